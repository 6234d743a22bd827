"""``request.shared``: the checkers of one candidate share work through typed slots, never string keys.

A :class:`~dace_ai.plugin.SharedKey` says what its slot holds; the module (or plugin) that fills a
slot declares the key. The checkers here are registered through real pluggy, as a third-party
distribution's would be, and share a value under a key of their own.
"""

from __future__ import annotations

import pytest
from dace_ai.checking.stages import check_workdir, run_checks
from dace_ai.config.settings import resolve_settings
from dace_ai.plugin import Checker, CheckReport, CheckRequest, SharedKey, SharedWork, hookimpl
from dace_ai.prompt.answer import Answer

from tests.test_checking import node_context


def test_a_slot_returns_what_was_stored_under_its_key():
    shared = SharedWork()
    sizes: SharedKey[dict[str, int]] = SharedKey("sizes")
    other: SharedKey[dict[str, int]] = SharedKey("sizes")  # same name, another slot
    value = {"N": 64}
    assert sizes not in shared and shared.get(sizes) is None and shared.get(sizes, {}) == {}
    shared[sizes] = value
    assert shared[sizes] is value and shared.get(sizes) is value and sizes in shared
    assert other not in shared and shared.setdefault(other, {"N": 1}) == {"N": 1} and shared[other] == {"N": 1}
    assert shared.setdefault(sizes, {}) is value
    assert shared.selected == [] and shared.background == []


def test_a_missing_key_raises_a_key_error_naming_it():
    with pytest.raises(KeyError, match=r"SharedKey\('lab-listing'\)"):
        SharedWork()[SharedKey("lab-listing")]


class _Stoppable:
    def __init__(self, fails: bool = False) -> None:
        self.stopped = 0
        self.fails = fails

    def stop(self) -> None:
        self.stopped += 1
        if self.fails:
            raise RuntimeError("stop failed")


#: The third-party plugin's own key: what its compile-stage checker leaves for its verify-stage one.
LISTING: SharedKey[list[str]] = SharedKey("lab-listing")


class _LabPlugin:
    """Two checkers of one distribution: ``t-parse`` stores a listing, ``t-use`` reads it back."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []
        self.selected: list[list[str]] = []
        self.work = [_Stoppable(fails=True), _Stoppable()]

    def parse(self, request: CheckRequest) -> CheckReport:
        request.shared[LISTING] = request.answer.code.split()
        request.shared.background.extend(self.work)  # left running: the stage runner stops it
        return CheckReport("t-parse", "passed")

    def use(self, request: CheckRequest) -> CheckReport:
        listing = request.shared[LISTING]
        self.seen.append(listing)
        self.selected.append(list(request.shared.selected))
        assert all(w.stopped == 0 for w in self.work)  # still running while the checks go on
        return CheckReport("t-use", "passed" if listing[0] == "for" else "failed", " ".join(listing))

    @hookimpl
    def dace_ai_checkers(self):
        yield Checker(name="t-use", stage="verify", check=self.use, default=False)
        yield Checker(name="t-parse", stage="compile", check=self.parse, default=False)


def test_a_plugins_checkers_share_a_value_under_their_own_key_and_their_background_work_is_stopped(
    register_dace_ai_plugin,
):
    plugin = register_dace_ai_plugin(_LabPlugin(), "lab-plugin")
    node, answer = node_context(), Answer(code="for (int i = 0; i < N; ++i) _b[i] = 2 * _a[i];")
    request = CheckRequest(answer, node, resolve_settings({"checkers": "t-use,t-parse"}), check_workdir(node, answer))
    reports = run_checks(request)
    assert [(r.checker, r.status, r.stage) for r in reports] == [
        ("t-parse", "passed", "compile"),
        ("t-use", "passed", "verify"),
    ]
    assert plugin.seen == [answer.code.split()] and request.shared[LISTING] == answer.code.split()
    assert plugin.selected == [["t-parse", "t-use"]]  # in run order: compile before verify
    # Stopped once each when the checks ended; one that fails to stop does not keep the other running.
    assert [w.stopped for w in plugin.work] == [1, 1] and request.shared.background == []
