"""The dace-ai command: help everywhere, exit codes, doctor never prints a key."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from dace_ai.cli.main import main


@pytest.mark.parametrize("argv", [[], ["plugins"], ["plugins", "list"], ["config"], ["doctor"], ["targets"]])
def test_help_on_every_command(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    assert "usage: dace-ai" in capsys.readouterr().out


def _commands(parser, prefix=()):
    """Every command path of the parser (``()``, ``("cache",)``, ``("cache", "list")``, ...)."""
    import argparse

    yield prefix
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, (*prefix, name))


def _all_commands():
    from dace_ai.cli.main import make_parser

    return list(_commands(make_parser()))


@pytest.mark.parametrize("argv", _all_commands(), ids=lambda argv: " ".join(argv) or "dace-ai")
def test_every_commands_help_ends_with_an_example_of_itself(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    help_text = capsys.readouterr().out.rstrip()
    assert "\nexample" in help_text, help_text
    example = help_text.rsplit("\nexample", 1)[1].splitlines()[-1].strip()
    words = [w for w in example.split() if "=" not in w or w.startswith("-")]  # VAR=value prefixes dropped
    assert words[0] == "dace-ai" and words[1 : 1 + len(argv)] == list(argv), example


def test_optimize_help_ends_with_a_complete_example(capsys):
    with pytest.raises(SystemExit):
        main(["optimize", "--help"])
    last = capsys.readouterr().out.rstrip().splitlines()[-1].strip()
    assert last.startswith("dace-ai optimize ") and ".sdfg" in last and "--samples" in last


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["plugins"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2


def test_doctor_reports_tools_and_key_presence_without_values(monkeypatch, capsys):
    secret = "sk-ant-test-must-never-be-printed"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    code = main(["doctor", "--json"])
    out = capsys.readouterr().out
    assert secret not in out
    report = json.loads(out)
    assert code == (1 if report["failed_plugins"] else 0)
    assert report["api_keys_set"]["ANTHROPIC_API_KEY"] is True
    assert report["api_keys_set"]["OPENAI_API_KEY"] is False
    assert report["tools"]["host compiler"]["path"]
    # Tools come from what the installed packs declare, each with who uses it.
    assert report["tools"]["nvcc"]["for"] == "target 'cuda'"
    assert report["tools"]["hipcc"]["for"] == "target 'hip'"
    assert report["tools"]["qemu-aarch64"]["for"] == "checker 'sve-vector-lengths'"
    assert "aarch64-linux-gnu-g++" in report["tools"] or "g++" in report["tools"]
    assert report["targets"]["host"]["matched"] is True


def test_doctor_lists_a_tool_declared_by_a_runtime_plugin(register_dace_ai_plugin, capsys):
    from dace_ai.plugin import Checker, CheckReport, hookimpl

    class Lint:
        @hookimpl
        def dace_ai_checkers(self):
            yield Checker(
                name="lab-lint",
                stage="compile",
                tools=("lab-lint-tool-not-installed",),
                check=lambda request: CheckReport("lab-lint", "passed"),
                default=False,
            )

    register_dace_ai_plugin(Lint(), name="lint")
    main(["doctor", "--json"])
    tool = json.loads(capsys.readouterr().out)["tools"]["lab-lint-tool-not-installed"]
    assert tool == {
        "command": "lab-lint-tool-not-installed",
        "path": None,
        "for": "checker 'lab-lint'",
        "version": None,
    }


def test_console_script_is_installed():
    proc = subprocess.run([sys.executable, "-m", "dace_ai.cli.main", "plugins", "list"], capture_output=True, text=True)
    assert "host-target" in proc.stdout and "dace-ai" in proc.stdout


def test_doctor_says_whether_dace_can_build_hip_here_and_why_not(monkeypatch, capsys):
    import shutil

    from dace_ai.compilation.gpu_toolchain import gpu_build_blocker

    main(["doctor", "--json"])
    hip = json.loads(capsys.readouterr().out)["hip_build"]
    if shutil.which("hipcc") is None:
        assert hip == {"hipcc": None, "can_build": False, "reason": "no hipcc on PATH"}
    else:
        blocker = gpu_build_blocker("hip")
        assert hip["can_build"] is (blocker is None)
        assert hip["reason"] == (blocker or "")
        main(["doctor"])
        line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("HIP build"))
        assert (blocker or "DaCe can build HIP programs") in line
    monkeypatch.setenv("PATH", "/nonexistent")  # no hipcc: said so, and no HIP line in the text
    main(["doctor", "--json"])
    assert json.loads(capsys.readouterr().out)["hip_build"]["reason"] == "no hipcc on PATH"
