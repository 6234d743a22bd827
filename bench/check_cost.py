"""Cost per candidate of every default check of the detected target, next to a faithful DaCe build.

Three real nodes in real SDFGs, their contexts collected as the expansion collects
them, with every default stage on (compile, verify, bench: the path a user runs):

* ``1-D reference=``: an AINode ``_b[i] = f(_a[i])`` over ``N`` with a NumPy reference;
* ``Gemm``: ``C = A @ B`` (the MatMul's Gemm implemented by 'ai'), checked against
  its native expansion, which DaCe builds once per node (the first candidate pays it);
* ``1-D no reference``: the same AINode without a reference (compile stage only
  verifies; nothing to time against);
* ``device tasklet``: the same per-element AINode inside a ``GPU_Device`` map, answered in
  CUDA: the ``cuda-nvcc`` compile (DaCe's GPU build, or a standalone nvcc unit where DaCe
  cannot build GPU programs here) and the verify stage on its CPU twin. Its compile check
  is itself the faithful build, so the faithful column is left out.

For each node, the first candidate (cold: the node's native reference built, its
outputs cached) is reported apart; then ``--candidates`` distinct answers (so
nothing is reused between candidates) give the warm figures per stage (from the
checkers' own timings) and as wall time per candidate, side by side with
``faithful``: DaCe building a program holding only the tasklet (its own build
folder per candidate, as in real use). Precompiling ``dace.h`` happens once per
compiler and flags and is reported apart. Goals (issue 18): warm, all default
stages, at most 1.0 s per candidate for nodes with a reference and 0.4 s for a
node without one. The machine's load is printed: run it on a quiet machine.

    python bench/check_cost.py [--candidates 5]
"""

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import dace
from dace_ai.checkers.host_compile import faithful_check
from dace_ai.checking.api import CheckRequest
from dace_ai.checking.stages import check_workdir, run_checks, select_checkers
from dace_ai.compilation.compile import ensure_pch
from dace_ai.config.settings import resolve_settings
from dace_ai.plugins.registrations import STAGES
from dace_ai.prompt.answer import Answer
from dace_ai.targets.build_flags import build_command

COMPILE_GOAL_S = 0.4


def node_context(settings: Any, reference: bool = True) -> Any:
    """The context of a 1-D AINode in a real SDFG, as the expansion collects it (with the live node)."""
    import dace_ai
    from dace_ai.expansion.expansion_pass import node_context as collect

    n = dace.symbol("N")
    sdfg = dace.SDFG("check_cost" if reference else "check_cost_unreferenced")
    sdfg.add_array("A", [n], dace.float64)
    sdfg.add_array("B", [n], dace.float64)
    state = sdfg.add_state("main")
    import numpy as np

    def meaning(a):  # what the node means, for the verify stage
        return 2.0 * a + np.sqrt(np.abs(a))

    node = dace_ai.AINode(
        "scale",
        "Write _b[i] = 2 * _a[i] + sqrt(|_a[i]|) for every i.",
        inputs={"_a"},
        outputs={"_b"},
        reference=meaning if reference else None,
    )
    state.add_node(node)
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet("A[0:N]"))
    state.add_edge(node, "_b", state.add_write("B"), None, dace.Memlet("B[0:N]"))
    return collect(sdfg, state, node, settings)


def device_context(settings: Any) -> Any:
    """The context of a per-element AINode inside a GPU_Device map over ``N`` (a device tasklet)."""
    import dace_ai
    import numpy as np
    from dace_ai.expansion.expansion_pass import node_context as collect

    n = dace.symbol("N")
    sdfg = dace.SDFG("check_cost_device")
    for name in "AB":
        sdfg.add_array(name, [n], dace.float64, storage=dace.StorageType.GPU_Global)
    state = sdfg.add_state("main")
    entry, exit_ = state.add_map("elements", {"i": "0:N"}, schedule=dace.ScheduleType.GPU_Device)
    node = dace_ai.AINode(
        "scale_device",
        "Write _b = 2 * _a + sqrt(|_a|).",
        inputs={"_a"},
        outputs={"_b"},
        reference=lambda a: 2.0 * a + np.sqrt(np.abs(a)),
    )
    state.add_memlet_path(state.add_read("A"), entry, node, dst_conn="_a", memlet=dace.Memlet("A[i]"))
    state.add_memlet_path(node, exit_, state.add_write("B"), src_conn="_b", memlet=dace.Memlet("B[i]"))
    return collect(sdfg, state, node, resolve_settings({"checkers": None, "target": "cuda"}))


def device_candidate(i: int) -> Answer:
    """Distinct correct device tasklets (one map point each), with a device helper."""
    return Answer(
        language="cuda",
        code=f"_b[0] = scale_dev_{i}(_a[0]);",
        code_global=f"__device__ __forceinline__ double scale_dev_{i}(double x) "
        f"{{ return 2.0 * x + 0.0 * {i} + sqrt(fabs(x)); }}",
    )


M_, K_, N_ = (dace.symbol(s) for s in "MKN")


@dace.program
def check_cost_gemm(A: dace.float64[M_, K_], B: dace.float64[K_, N_], C: dace.float64[M_, N_]):
    C[:] = A @ B


def gemm_context(settings: Any) -> Any:
    """The context of the Gemm behind ``C[:] = A @ B`` (implementation 'ai'), with its live node."""
    from dace_ai.expansion.expansion_pass import node_context as collect
    from dace_ai.expansion.pending import pending_nodes

    sdfg = check_cost_gemm.to_sdfg()
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.LibraryNode):
            node.implementation = "ai"
    ((parent, state, node),) = pending_nodes(sdfg)
    return collect(parent, state, node, settings)


def scale_candidate(i: int) -> Answer:
    """Distinct correct candidates (so no build is reused), each a typical small kernel with a helper."""
    return Answer(
        code=f"for (int i = 0; i < N; ++i) _b[i] = scale_{i}(_a[i]);",
        code_global=f"#include <cmath>\nstatic inline double scale_{i}(double x) "
        f"{{ return 2.0 * x + 0.0 * {i} + std::sqrt(std::fabs(x)); }}",
    )


def gemm_candidate(i: int) -> Answer:
    """Distinct correct Gemm kernels: row-major i-k-j loops with an OpenMP loop over rows."""
    return Answer(
        code=(
            "#pragma omp parallel for\n"
            "for (int i = 0; i < M; ++i) { for (int j = 0; j < N; ++j) _c[i * N + j] = 0.0;"
            " for (int q = 0; q < K; ++q) { const double a = _a[i * K + q];"
            f" for (int j = 0; j < N; ++j) _c[i * N + j] += a * _b[q * N + j]; }} }} // {i}"
        )
    )


def _request(ctx: Any, settings: Any, answer: Answer) -> CheckRequest:
    from dace_ai.solving.tasklet import make_tasklet

    live = (ctx.live or {}).get("node")
    factory = (
        (lambda envs, sdfg: make_tasklet(live, answer, ctx, environments=envs, sdfg=sdfg)) if live is not None else None
    )
    return CheckRequest(answer, ctx, settings, check_workdir(ctx, answer), make_tasklet=factory)


#: The bench stage's line for the last candidate of each node (names every baseline timed).
BENCH_LINES: dict[str, str] = {}


def time_default_checks(ctx: Any, settings: Any, answers: list[Answer]) -> tuple[dict[str, list[float]], list[str]]:
    """Seconds per candidate of the default checkers of every stage: per stage (checkers' sum) and wall."""
    per_stage: dict[str, list[float]] = defaultdict(list)
    names: list[str] = []
    for answer in answers:
        request = _request(ctx, settings, answer)
        start = time.perf_counter()
        reports = run_checks(request)
        per_stage["wall"].append(time.perf_counter() - start)
        bad = [r for r in reports if r.status == "failed"]
        if bad:
            sys.exit("a default check failed: " + "; ".join(f"{r.checker}: {r.diagnostics}" for r in bad))
        names = [f"{r.checker} ({r.stage}, {r.status})" for r in reports]
        BENCH_LINES[ctx.name] = next((r.diagnostics for r in reports if r.checker == "bench"), "")
        for stage in STAGES:
            mine = [r.seconds for r in reports if r.stage == stage]
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


NODES: dict[str, tuple[Any, Any, float | None]] = {  # label -> (context, candidates, goal in seconds per
    # candidate, warm, all default stages; None: no goal)
    "1-D reference=": (lambda settings: node_context(settings), scale_candidate, 1.0),
    "Gemm (native reference)": (gemm_context, gemm_candidate, 1.0),
    "1-D no reference": (lambda settings: node_context(settings, reference=False), scale_candidate, 0.4),
    # no goal: nvcc's compile dominates; its verify stage (the twin's own host compile and run) is the figure
    # to set beside a CPU candidate's compile and verify stages
    "device tasklet (CUDA, verified on the CPU twin)": (device_context, device_candidate, None),
}


def main(argv: list[str] | None = None) -> None:
    import os

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=5)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        dace.Config.set("default_build_folder", value=str(Path(tmp) / ".dacecache"))
        settings = resolve_settings({"checkers": None})
        load = os.getloadavg()[0]
        for label, (make, answer_for, goal) in NODES.items():
            ctx = make(settings)
            compiler, flags = build_command(ctx.target)
            start = time.perf_counter()
            _, pch_note = ensure_pch(compiler, flags)
            pch_seconds = time.perf_counter() - start
            chosen = [c.name for c in select_checkers(ctx, settings)[0]]
            cold, _ = time_default_checks(ctx, settings, [answer_for(1000)])  # native reference built here
            checks, names = time_default_checks(ctx, settings, [answer_for(i) for i in range(args.candidates)])
            faithful = (
                time_faithful(ctx, settings, [answer_for(100 + i) for i in range(args.candidates)])
                if not ctx.in_gpu_kernel
                else []  # the cuda-nvcc compile check is DaCe's own GPU build already
            )
            rows.append((label, ctx, cold, checks, names, faithful, goal))
            if pch_note != "pch reused":
                print(f"one-time precompiled dace.h: {pch_seconds:.2f} s ({pch_note})")
        print(f"target: {rows[0][1].target.name}; default checkers: {', '.join(chosen)}")
        print(f"build command: {' '.join(compiler + flags)}")
        print(
            f"load average at start: {load:.1f} on {os.cpu_count()} cores; candidates: {args.candidates} per node, "
            "each distinct"
        )
        for label, ctx, cold, checks, names, faithful, goal in rows:
            print(f"\n{label} ({ctx.node_type} {ctx.name!r}); ran: {', '.join(names)}")
            if BENCH_LINES.get(ctx.name):
                print(f"  bench stage (last candidate): {BENCH_LINES[ctx.name][:400]}")
            print(f"  {'seconds per candidate':<34} {'median':>7} {'min':>7} {'max':>7}")
            table = [("first candidate of the node, all", cold["wall"])]
            table += [(f"warm, {stage} stage", checks[stage]) for stage in STAGES if stage in checks]
            table += [("warm, all default stages", checks["wall"])]
            table += [("faithful DaCe build", faithful)] if faithful else []
            for name, times in table:
                print(f"  {name:<34} {statistics.median(times):>7.3f} {min(times):>7.3f} {max(times):>7.3f}")
            wall = statistics.median(checks["wall"])
            ratio = f"faithful / all default stages: {statistics.median(faithful) / wall:.1f}x; " if faithful else ""
            met = "no goal" if goal is None else f"goal <= {goal} s: {'met' if wall <= goal else 'NOT met'}"
            print(f"  {ratio}{met}")
        compile_s = statistics.median(rows[0][3].get("compile", [0.0]))
        print(
            f"\ncompile stage (1-D reference=): {compile_s:.3f} s (goal <= {COMPILE_GOAL_S} s: "
            f"{'met' if compile_s <= COMPILE_GOAL_S else 'NOT met'})"
        )


if __name__ == "__main__":
    main()
