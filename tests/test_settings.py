"""Settings: sources in order, DaCe's config category, clear errors."""

from __future__ import annotations

import json

import dace
import dace_ai
import pytest
from dace_ai.cli.main import main
from dace_ai.config.settings import resolve_settings
from dace_ai.errors import SettingsError
from pydantic import ValidationError

from tests.dace_versions import only_dace1


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
    # DaCe 2 has an 'ai' category of its own; implementing it, dace-ai's defaults apply to the shared keys.
    assert dace.Config.get("ai", "max_tokens") == 16000
    assert dace.Config.get("ai", "compile_check") is True
    assert dace.Config.get("ai", "bench") == "report"
    assert dace.Config.get_default("ai", "verify_seeds") == 3


@only_dace1("DACE_* variables are read once, when DaCe's configuration loads, not by Config.get")
def test_dace_config_sees_environment_variable(monkeypatch):
    monkeypatch.setenv("DACE_ai_model", "env-model")
    assert dace.Config.get("ai", "model") == "env-model"


def test_source_precedence(tmp_path, monkeypatch, dace_config_model):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.dace-ai]\nmodel = "from-file"\neffort = "low"\nmax_concurrency = 3\ntimeout = 12\n'
    )
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
    (tmp_path / "pyproject.toml").write_text("[tool.dace-ai]\nmax_tokenz = 5\n")
    with pytest.raises(SettingsError, match=r"pyproject.toml \[tool.dace-ai\]: unknown setting.*'max_tokenz'"):
        resolve_settings(start_dir=tmp_path)


def test_settings_are_frozen():
    settings = dace_ai.resolve_settings()
    with pytest.raises(ValidationError, match="frozen"):
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
            yield Target(
                name="test-gpu", kind="gpu", detect=lambda: Detection(False, "no device"), describe=lambda d: "a GPU"
            )

    register_dace_ai_plugin(GpuPack(), name="gpu-pack")
    settings = resolve_settings({"target": "test-gpu"})
    gpu, _, gpu_reason = resolve_target(settings, kind="gpu")
    cpu, _, _ = resolve_target(settings, kind="cpu")
    assert gpu.name == "test-gpu" and gpu_reason == "configured by argument"
    assert cpu.kind == "cpu" and cpu.name != "test-gpu"


def _lab_plugin(settings=None):
    """A plugin owning settings through its checker registration."""
    from dace_ai.plugin import Checker, CheckReport, Setting, hookimpl

    declared = settings or (
        Setting("lab_level", int, 2, "How strict the lab checker is"),
        Setting("lab_mode", str, "fast", "Lab checker mode", choices=("fast", "full")),
    )

    class LabPlugin:
        @hookimpl
        def dace_ai_checkers(self):
            yield Checker(
                name="lab-check",
                stage="compile",
                default=False,
                settings=declared,
                check=lambda request: CheckReport("lab-check", "passed"),
            )

    return LabPlugin()


@pytest.fixture
def lab_settings(register_dace_ai_plugin):
    register_dace_ai_plugin(_lab_plugin(), name="lab")
    yield
    dace.Config.set("ai", "lab_mode", value="fast")


def test_plugin_setting_defaults_and_every_source(lab_settings, tmp_path, monkeypatch):
    settings = resolve_settings()
    assert (settings.lab_level, settings.lab_mode) == (2, "fast") and settings.source("lab_level") == "default"
    (tmp_path / "dace-ai.toml").write_text('lab_level = 5\nlab_mode = "full"\n')
    settings = resolve_settings(start_dir=tmp_path)
    assert (settings.lab_level, settings.lab_mode) == (5, "full")
    assert settings.source("lab_level").endswith("dace-ai.toml")
    dace.Config.set("ai", "lab_mode", value="fast")
    monkeypatch.setenv("DACE_ai_lab_level", "7")
    settings = resolve_settings(start_dir=tmp_path)
    assert settings.lab_level == 7 and settings.source("lab_level") == "environment variable DACE_ai_lab_level"
    dace.Config.set("ai", "lab_mode", value="full")
    assert resolve_settings().lab_mode == "full"
    assert resolve_settings().source("lab_mode") == "dace.Config ('ai', 'lab_mode')"
    assert resolve_settings({"lab_level": 9}).lab_level == 9


def test_plugin_setting_bad_values_name_key_source_and_allowed(lab_settings, monkeypatch):
    monkeypatch.setenv("DACE_ai_lab_mode", "slow")
    with pytest.raises(
        SettingsError,
        match=r"'lab_mode' = 'slow' from environment variable DACE_ai_lab_mode "
        r"is not allowed \(allowed: 'fast', 'full'\)",
    ):
        resolve_settings()
    monkeypatch.delenv("DACE_ai_lab_mode")
    with pytest.raises(SettingsError, match=r"'lab_level' = 'lots' from argument is not allowed.*allowed: int"):
        resolve_settings({"lab_level": "lots"})


def test_plugin_settings_in_config_cli_with_source_description_and_owner(lab_settings, monkeypatch, capsys):
    monkeypatch.setenv("DACE_ai_lab_level", "3")
    assert main(["config", "--json"]) == 0
    rows = {row["key"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["lab_level"]["value"] == 3 and rows["lab_level"]["source"] == "environment variable DACE_ai_lab_level"
    assert rows["lab_mode"]["description"] == "Lab checker mode (one of: fast, full)"
    assert "plugin 'lab'" in rows["lab_mode"]["owner"] and rows["model"]["owner"] == "dace-ai"
    assert main(["config"]) == 0
    text = capsys.readouterr().out
    assert "Owned by" in text and "lab_mode" in text and "Lab checker mode (one of: fast, full)" in text


def test_openai_api_is_listed_as_a_setting_of_the_openai_plugin(capsys):
    assert main(["config", "--json"]) == 0
    rows = {row["key"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["openai_api"]["value"] == "responses" and "dace-ai-openai" in rows["openai_api"]["owner"]


def test_misspelt_environment_variable_warns_with_closest_setting(lab_settings, monkeypatch):
    from dace_ai.config.settings import SettingsWarning

    monkeypatch.setenv("DACE_ai_max_tokns", "5")
    monkeypatch.setenv("DACE_ai_lab_levle", "5")
    with pytest.warns(SettingsWarning) as caught:
        resolve_settings()
    messages = sorted(str(w.message) for w in caught)
    assert any(
        "DACE_ai_max_tokns names no dace-ai setting" in m and "did you mean DACE_ai_max_tokens?" in m for m in messages
    ), messages
    assert any("did you mean DACE_ai_lab_level?" in m for m in messages), messages


def test_unknown_toml_key_suggests_plugin_setting(lab_settings, tmp_path):
    (tmp_path / "dace-ai.toml").write_text("lab_levl = 1\n")
    with pytest.raises(SettingsError, match=r"unknown setting\(s\) 'lab_levl' \(did you mean 'lab_level'\?\)"):
        resolve_settings(start_dir=tmp_path)


def test_plugin_setting_may_not_reuse_a_core_name(register_dace_ai_plugin):
    from dace_ai.plugin import Setting

    register_dace_ai_plugin(_lab_plugin((Setting("timeout", float, 1.0, "clash"),)), name="clash")
    with pytest.raises(SettingsError, match=r"plugin setting\(s\) 'timeout' .*plugin 'clash'.* core setting"):
        resolve_settings()


def test_setting_declaration_is_checked_where_it_is_made():
    from dace_ai.plugin import Setting

    with pytest.raises(ValueError, match="Setting 'Bad-Name'"):
        Setting("Bad-Name", str)
    with pytest.raises(TypeError, match="type must be one of str, int, float, bool"):
        Setting("lab_list", list)
    with pytest.raises(ValueError, match="default 'x' is not one of"):
        Setting("lab_mode", str, "x", choices=("a", "b"))
