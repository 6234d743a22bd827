"""What each rung of the size ladder costs in the verify stage, per candidate, warm.

Two nodes: a matrix product (``C = A @ B``, a MatMul expanded with ``'ai'``, checked
against its native expansion) and a 1-D ``dace_ai.ai(..., reference=fn)`` sum.
Warm: the native reference program, the precompiled ``dace.h`` and the candidate's
object and library exist already (built by a first run), so each figure is the
sandbox run alone. For each node it runs the whole ladder, then each rung alone
(its sizes and its seeds), then what verify ran before the ladder (the two odd
sizes, three seeds), then a floor run (every symbol 1, one seed: the child's
start-up and the fixed cost of a run), and prints seconds side by side as a share
of the whole ladder. Reference outputs are computed in every run here (the
native program runs in the child; a ``reference=`` function in this process).

    python bench/ladder_cost.py [--repeats 3]
"""

import argparse
import statistics
import tempfile
import time

import dace
import dace_ai
import numpy as np
from dace_ai.checking.api import CheckRequest
from dace_ai.checking.stages import check_workdir
from dace_ai.config.settings import resolve_settings
from dace_ai.expansion.expansion_pass import node_context
from dace_ai.expansion.pending import pending_nodes
from dace_ai.prompt.answer import Answer
from dace_ai.sandbox.harness import run_against_reference
from dace_ai.sandbox.ladder import build_ladder

N, M, K = (dace.symbol(s) for s in "NMK")

MATMUL = (
    "for (int i = 0; i < N; ++i) for (int j = 0; j < M; ++j) { double acc = 0;"
    " for (int k = 0; k < K; ++k) acc += _a[i * K + k] * _b[k * M + j]; _c[i * M + j] = acc; }"
)
SUM = "double s = 0; for (int i = 0; i < N; ++i) s += _a[i]; _out = s;"


def total(a):
    return np.sum(a)


@dace.program
def matmul(A: dace.float64[N, K], B: dace.float64[K, M], C: dace.float64[N, M]):
    C[:] = A @ B


@dace.program
def vector_sum(A: dace.float64[N]):
    return dace_ai.ai("The sum of the N elements of _a.", a=A, reference=total, shape=[1])


def request(sdfg, code):
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.LibraryNode) and type(node).__name__ != "AINode":
            node.implementation = "ai"
    settings = resolve_settings({"checkers": "verify"})
    ((parent, state, node),) = pending_nodes(sdfg)
    ctx = node_context(parent, state, node, settings)
    answer = Answer(code=code)
    return CheckRequest(answer, ctx, settings, check_workdir(ctx, answer))


def run_seconds(req, **kwargs) -> float:
    start = time.perf_counter()
    result = run_against_reference(req, mode="verify", **kwargs)
    assert result["status"] == "passed", result["message"]
    return time.perf_counter() - start


def measure(name, req, repeats):
    run_seconds(req)  # warm: the candidate's library and the native reference exist afterwards
    ladder = build_ladder(req)
    rows = [("whole ladder", {}, lambda: run_seconds(req))]
    for rung in ladder.rungs:
        rows.append((rung.name, rung.sizes, lambda r=rung: run_seconds(req, sizes=[r.sizes], seeds=list(r.seeds))))
    before = [ladder.rungs[0].sizes, ladder.rungs[1].sizes]  # what verify ran before the ladder: two odd sizes
    rows.append(("two odd sizes", {}, lambda: run_seconds(req, sizes=before, seeds=[0, 1, 2])))
    floor = {s: 1 for s in ladder.rungs[0].sizes}
    rows.append(("floor (all 1)", floor, lambda: run_seconds(req, sizes=[floor], seeds=[0])))
    figures = [(label, sizes, statistics.median(fn() for _ in range(repeats))) for label, sizes, fn in rows]
    whole = figures[0][2]
    calls = {}  # per rung: (cases, candidate seconds per call, reference seconds per call), from timed runs
    for rung in ladder.rungs:
        timed = run_against_reference(req, mode="time", seeds=[0], sizes=[rung.sizes], repeats=3, warmup=1)
        case = timed["cases"][0]
        cases = max(len(rung.seeds), len(rung.points))
        calls[tuple(rung.sizes.items())] = (
            cases,
            min(case["candidate_seconds"]),
            min(case.get("reference_seconds") or [0.0]),
        )
    print(
        f"\n{name}: seconds per candidate, warm (median of {repeats}); compute = cases x (candidate + native "
        "reference) per call"
    )
    for label, sizes, seconds in figures:
        seeds = next((len(r.seeds) for r in ladder.rungs if r.name == label), 3 if label == "two odd sizes" else "")
        cases, candidate, reference = calls.get(tuple(sizes.items()), (0, 0.0, 0.0))
        compute = f"compute {cases} x ({candidate * 1e3:7.3f} + {reference * 1e3:7.3f}) ms" if cases else ""
        print(
            f"  {label:14s} {seconds:6.3f} s  {seconds / whole:5.2f} x whole  seeds {seeds!s:2s} {compute:40s} "
            f"{', '.join(f'{k}={v}' for k, v in sizes.items())}"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        dace.Config.set("default_build_folder", value=root)
        measure("MatMul via 'ai' (native reference)", request(matmul.to_sdfg(), MATMUL), args.repeats)
        measure("1-D ai(..., reference=np.sum)", request(vector_sum.to_sdfg(), SUM), args.repeats)


if __name__ == "__main__":
    main()
