"""The pytest plugin of dace-ai (entry point ``pytest11``: ``dace_ai``), loaded in every pytest session.

It lives outside the ``dace_ai`` package on purpose: importing anything under
``dace_ai`` runs ``dace_ai/__init__.py``, which imports DaCe and installs the
``ai`` expansion. A project that merely has dace-ai installed must not pay for
that, nor see DaCe patched, in its own test sessions. So this module imports
only pytest; dace-ai is imported inside the fixtures, when a test asks for one.

Fixtures:

* ``dace_ai_plugin_manager``: a fresh plugin manager (entry points loaded) installed as
  the process-wide one for the duration of a test;
* ``register_dace_ai_plugin``: ``register_dace_ai_plugin(obj, name=...)`` registers a plugin
  object (a module or any object with ``@hookimpl`` functions) for one test only.

The contract checks and the scripted :class:`~dace_ai.testing.FakeProvider` are in
:mod:`dace_ai.testing`, imported explicitly by tests that use them.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def dace_ai_plugin_manager():
    """A fresh, loaded plugin manager installed as the process-wide one for this test."""
    from dace_ai.plugins.manager import PluginManager, set_plugin_manager

    manager = PluginManager()
    manager.load()
    previous = set_plugin_manager(manager)
    try:
        yield manager
    finally:
        set_plugin_manager(previous)


@pytest.fixture
def register_dace_ai_plugin():
    """Register plugin objects on the process-wide manager for one test, then remove them."""
    from dace_ai.plugins.manager import get_plugin_manager

    names: list[str] = []
    manager = get_plugin_manager()

    def register(plugin: Any, name: str | None = None) -> Any:
        plugin_name = name or f"test-plugin-{len(names)}"
        manager.register(plugin, plugin_name)
        names.append(plugin_name)
        return plugin

    yield register
    for plugin_name in names:
        manager.unregister(plugin_name)
