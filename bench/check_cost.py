"""Cost per candidate of the two host compile checkers, side by side.

``probe``: the tasklet alone, ``-fsyntax-only`` with the precompiled ``dace.h``
(warm: built once before timing). ``faithful``: DaCe builds a program holding
only the tasklet (its own build folder per candidate, as in real use).
Prints seconds per candidate and the ratio faithful/probe (target: >= 10).

    python bench/check_cost.py [--candidates 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import dace
from dace_ai.checking.api import CheckRequest
from dace_ai.checking.host import compiler_and_flags, ensure_pch, faithful_check, probe_check
from dace_ai.checking.stages import check_workdir
from dace_ai.config.settings import resolve_settings
from dace_ai.context.types import ConnectorInfo, NodeContext, TargetInfo
from dace_ai.prompt.answer import Answer


def _connector(name: str, direction: str, container: str) -> ConnectorInfo:
    return ConnectorInfo(name=name, direction=direction, ctype="double*" if direction == "out" else "const double*",
                         dtype="double", is_pointer=True, container=container, storage="CPU_Heap", subset="0:N",
                         shape=("N",), strides=("1",), container_shape=("N",), container_strides=("1",),
                         offset="0", index_formula=f"{name}[i0]", volume="N")


def node() -> NodeContext:
    from dace_ai.targets.host import host_compiler

    compiler, flags = host_compiler()
    return NodeContext(key="bench", name="axpy", node_type="AINode", library=None, doc="", description="",
                       properties={}, inputs=[_connector("_a", "in", "A")], outputs=[_connector("_b", "out", "B")],
                       scopes=[], symbols={"N": "int"}, in_gpu_kernel=False, gpu_notes="",
                       target=TargetInfo("host", "cpu", "this machine", compiler=compiler, flags=flags),
                       sdfg_name="bench")


def candidate(i: int) -> Answer:
    """Distinct candidates (so no build is reused), each a typical small kernel with a helper."""
    return Answer(code=f"for (int i = 0; i < N; ++i) _b[i] = scale_{i}(_a[i]);",
                  code_global=f"#include <cmath>\nstatic inline double scale_{i}(double x) "
                              f"{{ return std::fma({i + 2}.0, x, std::sqrt(std::fabs(x))); }}")


def time_checker(check, ctx: NodeContext, answers: list[Answer]) -> list[float]:
    settings = resolve_settings()
    times = []
    for answer in answers:
        request = CheckRequest(answer, ctx, settings, check_workdir(ctx, answer))
        request.workdir.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        report = check(request)
        times.append(time.perf_counter() - start)
        if report.status != "passed":
            sys.exit(f"{report.checker} did not pass: {report.status}\n{report.diagnostics}")
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        dace.Config.set("default_build_folder", value=str(Path(tmp) / ".dacecache"))
        ctx = node()
        start = time.perf_counter()
        ensure_pch(*compiler_and_flags(ctx.target))
        pch_seconds = time.perf_counter() - start
        probe = time_checker(probe_check, ctx, [candidate(i) for i in range(args.candidates)])
        faithful = time_checker(faithful_check, ctx, [candidate(100 + i) for i in range(args.candidates)])
    p, f = statistics.median(probe), statistics.median(faithful)
    print(f"candidates: {args.candidates} each; precompiling dace.h once: {pch_seconds:.2f} s")
    print(f"{'checker':<10} {'median s':>9} {'min s':>7} {'max s':>7}")
    for name, times in (("probe", probe), ("faithful", faithful)):
        print(f"{name:<10} {statistics.median(times):>9.3f} {min(times):>7.3f} {max(times):>7.3f}")
    print(f"faithful/probe: {f / p:.1f}x (target >= 10)")


if __name__ == "__main__":
    main()
