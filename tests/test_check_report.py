"""Check reports as typed records: one writer and one reader of their data, fields instead of conventions."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from dace_ai.checking.api import CheckReport
from dace_ai.checking.verdict import judge
from dace_ai.config.settings import resolve_settings
from dace_ai.dispatch.check_results import read_outcome, to_reports
from dace_ai.errors import InconclusiveCheckWarning
from dace_ai.performance.records import BenchFigures, SpeedOfLight
from dace_ai.prompt.feedback import TimeEvidence
from dace_ai.solving.check_records import ReportModel


def _every_field() -> CheckReport:
    return CheckReport(
        "verify",
        "passed",
        "3 seeds agree",
        0.25,
        {"ladder": [{"rung": "small"}], "reference": {}},
        stage="verify",
        reason="",
        rule="",
        told_user=False,
        seeds=3,
        sizes=[{"N": 13}, {"N": 67}],
    )


def test_a_report_survives_its_record_with_every_field():
    for report in (
        _every_field(),
        CheckReport(
            "bench",
            "failed",
            "Too slow",
            1.5,
            {"reasons": ["slow"]},
            stage="bench",
            rule="gate",
            reason="slow",
            sizes=[{"N": 4096}],
            bench=BenchFigures(
                sizes={"N": 4096},
                repeats=2,
                candidate_seconds=(2e-3, 2.2e-3),
                native_seconds=(1e-3, 1e-3),
                candidate_median=2.1e-3,
                native_median=1e-3,
                speedup=0.5,
                speedup_range=(0.45, 0.5),
                timed=True,
                threads=2,
                baselines={"DaCe pure": 1e-3},
                native="DaCe pure",
                speedup_native=0.5,
                strongest="DaCe pure",
                speedup_strongest=0.5,
                speed_of_light_missing="not measured",
            ),
            speed_of_light=SpeedOfLight(1.0, 2.0, "memory", 0.1, 100.0, 20.0, 2e6, 4e6, "float64", 2),
        ),
        CheckReport(
            "sanitizers", "inconclusive", "clang++ missing", stage="verify", reason="clang missing", told_user=True
        ),
    ):
        record = report.record()
        assert json.loads(json.dumps(record)) == record  # plain JSON
        assert CheckReport.from_record(record) == report
        assert ReportModel.model_validate(record).model_dump() == record  # a check job's result: same fields


def test_an_older_checkers_details_become_fields():
    """A plugin written before the fields put stage, reason, rule, told, seeds and sizes into details."""
    old = CheckReport(
        "lab",
        "inconclusive",
        "no tool",
        details={"stage": "compile", "reason": "tool missing", "told": True, "extra": 1},
    )
    assert (old.stage, old.reason, old.told_user, old.details) == ("compile", "tool missing", True, {"extra": 1})
    bench = CheckReport("bench", "failed", "slow", details={"stage": "bench", "rule": "gate", "sizes": {"N": 8}})
    assert bench.rule == "gate" and bench.sizes == [] and bench.details["sizes"] == {"N": 8}  # a figure stays
    verify = CheckReport("verify", "passed", details={"seeds": 2, "sizes": [{"N": 5}]})
    assert (verify.seeds, verify.sizes, verify.details) == (2, [{"N": 5}], {})
    # a value given as a field wins over the convention
    both = CheckReport("x", "failed", details={"reason": "old"}, reason="new")
    assert both.reason == "new" and both.details == {"reason": "old"}
    # a checks.json row written before the fields (stage inside details) reads the same
    row = {
        "checker": "verify",
        "status": "inconclusive",
        "seconds": 0.1,
        "details": {"stage": "verify", "reason": "no reference", "told": True},
    }
    assert CheckReport.from_record(row) == CheckReport(
        "verify", "inconclusive", "", 0.1, {}, stage="verify", reason="no reference", told_user=True
    )


def test_a_returned_result_must_carry_the_fields_a_local_check_carries():
    record = _every_field().record()
    outcome = {"reports": [record], "seconds": 1.0, "check_seconds": 0.5}
    parsed, problem = read_outcome(outcome, checks_on=True, known_checkers={"verify"})
    assert problem == "" and to_reports(parsed) == [_every_field()]
    for broken, says in (
        ({**record, "stage": "later"}, "reports.0.stage"),
        ({**record, "seeds": 0}, "without its seeds and sizes"),
        ({**record, "sizes": []}, "without its seeds and sizes"),
        ({**record, "verdict": "passed"}, "reports.0.verdict"),
    ):
        parsed, problem = read_outcome({**outcome, "reports": [broken]}, checks_on=True, known_checkers={"verify"})
        assert parsed is None and says in problem, problem


@pytest.mark.parametrize("told", [True, False])
def test_the_acceptance_rule_warns_unless_the_checker_told_the_user(told):
    undecided = CheckReport(
        "verify", "inconclusive", "Not verified: no reference.", stage="verify", reason="no reference", told_user=told
    )
    passed = CheckReport("probe", "passed", stage="compile")
    verdict = judge([passed, undecided], resolve_settings({}))
    assert verdict.accepted and verdict.level == verdict.reached == "unverified: no reference"
    assert verdict.warnings == (() if told else (undecided,))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        verdict.warn(type("Node", (), {"name": "n", "node_type": "AINode", "sdfg_name": "p"})())
    assert [issubclass(w.category, InconclusiveCheckWarning) for w in caught] == ([] if told else [True])


def test_a_refused_candidate_reaches_a_level_too():
    wrong = CheckReport("verify", "failed", "Wrong result", stage="verify", reason="mismatch")
    verdict = judge([CheckReport("probe", "passed", stage="compile"), wrong], resolve_settings({}))
    assert not verdict.accepted and verdict.level == "" and verdict.reached == "unverified: failed verify"
    slow = judge([CheckReport("bench", "failed", "slow", stage="bench", rule="gate")], resolve_settings({}))
    assert slow.too_slow and not judge([wrong], resolve_settings({})).too_slow


def test_the_feedback_reads_bench_figures_by_the_stage_field_and_from_older_rows():
    figures = BenchFigures(speedup=0.5, candidate_median=2e-3, native_median=1e-3)
    live = CheckReport("bench", "failed", "Too slow", stage="bench", rule="gate", bench=figures)
    assert TimeEvidence.from_reports([live]).figures == figures
    assert TimeEvidence.from_reports([live.record()]).figures == figures
    older = {"speedup": 0.5, "candidate_median": 2e-3, "native_median": 1e-3}
    older_row = {"checker": "bench", "status": "failed", "details": {"stage": "bench", **older}}
    found = TimeEvidence.from_reports([older_row]).figures
    assert found is not None and found.speedup == 0.5
    not_bench = CheckReport("probe", "passed", details=dict(older), stage="compile")
    assert TimeEvidence.from_reports([not_bench]).figures is None
    assert TimeEvidence.from_reports([{**older_row, "details": {"stage": "compile", **older}}]).figures is None


#: The check reports of one candidate (verify and bench of a real matmul) as the code before the typed bench
#: figures and speed of light wrote them: everything in ``details``.
OLD_RECORDS = Path(__file__).parent / "data" / "records" / "checks-before-typed-results.json"


def test_records_written_before_the_typed_results_load_into_them_and_are_written_back_the_same():
    records = json.loads(OLD_RECORDS.read_text(encoding="utf-8"))
    verify, bench = (CheckReport.from_record(r) for r in records)
    assert verify.bench is None and verify.speed_of_light is None and "bench_sizes" in verify.details
    old = records[1]["details"]
    fig, sol = bench.bench, bench.speed_of_light
    assert fig is not None and sol is not None
    assert fig.speedup == old["speedup"] and fig.candidate_seconds == tuple(old["candidate_seconds"])
    assert fig.sizes == {"M": 48, "K": 40, "N": 56} and fig.repeats == 3 and fig.threads == 2
    assert fig.baselines == old["baselines"] and fig.strongest == old["strongest"] and fig.native == old["native"]
    assert fig.speedup_range == tuple(old["speedup_range"]) and fig.baselines_left_out == old["baselines_left_out"]
    assert (fig.speed_of_light_level, fig.work) == (old["speed_of_light_level"], old["work"])
    assert sol.fraction == old["speed_of_light"]["fraction"] and (sol.bound, sol.dtype) == ("compute", "float64")
    assert sol.flops == 2 * 48 * 40 * 56 and sol.threads == 2
    assert bench.details == {"origin": old["origin"]}  # what only the checker knows; the figures are fields
    for report, record in zip((verify, bench), records, strict=True):
        assert report.record() == record  # the same keys and values: older readers read it as before
        assert ReportModel.model_validate(report.record()).model_dump() == record
        assert CheckReport.from_record(report.record()) == report
