"""SVE checkers: cross compile, then run at several vector lengths under qemu.

``sve-compile`` compiles the tasklet unit with the aarch64 compiler and
``-march=armv8-a+sve`` (the compiler's diagnostics go back to the model).
``sve-vector-lengths`` builds a harness (:mod:`.harness`) and runs it under
``qemu-aarch64 -cpu max,sve-default-vector-length=<bytes>`` at 128, 512 and
2048 bits, each in a child process with a time limit; outputs must be finite
and the same at every length, otherwise the report names the lengths at which
the code went wrong.
"""

from __future__ import annotations

import math
import platform
import shutil

from dace_ai.plugin import (
    CheckReport,
    CheckRequest,
    dace_include_dir,
    environment_flags,
    host_unit,
    report_from_tool,
    run_tool,
    runtime_standard_flag,
)

from .harness import HarnessError, buffers, first_difference, harness_source, parse_outputs, symbol_values

COMPILE_CHECKER = "sve-compile"
VL_CHECKER = "sve-vector-lengths"
TARGET = "sve"
#: Vector lengths in bits at which the harness runs.
VECTOR_BITS = (128, 512, 2048)
SYSROOT = "/usr/aarch64-linux-gnu"
RUN_TIMEOUT = 60.0

PRELUDE = "// what DaCe includes in every generated file\n#include <dace/dace.h>\n"


def compiler(request: CheckRequest) -> str:
    """The target's compiler; the native one on an aarch64 machine without the cross compiler."""
    configured = request.node.target.compiler[0] if request.node.target.compiler else "aarch64-linux-gnu-g++"
    if shutil.which(configured) is None and platform.machine() == "aarch64":
        return "g++"
    return configured


def _flags(request: CheckRequest) -> list[str]:
    flags = list(request.node.target.flags) or ["-O3", "-march=armv8-a+sve"]
    return [f for f in flags if not f.startswith("-O")]


def check_compile(request: CheckRequest) -> CheckReport:
    """Cross compile the tasklet unit to an object file."""
    workdir = request.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    unit = workdir / "candidate.cpp"
    unit.write_text(host_unit(request.answer, request.node, prelude=PRELUDE, environments=request.environments))
    argv = [
        compiler(request),
        runtime_standard_flag(),
        "-c",
        "-O1",
        "-I",
        str(dace_include_dir()),
        *environment_flags(request.environments),
        *_flags(request),
        unit.name,
        "-o",
        "candidate.o",
    ]
    return report_from_tool(COMPILE_CHECKER, run_tool(argv, cwd=workdir, timeout=120), workdir)


def check_vector_lengths(request: CheckRequest) -> CheckReport:
    """Run the harness at every vector length and compare the outputs."""
    workdir = request.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    qemu = shutil.which("qemu-aarch64")
    if qemu is None:
        return CheckReport(VL_CHECKER, "inconclusive", "qemu-aarch64 not found on PATH (Debian: qemu-user)")
    try:
        source = harness_source(request.answer, request.node, PRELUDE)
        values = symbol_values(request.node)
        sizes = {b.conn.name: b.count for b in buffers(request.node, values)}
    except HarnessError as exc:
        return CheckReport(VL_CHECKER, "inconclusive", f"no harness for this node: {exc}")
    (workdir / "harness.cpp").write_text(source)
    build = run_tool(
        [
            compiler(request),
            runtime_standard_flag(),
            "-O2",
            "-I",
            str(dace_include_dir()),
            *_flags(request),
            "harness.cpp",
            "-o",
            "harness",
        ],
        cwd=workdir,
        timeout=180,
    )
    if not build.ok:
        return report_from_tool(VL_CHECKER, build, workdir, failure_prefix="The harness did not build:\n")
    seconds = build.seconds
    results: dict[int, dict[str, list[float]]] = {}
    details: dict[str, object] = {"symbols": values, "elements": sizes, "vector_bits": list(VECTOR_BITS)}
    for bits in VECTOR_BITS:
        run = run_tool(
            [qemu, "-L", SYSROOT, "-cpu", f"max,sve-default-vector-length={bits // 8}", "./harness"],
            cwd=workdir,
            timeout=RUN_TIMEOUT,
        )
        seconds += run.seconds
        if not run.ok:
            why = "did not finish" if run.timed_out else f"exited with status {run.returncode}"
            signal = f" (signal {-run.returncode})" if run.returncode < 0 and not run.timed_out else ""
            tail = "\n".join(run.output.strip().splitlines()[-10:])
            return CheckReport(
                VL_CHECKER,
                "failed",
                f"At SVE vector length {bits} bits the tasklet {why}{signal} (symbols {values}).\n{tail}\n{_ADVICE}",
                seconds,
                details,
            )
        results[bits] = parse_outputs(run.output)
    problems = _compare(results)
    status = "failed" if problems else "passed"
    text = (
        ("\n".join(problems) + f"\n(symbols {values}; inputs are odd multiples of 1/16)\n{_ADVICE}")
        if problems
        else f"same finite outputs at {', '.join(map(str, VECTOR_BITS))} bits (symbols {values})"
    )
    return CheckReport(VL_CHECKER, status, text, seconds, details)


_ADVICE = (
    "SVE code must be vector-length agnostic: step loops by svcntd()/svcntw() (never a constant lane "
    "count), build predicates with svwhilelt for the tail, and size temporaries by the runtime length."
)


def _compare(results: dict[int, dict[str, list[float]]]) -> list[str]:
    """Messages for non-finite outputs and for lengths whose outputs differ from the others."""
    problems = []
    for bits, outputs in results.items():
        for name, values in outputs.items():
            bad = next((k for k, v in enumerate(values) if not math.isfinite(v)), None)
            if bad is not None:
                problems.append(f"At SVE vector length {bits} bits, output {name} element {bad} is {values[bad]}.")
    names = sorted({n for outputs in results.values() for n in outputs})
    for name in names:
        groups: list[list[int]] = []
        for bits in VECTOR_BITS:
            for group in groups:
                if first_difference(results[group[0]].get(name, []), results[bits].get(name, [])) is None:
                    group.append(bits)
                    break
            else:
                groups.append([bits])
        if len(groups) == 1:
            continue
        groups.sort(key=len, reverse=True)
        if len(groups[0]) > len(VECTOR_BITS) // 2:  # a majority agrees: the others are wrong
            reference = groups[0]
            for group in groups[1:]:
                lengths = " and ".join(f"{b} bits" for b in group)
                problems.append(
                    f"Wrong result at SVE vector length {lengths}: output {name} differs from the "
                    f"result at {' and '.join(f'{b} bits' for b in reference)} "
                    f"({_where(results[group[0]].get(name, []), results[reference[0]].get(name, []))})."
                )
        else:
            first = groups[0][0]
            for group in groups[1:]:
                problems.append(
                    f"Output {name} differs between SVE vector lengths {first} and {group[0]} bits "
                    f"({_where(results[group[0]].get(name, []), results[first].get(name, []))})."
                )
    return problems


def _where(wrong: list[float], right: list[float]) -> str:
    k = first_difference(wrong, right)
    if k is None:
        return "same values"
    got = wrong[k] if k < len(wrong) else "missing"
    expected = right[k] if k < len(right) else "missing"
    return f"element {k}: {got} instead of {expected}"


def applies(request: CheckRequest) -> bool:
    return request.node.target.name == TARGET
