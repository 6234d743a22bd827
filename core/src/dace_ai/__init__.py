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
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dace_ai' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
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
