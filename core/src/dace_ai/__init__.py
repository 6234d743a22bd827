"""dace-ai: language models write the implementations of DaCe library nodes.

``import dace_ai`` registers the ``ai`` config category with DaCe and the user
API; it loads no plugin and imports no provider SDK (plugins load on first use).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from dace_ai import compat as _compat
from dace_ai.errors import (
    AIUsageError,
    AnswerError,
    CheckFailed,
    DaceAIError,
    MissingAnswer,
    PluginError,
    ProviderError,
    SettingsError,
)

__version__ = "0.1.0"

from dace_ai.config.definitions import SETTINGS as _SETTINGS  # noqa: E402

_compat.register_ai_config(_SETTINGS)

#: Public names provided by submodules, imported on first access.
_LAZY: dict[str, str] = {
    "get_plugin_manager": "dace_ai.plugins.manager",
    "PluginManager": "dace_ai.plugins.manager",
    "Answer": "dace_ai.prompt.answer",
    "parse_answer": "dace_ai.prompt.answer",
    "AISettings": "dace_ai.config.settings",
    "resolve_settings": "dace_ai.config.settings",
    "generate_prompts": "dace_ai.expansion.exchange",
    "read_prompt_responses": "dace_ai.expansion.exchange",
    "generate_prompt": "dace_ai.expansion.exchange",
    "read_prompt_response": "dace_ai.expansion.exchange",
    "pending_nodes": "dace_ai.expansion.pending",
    "implement": "dace_ai.expansion.pipeline",
    "runtime_checks": "dace_ai.runtime_check.hook",
    "generate": "dace_ai.workflows.generate",
    "optimize": "dace_ai.workflows.optimize",
    "OptimizeReport": "dace_ai.workflows.optimize_report",
    "list_sessions": "dace_ai.storage.session_store",
    "collect_sdfg_context": "dace_ai.context.collect",
    "render_prompt": "dace_ai.prompt.render",
    "build": "dace_ai.workflows.build",
    "repair": "dace_ai.workflows.build",
    "sessions": "dace_ai.workflows.sessions",
    "show": "dace_ai.workflows.sessions",
    "history": "dace_ai.workflows.sessions",
    "refine": "dace_ai.workflows.sessions",
    "rollback": "dace_ai.workflows.sessions",
    "pin": "dace_ai.workflows.sessions",
    "unpin": "dace_ai.workflows.sessions",
    "is_pinned": "dace_ai.solving.provenance",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dace_ai' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


# The user API of the expansion path: dace_ai.ai / dace.ai in programs, AINode, the reserved
# 'ai' implementation on every library node class (now and later), generated environments.
from dace_ai.expansion import install as _install  # noqa: E402
from dace_ai.expansion.ainode import AINode  # noqa: E402
from dace_ai.expansion.frontend import ai  # noqa: E402
from dace_ai.expansion.implementation import expand  # noqa: E402


def _stand_in(name: str) -> Any:
    """A function calling ``dace_ai.<name>`` (imported on first call), named after the module that defines it."""

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        return __getattr__(name)(*args, **kwargs)

    stand_in.__name__ = stand_in.__qualname__ = name
    stand_in.__module__ = _LAZY[name]
    stand_in.__doc__ = (
        f"dace-ai's :func:`{_LAZY[name]}.{name}` (standing in for DaCe's own; see dace_ai.expansion.takeover)."
    )
    return stand_in


#: DaCe 2's AI library functions that dace-ai's workflows stand in for (see :mod:`dace_ai.expansion.takeover`).
_WORKFLOWS = ("build", "repair", "sessions", "show", "history", "refine", "rollback", "pin", "unpin")
_install.install({name: _stand_in(name) for name in _WORKFLOWS})

__all__ = [
    "AINode",
    "ai",
    "expand",
    "AIUsageError",
    "AnswerError",
    "CheckFailed",
    "DaceAIError",
    "MissingAnswer",
    "PluginError",
    "ProviderError",
    "SettingsError",
    *_LAZY,
]
