"""The reserved ``'ai'`` implementation, on every library node class.

DaCe 1.0.2 only expands a node with an implementation registered on its class,
and matches expansions to classes through one attribute per expansion class.
So at ``import dace_ai`` every existing library node class gets its own
``ExpandAI_<class>`` under the name ``'ai'``, and a hook on class creation does
the same for classes defined later (DaCe's own libraries imported lazily, user
libraries). Then all of these work::

    node.implementation = "ai"                         # one node
    dace.libraries.blas.default_implementation = "ai"  # A @ B in a program
    dace_ai.expand(sdfg, state, node)                  # expand one node right now
    node.expand(state, "ai")                           # the same, seed spelling
    node.expand(sdfg, state)                           # DaCe's own spelling

A class that registered its own implementation named ``'ai'`` keeps it.

This is also where DaCe calls into dace-ai, so it is where our errors meet the
user: a :class:`~dace_ai.errors.DaceAIError` (no key, a refused answer, failed
checks) leaves the expansion as one short message, without DaCe's frames and
ours. The full traceback is appended to ``<build root>/ai-sessions/errors.log``
(named in the message) and shown as usual with the ``debug`` setting
(``DACE_ai_debug=1``).
"""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from dace.transformation.transformation import ExpandTransformation

from dace_ai import compat
from dace_ai.errors import DaceAIError
from dace_ai.expansion.charge import CHARGE, IMPLEMENTATION
from dace_ai.expansion.takeover import take_over

if TYPE_CHECKING:
    from types import TracebackType

    from dace_ai.config.settings import AISettings


def _debug() -> bool:
    """The ``debug`` setting; a setting that cannot be resolved counts as off (its own error will say why)."""
    try:
        from dace_ai.expansion.expansion_pass import resolve  # local: import dace_ai stays light

        return bool(resolve(None).debug)
    except Exception:  # noqa: BLE001
        return os.environ.get("DACE_ai_debug", "").strip().lower() in ("1", "true", "yes", "on")


class user_facing_errors:
    """Let a dace-ai error out of DaCe as one short message; keep its full traceback in the session log.

    A class rather than ``contextlib.contextmanager``, which would restore the traceback
    this is here to drop.
    """

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        if not isinstance(exc, DaceAIError) or _debug():
            return False
        if not exc.trace_log:
            from dace_ai.storage.session_store import log_error  # local: import dace_ai stays light

            log = log_error("".join(traceback.format_exception(kind, exc, tb)))
            exc.trace_log = str(log) if log else "-"
            where = f"full traceback in {log}; " if log else ""
            if hasattr(exc, "add_note"):
                exc.add_note(f"({where}set DACE_ai_debug=1 to show it here)")
        raise exc.with_traceback(None) from None


class ExpandAI(ExpandTransformation):
    """Replaces a library node by a tasklet whose code a model wrote (see :mod:`dace_ai.expansion.pipeline`).

    ``apply`` is overridden because the pipeline replaces the node itself: the
    generated tasklet carries its own environments, which DaCe's generic
    ``apply`` would overwrite with the (empty) class-level list.
    """

    environments: list[Any] = []

    @staticmethod
    def expansion(node: Any, parent_state: Any, parent_sdfg: Any, *args: Any, **kwargs: Any) -> Any:
        """The tasklet for ``node`` without placing it (DaCe's expansion interface)."""
        from dace_ai.expansion.pipeline import generate_tasklet  # local: import dace_ai stays light

        with user_facing_errors():
            return generate_tasklet(parent_sdfg, parent_state, node, kwargs.get("settings"))

    def apply(self, state: Any, sdfg: Any, *args: Any, **kwargs: Any) -> None:
        from dace_ai.expansion.pipeline import implement  # local: import dace_ai stays light

        node = state.node(self.subgraph[type(self)._match_node])
        with user_facing_errors():
            implement(sdfg, state, node, kwargs.get("settings"))


def _class_id(node_class: type) -> str:
    return re.sub(r"\W", "_", f"ExpandAI_{node_class.__module__}_{node_class.__qualname__}")


def expansion_for(node_class: type) -> type:
    """The ``'ai'`` expansion class of ``node_class``, created on first use.

    It is stored as an attribute of this module so that DaCe's transformation
    history (saved with the SDFG) can locate it by class path.
    """
    name = _class_id(node_class)
    existing = globals().get(name)
    if existing is not None and getattr(existing, "_match_node", None) is node_class:
        return existing
    cls = compat.make_expansion_class(name, ExpandAI, node_class)
    globals()[name] = cls
    return cls


def add_ai_implementation(node_class: type) -> None:
    """Register ``'ai'`` on ``node_class`` unless the class has its own (non-dace-ai) ``'ai'``."""
    if compat.is_unregistered_library_node(node_class):
        return
    implementations = compat.own_implementations(node_class)
    current = implementations.get(IMPLEMENTATION)
    if current is not None:
        is_ours = isinstance(current, type) and issubclass(current, ExpandAI)
        if not is_ours or getattr(current, "_match_node", None) is node_class:
            return
    compat.register_node_implementation(node_class, IMPLEMENTATION, expansion_for(node_class))


_installed = False


class _ExpansionPass:
    """The expansion pass of :mod:`~dace_ai.expansion.expansion_pass` (imported only when a program is expanded,
    keeping imports cheap); errors leave it without the frames of DaCe's expansion machinery (see
    :class:`user_facing_errors`)."""

    def __enter__(self) -> None:
        from dace_ai.expansion.expansion_pass import expansion_pass  # local: import dace_ai stays light

        self._pass = expansion_pass()
        self._pass.__enter__()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        self._pass.__exit__(kind, exc, tb)
        return user_facing_errors().__exit__(kind, exc, tb)


def _expansion_pass() -> _ExpansionPass:
    return _ExpansionPass()


def install(workflows: Mapping[str, Callable[..., Any]]) -> None:
    """Add 'ai' to every library node class, now and later; enable the seed ``expand`` spelling.

    On DaCe 2, where ``'ai'`` is DaCe's reserved name, it is routed to dace-ai instead
    (or, with ``builtin = "keep"``, dace-ai registers as ``'dace-ai'``), and DaCe's ``build``, ``repair``
    and session functions to ``workflows`` (see :func:`~dace_ai.expansion.takeover.take_over`).
    """
    global _installed
    if _installed:
        return
    if compat.HAS_BUILTIN_AI and CHARGE.dace_ai_in_charge:
        take_over(expansion_for, workflows)
    else:
        compat.on_library_node_class(add_ai_implementation)
    compat.patch_expand_spellings()
    compat.wrap_expand_library_nodes(_expansion_pass)
    _installed = True


def expand(sdfg: Any, state: Any, node: Any, settings: AISettings | dict[str, Any] | None = None) -> Any:
    """Expand one library node now with dace-ai and return the tasklet that replaced it.

    None when no answer passed its checks and ``on_failure=native`` expanded the node
    natively instead (with a :class:`~dace_ai.errors.NativeFallbackWarning`).

    Works for any library node whatever its ``implementation``; ``settings`` is an
    :class:`~dace_ai.config.settings.AISettings` or a dict of overrides (default: resolved
    from the usual sources).
    """
    from dace_ai.expansion.pipeline import implement  # local: import dace_ai stays light

    return implement(sdfg, state, node, settings)
