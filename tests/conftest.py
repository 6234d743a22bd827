"""Shared fixtures: every test gets its own build-folder root and a clean dace-ai environment."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _isolated_dace_ai(tmp_path, monkeypatch):
    """Own build root (caches, sessions, checks), no DACE_ai_* variables leaking in, the ``ai``
    provider as it was, and none of the process's caches or once-only notices left by an earlier
    test (``dace_ai.state``)."""
    import dace
    from dace_ai import state

    state.reset()

    for name in list(os.environ):
        if name.startswith("DACE_ai_"):
            monkeypatch.delenv(name)
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    previous = dace.Config.get("default_build_folder")
    provider = dace.Config.get("ai", "provider")  # a test that sets it and fails before resetting it leaks no further
    root = tmp_path / ".dacecache"
    dace.Config.set("default_build_folder", value=str(root))
    monkeypatch.chdir(tmp_path)
    yield root
    dace.Config.set("default_build_folder", value=previous)
    dace.Config.set("ai", "provider", value=provider)


@pytest.fixture
def fake(register_dace_ai_plugin):
    """A scripted provider named ``scripted`` (answers queued with ``fake.queue(...)``)."""
    from dace_ai.testing import FakeProvider

    provider = FakeProvider()
    register_dace_ai_plugin(provider.plugin("scripted"), "scripted-provider")
    return provider
