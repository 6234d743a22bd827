"""What happens when no answer passes its checks: expand the node natively, or raise.

``on_failure=native`` (the default for nodes that have a native implementation:
every standard DaCe library node) expands the node with DaCe's own
implementation and warns, naming the node and its session, so the program still
runs correctly. ``on_failure=error`` (and the default for nodes without one,
such as ``AINode``) raises the short :class:`~dace_ai.errors.CheckFailed`.
"""

from __future__ import annotations

import warnings
from typing import Any

from dace_ai import compat
from dace_ai.checking.verdict import falls_back_natively
from dace_ai.config.settings import AISettings
from dace_ai.errors import CheckFailed, NativeFallbackWarning
from dace_ai.expansion.charge import IMPLEMENTATION
from dace_ai.storage.session_store import Session


def fallback_implementation(node: Any) -> str | None:
    """The native implementation ``node`` falls back to, or None when it has none (``AINode``)."""
    return compat.native_implementation(node, IMPLEMENTATION)


def expand_natively_or_raise(sdfg: Any, state: Any, node: Any, settings: AISettings, error: CheckFailed) -> str:
    """Expand ``node`` natively after ``error`` when ``on_failure`` allows it; re-raise ``error`` otherwise.

    Returns the implementation used.
    """
    native = fallback_implementation(node)
    if native is None or not falls_back_natively(settings.on_failure, has_native=True):
        if settings.on_failure == "native" and native is None:
            raise CheckFailed(
                f"{error} (on_failure=native, but {type(node).__name__} {node.name!r} has no native "
                "implementation to fall back to)",
                node=error.node,
                session=error.session,
            ) from None
        raise error
    compat.expand_with(sdfg, state, node, native)
    if error.session:
        from pathlib import Path

        Session(Path(error.session)).record_fallback(native, str(error).splitlines()[0])
    warnings.warn(
        f"dace-ai: node {node.name!r} ({type(node).__name__}) in SDFG {sdfg.name!r}: no answer passed its "
        f"checks, so it was expanded natively with implementation {native!r} "
        f"(session: {error.session or 'none'}). Set on_failure=error to stop instead. "
        f"Reason: {str(error).splitlines()[0]}",
        NativeFallbackWarning,
        stacklevel=4,
    )
    return native
