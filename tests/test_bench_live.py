"""``dace-ai bench`` live: the real ``openai`` SDK against FakeLLMServer, recorded with ``--record`` and
replayed with ``--offline DIR``; tokens per correct kernel come from the provider's usage."""

from __future__ import annotations

import json

from dace_ai.cli.main import main

from tests.check_support import link_shared_artefacts
from tests.fakes.llm_server import Reply, fake_llm_server_fixture  # noqa: F401 - the fake_llm_server fixture

SECRET = "sk-bench-secret-never-written"
ANSWERS = {
    "Rectified linear unit": {"code": "for (long i = 0; i < N; ++i) _out[i] = _x[i] > 0 ? _x[i] : 0.0;"},
    # wrong on purpose: an exclusive scan where the task asks for an inclusive one
    "Inclusive prefix sum": {"code": "double s = 0;\nfor (long i = 0; i < N; ++i) { _out[i] = s; s += _x[i]; }"},
}


def _answer(request):
    text = request.text()
    for key, answer in ANSWERS.items():
        if key in text:
            return Reply(text=json.dumps(answer), input_tokens=1000, output_tokens=100)
    raise AssertionError("unexpected prompt")


def test_live_run_is_recorded_and_replays(fake_llm_server, monkeypatch, tmp_path, shared_artefacts):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("DACE_ai_base_url", fake_llm_server.openai_url)
    fake_llm_server.respond_with(_answer)
    record, out = tmp_path / "recorded", tmp_path / "live"
    build = tmp_path / "build"  # shared by the live run and its replay (which reuses the compiled programs)
    link_shared_artefacts(build, shared_artefacts)
    assert (
        main(
            [
                "bench",
                "--provider",
                "openai",
                "--model",
                "gpt-test",
                "--tasks",
                "relu,scan",
                "--samples",
                "2",
                "--record",
                str(record),
                "--out",
                str(out),
                "--build",
                str(build),
                "--workers",
                "2",
                "--quiet",
            ]
        )
        == 0
    )
    assert len(fake_llm_server.requests) == 4 and fake_llm_server.requests[0].model == "gpt-test"
    data = json.loads((out / "results.json").read_text())
    by_task = {(a["task"], a["sample"]): a for a in data["attempts"]}
    assert all(by_task[("relu", s)]["correct"] for s in (0, 1))
    scan = by_task[("scan", 0)]
    assert scan["compiled"] and not scan["correct"] and "output 'out'" in scan["error"]
    assert all(a["input_tokens"] == 1000 and a["output_tokens"] == 100 for a in data["attempts"])
    md = (out / "report.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| openai/gpt-test"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    from dace_ai.evaluation.report import SUMMARY_COLUMNS

    column = dict(zip(SUMMARY_COLUMNS, cells))
    assert [column["compile rate"], column["correct rate"]] == ["100.0%", "50.0%"]
    assert column["tokens / correct"] == "2200"  # 4 x 1100 tokens / 2 correct kernels
    assert SECRET not in "".join(p.read_text() for p in [*record.iterdir(), *out.glob("*.json")])

    replay = tmp_path / "replay"
    assert (
        main(
            [
                "bench",
                "--offline",
                str(record),
                "--tasks",
                "relu,scan",
                "--samples",
                "2",
                "--out",
                str(replay),
                "--build",
                str(build),
                "--workers",
                "2",
                "--quiet",
            ]
        )
        == 0
    )
    again = json.loads((replay / "results.json").read_text())
    assert sorted((a["task"], a["sample"], a["correct"], a["input_tokens"]) for a in again["attempts"]) == sorted(
        (a["task"], a["sample"], a["correct"], a["input_tokens"]) for a in data["attempts"]
    )
    assert len(fake_llm_server.requests) == 4  # the replay asked nobody


def test_bad_usage_is_a_short_error(capsys, tmp_path):
    assert main(["bench", "--out", str(tmp_path)]) == 1
    assert "--offline" in capsys.readouterr().err
    assert main(["bench", "--offline", "--tasks", "nope", "--out", str(tmp_path)]) == 1
    assert "unknown task(s) ['nope']" in capsys.readouterr().err
    assert main(["bench", "--offline", "--reward", "speed=1", "--out", str(tmp_path)]) == 1
    assert "--reward" in capsys.readouterr().err
    assert main(["bench", "--offline", "--executor", "nope", "--tasks", "relu", "--out", str(tmp_path)]) == 1
    assert "no executor named 'nope'" in capsys.readouterr().err
