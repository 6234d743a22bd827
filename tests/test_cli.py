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
    for tool in ("nvcc", "hipcc", "aarch64-linux-gnu-g++", "qemu-aarch64"):
        assert tool in report["tools"]
    assert report["targets"]["host"]["matched"] is True


def test_console_script_is_installed():
    proc = subprocess.run([sys.executable, "-m", "dace_ai.cli.main", "plugins", "list"], capture_output=True, text=True)
    assert "host-target" in proc.stdout and "dace-ai" in proc.stdout
