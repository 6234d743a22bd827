"""The ``ai`` category of DaCe's configuration: registering its keys, adopting dace-ai's defaults, reading what
was set, and DaCe settings a check needs changed for a while.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from dace.config import Config

from dace_ai.compat.versions import version


def register_ai_config(definitions: Any) -> None:
    """Register keys of the ``ai`` category in DaCe's config schema so ``dace.Config.get('ai', key)`` works.

    ``definitions`` are settings definitions (objects with ``key``, ``dace_type``,
    ``default``, ``description``). Called again with more definitions (plugin-owned
    settings, once plugins load) it adds the new keys and keeps the existing ones and
    any value already set (from ``.dace.conf`` or ``Config.set``).
    """
    metadata, values = version.config_store()
    required = metadata.setdefault("required", {})
    category = required.setdefault(
        "ai",
        {
            "type": "dict",
            "title": "AI implementations (dace-ai)",
            "description": "Settings of dace-ai; see `dace-ai config`.",
            "required": {},
        },
    )
    for d in definitions:
        category["required"].setdefault(
            d.key,
            {
                "type": d.dace_type,
                "default": "" if d.default is None else d.default,
                "title": d.key,
                "description": d.description,
            },
        )
    current = values.setdefault("ai", {})
    for key, entry in category["required"].items():
        current.setdefault(key, entry["default"])


def adopt_ai_defaults(definitions: Any) -> None:
    """Make dace-ai's defaults those of ``ai`` keys DaCe defines too (DaCe 2, when dace-ai implements them).

    Only values still at DaCe's default change, so one set in ``.dace.conf``, a
    ``DACE_ai_*`` variable or ``Config.set`` keeps its meaning; afterwards setting a key to
    what DaCe's default was (``provider = "anthropic"``) counts as a choice.
    """
    metadata, values = version.config_store()
    entries = metadata.get("required", {}).get("ai", {}).get("required", {})
    current = values.setdefault("ai", {})
    for d in definitions:
        entry = entries.get(d.key)
        if entry is None:
            continue
        default = "" if d.default is None else d.default
        if current.get(d.key) == entry.get("default"):
            current[d.key] = default
        entry["default"] = default


def dace_config_overrides() -> dict[str, Any]:
    """Values of the ``ai`` category that differ from the registered defaults.

    Read directly (not via ``Config.get``) because DaCe's getter would also return
    ``DACE_ai_*`` environment variables, which are a separate, higher source.
    """
    metadata, values = version.config_store()
    category = metadata.get("required", {}).get("ai")
    if category is None:  # registered by ``import dace_ai``; nothing can be set before that
        return {}
    schema = category["required"]
    current = values.get("ai", {})
    return {k: v for k, v in current.items() if k in schema and v != schema[k]["default"]}


def build_folder_root() -> str:
    """DaCe's build-folder root (``.dacecache`` by default)."""
    return Config.get("default_build_folder")


class debugprint_off:
    """Turn ``debugprint`` off for a block and restore it after.

    With ``debugprint`` on, DaCe 1.0.2 raises ``CompilationError('Compiler failure')``
    without the compiler's output, so diagnostics cannot be parsed.
    """

    def __enter__(self) -> "debugprint_off":
        # ``Config.get`` reads ``DACE_debugprint`` before the stored value, so both must go.
        self._env = os.environ.pop("DACE_debugprint", None)
        self._previous = version.config_store()[1].get("debugprint")
        Config.set("debugprint", value=False)
        return self

    def __exit__(self, *exc: object) -> None:
        Config.set("debugprint", value=self._previous)
        if self._env is not None:
            os.environ["DACE_debugprint"] = self._env


class gpu_backend:
    """DaCe's GPU backend (``compiler.cuda.backend``) set to ``backend`` for a block, restored after.

    ``cuda`` leaves DaCe's setting as it is. The setting is global and read both by the
    code generation and by the CMake configuration, so blocks with another backend run
    one at a time.
    """

    _lock = threading.Lock()

    def __init__(self, backend: str) -> None:
        self.backend = backend

    def __enter__(self) -> "gpu_backend":
        if self.backend == "cuda":
            return self
        self._lock.acquire()
        # ``Config.get`` reads ``DACE_compiler_cuda_backend`` before the stored value, so both must go.
        self._env = os.environ.pop("DACE_compiler_cuda_backend", None)
        self._previous = Config.get("compiler", "cuda", "backend")
        Config.set("compiler", "cuda", "backend", value=self.backend)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.backend == "cuda":
            return
        Config.set("compiler", "cuda", "backend", value=self._previous)
        if self._env is not None:
            os.environ["DACE_compiler_cuda_backend"] = self._env
        self._lock.release()
