"""Where the time goes, told to the model: the compiler's vectoriser remarks on the answer's own loops (from the
candidate's one real compile), the measured figures and the fraction of speed of light, in the repair prompt of a
candidate the bench gate refused, in refine's prompt, and in optimize's refinement rounds, which stop once a
candidate reaches ``target_sol``.

Real compiles, real DaCe programs, real sandboxed runs; the model is ``dace_ai.testing.FakeProvider``, which
records every request. The roofline figure comes from a checker registered here (a ``SpeedOfLight``, as the
bench's own).

No ``from __future__ import annotations`` here: DaCe reads the programs' annotations as objects."""

import json
import shutil
import warnings

import dace
import dace_ai
import pytest
from dace_ai.checking.api import CheckReport
from dace_ai.checking.artefacts import Artefacts
from dace_ai.checking.stages import run_checks
from dace_ai.compilation.compile import COMPILED
from dace_ai.compilation.remarks import MAX_REMARKS, parse_gcc
from dace_ai.expansion.pending import pending_nodes
from dace_ai.expansion.pipeline import implement
from dace_ai.plugin import BenchFigures, Checker, SpeedOfLight, hookimpl
from dace_ai.prompt.feedback import TITLE, TimeEvidence, where_the_time_goes

from tests.test_checking import request_for

N = dace.symbol("N")
# Line 2 carries a dependence from one iteration to the next (never vectorised); line 3 is asked to be.
LOOPS = (
    "_b[0] = _a[0];\n"
    "for (int i = 1; i < N; ++i) _b[i] = _b[i - 1] * 0.5 + _a[i];\n"
    "#pragma omp simd\n"
    "for (int i = 0; i < N; ++i) _b[i] += twice(_a[i]);"
)
SOL_MEMORY = {
    "gflops": 0.8,
    "gbs": 12.3,
    "bound": "memory",
    "fraction": 0.27,
    "peak_gflops": 150.0,
    "bandwidth_gbs": 45.6,
    "flops": 65536.0,
    "bytes": 1048576.0,
    "dtype": "float64",
    "threads": 2,
}


# ------------------------------------------------------------------------------------ the compiler's remarks
def _probe(code: str, **settings):
    """The probe's report and what the checks gave and made (the candidate's compile among them)."""
    request = request_for(code, **settings)
    store = Artefacts()
    (report,) = run_checks(request, artefacts=store)
    assert report.checker == "probe" and report.status == "passed", report.diagnostics
    return report, store


def test_the_compile_reports_which_of_the_answers_loops_were_vectorised_and_why_not():
    report, store = _probe(LOOPS)
    remarks = report.details["remarks"]
    build = store[COMPILED]
    assert build.remark_kind in ("gcc", "clang")
    # one compile: the remarks came with the object file the later stages link
    assert build.object is not None and sum("-fopt-info" in a or a.startswith("-Rpass") for a in build.command) >= 1
    dependent = [r for r in remarks if r.startswith("line 2 of your code")]
    simd = [r for r in remarks if r.startswith("line 4 of your code")]
    assert len(dependent) == 1 and ": not vectorized: " in dependent[0] and "_b[i - 1]" in dependent[0]
    assert len(simd) == 1 and ": vectorized" in simd[0]
    # only the answer's loops: the sandbox's entry points in the same unit have loops too
    assert all(r.startswith("line ") and " of your code" in r for r in remarks), remarks


def test_a_loop_gcc_turns_down_on_cost_at_O2_comes_with_the_remedy():
    from dace_ai.compilation.remarks import cost_model_note

    report, store = _probe("for (int i = 0; i < N; ++i)\n  _b[i] = twice(_a[i]);")
    build = store[COMPILED]
    levels = [f for f in build.flags if f.startswith("-O")]
    (remark,) = report.details["remarks"]
    if build.remark_kind == "gcc" and levels[-1] == "-O2" and "-fopenmp" in build.flags:  # DaCe 1.0's default build
        assert "not vectorized: " in remark and "would need to be peeled" in remark
        assert "#pragma omp simd" in report.details["remarks_note"]
    else:
        assert "remarks_note" not in report.details
    cheap = ["line 1 of your code, column 5 `for`: not vectorized: Loop costings not worthwhile"]
    assert cost_model_note("gcc", ["-O3", "-O2", "-fopenmp"], cheap).startswith("At -O2 GCC vectorises")
    assert cost_model_note("gcc", ["-O2", "-O3", "-fopenmp"], cheap) == ""  # -O3 pays for remainders
    assert cost_model_note("clang", ["-O2", "-fopenmp"], cheap) == ""
    assert cost_model_note("gcc", ["-O2", "-fopenmp"], ["line 2: not vectorized: bad data dependence"]) == ""


def test_remarks_are_deduplicated_capped_and_read_without_gimple_names(tmp_path):
    text = "\n".join(
        [
            f"tasklet.cpp:{line}:5: note:  === analyze_loop_nest ===\n"
            f"tasklet.cpp:{line}:9: missed:   not vectorized, possible dependence between data-refs *_11 and *_15\n"
            f"tasklet.cpp:{line}:9: missed:   not vectorized: no vectype for stmt: _12 = *_11;\n"
            f"tasklet.cpp:{line}:5: missed:  bad data dependence.\n"
            f"tasklet.cpp:{line}:5: missed: couldn't vectorize loop"
            for line in range(1, 30)
        ]
        * 2
    )
    loops = parse_gcc(text)
    assert len(loops) == 29  # the second analysis of each loop (an inlined copy) adds nothing
    assert loops[0].reasons == ["possible dependence between data-refs", "bad data dependence"]
    from dace_ai.compilation.remarks import candidate_remarks

    unit = "// ---- code ----\n" + "\n".join(f"for (;;) x{i};" for i in range(40)) + "\n"
    folder = tmp_path
    (folder / "remarks.txt").write_text(text.replace("tasklet.cpp:1:", "tasklet.cpp:999:"))
    lines = candidate_remarks("gcc", folder, "", unit, answer_lines=41)
    assert len(lines) == MAX_REMARKS + 1 and lines[-1] == "... (8 more loops)"
    assert lines[0] == (
        "line 1 of your code, column 5 `for (;;) x0;`: not vectorized: possible dependence between "
        "data-refs; bad data dependence"
    )


@pytest.mark.skipif(shutil.which("clang++") is None, reason="clang++ is not installed")
def test_clang_builds_report_its_loop_vectorize_remarks_on_the_same_lines():
    previous = dace.Config.get("compiler", "cpu", "executable")
    dace.Config.set("compiler", "cpu", "executable", value="clang++")
    try:
        report, store = _probe(LOOPS)
    finally:
        dace.Config.set("compiler", "cpu", "executable", value=previous)
    assert store[COMPILED].remark_kind == "clang"
    remarks = report.details["remarks"]
    assert any(r.startswith("line 2 of your code") and "not vectorized" in r for r in remarks), remarks
    # Clang places a '#pragma omp simd' loop at its pragma
    assert any(r.startswith(("line 3 of your code", "line 4 of your code")) and ": vectorized" in r for r in remarks), (
        remarks
    )


# ------------------------------------------------------------------------------------ the section's words
def test_the_section_names_figures_with_their_baselines_the_bound_and_the_remarks():
    bench = CheckReport(
        "bench",
        "failed",
        "Too slow",
        stage="bench",
        rule="gate",
        bench=BenchFigures(
            sizes={"M": 60, "N": 70},
            repeats=5,
            threads=2,
            timed=True,
            candidate_median=2.0e-3,
            native_median=8.0e-3,
            speedup=4.0,
            speedup_range=(3.5, 4.5),
            native="DaCe pure",
            baselines={"DaCe pure": 8.0e-3, "OpenBLAS (DaCe 'OpenBLAS')": 5.0e-4},
            strongest="OpenBLAS (DaCe 'OpenBLAS')",
        ),
        speed_of_light=SpeedOfLight.from_record(SOL_MEMORY),
    )
    probe = CheckReport(
        "probe",
        "passed",
        details={
            "stage": "compile",
            "compiler": ["c++"],
            "flags": ["-O3", "-O2"],
            "remarks": ["line 2 of your code, column 5 `for`: not vectorized"],
            "remarks_note": "At -O2 GCC vectorises a loop only when",
        },
    )
    text = where_the_time_goes([probe, bench])
    assert text.startswith(TITLE)
    assert "Measured at M=60, N=70 (median of 5 timed runs, 2 threads):" in text
    assert "- your code: 2.00 ms per call" in text
    assert "- DaCe pure (the native expansion): 8.00 ms per call; your speedup 4.00x (range 3.50-4.50)" in text
    assert "- OpenBLAS (DaCe 'OpenBLAS') (the strongest baseline): 500.0 µs per call; your speedup 0.25x" in text
    assert (
        "the node is memory-bound (1.05e+06 bytes moved, 6.55e+04 flops); your code reaches 12.3 GB/s of "
        "45.6 GB/s measured bandwidth: 27% of speed of light."
    ) in text
    assert "float64, 2 threads" in text
    assert "remarks on your loops (`c++` at -O2, the real build's flags):\n- line 2 of your code" in text
    assert text.rstrip().endswith("not vectorized\n\nAt -O2 GCC vectorises a loop only when")

    compute = {**SOL_MEMORY, "bound": "compute", "gflops": 30.0, "fraction": 0.2}
    rows = [{"checker": "bench", "status": "passed", "stage": "bench", "details": {"speed_of_light": compute}}]
    evidence = TimeEvidence.from_reports(rows)  # a session round's checks.json
    assert evidence.fraction == pytest.approx(0.2)
    assert "reaches 30 GFLOP/s of 150 GFLOP/s peak: 20% of speed of light" in where_the_time_goes(evidence)
    assert where_the_time_goes([CheckReport("probe", "failed", "error")]) == ""


# ------------------------------------------------------------------------------------ in the prompts
class _Roofline:
    """A bench-stage checker giving the roofline figure the bench stage gives (its shape), at a set fraction."""

    fraction = 0.27

    @hookimpl
    def dace_ai_checkers(self):
        def check(request):
            return CheckReport(
                "t-roofline",
                "passed",
                "",
                speed_of_light=SpeedOfLight.from_record({**SOL_MEMORY, "fraction": type(self).fraction}),
            )

        yield Checker(name="t-roofline", stage="bench", check=check, default=False)


@pytest.fixture
def scripted(fake, register_dace_ai_plugin):
    _Roofline.fraction = 0.27
    register_dace_ai_plugin(_Roofline(), "test-roofline")
    dace.Config.set("ai", "provider", value="scripted")
    dace.Config.set("ai", "speed_of_light", value="off")  # the figure comes from t-roofline, at a set fraction
    yield fake
    for key, value in (
        ("provider", ""),
        ("checkers", ""),
        ("bench", "report"),
        ("min_speedup", 1.03),
        ("max_repair_attempts", 2),
        ("target_sol", 0.0),
        ("bench_sizes", ""),
        ("speed_of_light", "on"),
    ):
        dace.Config.set("ai", key, value=value)


def _last_user_message(request) -> str:
    return request.messages[-1].content


def twice_program():
    def twice(a):
        return 2 * a

    @dace.program
    def prog(A: dace.float64[N]):
        return dace_ai.ai("Write _out[i] = 2 * _a[i] for every i < N.", a=A, name="twice", reference=twice)

    return prog.to_sdfg()


SCALAR = json.dumps({"code": "for (int i = 0; i < N; ++i)\n  _out[i] = 2.0 * _a[i];"})
SIMD = json.dumps({"code": "#pragma omp simd\nfor (int i = 0; i < N; ++i)\n  _out[i] = _a[i] + _a[i];"})


def test_a_candidate_the_gate_refuses_as_slow_is_told_where_the_time_goes(scripted):
    from tests.target_support import gemm_sdfg

    slow = json.dumps(
        {
            "code": "for (int i = 0; i < M; ++i)\n"
            "  for (int j = 0; j < N; ++j) {\n"
            "    double s = 0;\n"
            "    for (int k = 0; k < K; ++k) s += _a[i * K + k] * _b[k * N + j];\n"
            "    _c[i * N + j] = s;\n"
            "  }"
        }
    )
    scripted.queue(slow, slow)
    for key, value in (
        ("checkers", "probe,verify,bench,t-roofline"),
        ("bench", "gate"),
        ("min_speedup", 1e6),
        ("max_repair_attempts", 1),
        ("bench_sizes", "M=48,K=40,N=56"),
    ):
        dace.Config.set("ai", key, value=value)
    sdfg, _, node = gemm_sdfg()
    node.implementation = "ai"
    with warnings.catch_warnings(record=True) as said:  # the native expansion is kept, with a warning
        warnings.simplefilter("always")
        sdfg.expand_library_nodes()

    assert len(scripted.requests) == 2, [str(w.message) for w in said]
    repair = _last_user_message(scripted.requests[1])
    assert "Too slow" in repair and TITLE in repair
    section = repair[repair.index(TITLE) :]
    assert "Measured at M=48, K=40, N=56" in section and "- your code: " in section
    assert (
        "(the native expansion" in section and "your speedup " in section
    )  # ", the strongest baseline" without OpenBLAS
    assert "27% of speed of light" in section and "45.6 GB/s measured bandwidth" in section
    assert "remarks on your loops" in section and "- line 4 of your code, column " in section
    assert "s += _a[i * K + k] * _b[k * N + j];" in section


def test_refine_tells_the_model_where_the_time_of_the_round_went(scripted):
    scripted.queue(SCALAR, SIMD)
    dace.Config.set("ai", "checkers", value="probe,verify,bench,t-roofline")
    sdfg = twice_program()
    for nsdfg, state, node in pending_nodes(sdfg):
        implement(nsdfg, state, node)
    dace_ai.refine(sdfg, "twice", "Make it faster.")

    assert len(scripted.requests) == 2
    sent = _last_user_message(scripted.requests[1])
    assert sent.startswith("Feedback on the implementation:\n\nMake it faster.") and TITLE in sent
    section = sent[sent.index(TITLE) :]
    assert "- your code: " in section and "per call (no native expansion to compare with)" in section
    assert "27% of speed of light" in section
    assert "- line 1 of your code, column " in section and "for (int i = 0; i < N; ++i)" in section


@pytest.mark.parametrize("fraction, requests", [(0.9, 1), (0.3, 3)])
def test_optimize_stops_once_a_candidate_reaches_target_sol(scripted, fraction, requests):
    _Roofline.fraction = fraction
    scripted.queue(SCALAR, SIMD, SCALAR)
    dace.Config.set("ai", "checkers", value="probe,verify,bench,t-roofline")
    dace.Config.set("ai", "target_sol", value=0.5)
    report = dace_ai.optimize(twice_program(), samples=1, rounds=2, sizes={"N": 4096})

    (node,) = report.nodes
    assert node.outcome == "optimized" and len(scripted.requests) == requests
    assert all(c.sol_fraction == pytest.approx(fraction) for c in node.candidates)
    if fraction >= 0.5:
        assert node.stopped_early == (
            "stopped after round 0: r0s0 reached 90% of speed of light (target_sol 0.5); 2 refinement round(s) skipped"
        ) and node.stopped_early in str(report)
    else:
        assert node.stopped_early == ""
        refinement = _last_user_message(scripted.requests[1])
        assert TITLE in refinement and "30% of speed of light" in refinement
        assert "remarks on your loops" in refinement and "line 1 of your code" in refinement


def test_target_sol_is_a_documented_setting():
    from dace_ai.config.definitions import BY_KEY
    from dace_ai.config.settings import resolve_settings
    from dace_ai.errors import SettingsError

    assert BY_KEY["target_sol"].default == 0.0 and "speed of light" in BY_KEY["target_sol"].description
    assert resolve_settings({"target_sol": 0.8}).target_sol == 0.8
    with pytest.raises(SettingsError, match="target_sol"):
        resolve_settings({"target_sol": -1})


def test_a_rerun_of_the_same_answer_reads_only_its_own_remarks():
    """GCC appends to its remarks file: the check of an answer run again (same folder) starts a fresh one."""
    report, store = _probe(LOOPS)
    build = store[COMPILED]
    if build.remark_kind != "gcc":
        pytest.skip("the build's compiler is not GCC")
    size = (build.folder / "remarks.txt").stat().st_size
    again, store = _probe(LOOPS)
    # (the internals print addresses, so the size varies a little; appended, it would double)
    assert (store[COMPILED].folder / "remarks.txt").stat().st_size < 1.5 * size
    assert again.details["remarks"] == report.details["remarks"]
