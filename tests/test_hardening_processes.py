"""Real processes on one build root: overlapping programs expanded at once lose nothing and
corrupt nothing; a process killed with SIGKILL mid-generation or mid-write is followed by a
clean run. The provider is the real anthropic SDK against the fake server in this process."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dace_ai.cli.main import main as dace_ai_main
from dace_ai.storage.cache import AnswerCache

from tests.fakes.llm_server import (
    Reply,
    fake_llm_server_fixture,  # noqa: F401 - the fake_llm_server fixture
)
from tests.provider_cases import SECRET

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["n0", "n1", "n2", "n3", "n4"]


def code_for(name: str) -> str:
    return f"/* {name} */ for (int i = 0; i < 8; ++i) _out[i] = _in0[i];"


def answer_by_node(delay: float):
    def respond(request):
        text = request.text()
        name = next(n for n in NAMES if f"({n})" in text)
        return Reply(text=json.dumps({"code": code_for(name)}), input_tokens=10, output_tokens=5, delay=delay)

    return respond


def _env(server, build_root: Path, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DACE_ai_")}
    env.update(
        {
            "DACE_default_build_folder": str(build_root),
            "DACE_ai_provider": "anthropic",
            "DACE_ai_base_url": server.url,
            "DACE_ai_compile_check": "0",
            "DACE_ai_max_retries": "0",
            "DACE_ai_model": "claude-test",
            "ANTHROPIC_API_KEY": SECRET,
            "ANTHROPIC_CONFIG_DIR": str(build_root.parent / "anthropic-config"),
            "PYTHONPATH": str(ROOT),
            **extra,
        }
    )
    return env


def _start(names, env):
    return subprocess.Popen(
        [sys.executable, "-m", "tests.hardening_worker", *names],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _assert_clean(build_root: Path, expected_entries: int) -> None:
    """Every cache entry valid, no unfinished write, every session readable."""
    cache = AnswerCache(build_root)
    entries = list(cache.entries())
    assert [e.problem for e in entries] == [""] * expected_entries, [(e.path, e.problem) for e in entries]
    assert cache.leftovers() == [] and cache.quarantined() == []
    assert [p for p in build_root.rglob("*.tmp")] == []
    for summary in build_root.glob("ai-sessions/*/session.json"):
        data = json.loads(summary.read_text())
        numbers = [r["number"] for r in data["rounds"]]
        assert numbers == list(range(1, len(numbers) + 1)), (summary, numbers)
        for number in numbers:
            assert (summary.parent / f"round-{number}" / "answer.txt").is_file()
    assert dace_ai_main(["cache", "verify", "--root", str(build_root)]) == 0


def test_processes_expanding_overlapping_programs_on_one_build_root(fake_llm_server, tmp_path):
    fake_llm_server.respond_with(answer_by_node(delay=0.3))
    build_root = tmp_path / "shared-build"
    groups = [NAMES[i : i + 3] for i in range(3)] + [NAMES[:2] + NAMES[-1:]]  # every node in 2+ processes
    processes = [_start(group, _env(fake_llm_server, build_root)) for group in groups]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    for group, result in zip(groups, results):
        for name in group:
            [code] = [c for label, c in result["codes"].items() if code_for(name) in c]
            assert f"/* {name} */" in code
    assert sum(r["generated"] + r["cached"] for r in results) == sum(len(g) for g in groups)
    _assert_clean(build_root, expected_entries=len(NAMES))


def test_kill_9_mid_generation_then_a_clean_rerun(fake_llm_server, tmp_path):
    build_root = tmp_path / "killed-build"
    fake_llm_server.respond_with(answer_by_node(delay=120))  # the first run never gets its answers
    victim = _start(NAMES[:3], _env(fake_llm_server, build_root))
    deadline = time.time() + 300
    while len(fake_llm_server.requests) < 3 and time.time() < deadline:
        time.sleep(0.2)
    assert len(fake_llm_server.requests) == 3, "the requests are in flight"
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=60)

    fake_llm_server.respond_with(answer_by_node(delay=0))
    rerun = _start(NAMES[:3], _env(fake_llm_server, build_root))
    out, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1])["generated"] == 3
    _assert_clean(build_root, expected_entries=3)


def test_kill_9_mid_write_leaves_no_half_file_and_the_next_write_tidies_up(fake_llm_server, tmp_path):
    build_root = tmp_path / "half-written"
    fake_llm_server.respond_with(answer_by_node(delay=0))
    victim = _start(["n0"], _env(fake_llm_server, build_root, DACE_AI_TEST_HANG_IN_WRITE="1"))
    assert victim.stdout.readline().strip() == "in-write"
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=60)
    cache = AnswerCache(build_root)
    [half] = cache.leftovers()
    assert list(cache.folder.glob("??/*.json")) == [], "no entry exists until it is complete"
    assert dace_ai_main(["cache", "verify", "--root", str(build_root)]) == 1, "verify reports the unfinished write"

    rerun = _start(["n0"], _env(fake_llm_server, build_root))
    _, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err[-3000:]
    assert not half.exists(), "the next write of the same entry removed the dead process's temporary file"
    _assert_clean(build_root, expected_entries=1)
