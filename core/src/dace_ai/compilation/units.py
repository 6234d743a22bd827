"""Standalone translation units around one tasklet body, for target checkers.

Target packs check answers for hardware this machine may not have, with
compilers DaCe's own code generation does not drive (cross compilers, nvcc,
hipcc). They cannot reuse the SDFG's generated program, so they rebuild what
DaCe gives a tasklet at that place: its connectors as variables of their C++
types, the symbols and enclosing map parameters in scope, the ``__state`` struct
on the host, the GPU map parameters as thread indices in device code. The
functions here write that unit and run tools in a child process with a time
limit; the packs add their own prelude, flags and harnesses.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dace_ai import compat
from dace_ai.checking.api import CheckReport, Status, stable_paths
from dace_ai.compat import gpu_host
from dace_ai.compilation.diagnostics import summarize_output
from dace_ai.context.types import ConnectorInfo, NodeContext
from dace_ai.prompt.answer import Answer

#: Name of the function that holds the tasklet body in every unit.
TASKLET_FUNCTION = "dace_ai_tasklet"
#: File name of the host unit the core's compile check writes; diagnostics name it, so it must not change.
UNIT_FILE = "tasklet.cpp"
#: Schedules whose map parameters are thread indices inside a GPU kernel.
GPU_THREAD_SCHEDULES = ("GPU_Device", "GPU_ThreadBlock")
#: The comment that opens each part of the answer in a host unit (see :func:`host_unit`).
UNIT_SECTION = re.compile(r"^// ---- (code_global|code_init|code_exit|code) ----$")


@dataclass(frozen=True)
class ToolResult:
    """What a compiler or emulator run produced."""

    argv: tuple[str, ...]
    returncode: int
    output: str  #: stdout and stderr together, as a user would see them
    seconds: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def run_tool(
    argv: Sequence[str], *, cwd: Path, timeout: float = 120.0, env: Mapping[str, str] | None = None
) -> ToolResult:
    """Run a tool in a child process with a time limit; never raises for the tool's failure.

    A missing executable gives return code 127 and says so in the output, so a
    checker can report it as inconclusive with the reason.
    """
    start = time.perf_counter()
    full_env = {**os.environ, **(env or {})}
    try:
        proc = subprocess.run(
            list(argv),
            cwd=cwd,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            text=True,
            errors="replace",
            check=False,
        )
    except FileNotFoundError:
        return ToolResult(tuple(argv), 127, f"{argv[0]}: not found on PATH", time.perf_counter() - start)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode(errors="replace")
        return ToolResult(
            tuple(argv),
            -9,
            out + f"\n{argv[0]}: killed after {timeout:g} s",
            time.perf_counter() - start,
            timed_out=True,
        )
    return ToolResult(tuple(argv), proc.returncode, proc.stdout, time.perf_counter() - start)


def dace_include_dir() -> Path:
    """DaCe's runtime include folder (``<dace/dace.h>``)."""
    import dace

    return Path(dace.__file__).resolve().parent / "runtime" / "include"


def scope_parameters(node: NodeContext) -> list[str]:
    """Parameters of the enclosing maps/loops that are not already symbols, outermost first."""
    seen = set(node.symbols)
    params = []
    for scope in node.scopes:
        for p in scope.params:
            if p not in seen:
                seen.add(p)
                params.append(p)
    return params


def init_symbols(node: NodeContext) -> list[str]:
    """The node's symbols that DaCe passes to init code, in the node's order.

    DaCe emits a tasklet's ``code_init`` into ``__dace_init_<program>``, whose only
    parameters are the program's init signature
    (:func:`dace_ai.compat.init_symbols`); ``code_exit`` goes into
    ``__dace_exit_<program>``, which receives no symbol at all. Without the live
    program (a context read back from disk) every symbol is assumed passed.
    """
    sdfg = (node.live or {}).get("sdfg")
    if sdfg is None:
        return list(node.symbols)

    try:
        passed = set(compat.init_symbols(sdfg))
    except Exception:  # noqa: BLE001 - a program DaCe cannot analyse: keep every symbol rather than guess
        return list(node.symbols)
    return [name for name in node.symbols if name in passed]


#: Type of the stand-ins for symbols DaCe does not pass to init/exit code: using one fails to
#: compile with an error that names this type, i.e. says why.
NOT_PASSED = "dace_ai_symbol_not_passed_by_DaCe_to_{}"


def _stand_ins(node: NodeContext, passed: Sequence[str], where: str) -> str:
    """Declarations shadowing the node's symbols DaCe does not give ``where`` (code_init / code_exit)."""
    missing = [name for name in node.symbols if name not in passed]
    if not missing:
        return ""
    kind = NOT_PASSED.format(where)
    return f"    struct {kind} {{}};\n" + "".join(
        f"    [[maybe_unused]] const {kind} {name}{{}};\n" for name in missing
    )


def connector_declaration(conn: ConnectorInfo, *, output_by_reference: bool) -> str:
    """How DaCe declares a connector inside a tasklet, as a parameter (or local) declaration."""
    ctype = conn.ctype.strip()
    if conn.is_pointer:
        return f"{ctype} __restrict__ {conn.name}" if ctype.endswith("*") else f"{ctype} {conn.name}"
    if conn.direction == "out" and output_by_reference:
        return f"{ctype}& {conn.name}"
    return f"{ctype} {conn.name}"


def state_struct(answer: Answer, name: str = "dace_ai_state_t") -> str:
    """The ``__state`` struct with the answer's own fields."""
    fields = "".join(f"    {f.strip().rstrip(';')};\n" for f in answer.state_fields)
    return f"struct {name} {{\n    int dace_ai_unused;\n{fields}}};\n"


def _registered(environments: Iterable[str]) -> list[Any]:
    found = [compat.registered_environment(path) for path in sorted(environments)]
    return [env for env in found if env is not None]


def environment_flags(environments: Iterable[str]) -> list[str]:
    """Compiler arguments of the answer's environments: include folders and ``-D``/``-I`` flags."""
    flags: list[str] = []
    for env in _registered(environments):
        flags += [f"-I{d}" for d in (env.cmake_includes or ())]
        flags += [f for f in (env.cmake_compile_flags or ()) if f.startswith(("-D", "-I"))]
    return list(dict.fromkeys(flags))


def environment_classes(answer: Answer, resolved: Iterable[str] = ()) -> tuple[list[Any], list[str]]:
    """DaCe environment classes the answer uses (``resolved`` class paths from the pipeline first, then the
    names in ``use_environments``), and the names not registered."""
    import dace.library

    found, unknown = [], []
    for name in dict.fromkeys([*sorted(resolved), *answer.use_environments]):
        try:
            found.append(dace.library.get_environment(name))
        except Exception:  # noqa: BLE001 - DaCe raises several kinds for unknown names
            unknown.append(name)
    return list(dict.fromkeys(found)), unknown


def environment_headers(env: Any) -> list[str]:
    """The headers a DaCe environment class puts into generated code."""
    headers = env.headers() if callable(env.headers) else env.headers
    if isinstance(headers, dict):
        headers = headers.get("frame", [])
    return list(headers or [])


def answer_headers(answer: Answer, resolved: Iterable[str] = ()) -> list[str]:
    """Headers of the environments the answer uses or requests, as DaCe includes them before the code."""
    envs, _ = environment_classes(answer, resolved)
    return [h for env in envs for h in environment_headers(env)] + [h for r in answer.environments for h in r.headers]


def host_unit(
    answer: Answer,
    node: NodeContext,
    *,
    prelude: str = "",
    extra_locals: str = "",
    headers: Sequence[str] | None = None,
    environments: Iterable[str] = (),
) -> str:
    """The one standalone C++ unit of a tasklet for host code: what DaCe gives the code, nothing more.

    Every host check compiles this unit (the core's compile check, the x86 ISA
    check, the SVE pack's cross compile and harness, the GPU packs' host code):
    ``prelude``, the headers of the answer's environments (``headers``: default
    :func:`answer_headers` of the answer and its resolved ``environments``), the ``__state`` struct, ``code_global`` at file scope,
    then ``dace_ai_init`` / ``dace_ai_exit`` / :data:`TASKLET_FUNCTION` holding the
    answer's code. Init code receives exactly the symbols DaCe's ``__dace_init``
    receives (:func:`init_symbols`), exit code only ``__state``; the other symbols are
    shadowed by stand-ins whose use fails to compile with a message naming why. Section comments tell the model which part of its answer a
    diagnosed line came from.

    Signature of the tasklet function: ``(dace_ai_state_t* __state, <symbols>,
    <scope parameters as int>, <connectors>)``; scalar outputs are references so a
    harness can read them. ``extra_locals`` is inserted before the body (e.g.
    ``cudaStream_t __dace_current_stream = nullptr;``).
    """
    syms = [f"{ctype} {name}" for name, ctype in node.symbols.items()]
    params = [f"int {p}" for p in scope_parameters(node)]
    conns = [connector_declaration(c, output_by_reference=True) for c in node.connectors]
    state_param = "dace_ai_state_t* __state"
    tasklet_params = ", ".join([state_param, *syms, *params, *conns])
    passed = init_symbols(node)
    init_params = ", ".join([state_param, *(f"{node.symbols[name]} {name}" for name in passed)])
    includes = "".join(
        f"#include {h}\n" if h.startswith("<") else f'#include "{h}"\n'
        for h in (answer_headers(answer, environments) if headers is None else headers)
    )
    return (
        f"// The candidate tasklet in a unit of its own, as DaCe gives it its code.\n{prelude}\n{includes}"
        f"{state_struct(answer)}\n"
        f"// ---- code_global ----\n{answer.code_global}\n\n"
        f"void dace_ai_init({init_params}) {{\n{_stand_ins(node, passed, 'code_init')}"
        f"// ---- code_init ----\n{answer.code_init}\n}}\n\n"
        f"void dace_ai_exit({state_param}) {{\n{_stand_ins(node, [], 'code_exit')}"
        f"// ---- code_exit ----\n{answer.code_exit}\n}}\n\n"
        f"void {TASKLET_FUNCTION}({tasklet_params}) {{\n{extra_locals}"
        f"// ---- code ----\n{answer.code}\n}}\n"
    )


def unit_place(unit: str, line: int, answer_lines: int) -> tuple[str, bool]:
    """(``tasklet.cpp:27: `s += _x[i];` (line 3 of your code)``, whether the line is the answer's)."""
    lines = unit.splitlines()
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    if len(text) > 160:
        text = text[:157] + "..."
    section, offset = None, 0
    for number in range(min(line, len(lines)), 0, -1):
        m = UNIT_SECTION.match(lines[number - 1])
        if m:
            section, offset = m.group(1), line - number
            break
    part = {"code": "your code"}.get(section or "", f"your {section}") if section else ""
    words = f"{UNIT_FILE}:{line}: `{text}`" + (f" (line {offset} of {part})" if part and offset > 0 else "")
    return words, section is not None and line <= answer_lines


def device_unit(answer: Answer, node: NodeContext, *, prelude: str = "") -> str:
    """A unit with the tasklet body inside a ``__global__`` kernel, as DaCe emits it in a GPU map.

    Parameters of GPU_Device / GPU_ThreadBlock maps become thread indices (the
    innermost parameter on x, as DaCe assigns them); there is no ``__state`` and
    no host pointer here, so code that uses them fails to compile, as it would
    in DaCe's kernel.
    """
    thread_params: list[tuple[str, str]] = []  # (param, range begin)
    for scope in node.scopes:
        if scope.kind == "map" and scope.schedule in GPU_THREAD_SCHEDULES:
            for p, r in zip(scope.params, scope.ranges or ("",) * len(scope.params)):
                thread_params.append((p, r.split(":")[0].strip() or "0"))
    indexed = thread_params[-3:][::-1]  # innermost on x
    index_names = {p for p, _ in indexed}
    syms = [f"{ctype} {name}" for name, ctype in node.symbols.items() if name not in index_names]
    others = [f"int {p}" for p in scope_parameters(node) if p not in index_names]
    scalars_out = [c for c in node.outputs if not c.is_pointer]
    conns = [connector_declaration(c, output_by_reference=False) for c in node.connectors if c not in scalars_out]
    lines = []
    for axis, (param, begin) in zip("xyz", indexed):
        lines.append(f"    int {param} = (int)(blockIdx.{axis} * blockDim.{axis} + threadIdx.{axis}) + ({begin});")
    lines += [f"    {connector_declaration(c, output_by_reference=False)};" for c in scalars_out]
    params = ", ".join([*syms, *others, *conns])
    return (
        f"{prelude}\n// code_global\n{answer.code_global}\n\n"
        f"__global__ void {TASKLET_FUNCTION}_kernel({params}) {{\n" + "\n".join(lines) + "\n"
        f"    {{\n// tasklet code\n{answer.code}\n    }}\n"
        + "".join(f"    (void){c.name};\n" for c in scalars_out)
        + "}\n"
    )


def report_from_tool(
    checker: str,
    result: ToolResult,
    workdir: Path,
    *,
    passed_note: str = "",
    names: Mapping[str, str] | None = None,
    details: Mapping[str, object] | None = None,
    failure_prefix: str = "",
) -> CheckReport:
    """A report from a compiler run: ``failed`` with the compiler's errors, ``inconclusive`` when it is missing."""

    replacements = {str(workdir) + "/": "", **(names or {})}
    info = {"command": " ".join(stable_paths(a, replacements) for a in result.argv), **(details or {})}
    status: Status
    if result.returncode == 127:
        status, text = "inconclusive", result.output.strip()
    elif result.timed_out:
        status, text = "failed", failure_prefix + stable_paths(result.output.strip(), replacements)
    elif result.returncode != 0:
        status = "failed"
        text = failure_prefix + stable_paths(summarize_output(result.output), replacements)
    else:
        status, text = "passed", passed_note
    return CheckReport(checker, status, text, result.seconds, info)


def touches_gpu(node: NodeContext) -> bool:
    """Inside a GPU kernel, or a host tasklet with a connector in GPU memory."""
    return node.in_gpu_kernel or any(c.storage.startswith("GPU_") for c in node.connectors)


def check_gpu_unit(
    checker: str,
    answer: Answer,
    node: NodeContext,
    workdir: Path,
    *,
    compiler: str,
    arch_flag: str,
    arch: str,
    arch_source: str,
    prelude: str,
    stream_type: str,
    suffix: str,
    env: Mapping[str, str] | None = None,
    environments: Iterable[str] = (),
) -> CheckReport:
    """Compile the tasklet as device code (inside a GPU kernel) or as host code over GPU data.

    The shape every GPU pack needs (CUDA with nvcc, HIP with hipcc): the unit as DaCe
    would give it, one compile to an object file with the architecture flag, the
    compiler's diagnostics as the report, and a hint when device code reached for
    the host-side ``__state``.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    if node.in_gpu_kernel:
        source, where = device_unit(answer, node, prelude=prelude), "device code (inside a GPU kernel)"
    else:
        source = host_unit(
            answer,
            node,
            prelude=prelude,
            environments=environments,
            extra_locals=f"    {stream_type} __dace_current_stream = nullptr;\n",
        )
        where = "host code over GPU data"
    unit = workdir / f"candidate{suffix}"
    unit.write_text(source)
    argv = [
        compiler,
        "-std=c++17",
        arch_flag,
        "-c",
        "-I",
        str(dace_include_dir()),
        *environment_flags(environments),
        unit.name,
        "-o",
        "candidate.o",
    ]
    report = report_from_tool(
        checker,
        run_tool(argv, cwd=workdir, timeout=180, env=env),
        workdir,
        passed_note=f"compiled as {where} for {arch} ({arch_source})",
        failure_prefix=f"{compiler} rejected the code as {where} for {arch}:\n",
        details={"arch": arch, "arch_source": arch_source, "unit": where},
    )
    if report.failed and "__state" in report.diagnostics and node.in_gpu_kernel:
        report.diagnostics += (
            "\nDevice code cannot use __state (it lives in host memory); pass what the "
            "kernel needs through connectors or symbols."
        )
    return report


def gpu_host_parts(sdfg: Any, label: str, answer: Answer, ctx: NodeContext, head: str) -> tuple[str, str]:
    """(code, code_global) of the tasklet: the answer's, or for a host tasklet over GPU data whose code
    launches kernels, a call of the same code moved into ``sdfg``'s GPU file
    (:func:`dace_ai.compat.gpu_host.route_to_gpu_file`); unrouted without ``sdfg``."""
    routed = (
        sdfg is not None
        and not ctx.in_gpu_kernel
        and touches_gpu(ctx)
        and gpu_host.needs_gpu_compiler(answer.code, answer.code_global)
    )
    if not routed:
        return head + answer.code, answer.code_global
    parameters = [(connector_declaration(c, output_by_reference=True), c.name) for c in ctx.connectors]
    parameters += [(f"{ctype} {name}", name) for name, ctype in ctx.symbols.items()]
    parameters += [(f"long long {p}", p) for p in scope_parameters(ctx)]
    hip = answer.language == "hip" or ctx.target.language == "hip"
    return gpu_host.route_to_gpu_file(
        sdfg,
        label,
        answer.code,
        answer.code_global,
        parameters,
        stream_type="hipStream_t" if hip else "cudaStream_t",
        head=head,
    )
