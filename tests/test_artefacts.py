"""Checkers hand each other typed artefacts they declare: the runner orders them by needs and gives.

The checkers here are registered through real pluggy, as a third-party distribution's would be,
and use only the public door ``dace_ai.plugin``.
"""

from __future__ import annotations

import dataclasses
import warnings

import pytest
from dace_ai.checking.artefacts import Artefacts, CheckerGraphError, order_checkers
from dace_ai.checking.stages import check_workdir, run_checks, select_checkers
from dace_ai.config.settings import resolve_settings
from dace_ai.plugin import (
    BENCH_RUN,
    COMPILED,
    SANDBOX_RUN,
    Artefact,
    Checker,
    CheckReport,
    CheckRequest,
    SandboxRun,
    UndeclaredArtefact,
    hookimpl,
)
from dace_ai.prompt.answer import Answer

from tests.test_checking import node_context

CODE = "for (int i = 0; i < N; ++i) _b[i] = 2 * _a[i];"


def _request(checkers: str) -> CheckRequest:
    node, answer = node_context(), Answer(code=CODE)
    return CheckRequest(answer, node, resolve_settings({"checkers": checkers}), check_workdir(node, answer))


def _plugin(*checkers: Checker):
    class _Plugin:
        @hookimpl
        def dace_ai_checkers(self):
            yield from checkers

    return _Plugin()


def _passed(name: str):
    return lambda request: CheckReport(name, "passed")


def test_a_plugin_checker_needing_the_sandbox_run_runs_after_verify_and_gets_the_frozen_record(
    register_dace_ai_plugin,
):
    seen: list[SandboxRun | None] = []

    def read(request: CheckRequest) -> CheckReport:
        seen.append(request.artefacts.get(SANDBOX_RUN))
        return CheckReport("a-reader", "passed")

    # Its name sorts before "verify" and its order is lower: only its need puts it after verify.
    reader = Checker(name="a-reader", stage="verify", check=read, needs=(SANDBOX_RUN,), order=-5, default=False)
    register_dace_ai_plugin(_plugin(reader), "reader-plugin")
    request = _request("a-reader,verify")
    assert [c.name for c in select_checkers(request.node, request.settings)[0]] == ["verify", "a-reader"]
    store = Artefacts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the node has no reference: verify says so once per program
        reports = run_checks(request, artefacts=store)
    assert [(r.checker, r.status) for r in reports] == [("verify", "inconclusive"), ("a-reader", "passed")]
    (run,) = seen
    assert isinstance(run, SandboxRun) and run is store[SANDBOX_RUN]
    assert run.status == "inconclusive" and run.reason == "no reference" and run.mode == "verify"
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.status = "passed"  # type: ignore[misc]  # the record is frozen: the next reader sees what verify saw
    assert "artefacts" not in reports[0].record()  # given artefacts are never recorded


def test_reading_an_artefact_not_declared_is_an_error_naming_the_checker_and_the_artefact(register_dace_ai_plugin):
    def read(request: CheckRequest) -> CheckReport:
        request.artefacts.get(SANDBOX_RUN)
        return CheckReport("t-sneak", "passed")

    register_dace_ai_plugin(_plugin(Checker(name="t-sneak", stage="compile", check=read, default=False)))
    (report,) = run_checks(_request("t-sneak"))
    assert report.status == "inconclusive" and "UndeclaredArtefact" in report.diagnostics
    assert "'t-sneak'" in report.diagnostics and "Artefact('sandbox_run')" in report.diagnostics

    store = Artefacts()
    limited = store.request_for(_request("probe"), "t-sneak", (COMPILED,))
    with pytest.raises(UndeclaredArtefact, match=r"checker 't-sneak' read Artefact\('sandbox_run'\)"):
        limited.artefacts.get(SANDBOX_RUN)


def test_a_declared_need_no_checker_gave_reads_as_absent(register_dace_ai_plugin):
    listing: Artefact[list[str]] = Artefact("lab-listing")
    seen: list[object] = []

    def read(request: CheckRequest) -> CheckReport:
        seen.append(request.artefacts.get(listing))
        seen.append(request.artefacts.get(listing, "default"))
        with pytest.raises(KeyError, match="lab-listing"):
            request.artefacts[listing]
        return CheckReport("t-alone", "passed")

    check = Checker(name="t-alone", stage="verify", check=read, needs=(listing,), default=False)
    register_dace_ai_plugin(_plugin(check))
    (report,) = run_checks(_request("t-alone"))
    assert report.status == "passed", report.diagnostics
    assert seen == [None, "default"]


def test_giving_an_artefact_not_declared_makes_the_report_inconclusive_naming_the_checker(register_dace_ai_plugin):
    listing: Artefact[list[str]] = Artefact("lab-listing")

    def give(request: CheckRequest) -> CheckReport:
        return CheckReport("t-giver", "passed").give(listing, ["x"])

    register_dace_ai_plugin(_plugin(Checker(name="t-giver", stage="compile", check=give, default=False)))
    store = Artefacts()
    (report,) = run_checks(_request("t-giver"), artefacts=store)
    assert report.status == "inconclusive" and report.reason == "undeclared artefact"
    assert "checker 't-giver'" in report.diagnostics and "Artefact('lab-listing')" in report.diagnostics
    assert store.get(listing) is None


class _Work:
    def __init__(self, fails: bool = False) -> None:
        self.stopped = 0
        self.fails = fails

    def stop(self) -> None:
        self.stopped += 1
        if self.fails:
            raise RuntimeError("stop failed")


def test_a_plugins_own_artefact_goes_from_stage_to_stage_and_its_background_work_is_stopped(
    register_dace_ai_plugin,
):
    listing: Artefact[tuple[str, ...]] = Artefact("lab-listing")
    work = [_Work(fails=True), _Work()]
    started: list[_Work] = []

    def start(request: CheckRequest) -> _Work:
        started.append(work[len(started)])
        return started[-1]

    background_a: Artefact[_Work] = Artefact("lab-a", make=start, background=True)
    background_b: Artefact[_Work] = Artefact("lab-b", make=start, background=True)
    seen: list[tuple[str, ...]] = []

    def parse(request: CheckRequest) -> CheckReport:
        assert len(started) == 2 and all(w.stopped == 0 for w in work)  # started before the first checker
        return CheckReport("t-parse", "passed").give(listing, tuple(request.answer.code.split()))

    def use(request: CheckRequest) -> CheckReport:
        seen.append(request.artefacts[listing])
        assert request.artefacts[background_a] is work[0] and all(w.stopped == 0 for w in work)
        return CheckReport("t-use", "passed")

    register_dace_ai_plugin(
        _plugin(
            Checker(
                name="t-use", stage="verify", check=use, needs=(listing, background_a, background_b), default=False
            ),
            Checker(name="t-parse", stage="compile", check=parse, gives=(listing,), default=False),
        )
    )
    reports = run_checks(_request("t-use,t-parse"))
    assert [(r.checker, r.status, r.stage) for r in reports] == [
        ("t-parse", "passed", "compile"),
        ("t-use", "passed", "verify"),
    ], [r.diagnostics for r in reports]
    assert seen == [tuple(CODE.split())]
    # Stopped once each when the checks ended; one that fails to stop does not keep the other running.
    assert [w.stopped for w in work] == [1, 1]


def test_background_work_is_stopped_as_soon_as_a_stage_fails(register_dace_ai_plugin):
    work = _Work()
    builds: Artefact[_Work] = Artefact("lab-builds", make=lambda request: work, background=True)
    stopped_before_next: list[int] = []

    def fail(request: CheckRequest) -> CheckReport:
        return CheckReport("t-fail", "failed", "no")

    def after(request: CheckRequest) -> CheckReport:
        stopped_before_next.append(work.stopped)
        return CheckReport("t-after", "passed")

    register_dace_ai_plugin(
        _plugin(
            Checker(name="t-fail", stage="compile", check=fail, default=False),
            Checker(name="t-after", stage="compile", check=after, default=False),
            Checker(name="t-needs", stage="verify", check=_passed("t-needs"), needs=(builds,), default=False),
        )
    )
    reports = run_checks(_request("t-fail,t-after,t-needs"))
    assert [r.checker for r in reports] == ["t-fail", "t-after"]
    assert stopped_before_next == [1] and work.stopped == 1


def _checker(name: str, stage: str = "verify", **fields) -> Checker:
    return Checker(name=name, stage=stage, check=_passed(name), **fields)  # type: ignore[arg-type]  # stage: a str


def test_order_follows_needs_and_gives_then_order_then_the_selection():
    x: Artefact[int] = Artefact("x")
    y: Artefact[int] = Artefact("y")
    checkers = [
        _checker("c", needs=(y,)),
        _checker("b", needs=(x,), gives=(y,)),
        _checker("a", gives=(x,), order=5),
        _checker("d", order=-1),
        _checker("e", stage="compile"),
        _checker("f", stage="bench", needs=(y,)),
    ]
    assert [c.name for c in order_checkers(checkers)] == ["e", "d", "a", "b", "c", "f"]


def test_a_cycle_an_artefact_given_twice_and_a_need_from_a_later_stage_are_errors_naming_the_checkers():
    x: Artefact[int] = Artefact("x")
    y: Artefact[int] = Artefact("y")
    with pytest.raises(CheckerGraphError, match=r"'p', 'q'.*cycle.*'p' needs Artefact\('y'\).*'q' needs"):
        order_checkers([_checker("p", needs=(y,), gives=(x,)), _checker("q", needs=(x,), gives=(y,))])
    with pytest.raises(CheckerGraphError, match=r"checkers 'p' .* and 'q' .* both give Artefact\('x'\)"):
        order_checkers([_checker("p", gives=(x,)), _checker("q", gives=(x,))])
    with pytest.raises(
        CheckerGraphError, match=r"'p' \(stage compile\) needs Artefact\('x'\).*'q'.*later stage verify"
    ):
        order_checkers([_checker("p", stage="compile", needs=(x,)), _checker("q", gives=(x,))])


def test_a_cycle_among_selected_plugin_checkers_is_an_error_at_selection(register_dace_ai_plugin):
    x: Artefact[int] = Artefact("x")
    y: Artefact[int] = Artefact("y")
    register_dace_ai_plugin(
        _plugin(
            Checker(name="t-p", stage="verify", check=_passed("t-p"), needs=(y,), gives=(x,), default=False),
            Checker(name="t-q", stage="verify", check=_passed("t-q"), needs=(x,), gives=(y,), default=False),
        )
    )
    request = _request("t-p,t-q")
    with pytest.raises(CheckerGraphError, match="'t-p', 't-q'"):
        run_checks(request)


def test_registrations_refuse_needs_and_gives_that_are_not_artefacts():
    with pytest.raises(TypeError, match=r"Checker\('t-bad'\): needs must be Artefact objects"):
        Checker(name="t-bad", stage="verify", check=_passed("t-bad"), needs=("sandbox_run",))  # type: ignore[arg-type]  # a string
    assert Checker(name="t-one", stage="verify", check=_passed("t-one"), gives=SANDBOX_RUN).gives == (SANDBOX_RUN,)  # type: ignore[arg-type]  # one artefact


def test_the_core_checkers_declare_what_they_hand_on():
    request = _request("probe,verify,sanitizers,bench")
    checkers = {c.name: c for c in select_checkers(request.node, request.settings)[0]}
    assert checkers["verify"].gives == (SANDBOX_RUN, BENCH_RUN) and COMPILED in checkers["verify"].needs
    assert SANDBOX_RUN in checkers["sanitizers"].needs and BENCH_RUN in checkers["bench"].needs
    assert COMPILED in checkers["probe"].needs
    assert [c.name for c in select_checkers(request.node, request.settings)[0]] == [
        "probe",
        "verify",
        "sanitizers",
        "bench",
    ]


def test_a_giver_asks_whether_a_selected_checker_that_applies_needs_its_artefact(register_dace_ai_plugin):
    """``wanted`` is how verify knows to time its run: a selected checker that applies needs BENCH_RUN."""
    TIMED: Artefact[str] = Artefact("t-timed")
    asked: list[bool] = []

    def give(request: CheckRequest) -> CheckReport:
        asked.append(request.artefacts.wanted(TIMED))
        return CheckReport("t-giver", "passed")

    giver = Checker(name="t-giver", stage="verify", check=give, gives=(TIMED,), default=False)
    taker = Checker(
        name="t-taker",
        stage="bench",
        check=_passed("t-taker"),
        applies=lambda request: request.settings.bench != "off",
        needs=(TIMED,),
        default=False,
    )
    register_dace_ai_plugin(_plugin(giver, taker), "t-wanted")
    node, answer = node_context(), Answer(code=CODE)
    for checkers, bench, expected in (
        ("t-giver,t-taker", "report", True),
        ("t-giver,t-taker", "off", False),  # selected, but it does not apply
        ("t-giver", "report", False),  # not selected
    ):
        settings = resolve_settings({"checkers": checkers, "bench": bench})
        run_checks(CheckRequest(answer, node, settings, check_workdir(node, answer)))
        assert asked.pop() is expected, (checkers, bench)
    # Outside the runner nothing else runs: nothing is wanted.
    alone = CheckRequest(answer, node, resolve_settings(), check_workdir(node, answer))
    assert give(alone).status == "passed" and asked.pop() is False
