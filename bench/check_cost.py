"""Warm cost per candidate of the default checks of the detected target, next to a faithful DaCe build.

The node is a real 1-D node in a real SDFG (``_b[i] = f(_a[i])`` over ``N``
elements), its context collected as the expansion collects it. For each of
``--candidates`` distinct answers (so nothing is reused between candidates):

* ``default checks``: :func:`dace_ai.checking.stages.run_checks` with the default
  checker set of the detected target, every stage (compile, verify, bench: a
  stage's column appears once a default checker of that stage is installed),
  reported per stage from the checkers' own timings and as wall time per candidate;
* ``faithful``: DaCe builds a program holding only the tasklet (its own build
  folder per candidate, as in real use).

Precompiling ``dace.h`` happens once per compiler and flags and is reported
apart (the first check of a fresh build root pays it). Goal: the compile stage
at most 0.4 s warm per candidate.

    python bench/check_cost.py [--candidates 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import dace
from dace_ai.checking.api import CheckRequest
from dace_ai.checking.compile import ensure_pch
from dace_ai.checking.host import faithful_check
from dace_ai.checking.stages import check_workdir, run_checks, select_checkers
from dace_ai.config.settings import resolve_settings
from dace_ai.plugins.registrations import STAGES
from dace_ai.prompt.answer import Answer
from dace_ai.targets.build_flags import build_command

COMPILE_GOAL_S = 0.4


def node_context(settings: Any) -> Any:
    """The context of a 1-D AINode in a real SDFG, as the expansion collects it (with the live node)."""
    import dace_ai
    from dace_ai.expansion.pipeline import node_context as collect

    n = dace.symbol("N")
    sdfg = dace.SDFG("check_cost")
    sdfg.add_array("A", [n], dace.float64)
    sdfg.add_array("B", [n], dace.float64)
    state = sdfg.add_state("main")
    node = dace_ai.AINode("scale", "Write _b[i] = 2 * _a[i] + sqrt(|_a[i]|) for every i.", inputs={"_a"},
                          outputs={"_b"})
    state.add_node(node)
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet("A[0:N]"))
    state.add_edge(node, "_b", state.add_write("B"), None, dace.Memlet("B[0:N]"))
    return collect(sdfg, state, node, settings)


def candidate(i: int) -> Answer:
    """Distinct correct candidates (so no build is reused), each a typical small kernel with a helper."""
    return Answer(code=f"for (int i = 0; i < N; ++i) _b[i] = scale_{i}(_a[i]);",
                  code_global=f"#include <cmath>\nstatic inline double scale_{i}(double x) "
                              f"{{ return 2.0 * x + 0.0 * {i} + std::sqrt(std::fabs(x)); }}")


def _request(ctx: Any, settings: Any, answer: Answer) -> CheckRequest:
    from dace_ai.expansion.tasklet import make_tasklet

    live = (ctx.live or {}).get("node")
    factory = (lambda envs: make_tasklet(live, answer, ctx, environments=envs)) if live is not None else None
    return CheckRequest(answer, ctx, settings, check_workdir(ctx, answer), make_tasklet=factory)


def time_default_checks(ctx: Any, settings: Any, answers: list[Answer]) -> tuple[dict[str, list[float]], list[str]]:
    """Seconds per candidate of the default checkers of every stage: per stage (checkers' sum) and wall."""
    per_stage: dict[str, list[float]] = defaultdict(list)
    names: list[str] = []
    for answer in answers:
        request = _request(ctx, settings, answer)
        start = time.perf_counter()
        reports = run_checks(request)
        per_stage["wall"].append(time.perf_counter() - start)
        bad = [r for r in reports if r.status != "passed"]
        if bad:
            sys.exit("a default check did not pass: " + "; ".join(f"{r.checker}: {r.status} {r.diagnostics}"
                                                                  for r in bad))
        names = [f"{r.checker} ({r.details.get('stage')})" for r in reports]
        for stage in STAGES:
            mine = [r.seconds for r in reports if r.details.get("stage") == stage]
            if mine:
                per_stage[stage].append(sum(mine))
    return dict(per_stage), names


def time_faithful(ctx: Any, settings: Any, answers: list[Answer]) -> list[float]:
    times = []
    for answer in answers:
        request = _request(ctx, settings, answer)
        request.workdir.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        report = faithful_check(request)
        times.append(time.perf_counter() - start)
        if report.status != "passed":
            sys.exit(f"faithful did not pass: {report.status}\n{report.diagnostics}")
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        dace.Config.set("default_build_folder", value=str(Path(tmp) / ".dacecache"))
        settings = resolve_settings({"checkers": None})
        ctx = node_context(settings)
        compiler, flags = build_command(ctx.target)
        start = time.perf_counter()
        _, pch_note = ensure_pch(compiler, flags)
        pch_seconds = time.perf_counter() - start
        chosen = [c.name for c in select_checkers(ctx, settings)[0]]
        time_default_checks(ctx, settings, [candidate(1000)])  # warm-up: imports, compiler caches
        checks, names = time_default_checks(ctx, settings, [candidate(i) for i in range(args.candidates)])
        faithful = time_faithful(ctx, settings, [candidate(100 + i) for i in range(args.candidates)])
    print(f"target: {ctx.target.name}; default checkers: {', '.join(chosen)}; ran: {', '.join(names)}")
    print(f"build command: {' '.join(compiler + flags)}")
    print(f"one-time precompiled dace.h: {pch_seconds:.2f} s ({pch_note}); candidates: {args.candidates} each")
    print(f"{'seconds per candidate':<28} {'median':>7} {'min':>7} {'max':>7}")
    rows = [(f"default checks, {stage} stage", checks[stage]) for stage in STAGES if stage in checks]
    rows += [("default checks, all stages", checks["wall"]), ("faithful DaCe build", faithful)]
    for name, times in rows:
        print(f"{name:<28} {statistics.median(times):>7.3f} {min(times):>7.3f} {max(times):>7.3f}")
    compile_s = statistics.median(checks.get("compile", [0.0]))
    print(f"faithful / default checks: {statistics.median(faithful) / statistics.median(checks['wall']):.1f}x; "
          f"compile stage {compile_s:.3f} s (goal <= {COMPILE_GOAL_S} s: {'met' if compile_s <= COMPILE_GOAL_S else 'NOT met'})")


if __name__ == "__main__":
    main()
