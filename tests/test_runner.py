"""One build, one sandboxed run per candidate: the verify and bench stages share the child runner.

Real compiles, a real DaCe build of the native reference (the only DaCe build a
default check makes), real child processes with OpenMP threads.
"""

import json
import os
import re
import subprocess
import sys
import textwrap

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.checking.api import CheckRequest
from dace_ai.checking.artefacts import Artefacts
from dace_ai.checking.stages import check_workdir, run_checks
from dace_ai.config.settings import resolve_settings
from dace_ai.expansion.expansion_pass import node_context
from dace_ai.expansion.pending import pending_nodes
from dace_ai.prompt.answer import Answer
from dace_ai.sandbox.sandbox_run import SANDBOX_RUN

N, M, K = (dace.symbol(s) for s in "NMK")

MATMUL = (
    "for (int i = 0; i < N; ++i) for (int j = 0; j < M; ++j) { double acc = 0;"
    " for (int k = 0; k < K; ++k) acc += _a[i * K + k] * _b[k * M + j]; _c[i * M + j] = acc; }"
)
RACY_SUM = "double total = 0.0;\n#pragma omp parallel for\nfor (int i = 0; i < N; ++i) total += _a[i];\n_s = total;"
REDUCED_SUM = (
    "double total = 0.0;\n#pragma omp parallel for reduction(+: total)\n"
    "for (int i = 0; i < N; ++i) total += _a[i];\n_s = total;"
)


@dace.program
def matmul(A: dace.float64[N, K], B: dace.float64[K, M], C: dace.float64[N, M]):
    C[:] = A @ B


def _request(sdfg, answer: Answer, implementation=None, **settings) -> CheckRequest:
    settings = resolve_settings(settings)
    if implementation:
        for node, _ in sdfg.all_nodes_recursive():
            if isinstance(node, dace.nodes.LibraryNode):
                node.implementation = implementation
    ((parent, state, node),) = pending_nodes(sdfg)
    ctx = node_context(parent, state, node, settings)
    return CheckRequest(answer, ctx, settings, check_workdir(ctx, answer))


@pytest.fixture
def dace_builds(monkeypatch):
    """The names of the programs DaCe builds (its CMake step), recorded, not prevented."""
    from dace.codegen import compiler

    built: list[str] = []
    original = compiler.configure_and_compile

    def spy(program_folder, program_name=None, *args, **kwargs):
        built.append(str(program_name or os.path.basename(str(program_folder))))
        return original(program_folder, program_name, *args, **kwargs)

    monkeypatch.setattr(compiler, "configure_and_compile", spy)
    return built


@pytest.mark.own_builds
def test_bench_times_the_library_verify_linked_and_no_candidate_is_built_by_dace(dace_builds):
    sdfg = matmul.to_sdfg()
    reports, requests, stores = [], [], []
    for variant in ("", " /* second candidate */"):
        request = _request(
            sdfg,
            Answer(code=MATMUL + variant),
            "ai",
            checkers="verify,bench",
            bench_sizes="N=40,K=30,M=50",
            bench_repeats=3,
        )
        requests.append(request)
        stores.append(Artefacts())
        reports.append(run_checks(request, artefacts=stores[-1]))
    for request, store, (verify, bench) in zip(requests, stores, reports):
        assert (verify.checker, verify.status) == ("verify", "passed"), verify.diagnostics
        assert (bench.checker, bench.status) == ("bench", "passed"), bench.diagnostics
        library = str(request.workdir / "sandbox" / "candidate.so")
        assert bench.bench is not None and store[SANDBOX_RUN].library == library == bench.bench.library
        assert bench.bench.timed and bench.bench.speedup is not None and bench.bench.speedup > 0
        assert len(bench.bench.candidate_seconds) == 3 and bench.sizes == [{"N": 40, "K": 30, "M": 50}]
        assert "and at the bench sizes N=40, K=30, M=50" in verify.diagnostics
        assert verify.details["threads"]["runs"] == [] and "no OpenMP in the code" in verify.diagnostics
    # DaCe built the node's native reference once, for both candidates, and never a candidate;
    # besides it only the node's library baselines (DaCe's OpenBLAS, ...), each once as well.
    bench = reports[0][1]
    baselines = [label for label in bench.bench.baselines or {} if label != bench.bench.native]
    assert len(dace_builds) == 1 + len(baselines), (dace_builds, baselines)
    assert len(set(dace_builds)) == len(dace_builds) and all(b.startswith("ai_reference_") for b in dace_builds)
    assert (reports[1][1].bench.baselines or {}).keys() == (bench.bench.baselines or {}).keys()
    # The reference's outputs are cached per case next to it: the second candidate ran no reference.
    outputs = list((requests[0].workdir.parent / "reference").glob("*/outputs/*.npy"))
    assert outputs, "reference outputs were not cached"


@pytest.mark.own_builds
def test_a_nodes_native_reference_is_found_again_without_remaking_its_program(monkeypatch, tmp_path):
    """A node's next candidates take its native program as found before (no program made and hashed again),
    while its library is there and under the same build root; otherwise it is looked for (or built) anew."""
    from dace_ai.sandbox import reference

    request = _request(matmul.to_sdfg(), Answer(code="x"), "ai")
    first = reference.build_native_reference(request)
    made: list[int] = []
    real = reference.reference_sdfg
    monkeypatch.setattr(reference, "reference_sdfg", lambda *a, **k: made.append(1) or real(*a, **k))
    again = reference.build_native_reference(request)
    assert (again.library, again.seconds, made) == (first.library, 0.0, [])
    first.library.rename(first.library.with_suffix(".gone"))  # its library removed: built again
    rebuilt = reference.build_native_reference(request)
    assert made == [1] and rebuilt.library.is_file() and rebuilt.seconds > 0
    root = dace.Config.get("default_build_folder")
    dace.Config.set("default_build_folder", value=str(tmp_path))
    try:
        elsewhere = reference.build_native_reference(request)  # another build root: its own program there
    finally:
        dace.Config.set("default_build_folder", value=root)
    assert made == [1, 1] and str(tmp_path) in str(elsewhere.library)


@pytest.mark.own_builds
def test_the_native_reference_is_reused_by_another_process(tmp_path):
    """A second process with the same build root finds the reference built (no DaCe build, 0 s)."""
    script = textwrap.dedent("""
        import json, sys
        import dace
        from dace_ai.sandbox.reference import build_native_reference
        sys.path.insert(0, {tests!r})
        from test_runner import _request, matmul
        from dace_ai.prompt.answer import Answer
        dace.Config.set("default_build_folder", value={root!r})
        native = build_native_reference(_request(matmul.to_sdfg(), Answer(code="x"), "ai"))
        print(json.dumps({{"library": str(native.library), "seconds": native.seconds}}))
    """)
    root = str(dace.Config.get("default_build_folder"))
    code = script.format(tests=os.path.dirname(__file__), root=root)
    first, second = (
        json.loads(
            subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            .stdout.strip()
            .splitlines()[-1]
        )
        for _ in range(2)
    )
    assert first["library"] == second["library"] and first["seconds"] > 0 and second["seconds"] == 0


def _sum_program(name: str):
    """``S[0] = sum(A)`` as an AINode with a NumPy reference (a scalar output: a reduction)."""
    sdfg = dace.SDFG(name)
    sdfg.add_array("A", [N], dace.float64)
    sdfg.add_array("S", [1], dace.float64)
    state = sdfg.add_state()
    node = dace_ai.AINode(
        "total", "Write _s = the sum of _a[i] over i < N.", inputs={"_a"}, outputs={"_s"}, reference=lambda a: np.sum(a)
    )
    state.add_node(node)
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet("A[0:N]"))
    state.add_edge(node, "_s", state.add_write("S"), None, dace.Memlet("S[0]"))
    return sdfg


@pytest.mark.parametrize("bench", ["off", "report"])
def test_a_data_race_is_refused_as_not_deterministic_naming_sizes_and_threads(bench):
    """A shared accumulator: right with one thread, wrong (and varying) with eight.

    Collisions need the threads to overlap: more threads than cores (the scheduler
    interrupts them mid-loop) and 16 M elements make that near certain.
    """
    settings = {"checkers": "verify,bench", "bench": bench, "check_threads": 8}
    if bench == "off":
        settings["verify_sizes"] = "N=13,16000003"
    else:
        settings["bench_sizes"] = "N=16000003"
    report = run_checks(_request(_sum_program(f"racy_{bench}"), Answer(code=RACY_SUM), **settings))[0]
    assert report.status == "failed" and report.reason == "nondeterministic", report.diagnostics
    # Named where it showed: at the large size in the thread runs, or already at a smaller size run with all
    # cores, which then comes out right with one thread.
    assert "not deterministic" in report.diagnostics and "data race" in report.diagnostics
    named = re.search(r"sizes N=(\d+)( \([a-z_ -]+\))?[;),]", report.diagnostics)
    assert named, report.diagnostics
    checked = [s["N"] for s in report.sizes] + [report.details.get("bench_sizes", {}).get("N")]
    assert int(named.group(1)) in checked, (named.group(1), checked)  # a size the ladder really ran
    assert "runs with 1 thread then 8 threads" in report.diagnostics or (
        "with 8 threads output _s" in report.diagnostics and "with 1 thread it is right" in report.diagnostics
    )

    honest = run_checks(_request(_sum_program(f"reduced_{bench}"), Answer(code=REDUCED_SUM), **settings))
    assert [r.status for r in honest] == (["passed"] if bench == "off" else ["passed", "passed"]), [
        r.diagnostics for r in honest
    ]
    assert honest[0].details["threads"]["runs"][-1]["threads"] == [1, 8, 8]
    assert honest[0].details["threads"]["runtime"].startswith(("libgomp", "libomp"))


@pytest.mark.parametrize(
    "where, code, passes",
    [
        ("code_init", "int k = K; (void)k;", True),  # K is in DaCe's __dace_init_<program>(int K, int M)
        ("code_init", "int n = N; (void)n;", False),  # N is not: DaCe's build would not compile it either
        ("code_exit", "int k = K; (void)k;", False),  # __dace_exit_<program> receives only __state
    ],
)
def test_init_and_exit_code_get_exactly_the_symbols_dace_passes(where, code, passes):
    request = _request(matmul.to_sdfg(), Answer(code=MATMUL, **{where: code}), "ai", checkers="probe")
    (report,) = run_checks(request)
    if passes:
        assert report.status == "passed", report.diagnostics
    else:
        assert report.status == "failed" and f"dace_ai_symbol_not_passed_by_DaCe_to_{where}" in report.diagnostics


def test_the_task_run_of_the_evaluation_harness_uses_the_same_child(monkeypatch):
    """``dace-ai bench``'s whole-program run goes through sandbox.child_process.run_child, both programs loaded there."""
    from dace_ai.evaluation.task_run import run_task
    from dace_ai.sandbox import child_process

    jobs = []
    original = child_process.run_child

    def spy(job, folder, limits, **kwargs):
        jobs.append(job)
        return original(job, folder, limits, **kwargs)

    monkeypatch.setattr(child_process, "run_child", spy)
    root = str(dace.Config.get("default_build_folder"))
    good = {"code": "for (long i = 0; i < N; ++i) _out[i] = _a * _x[i] + _y[i];"}
    spec = {"suite": "core", "task": "axpy", "build_root": root, "seeds": [0, 1], "repeats": 3}
    result = run_task({**spec, "answer": good})
    assert result["candidate_compiled"] and result["correct"] and result["baseline_correct"], result
    assert result["speedup"] > 0 and result["repeats"] == 3
    assert [j["candidate"]["kind"] for j in jobs] == ["program"] and jobs[0]["reference"]["kind"] == "program"
    # the task's NumPy reference is timed in that same child run, next to candidate and native program
    numpy_side = jobs[0]["bench"]["baselines"][-1]
    assert numpy_side["kind"] == "python" and numpy_side["function"].startswith("dace_ai.evaluation.suites.")
    assert result["baselines_seconds"]["NumPy"] > 0, result
    wrong = run_task(
        {**spec, "answer": {"code": "for (long i = 0; i < N; ++i) _out[i] = _x[i] + _y[i];"}, "time": False}
    )
    assert wrong["candidate_compiled"] and not wrong["correct"] and "seed 0" in wrong["candidate_mismatch"]
    crash = run_task({**spec, "answer": {"code": "volatile double *p = nullptr; _out[0] = p[N];"}, "time": False})
    assert "the candidate's process died of SIGSEGV" in crash["error"]
