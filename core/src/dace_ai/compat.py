"""Everything specific to the DaCe version in one place (DaCe 1.0.2 today).

Other modules call these functions instead of reaching into DaCe internals, so
support for another DaCe version means changing this module only.
"""

from __future__ import annotations

from typing import Any

import dace
from dace.config import Config

DACE_VERSION = dace.__version__

#: DaCe config schema types for our settings.
_SCHEMA_TYPES = {bool: "bool", int: "int", float: "float", str: "str"}


def _schema_entry(key: str, info: Any) -> dict[str, Any]:
    default = info.default
    annotation = info.annotation
    kind = "str"
    for py_type, name in _SCHEMA_TYPES.items():
        if annotation is py_type:
            kind = name
    if default is None or isinstance(default, tuple):
        default = ""
    return {"type": kind, "default": default, "title": key, "description": info.description or key}


def register_ai_config() -> None:
    """Register the ``ai`` category in DaCe's config schema so ``dace.Config.get('ai', key)`` works."""
    from .settings import AISettings

    required = Config._config_metadata.setdefault("required", {})
    if "ai" not in required:
        required["ai"] = {
            "type": "dict",
            "title": "AI implementations (dace-ai)",
            "description": "Settings of dace-ai; see `dace-ai config`.",
            "required": {key: _schema_entry(key, info) for key, info in AISettings.model_fields.items()},
        }
    current = Config._config.setdefault("ai", {})
    for key, entry in required["ai"]["required"].items():
        current.setdefault(key, entry["default"])


def dace_config_overrides() -> dict[str, Any]:
    """Values of the ``ai`` category that differ from the registered defaults.

    Read directly (not via ``Config.get``) because DaCe's getter would also return
    ``DACE_ai_*`` environment variables, which are a separate, higher source.
    """
    register_ai_config()
    schema = Config._config_metadata["required"]["ai"]["required"]
    current = Config._config.get("ai", {})
    return {k: v for k, v in current.items() if k in schema and v != schema[k]["default"]}


def build_folder_root() -> str:
    """DaCe's build-folder root (``.dacecache`` by default)."""
    return Config.get("default_build_folder")
