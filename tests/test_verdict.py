"""One acceptance rule for every driver: the expansion, ``generate``, ``optimize`` and ``refine`` accept,
warn about and refuse an answer alike, as ``on_inconclusive`` and ``on_failure`` say.

A checker plugin registered here (a real pluggy registration) answers with the status a test chooses,
so the rule is what is under test, not a compiler. No ``from __future__ import annotations``: DaCe reads
the programs' annotations as objects."""

import json
import warnings
from pathlib import Path

import dace
import dace_ai
import pytest
from dace_ai.checking.api import CheckReport
from dace_ai.checking.verdict import falls_back_natively, judge
from dace_ai.config.settings import resolve_settings
from dace_ai.errors import CheckFailed, InconclusiveCheckWarning, NativeFallbackWarning
from dace_ai.plugin import Checker, hookimpl
from dace_ai.solving.provenance import level_from_code, provenance
from dace_ai.storage.cache import AnswerCache
from dace_ai.storage.session_store import Session
from dace_ai.testing import FakeProvider
from dace_ai.workflows.generate import GenerateWarning

N = dace.symbol("N")
CODE = "for (int i = 0; i < N; ++i) _out[i] = _a[i];"
GEMM_CODE = "for (int i = 0; i < M * N; ++i) _c[i] = 0.0;"


class _Verdicts:
    """A compile-stage checker whose status the test sets (``status``); it counts its calls."""

    def __init__(self) -> None:
        self.status = "passed"
        self.calls = 0

    @hookimpl
    def dace_ai_checkers(self):
        def check(request):
            self.calls += 1
            return CheckReport(
                "t-verdict",
                self.status,
                f"t-verdict says {self.status}",
                details={"reason": f"t-verdict: tool missing ({self.status})"} if self.status == "inconclusive" else {},
            )

        yield Checker(name="t-verdict", stage="compile", check=check, default=False)


@pytest.fixture
def checker(register_dace_ai_plugin):
    fake, verdicts = FakeProvider(), _Verdicts()
    fake.queue(*[lambda request: json.dumps({"code": GEMM_CODE if "_c" in request.messages[0].content else CODE})] * 40)
    register_dace_ai_plugin(fake.plugin("scripted"), "scripted-provider")
    register_dace_ai_plugin(verdicts, "verdict-checker")
    settings = {"provider": "scripted", "checkers": "t-verdict", "max_repair_attempts": 1}
    for key, value in settings.items():
        dace.Config.set("ai", key, value=value)
    yield verdicts
    for key, value in (
        ("provider", ""),
        ("checkers", ""),
        ("max_repair_attempts", 2),
        ("on_failure", ""),
        ("on_inconclusive", "warn"),
    ):
        dace.Config.set("ai", key, value=value)


def ai_program():
    @dace.program
    def copyit(A: dace.float64[N], B: dace.float64[N]):
        dace_ai.ai("Copy _a into _out.", a=A, out=B, name="copyit")

    return copyit.to_sdfg()


def gemm_program():
    from tests.target_support import gemm_sdfg

    sdfg, _, node = gemm_sdfg()
    node.implementation = "ai"
    return sdfg, node


def cached() -> int:
    folder = AnswerCache().folder
    return len(list(folder.glob("*/*.json"))) if folder.is_dir() else 0


def generated(sdfg):
    return [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet) and provenance(n)]


# ------------------------------------------------------------------------------------ the rule itself
def _report(status, **details):
    return CheckReport("c", status, f"c: {status}", details={"stage": "compile", **details})


def test_judge_accepts_refuses_and_warns_by_the_settings():
    warn, reject = resolve_settings({}), resolve_settings({"on_inconclusive": "reject"})
    passed = judge([_report("passed")], warn)
    assert passed.accepted and passed.level == "compile-only" and not passed.warnings
    undecided = _report("inconclusive", reason="no compiler")
    told = _report("inconclusive", reason="no reference", told=True)
    accepted = judge([_report("passed"), undecided, told], warn)
    assert accepted.accepted and accepted.warnings == (undecided,) and accepted.inconclusive == (undecided, told)
    refused = judge([_report("passed"), undecided], reject)
    assert not refused.accepted and not refused.repairable and refused.level == ""
    assert "could not decide and on_inconclusive=reject" in refused.reason
    failed = judge([_report("failed"), undecided], warn)
    assert (
        not failed.accepted and failed.repairable and not failed.warnings and "refused by check(s) c" in failed.reason
    )
    assert judge([], warn).accepted and judge([], warn).level == "unverified: checks are off"


def test_on_failure_and_the_bench_gate_decide_the_fallback():
    error = resolve_settings({"on_failure": "error"})
    wrong = judge([_report("failed")], error)
    slow = judge([CheckReport("bench", "failed", "slower", details={"stage": "bench", "rule": "gate"})], error)
    assert not wrong.keeps_native(True) and slow.too_slow and slow.keeps_native(True)
    assert judge([_report("failed")], resolve_settings({})).keeps_native(True)
    assert not falls_back_natively("native", False) and falls_back_natively("", True)
    assert not falls_back_natively("error", True) and falls_back_natively("error", True, too_slow=True)


# ------------------------------------------------------------------------------------ on_inconclusive
def _pointing_here(caught) -> bool:
    """Every InconclusiveCheckWarning points at the line of this file that called dace-ai, as warnings should."""
    found = [w for w in caught if issubclass(w.category, InconclusiveCheckWarning)]
    return bool(found) and all(Path(w.filename) == Path(__file__) for w in found)


def test_expansion_warns_or_refuses_an_undecided_answer(checker):
    checker.status = "inconclusive"
    sdfg = ai_program()
    with pytest.warns(InconclusiveCheckWarning, match=r"'copyit'.*t-verdict: tool missing.*session: "):
        sdfg.expand_library_nodes()
    [tasklet] = generated(sdfg)
    assert level_from_code(tasklet.code.as_string) == "unverified: t-verdict: tool missing (inconclusive)"
    assert cached() == 1

    dace.Config.set("ai", "on_inconclusive", value="reject")
    dace.Config.set("ai", "cache", value=False)
    try:
        with pytest.raises(CheckFailed, match=r"'copyit'.*could not decide.*on_inconclusive=reject"):
            ai_program().expand_library_nodes()
    finally:
        dace.Config.set("ai", "cache", value=True)


def test_generate_warns_or_refuses_an_undecided_answer(checker):
    checker.status = "inconclusive"
    with pytest.warns(InconclusiveCheckWarning, match=r"'copyit'.*t-verdict: tool missing") as caught:
        summary = dace_ai.generate(ai_program())
    assert _pointing_here(caught)
    assert summary.generated == 1 and summary.nodes[0].verification.startswith("unverified: t-verdict")

    dace.Config.set("ai", "on_inconclusive", value="reject")
    for entry in AnswerCache().folder.glob("*/*.json"):
        entry.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error", InconclusiveCheckWarning)  # refused: nothing to warn about
        warnings.simplefilter("ignore", GenerateWarning)
        summary = dace_ai.generate(ai_program())
    assert summary.failed == 1 and "on_inconclusive=reject" in summary.nodes[0].error and cached() == 0


def test_optimize_warns_about_or_refuses_an_undecided_winner(checker):
    checker.status = "inconclusive"
    sdfg = ai_program()
    with pytest.warns(InconclusiveCheckWarning, match=r"'copyit'.*t-verdict: tool missing") as caught:
        report = dace_ai.optimize(sdfg, samples=1, rounds=0)
    assert _pointing_here(caught)
    assert report.nodes[0].outcome == "optimized"
    assert level_from_code(generated(sdfg)[0].code.as_string).startswith("unverified: t-verdict")

    dace.Config.set("ai", "on_inconclusive", value="reject")
    sdfg = ai_program()
    with warnings.catch_warnings():
        warnings.simplefilter("error", InconclusiveCheckWarning)
        report = dace_ai.optimize(sdfg, samples=1, rounds=0)
    [candidate] = report.nodes[0].candidates
    assert candidate.status == "refused" and "on_inconclusive=reject" in candidate.reason
    assert report.nodes[0].outcome == "failed" and not generated(sdfg)


def test_refine_warns_or_refuses_an_undecided_answer_and_keeps_the_level(checker):
    sdfg = ai_program()
    sdfg.expand_library_nodes()
    [tasklet] = generated(sdfg)
    assert level_from_code(tasklet.code.as_string) == "compile-only"
    checker.status = "inconclusive"
    dace.Config.set("ai", "on_inconclusive", value="reject")
    before = tasklet.code.as_string
    with pytest.raises(CheckFailed, match="on_inconclusive=reject"):
        dace_ai.refine(sdfg, "copyit", "make it faster")
    assert tasklet.code.as_string == before  # a refused round changes nothing
    dace.Config.set("ai", "on_inconclusive", value="warn")
    with pytest.warns(InconclusiveCheckWarning, match="'copyit'") as caught:
        dace_ai.refine(sdfg, "copyit", "make it faster still")
    assert _pointing_here(caught)
    assert level_from_code(tasklet.code.as_string) == "unverified: t-verdict: tool missing (inconclusive)"


# ------------------------------------------------------------------------------------ on_failure
@pytest.mark.parametrize("on_failure", ["native", "error"])
def test_expansion_of_a_refused_node_follows_on_failure(checker, on_failure):
    checker.status = "failed"
    dace.Config.set("ai", "on_failure", value=on_failure)
    sdfg, node = gemm_program()
    if on_failure == "native":
        with pytest.warns(NativeFallbackWarning, match="'gemm'"):
            sdfg.expand_library_nodes()
        assert not generated(sdfg) and not any(
            isinstance(n, dace.nodes.LibraryNode) for n, _ in sdfg.all_nodes_recursive()
        )
    else:
        with pytest.raises(CheckFailed, match="'gemm'.*still fails its checks .t-verdict"):
            sdfg.expand_library_nodes()
    assert checker.calls == 2 and cached() == 0  # the first answer and one repair round, nothing cached


@pytest.mark.parametrize("on_failure", ["native", "error"])
def test_generate_lists_a_refused_node_whatever_on_failure_says(checker, on_failure):
    checker.status = "failed"
    dace.Config.set("ai", "on_failure", value=on_failure)
    sdfg, node = gemm_program()
    with pytest.warns(GenerateWarning, match="'gemm': refused by its checks"):
        summary = dace_ai.generate(sdfg)
    assert summary.failed == 1 and "refused by its checks" in summary.nodes[0].error and cached() == 0
    assert node.implementation == "ai"  # generate changes no node: the expansion decides later


@pytest.mark.parametrize("on_failure", ["native", "error"])
def test_optimize_of_a_refused_node_follows_on_failure(checker, on_failure):
    checker.status = "failed"
    dace.Config.set("ai", "on_failure", value=on_failure)
    sdfg, node = gemm_program()
    report = dace_ai.optimize(sdfg, samples=1, rounds=0)
    result = report.nodes[0]
    assert [c.status for c in result.candidates] == ["refused"]
    if on_failure == "native":
        assert result.outcome == "native kept" and node.implementation != "ai"
    else:
        assert result.outcome == "failed" and node.implementation == "ai"
        assert "on_failure=error" in result.reason


def test_optimize_records_the_level_the_expansion_would_write(checker):
    sdfg = ai_program()
    report = dace_ai.optimize(sdfg, samples=1, rounds=0)
    [entry] = Session(Path(report.nodes[0].session)).summary()["rounds"]
    assert entry["verification"] == "compile-only" == level_from_code(generated(sdfg)[0].code.as_string)


class _UndecidedVerify:
    @hookimpl
    def dace_ai_checkers(self):
        yield Checker(
            name="t-undecided",
            stage="verify",
            default=False,
            check=lambda request: CheckReport(
                "t-undecided", "inconclusive", "no reference here", details={"reason": "t-undecided: no reference here"}
            ),
        )


def test_dace_ai_bench_refuses_an_undecided_attempt_under_reject(checker, register_dace_ai_plugin, tmp_path):
    """``dace-ai bench`` judges an attempt by the same rule: refused, not run, no figure."""
    from dace_ai.evaluation.attempt import evaluate_attempt

    register_dace_ai_plugin(_UndecidedVerify(), "undecided-verify")
    answer = json.dumps({"code": "for (long i = 0; i < N; ++i) _out[i] = _a * _x[i] + _y[i];"})
    payload = {
        "suite": "core",
        "task": "axpy",
        "answer_text": answer,
        "build_root": str(tmp_path / "build"),
        "settings": {"checkers": "t-verdict,t-undecided", "on_inconclusive": "reject"},
    }
    out = evaluate_attempt(payload)
    assert out["accepted"] is False and out["refused_by"] == "verify" and out["task_run"] == "not run"
    assert out["verdict"].startswith("refused by the verify stage: check(s) t-undecided could not decide")
    assert not out["correct"] and out["speedup"] is None
    checker.status = "failed"
    out = evaluate_attempt({**payload, "settings": {"checkers": "t-verdict"}})
    assert out["accepted"] is False and out["refused_by"] == "compile" and "t-verdict says failed" in out["refusal"]
