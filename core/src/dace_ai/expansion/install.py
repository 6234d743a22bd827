"""What ``import dace_ai`` sets up in DaCe: the frontend call, the 'ai' implementation,
per-node manual-exchange methods, and the environments stored (as data) by earlier runs."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dace_ai import compat
from dace_ai.expansion import frontend
from dace_ai.expansion import implementation as expansion

if TYPE_CHECKING:
    from dace_ai.config.settings import AISettings

_done = False


def _generate_prompt(self: Any, state: Any, settings: AISettings | dict[str, Any] | None = None) -> str:
    """The dace-ai prompt document for this node (see :func:`dace_ai.expansion.exchange.generate_prompt`)."""
    from dace_ai.expansion.exchange import generate_prompt  # local: import dace_ai stays light

    return generate_prompt(self, state, settings)


def _read_prompt_response(
    self: Any, state: Any, reply: Any, settings: AISettings | dict[str, Any] | None = None
) -> Any:
    """Expand this node now with an answer (see :func:`dace_ai.expansion.exchange.read_prompt_response`)."""
    from dace_ai.expansion.exchange import read_prompt_response  # local: import dace_ai stays light

    return read_prompt_response(self, state, reply, settings)


def install(workflows: Mapping[str, Callable[..., Any]]) -> None:
    """Set up DaCe for dace-ai (once); ``workflows``: see :func:`~dace_ai.expansion.takeover.take_over`."""
    global _done
    if _done:
        return

    frontend.install()
    expansion.install(workflows)
    # DaCe 2's own AINode shares the class name: saved SDFGs keep each kind of node what it was.
    if compat.builtin_node_class() is not None:
        compat.serialize_by_class_path("AINode")
    compat.add_library_node_methods(generate_prompt=_generate_prompt, read_prompt_response=_read_prompt_response)
    try:
        from pathlib import Path

        # Only pay for importing the loader when earlier runs left environments behind.
        if any((Path(compat.build_folder_root()) / "ai-environments").glob("*.json")):
            from dace_ai.environments.generated import load_generated  # local: import dace_ai stays light

            load_generated()
    except Exception as exc:  # noqa: BLE001 - never let a stray file break the import
        warnings.warn(f"dace-ai: stored environments were not loaded: {exc}", stacklevel=2)
    _done = True
