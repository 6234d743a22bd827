"""Errors a person can read: settings checked against what is installed, messages in words,
a closed pipe and Ctrl-C handled quietly, and short errors out of DaCe's expansion."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import traceback

import dace
import dace_ai
import pytest
from dace_ai.cli import main as cli_main
from dace_ai.config.settings import resolve_settings
from dace_ai.errors import ProviderError, SettingsError

DACE_AI = [sys.executable, "-m", "dace_ai.cli.main"]


def _run(args, env=None, **kwargs):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DACE_ai_")}
    environment.update(env or {})
    return subprocess.run(
        [*DACE_AI, *args], env=environment, capture_output=True, text=True, timeout=300, check=False, **kwargs
    )


def test_misspelt_provider_exits_1_with_the_closest_name():
    result = _run(["config"], env={"DACE_ai_provider": "antropic"})
    assert result.returncode == 1
    assert "setting 'provider' = 'antropic' from environment variable DACE_ai_provider" in result.stderr
    assert "Did you mean 'anthropic'?" in result.stderr and "Traceback" not in result.stderr
    nonsense = _run(["config"], env={"DACE_ai_provider": "nonsense"})
    assert nonsense.returncode == 1 and "names no installed provider" in nonsense.stderr


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("target", "x86_64", "names no installed target"),
        ("checkers", "probe,faithfull", "names no installed checker. Did you mean 'faithful'?"),
    ],
)
def test_every_choice_valued_setting_is_checked_at_load(monkeypatch, key, value, words):
    monkeypatch.setenv(f"DACE_ai_{key}", value)
    with pytest.raises(SettingsError, match=words):
        resolve_settings()


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("max_concurrency", "0", "it must be an integer >= 1"),
        ("max_concurrency", "four", "it must be an integer >= 1"),
        ("timeout", "-1", "it must be a number > 0"),
        ("cache", "maybe", "it must be true or false"),
        ("effort", "extreme", "it must be one of 'low', 'medium', 'high', 'max'"),
    ],
)
def test_bad_values_are_described_in_words_not_pydantic_internals(monkeypatch, key, value, words):
    monkeypatch.setenv(f"DACE_ai_{key}", value)
    with pytest.raises(SettingsError) as info:
        resolve_settings()
    assert words in str(info.value)
    assert "<class" not in str(info.value) and "Ge(" not in str(info.value) and "Gt(" not in str(info.value)


def test_closed_pipe_ends_quietly():
    """``dace-ai plugins list | head -1``: the reader leaves; no BrokenPipeError traceback."""
    process = subprocess.Popen([*DACE_AI, "plugins", "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # the reader is gone before anything was written
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert b"BrokenPipeError" not in err and b"Traceback" not in err and err.strip() == b""


def test_closed_pipe_through_a_shell_pipeline():
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DACE_ai_")}
    script = f"{sys.executable} -m dace_ai.cli.main config | head -1"
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 1
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr


def test_ctrl_c_exits_130_with_one_line(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "cmd_config", interrupted)
    assert cli_main.main(["config"]) == 130
    assert capsys.readouterr().err == "dace-ai: interrupted\n"


def test_ctrl_c_on_a_real_process():
    code = textwrap.dedent("""
        import sys, time
        from dace_ai.cli import main as m
        def slow(args):
            print("started", flush=True)
            time.sleep(60)
        m.cmd_config = slow
        sys.exit(m.main(["config"]))
    """)
    # A process started with SIGINT ignored (a test worker's children may inherit that) keeps ignoring it:
    # start this one as a terminal would, with the default disposition.
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stdout.readline() == b"started\n"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130 and err == b"dace-ai: interrupted\n"


# ----------------------------------------------------------- the expansion boundary
N = dace.symbol("N")


@dace.program
def needs_a_key(A: dace.float64[N]):
    return dace_ai.ai("Write _out[i] = 2 * _in0[i].", A, name="needs_a_key")


def _frames(tb):
    count = 0
    while tb is not None:
        count, tb = count + 1, tb.tb_next
    return count


def _error_of_a_compile():
    import numpy as np

    dace.Config.set("ai", "provider", value="anthropic")
    try:
        with pytest.raises(ProviderError) as info:
            needs_a_key(np.ones(4))
    finally:
        dace.Config.set("ai", "provider", value="")
    return info


def test_error_inside_the_expansion_is_one_short_message_with_the_trace_in_the_session_log(_isolated_dace_ai):
    info = _error_of_a_compile()
    error = info.value
    assert "needs an API key" in str(error)
    assert error.__cause__ is None and error.__suppress_context__
    files = [f.f_code.co_filename for f, _ in traceback.walk_tb(error.__traceback__)]
    assert not any("/dace_ai/expansion/pipeline.py" in f or "/dace/transformation/" in f for f in files), files
    assert _frames(error.__traceback__) <= 7, files
    log = _isolated_dace_ai / "ai-sessions" / "errors.log"
    assert error.trace_log == str(log)
    assert any(str(log) in note and "DACE_ai_debug=1" in note for note in error.__notes__)
    text = log.read_text()
    assert "pipeline.py" in text and "make_client" in text and "needs an API key" in text


def test_debug_setting_shows_the_full_trace(monkeypatch):
    monkeypatch.setenv("DACE_ai_debug", "1")
    info = _error_of_a_compile()
    files = [f.f_code.co_filename for f, _ in traceback.walk_tb(info.value.__traceback__)]
    assert any("/dace_ai/expansion/pipeline.py" in f for f in files)
    assert not getattr(info.value, "trace_log", None)


def test_short_error_on_a_terminal(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        textwrap.dedent("""
        import dace, dace_ai, numpy as np
        N = dace.symbol("N")
        @dace.program
        def f(A: dace.float64[N]):
            return dace_ai.ai("Write _out[i] = 2 * _in0[i].", A, name="f")
        f(np.ones(3))
    """)
    )
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("DACE_ai_") and k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
    }
    environment.update(
        {
            "DACE_ai_provider": "anthropic",
            "DACE_default_build_folder": str(tmp_path / "build"),
            "ANTHROPIC_CONFIG_DIR": str(tmp_path / "no-profile"),
        }
    )
    started = time.time()
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 1 and time.time() - started < 600
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert (
        "dace_ai.errors.ProviderError: provider 'anthropic'" in result.stderr and "ANTHROPIC_API_KEY" in result.stderr
    )
    traceback_lines = len(lines) - next(i for i, line in enumerate(lines) if line.startswith("Traceback"))
    assert traceback_lines <= 25, result.stderr
    assert "pipeline.py" not in result.stderr and "errors.log" in result.stderr
