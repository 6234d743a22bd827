"""dace-ai: language models write the implementations of DaCe library nodes.

``import dace_ai`` registers the ``ai`` config category with DaCe and the user
API; it loads no plugin and imports no provider SDK (plugins load on first use).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from . import compat as _compat
from .errors import (
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

_compat.register_ai_config()

#: Public names provided by submodules, imported on first access.
_LAZY: dict[str, str] = {
    "get_plugin_manager": "dace_ai.manager",
    "PluginManager": "dace_ai.manager",
    "Answer": "dace_ai.answer",
    "parse_answer": "dace_ai.answer",
    "AISettings": "dace_ai.settings",
    "resolve_settings": "dace_ai.settings",
    "generate_prompts": "dace_ai.manual",
    "read_prompt_responses": "dace_ai.manual",
    "generate_prompt": "dace_ai.manual",
    "read_prompt_response": "dace_ai.manual",
    "pending_nodes": "dace_ai.pipeline",
    "implement": "dace_ai.pipeline",
    "generate": "dace_ai.generation",
    "list_sessions": "dace_ai.sessions",
    "collect_sdfg_context": "dace_ai.context",
    "render_prompt": "dace_ai.prompt",
    "build": "dace_ai.building",
    "repair": "dace_ai.building",
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
from . import _install  # noqa: E402
from .ainode import AINode  # noqa: E402
from .expansion import expand  # noqa: E402
from .frontend import ai  # noqa: E402

_install.install()

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
