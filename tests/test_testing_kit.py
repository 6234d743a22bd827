"""dace_ai.testing: the fixtures and contract checks offered to plugin authors."""

from __future__ import annotations

import pytest
from dace_ai.plugin import PromptSection, Provider, Target, hookimpl
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.providers.api import Message, ProviderRequest
from dace_ai.targets import host as host_target
from dace_ai.testing import FakeProvider, check_registrations


class _SectionPlugin:
    @hookimpl
    def dace_ai_prompt_sections(self):
        yield PromptSection(name="kit-section", order=990, render=lambda ctx: "kit")


def test_fresh_manager_fixture_is_global(dace_ai_plugin_manager):
    assert get_plugin_manager() is dace_ai_plugin_manager
    assert "host" in dace_ai_plugin_manager.targets()


def test_register_fixture_adds_for_one_test(register_dace_ai_plugin):
    register_dace_ai_plugin(_SectionPlugin(), name="kit")
    sections = {s.name: s for s in get_plugin_manager().prompt_sections()}
    assert sections["kit-section"].provenance.plugin == "kit"


def test_registration_is_gone_after_the_test():
    assert "kit-section" not in [s.name for s in get_plugin_manager().prompt_sections()]


def test_contract_of_builtin_target():
    found = check_registrations(host_target)
    assert [t.name for t in found["dace_ai_targets"]] == ["host"]


def test_contract_catches_wrong_type_and_empty_description():
    class WrongType:
        @hookimpl
        def dace_ai_providers(self):
            yield PromptSection(name="x", order=1, render=str)

    with pytest.raises(AssertionError, match="dace_ai_providers yielded PromptSection"):
        check_registrations(WrongType())

    from dace_ai.plugin import Detection

    class SilentTarget:
        @hookimpl
        def dace_ai_targets(self):
            yield Target(name="mute", detect=lambda: Detection(False, "no"), describe=lambda d: " ")

    with pytest.raises(AssertionError, match="describe\\(\\) must return text"):
        check_registrations(SilentTarget())


def test_fake_provider_scripts_answers_and_records_requests(register_dace_ai_plugin):
    fake = FakeProvider(['{"code": "_out = _in0;"}', lambda request: request.messages[-1].content.upper()])
    register_dace_ai_plugin(fake.plugin("scripted"), name="scripted-plugin")
    provider = get_plugin_manager().get("providers", "scripted")
    assert isinstance(provider, Provider) and provider.origin.startswith("<registered at runtime>")
    request = ProviderRequest(system="s", messages=(Message("user", "hello"),), schema={})
    client = provider.factory(None)
    assert client.complete(request).text == '{"code": "_out = _in0;"}'
    assert client.complete(request).text == "HELLO"
    with pytest.raises(RuntimeError, match="no scripted answer left"):
        client.complete(request)
    assert len(fake.requests) == 3


def test_registration_validation_names_the_problem():
    with pytest.raises(ValueError, match="name 'bad name' is not allowed"):
        Provider(name="bad name", factory=lambda s: None)
    with pytest.raises(TypeError, match="field 'factory' must be callable"):
        Provider(name="p", factory="not callable")
    from dace_ai.plugin import Checker

    with pytest.raises(ValueError, match="stage must be one of"):
        Checker(name="c", stage="lint", check=lambda r: None)


def test_contract_checks_plugin_settings():
    from dace_ai.plugin import Setting

    def plugin_with(*settings):
        class Plugin:
            @hookimpl
            def dace_ai_providers(self):
                yield Provider(name="p1", factory=lambda s: None, settings=settings[:1])
                yield Provider(name="p2", factory=lambda s: None, settings=settings[1:])

        return Plugin()

    check_registrations(plugin_with(Setting("lab_x", int, 1), Setting("lab_x", int, 1)))
    with pytest.raises(AssertionError, match="reuses a core setting's name"):
        check_registrations(plugin_with(Setting("timeout", float, 1.0)))
    with pytest.raises(AssertionError, match="'lab_x' is declared differently"):
        check_registrations(plugin_with(Setting("lab_x", int, 1), Setting("lab_x", int, 2)))


def test_pytest_plugin_costs_other_projects_nothing_until_a_fixture_is_used(tmp_path):
    """In another project's session the plugin is loaded, yet dace_ai and DaCe stay unimported (and so
    DaCe unpatched) until a test asks for a dace-ai fixture."""
    import os
    import subprocess
    import sys

    project = tmp_path / "other-project"
    (project / "tests").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "other"\nversion = "1"\n')
    (project / "tests" / "test_other.py").write_text(
        "import sys\n\n"
        "def test_a_plain_test(request):\n"
        "    assert request.config.pluginmanager.hasplugin('dace_ai')\n"
        "    loaded = sorted(m for m in sys.modules if m == 'dace' or m.startswith(('dace.', 'dace_ai')))\n"
        "    assert loaded == ['dace_ai_pytest'], loaded\n\n"
        "def test_z_fixture_imports_on_use(register_dace_ai_plugin):\n"
        "    assert 'dace_ai' in sys.modules and 'dace' in sys.modules\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DACE_ai_", "PYTEST_"))}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-p",
            "no:randomly",
            "tests",
        ],
        check=False,
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
