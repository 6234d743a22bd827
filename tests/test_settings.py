"""Settings: sources in order, DaCe's config category, clear errors."""

from __future__ import annotations

import json

import dace
import dace_ai
import pytest
from dace_ai.cli.main import main
from dace_ai.config.settings import resolve_settings
from dace_ai.errors import SettingsError


@pytest.fixture
def dace_config_model():
    dace.Config.set("ai", "model", value="from-dace-config")
    yield
    dace.Config.set("ai", "model", value="")


def test_defaults_have_default_source():
    settings = resolve_settings()
    assert settings.max_tokens == 16000 and settings.provider is None
    assert settings.source("max_tokens") == "default"


def test_dace_config_category_is_registered():
    assert dace.Config.get("ai", "max_tokens") == 16000
    assert dace.Config.get("ai", "compile_check") is True
    assert "ai" in dace.Config._config_metadata["required"]


def test_dace_config_sees_environment_variable(monkeypatch):
    monkeypatch.setenv("DACE_ai_model", "env-model")
    assert dace.Config.get("ai", "model") == "env-model"


def test_source_precedence(tmp_path, monkeypatch, dace_config_model):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.dace-ai]\nmodel = "from-file"\neffort = "low"\nmax_concurrency = 3\ntimeout = 12\n')
    monkeypatch.setenv("DACE_ai_effort", "high")
    monkeypatch.setenv("DACE_ai_timeout", "30")
    settings = resolve_settings({"timeout": 5}, start_dir=tmp_path)
    assert (settings.timeout, settings.source("timeout")) == (5.0, "argument")
    assert (settings.effort, settings.source("effort")) == ("high", "environment variable DACE_ai_effort")
    assert (settings.model, settings.source("model")) == ("from-dace-config", "dace.Config ('ai', 'model')")
    assert settings.max_concurrency == 3 and "pyproject.toml [tool.dace-ai]" in settings.source("max_concurrency")


def test_nearest_file_from_a_subfolder(tmp_path):
    (tmp_path / "dace-ai.toml").write_text('checkers = ["probe", "faithful"]\ncompile_check = false\n')
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    settings = resolve_settings(start_dir=sub)
    assert settings.checkers == ("probe", "faithful") and settings.compile_check is False
    assert settings.source("checkers") == str(tmp_path / "dace-ai.toml")


def test_list_and_bool_from_environment(monkeypatch):
    monkeypatch.setenv("DACE_ai_checkers", "probe, faithful")
    monkeypatch.setenv("DACE_ai_cache", "off")
    settings = resolve_settings()
    assert settings.checkers == ("probe", "faithful") and settings.cache is False


def test_bad_value_names_key_value_source_and_allowed(monkeypatch):
    monkeypatch.setenv("DACE_ai_max_tokens", "-5")
    with pytest.raises(SettingsError) as info:
        resolve_settings()
    message = str(info.value)
    assert "'max_tokens'" in message and "'-5'" in message
    assert "environment variable DACE_ai_max_tokens" in message and "it must be an integer > 0" in message


def test_bad_choice_lists_allowed_values(tmp_path):
    (tmp_path / "dace-ai.toml").write_text('effort = "extreme"\n')
    with pytest.raises(SettingsError, match=r"'effort' = 'extreme' from .*dace-ai.toml.*'low', 'medium', 'high'"):
        resolve_settings(start_dir=tmp_path)


def test_unknown_keys_are_rejected(tmp_path):
    with pytest.raises(SettingsError, match="unknown setting.*'modle'"):
        resolve_settings({"modle": "x"})
    (tmp_path / "pyproject.toml").write_text('[tool.dace-ai]\nmax_tokenz = 5\n')
    with pytest.raises(SettingsError, match=r"pyproject.toml \[tool.dace-ai\]: unknown setting.*'max_tokenz'"):
        resolve_settings(start_dir=tmp_path)


def test_settings_are_frozen():
    settings = dace_ai.resolve_settings()
    with pytest.raises(Exception):
        settings.max_tokens = 3


def test_config_cli_json_shows_sources(monkeypatch, capsys):
    monkeypatch.setenv("DACE_ai_max_repair_attempts", "4")
    assert main(["config", "--json"]) == 0
    rows = {row["key"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["max_repair_attempts"]["value"] == 4
    assert rows["max_repair_attempts"]["source"] == "environment variable DACE_ai_max_repair_attempts"
    assert rows["timeout"]["source"] == "default"


def test_config_cli_reports_bad_value_with_exit_1(monkeypatch, capsys):
    monkeypatch.setenv("DACE_ai_timeout", "soon")
    assert main(["config"]) == 1
    assert "DACE_ai_timeout" in capsys.readouterr().err


def test_configured_target_applies_only_to_its_kind(register_dace_ai_plugin):
    from dace_ai.plugin import Detection, Target, hookimpl
    from dace_ai.targets.select import resolve_target

    class GpuPack:
        @hookimpl
        def dace_ai_targets(self):
            yield Target(name="test-gpu", kind="gpu", detect=lambda: Detection(False, "no device"),
                         describe=lambda d: "a GPU")

    register_dace_ai_plugin(GpuPack(), name="gpu-pack")
    settings = resolve_settings({"target": "test-gpu"})
    gpu, _, gpu_reason = resolve_target(settings, kind="gpu")
    cpu, _, _ = resolve_target(settings, kind="cpu")
    assert gpu.name == "test-gpu" and gpu_reason == "configured by argument"
    assert cpu.kind == "cpu" and cpu.name != "test-gpu"
