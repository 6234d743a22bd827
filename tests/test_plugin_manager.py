"""The plugin manager against real installed distributions (tests/data/plugins)."""

from __future__ import annotations

import json

import pytest

from tests.distributions import DATA, build_wheel, install_wheels, run_json, run_python

#: One worker runs the module (xdist --dist loadgroup), so the test plugins' wheels are built once.
pytestmark = pytest.mark.xdist_group("plugin-wheels")

PLUGINS = ("good", "broken", "dup_a", "dup_b", "blocked", "misspelt")

#: Loads the manager in a fresh interpreter and reports what happened, as JSON.
PROBE = r"""
import json, sys, warnings
out = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        from dace_ai.plugins.manager import get_plugin_manager
        manager = get_plugin_manager()
        out["records"] = {r.name: r.as_dict() for r in manager.records()}
        out["providers"] = {n: p.origin for n, p in manager.providers().items()}
        out["sections"] = [s.name for s in manager.prompt_sections()]
        out["targets"] = {n: t.origin for n, t in manager.targets().items()}
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
out["warnings"] = [str(w.message) for w in caught if "dace-ai plugin" in str(w.message)]
out["modules"] = sorted(m for m in sys.modules if m.startswith("dace_ai_test"))
print(json.dumps(out))
"""


@pytest.fixture(scope="session")
def wheels(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wheels")
    return {name: build_wheel(DATA / "plugins" / name, folder) for name in PLUGINS}


@pytest.fixture
def site(tmp_path, wheels):
    def make(*names):
        return install_wheels([wheels[n] for n in names], tmp_path / "site")

    return make


def test_good_plugin_loads_with_provenance(site):
    out = run_json(PROBE, site("good"))
    assert "error" not in out, out
    record = out["records"]["good"]
    assert (record["distribution"], record["version"], record["status"]) == ("dace-ai-test-good", "1.2.3", "active")
    assert record["registered"]["providers"] == ["echo-test"]
    assert out["providers"]["echo-test"] == "dace-ai-test-good 1.2.3 (plugin 'good')"
    assert "lab-rules" in out["sections"]
    assert out["records"]["manual"]["builtin"] is True


def test_broken_plugin_is_reported_and_others_still_load(site):
    out = run_json(PROBE, site("good", "broken"))
    assert "error" not in out, out
    broken = out["records"]["broken"]
    assert broken["status"] == "failed"
    assert "libvendor.so.3" in broken["error"] and "ImportError" in broken["error"]
    assert any("dace-ai-test-broken 0.0.1" in w and "libvendor.so.3" in w for w in out["warnings"])
    assert out["records"]["good"]["status"] == "active"
    assert "echo-test" in out["providers"]


def test_strict_mode_raises_on_broken_plugin(site):
    out = run_json(PROBE, site("good", "broken"), env={"DACE_ai_strict_plugins": "1"})
    assert out["error"].startswith("PluginError")
    assert "dace-ai-test-broken 0.0.1" in out["error"] and "strict mode" in out["error"]


def test_duplicate_names_list_every_distribution(site):
    out = run_json(PROBE, site("dup_a", "dup_b"))
    error = out["error"]
    assert error.startswith("PluginError") and "'twin'" in error
    assert "dace-ai-test-dup-a 0.1.0" in error and "dace-ai-test-dup-b 0.2.0" in error


def test_disabled_plugin_is_never_imported(site, tmp_path):
    marker = tmp_path / "imported.txt"
    folder = site("good", "blocked")
    env = {"DACE_AI_TEST_IMPORT_MARKER": str(marker)}
    # Control: without blocking, the import leaves its marker.
    out = run_json(PROBE, folder, env=env)
    assert marker.exists() and "blocked-provider" in out["providers"]
    marker.unlink()

    out = run_json(PROBE, folder, env={**env, "DACE_ai_disable_plugins": "blocked"})
    assert not marker.exists(), "a disabled plugin was imported"
    assert "dace_ai_test_blocked" not in out["modules"]
    assert out["records"]["blocked"]["status"] == "disabled"
    assert "DACE_ai_disable_plugins" in out["records"]["blocked"]["error"]
    assert "blocked-provider" not in out["providers"] and "echo-test" in out["providers"]


def test_no_plugins_keeps_builtins_only(site, tmp_path):
    marker = tmp_path / "imported.txt"
    out = run_json(
        PROBE, site("good", "blocked"), env={"DACE_AI_TEST_IMPORT_MARKER": str(marker), "DACE_ai_no_plugins": "1"}
    )
    assert not marker.exists()
    assert out["modules"] == []
    assert out["records"]["good"]["status"] == "disabled"
    assert out["records"]["manual"]["status"] == "active"
    assert out["targets"]["host"].startswith("dace-ai ")


def test_misspelt_hook_is_rejected_with_hint(site):
    out = run_json(PROBE, site("misspelt", "good"))
    record = out["records"]["misspelt"]
    assert record["status"] == "failed"
    assert "dace_ai_provider" in record["error"] and "did you mean dace_ai_providers" in record["error"]
    assert out["records"]["good"]["status"] == "active"


def test_plugins_list_json_cli(site):
    proc = run_python(
        "import sys; from dace_ai.cli.main import main; sys.exit(main(['plugins', 'list', '--json']))",
        site("good", "broken"),
    )
    assert proc.returncode == 1, proc.stderr  # a failed plugin makes the listing exit 1
    listing = {row["name"]: row for row in json.loads(proc.stdout)}
    assert listing["good"]["distribution"] == "dace-ai-test-good"
    assert listing["good"]["registered"]["prompt_sections"] == ["lab-rules"]
    assert listing["broken"]["status"] == "failed"
    assert listing["manual"]["status"] == "active" and listing["manual"]["builtin"]


def test_trace_prints_hook_calls(site):
    proc = run_python(
        "from dace_ai.plugins.manager import get_plugin_manager; get_plugin_manager().providers()",
        site("good"),
        env={"DACE_ai_trace_plugins": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "[dace-ai trace] dace_ai_providers <- dace-ai-test-good 1.2.3 (plugin 'good'): 'echo-test'" in proc.stderr


def test_import_dace_ai_loads_no_plugin_and_no_sdk(site, tmp_path):
    marker = tmp_path / "imported.txt"
    out = run_json(
        "import sys, json, dace_ai, dace\n"
        "from dace_ai.plugins import manager\n"
        "sdks = [m for m in ('anthropic', 'openai', 'litellm') if m in sys.modules]\n"
        "loaded = manager._manager is not None and manager._manager._loaded\n"
        "print(json.dumps({'sdks': sdks, 'loaded': loaded, 'ai': hasattr(dace, 'ai'),\n"
        "                  'plugins': sorted(m for m in sys.modules if m.startswith(("
        "'dace_ai.providers.manual', 'dace_ai.prompt.sections', 'dace_ai.targets.host', 'dace_ai.checkers.host_compile', "
        "'dace_ai.environments.generated', 'dace_ai_')))}))",
        site("good", "blocked"),
        env={"DACE_AI_TEST_IMPORT_MARKER": str(marker)},
    )
    assert out["sdks"] == []
    assert out["loaded"] is False
    assert out["plugins"] == []
    assert not marker.exists()


def test_a_packs_machine_fact_is_kept_until_the_process_state_is_reset():
    from dace_ai import state
    from dace_ai.plugin import machine_fact

    calls: list[int] = []

    @machine_fact("tests.counted_fact")
    def fact() -> int:
        calls.append(1)
        return len(calls)

    assert fact() == fact() == 1
    assert "plugin.tests.counted_fact" in state.STATE.names()
    state.reset()
    assert fact() == 2
