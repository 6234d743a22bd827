"""Repair rounds with real compile checks, and what the session records on disk."""

import json
from pathlib import Path

import dace_ai
import numpy as np
import pytest
from dace_ai.errors import CheckFailed

from tests.inc_program import BROKEN, GOOD, inc_sdfg


def _sdfg(name="repairs"):
    return inc_sdfg(name)


def test_repair_round_then_accepted_and_recorded(fake):
    fake.queue(json.dumps(BROKEN), json.dumps(GOOD))
    sdfg, state, node = _sdfg()
    settings = {"provider": "scripted", "compile_check": True, "max_repair_attempts": 2, "checkers": ("probe",)}
    dace_ai.expand(sdfg, state, node, settings)

    assert len(fake.requests) == 2
    repair = fake.requests[1].messages
    assert [m.role for m in repair] == ["user", "assistant", "user"]
    assert "undefined_thing" in repair[1].content and "undefined_thing" in repair[2].content
    A, B = np.arange(8.0), np.zeros(8)
    sdfg(A=A, B=B)
    np.testing.assert_allclose(B, A + 1)

    (session,) = dace_ai.list_sessions()
    assert session["rounds"] == 2 and session["current"] == 2
    folder = session["folder"]
    summary = json.loads(Path(folder, "session.json").read_text())
    assert [r["status"] for r in summary["rounds"]] == ["rejected", "accepted"]
    log = Path(folder, "round-1", "check-probe.log").read_text()
    assert "undefined_thing" in log
    assert "Write _out[i] = _a[i] + 1." in Path(folder, "round-2", "prompt.md").read_text()
    request = json.loads(Path(folder, "round-2", "request.json").read_text())
    assert request["provider"] == "scripted" and "key" not in json.dumps(request).replace("cache_key", "")
    assert json.loads(Path(folder, "node.json").read_text())["classpath"] == "dace_ai.expansion.ainode.AINode"


def test_checks_still_failing_raise_check_failed(fake):
    fake.queue(json.dumps(BROKEN), json.dumps(BROKEN))
    sdfg, state, node = _sdfg()
    settings = {"provider": "scripted", "compile_check": True, "max_repair_attempts": 1, "checkers": ("probe",)}
    with pytest.raises(CheckFailed) as info:
        dace_ai.expand(sdfg, state, node, settings)
    message = str(info.value)
    assert "'inc'" in message and "ai-sessions" in message and "undefined_thing" in message
    assert node in state.nodes()  # the SDFG keeps the node
    assert len(fake.requests) == 2
