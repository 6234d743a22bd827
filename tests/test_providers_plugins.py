"""The three provider distributions as installed plugins: listing, blocking, lazy SDK imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROVIDERS = {"anthropic": "dace-ai-anthropic", "openai": "dace-ai-openai", "litellm": "dace-ai-litellm"}
CLI = Path(sys.executable).with_name("dace-ai")


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DACE_ai_")}
    full_env.update(env)
    return subprocess.run(args, check=False, capture_output=True, text=True, env=full_env, timeout=120)


def _listing(**env: str) -> dict[str, dict]:
    proc = _run([str(CLI), "plugins", "list", "--json"], **env)
    assert proc.returncode == 0, proc.stderr
    return {record["name"]: record for record in json.loads(proc.stdout)}


def test_plugins_list_shows_the_three_providers_with_distributions_and_versions():
    records = _listing()
    for name, dist in PROVIDERS.items():
        record = records[name]
        assert record["distribution"] == dist
        assert record["version"] == metadata.version(dist)
        assert record["status"] == "active" and not record["builtin"]
        assert record["registered"] == {"providers": [name]}
        assert record["entry_point"] == f"dace_ai_{name}.plugin"


def test_disable_plugins_hides_litellm():
    records = _listing(DACE_ai_disable_plugins="litellm")
    assert records["litellm"]["status"] == "disabled"
    assert "DACE_ai_disable_plugins" in records["litellm"]["error"]
    assert records["anthropic"]["status"] == "active" and records["openai"]["status"] == "active"
    code = (
        "from dace_ai.plugins.manager import get_plugin_manager\n"
        "from dace_ai.errors import PluginError\n"
        "m = get_plugin_manager()\n"
        "print(sorted(m.providers()))\n"
        "try:\n    m.get('providers', 'litellm')\nexcept PluginError as e:\n    print('ERR', e)\n"
    )
    proc = _run([sys.executable, "-c", code], DACE_ai_disable_plugins="litellm")
    assert proc.returncode == 0, proc.stderr
    providers, error = proc.stdout.strip().splitlines()
    assert "'litellm'" not in providers and "'anthropic'" in providers
    assert error.startswith("ERR") and "disabled" in error and "DACE_ai_disable_plugins" in error


def test_loading_plugins_imports_no_sdk():
    code = (
        "import sys\nfrom dace_ai.plugins.manager import get_plugin_manager\n"
        "m = get_plugin_manager(); m.records(); m.providers()\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] in ('anthropic', 'openai', 'litellm')))"
    )
    proc = _run([sys.executable, "-c", code])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_distribution_declares_entry_point_and_dependencies(name):
    dist = metadata.distribution(PROVIDERS[name])
    [ep] = [e for e in dist.entry_points if e.group == "dace_ai"]
    assert (ep.name, ep.value) == (name, f"dace_ai_{name}.plugin")
    requires = " ".join(dist.requires or [])
    assert "dace-ai" in requires and name in requires.replace("dace-ai-", "")
    assert f"-e ./plugins/providers/{name}" in (REPO / "requirements-dev.txt").read_text()
