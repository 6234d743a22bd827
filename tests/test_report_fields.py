"""What the rest of the product reads across checkers is typed on the report, and old records still read."""

from __future__ import annotations

from dace_ai.checking.api import CheckReport, Coverage
from dace_ai.checking.levels import verification_level

#: A verify report and a sanitizer report as sessions wrote them before the typed fields.
OLD_VERIFY = {
    "checker": "verify",
    "status": "passed",
    "diagnostics": "matches",
    "seconds": 1.0,
    "stage": "verify",
    "seeds": 3,
    "sizes": [{"N": 13}, {"N": 64}],
    "details": {
        "threads": {"count": 2, "runs": [{"sizes": {"N": 64}, "seed": 0, "threads": [1, 2, 2]}]},
        "distributions": {"ran": ["uniform", "ones"]},
        "bench_sizes": {"N": 4096},
    },
}
OLD_SANITIZERS = {
    "checker": "sanitizers",
    "status": "passed",
    "stage": "verify",
    "details": {"sanitizers": ["address", "undefined"]},
}
OLD_STATIC = {"checker": "probing", "status": "passed", "stage": "compile", "details": {"static": True}}
LEVEL = "verified (3 seeds, 3 sizes, 2 thread counts, 2 distributions, sanitizers)"


def test_old_records_read_into_the_typed_fields_and_give_the_same_level():
    reports = [CheckReport.from_record(r) for r in (OLD_STATIC, OLD_VERIFY, OLD_SANITIZERS)]
    static, verify, sanitizers = reports
    assert static.static and not verify.static and sanitizers.supplements_verify
    assert verify.coverage == Coverage(threads=(1, 2), distributions=("uniform", "ones"), bench_sizes={"N": 4096})
    assert verification_level(reports) == LEVEL
    assert verification_level([static]) == "unverified: checks are off"


def test_the_levels_read_the_typed_fields_not_the_details():
    verify = CheckReport(
        "verify",
        "passed",
        stage="verify",
        seeds=2,
        sizes=[{"N": 13}],
        coverage=Coverage(threads=(1, 4), device="X sm_90"),
    )
    sanitizers = CheckReport("t-extra", "inconclusive", stage="verify", reason="clang missing", supplements_verify=True)
    assert verification_level([verify, sanitizers]) == (
        "verified (2 seeds, 1 size, 2 thread counts, on X sm_90, no sanitizers: clang missing)"
    )
    routed = CheckReport("routing", "inconclusive", stage="verify", reason="compile-only: no worker", compile_only=True)
    probe = CheckReport("probe", "passed", stage="compile")
    assert verification_level([probe, routed]) == "compile-only: no worker"


def test_new_records_round_trip_the_typed_fields():
    report = CheckReport(
        "verify", "passed", stage="verify", seeds=1, coverage=Coverage(threads=(1, 2), distributions=("ones",))
    )
    record = report.record()
    assert record["coverage"] == {"threads": [1, 2], "distributions": ["ones"], "device": "", "bench_sizes": None}
    back = CheckReport.from_record(record)
    assert back.coverage == report.coverage and not back.static and not back.supplements_verify
    assert CheckReport.from_record(CheckReport("p", "passed", static=True).record()).static
