"""Shared fixtures: every test gets its own build-folder root and a clean dace-ai environment.

The root's content-addressed artefacts (precompiled header, native references, sanitizers' driver, roofline)
are links into one folder of the test run (tests/check_support.py), so each is built once per run; a test
marked ``own_builds`` (a test of those builds) gets none of them and builds its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.host_cpu import HIDE_VARIABLE

#: DACE_ai_* variables that describe the machine the suite runs as, kept for every test:
#: ``DACE_ai_hide_cpu_features=avx512f,avx512bw,avx512dq,avx512vl`` runs it as on an AVX2 machine.
MACHINE_SETTINGS = (HIDE_VARIABLE,)


@pytest.fixture(scope="session")
def shared_artefacts(tmp_path_factory) -> Path:
    """The test run's folder of content-addressed build artefacts, shared by the xdist workers."""
    from tests.check_support import shared_artefacts_folder

    return shared_artefacts_folder(tmp_path_factory.getbasetemp())


@pytest.fixture(autouse=True)
def _isolated_dace_ai(request, tmp_path, monkeypatch, shared_artefacts):
    """Own build root (caches, sessions, checks) whose content-addressed artefacts are the test run's shared
    ones (unless the test is marked ``own_builds``), no DACE_ai_* variables leaking in (but those of
    :data:`MACHINE_SETTINGS`), the ``ai`` provider as it was, and none of the process's caches or once-only
    notices left by an earlier test (``dace_ai.state``)."""
    import dace
    from dace_ai import state

    from tests.check_support import link_shared_artefacts

    state.reset()

    for name in list(os.environ):
        if name.startswith("DACE_ai_") and name not in MACHINE_SETTINGS:
            monkeypatch.delenv(name)
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    previous = dace.Config.get("default_build_folder")
    provider = dace.Config.get("ai", "provider")  # a test that sets it and fails before resetting it leaks no further
    root = tmp_path / ".dacecache"
    if request.node.get_closest_marker("own_builds") is None:
        link_shared_artefacts(root, shared_artefacts)
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


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """On an xdist worker under ``--dist loadgroup``: give each ``xdist_group`` test its group suffix (``@name``)
    where pytest-xdist could not. xdist 3.8 sets ``item._nodeid``, which pytest 9 no longer reads (a node's id
    is ``item._id``), so without this the groups are never formed and their tests spread over the workers."""
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:  # pytest before 9: xdist's own suffix works
        return
    for item in items:
        groups = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
        )
        suffix = "@" + "_".join(groups)
        if groups and not item.nodeid.endswith(suffix):
            item._id = coerce_node_id(item.nodeid + suffix)
