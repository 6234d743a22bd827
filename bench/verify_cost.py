"""Warm cost of the verify stage per candidate, side by side with a faithful DaCe build of the same tasklet.

Two nodes of 10^6 elements: an AINode with a NumPy ``reference=`` (elementwise), and a
``Reduce`` (sum over the rows of a 1000 x 1000 array) checked against its native
expansion. Warm means the native reference program and the precompiled ``dace.h``
exist already (built once per node / per compiler). Each candidate is a new answer:
its one shared compile (the compile stage's, timed apart) comes first, then the
timed verify stage links it and runs the sandbox. Prints seconds per candidate (shared
compile; verify: link, sandbox run, total) and the ratio verify / faithful build (goal:
verify at most 1.0 s).

    python bench/verify_cost.py [--candidates 3]
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import dace
import dace_ai
import numpy as np
from dace_ai.checkers.host_compile import faithful_check
from dace_ai.checkers.verify import verify_check
from dace_ai.checking.api import CheckRequest
from dace_ai.checking.stages import check_workdir
from dace_ai.compilation.compile import compile_candidate
from dace_ai.config.settings import resolve_settings
from dace_ai.expansion.expansion_pass import node_context
from dace_ai.expansion.pending import pending_nodes
from dace_ai.prompt.answer import Answer
from dace_ai.solving.tasklet import make_tasklet

SIZE = 1_000_000


def axpb(a):
    return 3 * a + 1


@dace.program
def elementwise(A: dace.float64[SIZE]):
    return dace_ai.ai("Write _out[i] = 3 * _a[i] + 1 for every i.", a=A, reference=axpb)


@dace.program
def row_sums(A: dace.float64[1000, 1000]):
    return np.sum(A, axis=1)


def requests(sdfg, codes):
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.LibraryNode):
            node.implementation = "ai"
    settings = resolve_settings({"checkers": "verify"})
    ((parent, state, node),) = pending_nodes(sdfg)
    ctx = node_context(parent, state, node, settings)
    for code in codes:
        answer = Answer(code=code)
        yield CheckRequest(
            answer,
            ctx,
            settings,
            check_workdir(ctx, answer),
            make_tasklet=lambda envs, sdfg, a=answer: make_tasklet(node, a, ctx, environments=envs, sdfg=sdfg),
        )


def measure(label, sdfg, code_for, candidates):
    reqs = list(requests(sdfg, [code_for(i) for i in range(candidates + 1)]))
    first = verify_check(reqs[0])  # cold: reference program and precompiled header
    assert first.status == "passed", first.diagnostics
    verify_s, shared_s, link_s, run_s, faithful_s = [], [], [], [], []
    for req in reqs[1:]:
        start = time.perf_counter()
        assert compile_candidate(req).ok
        shared_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        report = verify_check(req)
        verify_s.append(time.perf_counter() - start)
        assert report.status == "passed", report.diagnostics
        link_s.append(report.details["timings"]["compile"])
        run_s.append(report.details["timings"]["run"])
        start = time.perf_counter()
        faithful = faithful_check(req)
        faithful_s.append(time.perf_counter() - start)
        assert faithful.status == "passed", faithful.diagnostics
    v, f = statistics.median(verify_s), statistics.median(faithful_s)
    print(
        f"{label:<34} shared compile {statistics.median(shared_s):.3f} s | verify {v:6.3f} s (link "
        f"{statistics.median(link_s):.3f}, sandbox run "
        f"{statistics.median(run_s):.3f}; seeds {first.seeds}, sizes {first.sizes}) | "
        f"faithful build {f:6.3f} s | verify/faithful {v / f:5.2f} | goal verify <= 1.0 s: "
        f"{'met' if v <= 1.0 else 'NOT met'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        dace.Config.set("default_build_folder", value=str(Path(root) / ".dacecache"))
        measure(
            "AINode 10^6 elements, reference=",
            elementwise.to_sdfg(),
            lambda i: f"for (int i = 0; i < {SIZE}; ++i) _out[i] = 3 * _a[i] + 1; // candidate {i}",
            args.candidates,
        )
        measure(
            "Reduce 10^6 elements, native",
            row_sums.to_sdfg(),
            lambda i: (
                "for (int i = 0; i < 1000; ++i) { double s = 0; for (int j = 0; j < 1000; ++j) "
                f"s += _in[i * 1000 + j]; _out[i] = s; }} // candidate {i}"
            ),
            args.candidates,
        )


if __name__ == "__main__":
    main()
