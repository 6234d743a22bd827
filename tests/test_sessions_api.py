"""Sessions from Python and the command line: refine, rollback, pin, hand edits, saved SDFGs.

The model is the real ``openai`` SDK talking to FakeLLMServer on 127.0.0.1, so the
requests asserted here are the HTTP requests a provider would have received. Checks
are the real probe compile, and programs are compiled and run by DaCe.
"""

# No ``from __future__ import annotations`` here: DaCe reads ``@dace.program`` annotations as objects.
import json
import os
import subprocess
import sys
from pathlib import Path

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.cli.main import main as cli
from dace_ai.errors import AIUsageError, CheckFailed
from dace_ai.expansion.pending import pending_nodes
from dace_ai.expansion.pipeline import implement
from dace_ai.solving.provenance import body, is_pinned, provenance

from tests.fakes.llm_server import Reply, fake_llm_server_fixture  # noqa: F401 - the fake_llm_server fixture
from tests.provider_cases import SECRET

REPO = Path(__file__).resolve().parents[1]
N = dace.symbol("N")
ROUND1 = {"code": "for (int i = 0; i < N; ++i) _out[i] = 2.0 * _a[i];", "notes": "scalar loop"}
ROUND2 = {
    "code": (
        "int i = 0;\nfor (; i + 1 < N; i += 2) { _out[i] = _a[i] + _a[i]; "
        "_out[i + 1] = _a[i + 1] + _a[i + 1]; }\nfor (; i < N; ++i) _out[i] = _a[i] + _a[i];"
    ),
    "notes": "unrolled by two",
}
BROKEN = {"code": "for (int i = 0; i < N; ++i) _out[i] = 2.0 * _a[i] + undeclared_value;"}
FEEDBACK = "Unroll the loop by two."


def provider_env(server) -> dict:
    return {
        "DACE_ai_provider": "openai",
        "DACE_ai_base_url": server.openai_url,
        "DACE_ai_max_retries": "0",
        "DACE_ai_timeout": "30",
        "DACE_ai_max_repair_attempts": "0",
        "OPENAI_API_KEY": SECRET,
    }


@pytest.fixture
def llm(fake_llm_server, monkeypatch):
    """The openai provider against the fake server; ``llm.answers`` maps a marker in the request to an answer."""
    for name in ("OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    for key, value in provider_env(fake_llm_server).items():
        monkeypatch.setenv(key, value)
    fake_llm_server.answers = {}

    def respond(request):
        text = request.text()
        chosen = ROUND1
        for marker, answer in fake_llm_server.answers.items():
            if marker in text:
                chosen = answer
        return Reply(text=json.dumps(chosen), input_tokens=100, output_tokens=20)

    fake_llm_server.respond_with(respond)
    return fake_llm_server


def twice_sdfg() -> dace.SDFG:
    @dace.program
    def twice(A: dace.float64[N]):
        return dace_ai.ai("TWICE: _out[i] = 2 * _a[i] for every i < N", a=A, name="twice")

    sdfg = twice.to_sdfg()
    for nsdfg, state, node in pending_nodes(sdfg):
        implement(nsdfg, state, node)
    return sdfg


def tasklet_of(sdfg: dace.SDFG):
    (tasklet,) = [n for n, _ in sdfg.all_nodes_recursive() if provenance(n) is not None]
    return tasklet


def run(sdfg: dace.SDFG, size: int = 11) -> None:
    A = np.random.rand(size)
    np.testing.assert_allclose(sdfg.compile()(A=A, N=size), 2 * A)


def last_user_text(request) -> str:
    messages = request.body.get("input") or request.body.get("messages")
    return json.dumps(messages[-1])


def test_refine_changes_the_code_and_rollback_restores_round_one_without_a_request(llm):
    sdfg = twice_sdfg()
    tasklet = tasklet_of(sdfg)
    round1_code = tasklet.code.as_string
    assert len(llm.requests) == 1 and body(tasklet).strip() == ROUND1["code"]
    run(sdfg)

    llm.answers[FEEDBACK] = ROUND2
    assert dace_ai.refine(sdfg, "twice", FEEDBACK) is tasklet
    assert len(llm.requests) == 2
    sent = llm.requests[1].text()
    assert FEEDBACK in sent and ROUND1["code"] in sent  # the same conversation, continued
    assert "edited by hand" not in sent
    assert body(tasklet).strip() == ROUND2["code"]
    (row,) = dace_ai.sessions(sdfg)
    assert row["round"] == 2 and row["rounds"] == 2 and not row["edited"] and not row["pinned"]
    assert row["tokens"] == {"input": 200, "output": 40, "total": 240}
    assert row["verification"] == "unverified: no reference"  # the level the expansion writes, in the provenance
    run(sdfg)  # the program builds the new code and still computes 2 * A
    assert "_a[i] + _a[i]" in Path(sdfg.build_folder, "src", "cpu", f"{sdfg.name}.cpp").read_text()

    dace_ai.rollback(sdfg, "twice", round=1)
    assert len(llm.requests) == 2  # no request made
    assert tasklet.code.as_string == round1_code
    rounds = dace_ai.history(sdfg, "twice")
    assert [(r["number"], r["reason"], r["in_use"]) for r in rounds] == [(1, "expansion", True), (2, "refine", False)]
    assert rounds[1]["feedback"] == FEEDBACK and rounds[1]["parent"] == 1
    assert dace_ai.show(sdfg)["events"][-1]["action"] == "rollback"
    run(sdfg, 7)
    assert "_a[i] + _a[i]" not in Path(sdfg.build_folder, "src", "cpu", f"{sdfg.name}.cpp").read_text()

    session = Path(rounds[1]["folder"])
    assert (session / "feedback.md").read_text().strip() == FEEDBACK
    assert "Unroll the loop by two." in (session / "prompt.md").read_text()
    checks = json.loads((session / "checks.json").read_text())
    assert checks and all(c["stage"] in ("compile", "verify", "bench") and "stage" not in c["details"] for c in checks)
    # the program's AI node has no reference= function: every check passes but verify, which cannot decide
    assert all(c["status"] == "passed" for c in checks if c["checker"] != "verify")
    assert [c["reason"] for c in checks if c["checker"] == "verify"] == ["no reference"]
    with pytest.raises(AIUsageError, match=r"round 5 .* does not exist; accepted rounds: \[1, 2\]"):
        dace_ai.rollback(sdfg, round=5)


def test_a_failing_refine_leaves_the_sdfg_and_its_file_unchanged(llm, tmp_path, monkeypatch):
    sdfg = twice_sdfg()
    path = tmp_path / "twice.sdfg"
    sdfg.save(str(path))
    saved = path.read_bytes()
    loaded = dace.SDFG.from_file(str(path))
    before = json.dumps(loaded.to_json(), sort_keys=True)
    llm.answers[FEEDBACK] = BROKEN

    with pytest.raises(CheckFailed, match="undeclared_value"):
        dace_ai.refine(loaded, "twice", FEEDBACK)
    assert json.dumps(loaded.to_json(), sort_keys=True) == before
    assert body(tasklet_of(loaded)).strip() == ROUND1["code"]

    monkeypatch.setenv("DACE_ai_cache", "0")  # ask again rather than replay the rejected answer
    assert cli(["refine", str(path), "twice", "--feedback", FEEDBACK]) == 1
    assert path.read_bytes() == saved
    assert len(llm.requests) == 3
    statuses = [r["status"] for r in dace_ai.history(loaded, "twice")]
    assert statuses == ["accepted", "rejected", "rejected"]
    assert dace_ai.sessions(loaded)[0]["round"] == 1
    run(loaded)


def test_pinned_tasklets_are_left_alone_by_refine_rollback_and_build_repairs(llm, monkeypatch):
    sdfg = twice_sdfg()
    tasklet = tasklet_of(sdfg)
    dace_ai.pin(sdfg)
    assert is_pinned(tasklet) and dace_ai.is_pinned(tasklet) and provenance(tasklet)["pinned"] == "true"
    assert dace_ai.sessions(sdfg)[0]["pinned"]
    with pytest.raises(AIUsageError, match="pinned"):
        dace_ai.refine(sdfg, "twice", FEEDBACK)
    with pytest.raises(AIUsageError, match="pinned"):
        dace_ai.rollback(sdfg, "twice", round=1)

    # A hand edit that breaks the program: build() must not ask to repair a pinned tasklet.
    tasklet.code = dace.properties.CodeBlock(
        tasklet.code.as_string.replace("2.0 * _a[i]", "broken_by_hand"), dace.Language.CPP
    )
    with pytest.raises(CheckFailed, match="pinned"):
        dace_ai.build(sdfg, rounds=1)
    assert len(llm.requests) == 1

    dace_ai.unpin(sdfg, tasklet)
    assert not is_pinned(tasklet) and "pinned" not in provenance(tasklet)
    compiled = dace_ai.build(sdfg, rounds=1)  # now the build repairs it
    repair_request = last_user_text(llm.requests[1])
    assert len(llm.requests) == 2 and "broken_by_hand" in repair_request and "edited by hand" in repair_request
    assert dace_ai.history(sdfg)[-1]["reason"] == "program build repair"
    A = np.random.rand(6)
    np.testing.assert_allclose(compiled(A=A, N=6), 2 * A)


def test_hand_edited_code_is_what_the_next_round_revises(llm):
    sdfg = twice_sdfg()
    tasklet = tasklet_of(sdfg)
    edited = ROUND1["code"].replace("2.0 * _a[i]", "_a[i] * 2.0 /* hand-tuned */")
    tasklet.code = dace.properties.CodeBlock(tasklet.code.as_string.replace(ROUND1["code"], edited), dace.Language.CPP)
    assert dace_ai.sessions(sdfg)[0]["edited"] is True
    llm.answers["hand-tuned"] = ROUND2
    dace_ai.refine(sdfg, "twice", "Keep my edit and unroll.")
    last = last_user_text(llm.requests[-1])
    assert "edited by hand" in last and "hand-tuned" in last and "Keep my edit and unroll." in last
    assert body(tasklet).strip() == ROUND2["code"]
    (row,) = dace_ai.sessions(sdfg)
    assert row["edited"] is False and row["round"] == 2
    assert dace_ai.history(sdfg)[1]["edited_by_hand"] is True


def test_selection_names_every_candidate_and_same_named_programs_do_not_collide(llm):
    first, second = twice_sdfg(), twice_sdfg()  # two programs with the same name and node name
    (one,), (two,) = dace_ai.sessions(first), dace_ai.sessions(second)
    assert one["session"] != two["session"] and one["session"].startswith("twice-")
    assert len(dace_ai.list_sessions()) == 2
    with pytest.raises(AIUsageError, match=r"no generated tasklet named 'nope'; candidates: twice \(tasklet"):
        dace_ai.show(first, "nope")
    with pytest.raises(AIUsageError, match="not a generated tasklet"):
        dace_ai.show(first, tasklet_of(second))
    assert dace_ai.show(first, one["session"])["session"] == one["session"]
    assert dace_ai.show(first, tasklet_of(first))["code"].strip() == ROUND1["code"]
    with pytest.raises(AIUsageError, match="refine needs feedback"):
        dace_ai.refine(first, "twice", "  ")


def test_everything_works_on_a_saved_sdfg_in_a_fresh_process(llm, tmp_path, _isolated_dace_ai):
    sdfg = twice_sdfg()
    path = tmp_path / "twice.sdfg"
    sdfg.save(str(path))
    llm.answers[FEEDBACK] = ROUND2
    script = f"""
import json, dace, dace_ai, numpy as np
sdfg = dace.SDFG.from_file({str(path)!r})
out = {{"before": dace_ai.sessions(sdfg)}}
dace_ai.refine(sdfg, "twice", {FEEDBACK!r})
out["refined"] = dace_ai.show(sdfg, "twice")
A = np.random.rand(9)
out["ok_after_refine"] = bool(np.allclose(sdfg.compile()(A=A, N=9), 2 * A))
dace_ai.rollback(sdfg, "twice", round=1)
dace_ai.pin(sdfg, "twice")
out["history"] = dace_ai.history(sdfg, "twice")
out["after"] = dace_ai.sessions(sdfg)
sdfg.save({str(tmp_path / "after.sdfg")!r})
print(json.dumps(out, default=str))
"""
    env = {**os.environ, **provider_env(llm), "DACE_default_build_folder": str(_isolated_dace_ai)}
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["before"][0]["round"] == 1 and out["before"][0]["name"] == "twice"
    assert out["refined"]["round"] == 2 and out["refined"]["code"].strip() == ROUND2["code"]
    assert out["ok_after_refine"]
    assert [r["in_use"] for r in out["history"]] == [True, False]
    assert out["after"][0]["pinned"] and out["after"][0]["round"] == 1
    assert len(llm.requests) == 2  # the expansion here, the refine there; rollback asked nothing
    reloaded = dace.SDFG.from_file(str(tmp_path / "after.sdfg"))
    assert is_pinned(tasklet_of(reloaded)) and body(tasklet_of(reloaded)).strip() == ROUND1["code"]


def _json(capsys, argv: list[str], code: int = 0):
    assert cli(argv) == code
    return json.loads(capsys.readouterr().out)


def test_every_cli_command_on_a_saved_sdfg(llm, tmp_path, capsys):
    path = tmp_path / "twice.sdfg"
    twice_sdfg().save(str(path))
    file = str(path)

    (row,) = _json(capsys, ["sessions", file, "--json"])
    assert row["name"] == "twice" and row["round"] == 1 and not row["pinned"]
    shown = _json(capsys, ["show", file, "twice", "--json"])
    assert shown["code"].strip() == ROUND1["code"] and shown["session"] == row["session"]

    llm.answers[FEEDBACK] = ROUND2
    refined = _json(capsys, ["refine", file, "twice", "--feedback", FEEDBACK, "--json"])
    assert refined["round"] == 2 and refined["code"].strip() == ROUND2["code"]
    assert body(tasklet_of(dace.SDFG.from_file(file))).strip() == ROUND2["code"]  # the file was rewritten

    rounds = _json(capsys, ["history", file, "twice", "--json"])
    assert [(r["number"], r["status"], r["in_use"]) for r in rounds] == [(1, "accepted", False), (2, "accepted", True)]
    asked = len(llm.requests)
    rolled = _json(capsys, ["rollback", file, "twice", "--round", "1", "--json"])
    assert rolled["round"] == 1 and rolled["code"].strip() == ROUND1["code"] and len(llm.requests) == asked

    assert _json(capsys, ["pin", file, "--json"])["pinned"] is True
    assert is_pinned(tasklet_of(dace.SDFG.from_file(file)))
    assert cli(["refine", file, "twice", "--feedback", "more"]) == 1
    assert "pinned" in capsys.readouterr().err
    assert _json(capsys, ["unpin", file, "twice", "--json"])["pinned"] is False

    # Plain text when piped (as here), with the same facts.
    assert cli(["sessions", file]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["name", "session", "round", "rounds"] and lines[1].split()[:4] == [
        "twice",
        row["session"],
        "1",
        "2",
    ]
    assert cli(["show", file, "nope"]) == 1
    assert "candidates: twice" in capsys.readouterr().err
    assert cli(["sessions", str(tmp_path / "missing.sdfg")]) == 1
    assert "no such SDFG file" in capsys.readouterr().err


def test_the_installed_command_runs_in_its_own_process(llm, tmp_path, _isolated_dace_ai):
    path = tmp_path / "twice.sdfg"
    twice_sdfg().save(str(path))
    env = {**os.environ, **provider_env(llm), "DACE_default_build_folder": str(_isolated_dace_ai)}
    done = subprocess.run(
        [sys.executable, "-m", "dace_ai.cli.main", "history", str(path), "--json"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert [r["status"] for r in json.loads(done.stdout)] == ["accepted"]


def test_the_session_record_keeps_unknown_fields_and_reads_damaged_files(_isolated_dace_ai):
    from dace_ai.storage.session_store import session_by_id

    session = session_by_id("prog-abc")
    session.folder.mkdir(parents=True)
    session.summary_path.write_text(
        json.dumps({"rounds": [{"number": 1, "status": "accepted", "extra": 7}, "garbage"], "from_elsewhere": {"a": 1}})
    )
    session.set_pinned(True)
    data = json.loads(session.summary_path.read_text())
    assert data["from_elsewhere"] == {"a": 1} and data["rounds"] == [{"number": 1, "status": "accepted", "extra": 7}]
    assert data["pinned"] is True and data["format"] == 1 and data["events"][0]["action"] == "pin"
    session.summary_path.write_text("{not json")
    assert session.summary()["rounds"] == [] and not session.pinned and session.conversation(1) is None


def test_a_round_is_recorded_from_one_typed_content_and_refused_without_a_status(_isolated_dace_ai):
    from dataclasses import replace

    from dace_ai.checking.api import CheckReport
    from dace_ai.storage.session_store import RoundContent, session_by_id

    session = session_by_id("prog-typed")
    asked = RoundContent(
        node={"name": "n"},
        system="sys",
        messages=[("user", "write it")],
        request={"provider": "p", "cache_key": "k1"},
        reply_text='{"code": "x"}',
        source="p",
    )
    with pytest.raises(ValueError, match="needs a status"):
        session.record_round(asked)
    assert not session.summary_path.exists()  # nothing half-written
    report = CheckReport("probe", "failed", "error: x", stage="compile", reason="compile error")
    first = session.record_round(replace(asked, status="rejected", reports=[report], level="unverified: failed probe"))
    second = session.record_round(replace(asked, status="error", error="reply is not JSON"))
    rounds = session.summary()["rounds"]
    assert [r["status"] for r in rounds] == ["rejected", "error"] and (first.number, second.number) == (1, 2)
    assert rounds[0]["verification"] == "unverified: failed probe" and rounds[1]["error"] == "reply is not JSON"
    assert json.loads((first.folder / "checks.json").read_text())[0]["reason"] == "compile error"
    assert (first.folder / "prompt.md").is_file() and not (second.folder / "checks.json").read_text().strip("[]\n")
