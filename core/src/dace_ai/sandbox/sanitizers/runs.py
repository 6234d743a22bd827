"""One sanitized run of a candidate: the cases, the driver's job file, the environment, the run."""

from __future__ import annotations

import os
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dace_ai.checking.api import CheckRequest
from dace_ai.compilation.units import scope_parameters
from dace_ai.sandbox.cases import make_case
from dace_ai.sandbox.child.inputs import case_inputs
from dace_ai.sandbox.child_process import SandboxLimits, launch, watched_from_outside
from dace_ai.sandbox.ladder import build_ladder
from dace_ai.sandbox.sanitizers.builds import SanitizerBuild
from dace_ai.sandbox.sanitizers.tools import EXIT_ADDRESS, EXIT_THREAD, EXIT_UNDEFINED, archer_library, symbolizer

if TYPE_CHECKING:
    from dace_ai.sandbox.child.records import Case


# ----------------------------------------------------------------------------- the run
def sanitizer_cases(request: CheckRequest) -> tuple[Case, Case]:
    """(case of the address run, case of the thread run): the ladder's first small case, and its first odd one
    (a bit more work per thread) or else the small one."""

    ladder = build_ladder(request, None, seeds=(0,), rungs=("small", "odd"))
    planned = ladder.cases()
    if not planned:
        raise ValueError("; ".join(map(str, ladder.skipped)) or "no size")
    small = next((c for c in planned if c.rung != "odd"), planned[0])
    odd = next((c for c in planned if c.rung == "odd"), small)
    small_case, odd_case = (make_case(request, c.seed, c.sizes, c.point, c.rung, c.point_words) for c in (small, odd))
    return small_case, odd_case


def write_job(
    case: Case, request: CheckRequest, folder: Path, cpu_seconds: int = 60, at_once: tuple[int, int] = (0, 0)
) -> Path:
    """The driver's job file and one raw data file per container (initial data of the case, outputs pre-filled).

    Format (whitespace separated): ``cpu_seconds n`` (the driver's own CPU-time
    limit), ``symbols n v...``, ``params n v...`` (doubles, in
    the entry points' order), ``containers n`` then ``bytes file`` per container,
    ``connectors n`` then ``container-index byte-offset`` per connector, ``at_once threads rounds``
    (``at_once``: after the one call, ``rounds`` rounds of ``threads`` calls at once on the same state,
    each thread on copies of its own of every container; ``0 0``: none).
    """
    import numpy as np

    data = case_inputs(case)
    values = case["values"]
    symbols = [float(values[s]) for s in request.node.symbols]
    params = [float(values[p]) for p in scope_parameters(request.node)]
    lines = [
        f"cpu_seconds {max(0, int(cpu_seconds))}",
        f"symbols {len(symbols)} " + " ".join(repr(v) for v in symbols),
        f"params {len(params)} " + " ".join(repr(v) for v in params),
        f"containers {len(case['containers'])}",
    ]
    index = {}
    for i, cont in enumerate(case["containers"]):
        array = np.ascontiguousarray(data[cont["name"]])
        array.tofile(folder / f"container-{i}.bin")
        index[cont["name"]] = (i, np.dtype(cont["dtype"]).itemsize)
        lines.append(f"{array.nbytes} container-{i}.bin")
    conns = {c["name"]: c for c in case["connectors"]}
    lines.append(f"connectors {len(request.node.connectors)}")
    for conn in request.node.connectors:
        where = conns[conn.name]
        i, item = index[where["container"]]
        lines.append(f"{i} {int(where['offset']) * item}")
    lines.append(f"at_once {max(0, int(at_once[0]))} {max(0, int(at_once[1]))}")
    job = folder / "job.txt"
    job.write_text("\n".join(lines) + "\n", encoding="ascii")
    return job


def sanitizer_environment(kind: str, compiler: str, threads: int) -> dict[str, str]:
    """Environment of a run: the sanitizers' options, the thread count, Archer for the thread run."""
    sym = symbolizer(compiler)
    common = ["detect_leaks=0", "abort_on_error=0", "symbolize=1", "handle_abort=1"]
    if sym:
        common.append(f"external_symbolizer_path={sym}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASAN_", "UBSAN_", "TSAN_", "OMP_", "KMP_"))}
    env.pop("LD_PRELOAD", None)
    env.update(
        ASAN_OPTIONS=":".join([*common, f"exitcode={EXIT_ADDRESS}", "detect_stack_use_after_return=0"]),
        UBSAN_OPTIONS=":".join([*common, "print_stacktrace=1", f"exitcode={EXIT_UNDEFINED}"]),
        TSAN_OPTIONS=" ".join(
            [
                "ignore_noninstrumented_modules=1",
                "halt_on_error=1",
                f"exitcode={EXIT_THREAD}",
                "report_signal_unsafe=0",
                *(c for c in common if not c.startswith("detect_leaks")),
            ]
        ),
        OMP_NUM_THREADS=str(threads),
        OMP_DYNAMIC="false",
        LC_ALL="C",
    )
    if kind == "thread":
        archer = archer_library(compiler)
        env["ARCHER_OPTIONS"] = "verbose=1"
        if archer:
            env["OMP_TOOL_LIBRARIES"] = archer
    return env


@dataclass
class SanitizerRun:
    """What one sanitized run printed, and how it ended."""

    kind: str
    returncode: int
    output: str
    seconds: float
    timed_out: bool = False


def run_sanitized(
    build: SanitizerBuild, case: Case, request: CheckRequest, threads: int, at_once: tuple[int, int] = (0, 0)
) -> SanitizerRun:
    """Run the sanitized executable on ``case`` in a sandboxed session of its own (wall and CPU time limits);
    ``at_once``: (threads, rounds) of calls at once on one state after the one call (see :func:`write_job`)."""

    limits = SandboxLimits.from_settings(request.settings)
    cpu_seconds = max(2, round(limits.cpu_seconds)) * max(1, threads, at_once[0])
    outside = watched_from_outside()  # then the parent watches the CPU time: nothing the code could read
    job = write_job(case, request, build.folder, 0 if outside else cpu_seconds, at_once)
    env = sanitizer_environment(build.kind, build.compiler, threads)
    argv = [str(build.executable), job.name]
    if build.kind == "thread" and shutil.which("setarch"):  # LLVM 14's TSan cannot map its shadow under some
        argv = ["setarch", platform.machine(), "-R", *argv]  # kernels' address randomisation: run without it
    run = launch(
        argv, cwd=build.folder, wall_seconds=limits.wall_seconds, env=env, cpu_seconds=cpu_seconds if outside else None
    )
    over = run.timed_out or run.over == "cpu_time"  # out of wall or CPU time: both said as not finishing in time
    return SanitizerRun(build.kind, run.returncode, run.output.decode(errors="replace"), run.seconds, over)
