"""The expansion pass: what one pass over an SDFG collects once and every node of it reuses.

Collecting an SDFG's context (types, schedules and storage inferred on one copy of
the whole SDFG) costs about as much for one node as for all of them, so it is done
once per pass, not once per node: every outermost ``SDFG.expand_library_nodes``
(which ``sdfg.compile()`` runs) and every :func:`~dace_ai.expansion.exchange.generate_prompts`-style
loop runs inside :func:`expansion_pass`, which keeps the collected contexts (and the
settings resolved from the usual sources) until the outermost pass ends. Nested passes
(an expansion that compiles a program, which expands again) reuse the outer one's.
Outside a pass each call collects afresh, so edits between calls are always seen.

The pass belongs to the thread that entered it (a :class:`threading.local`, not a
:class:`contextvars.ContextVar`). The kept contexts hold live SDFGs that this thread
edits as it expands them, in a plain dict without a lock, so no other thread may use
them. Threads started during a pass (a check's background build, the workers of
``dace_ai.generate`` and ``dace_ai.optimize``, which run outside any pass anyway) start
outside it and open their own pass when they expand a program. A ``ContextVar`` would
make that depend on how the thread was started: Python 3.14 can start a thread with a
copy of its starter's context (``-X thread_inherit_context``, on by default in
free-threaded builds), and a pool thread started during a pass would then share the
pass's dict, and keep it after the pass ended, for every later job it runs.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dace_ai import compat
from dace_ai.config.settings import AISettings, resolve_settings
from dace_ai.context.collect import collect_sdfg_context
from dace_ai.context.types import NodeContext
from dace_ai.expansion.pending import pending_nodes

if TYPE_CHECKING:
    from dace_ai.context.collect import SDFGContext


@dataclass
class PassState:
    """What the outermost pass of a thread keeps until it ends."""

    #: ``(id of the root SDFG, id of the settings)`` -> (that root SDFG, its collected context). The SDFG
    #: is kept alive so that its id is not reused by another SDFG during the pass.
    contexts: dict[tuple[int, int], tuple[Any, SDFGContext]] = field(default_factory=dict)
    #: The settings resolved from the usual sources, the first time a node asked for them.
    settings: AISettings | None = None


class _ThreadPass(threading.local):
    """The pass of the current thread: None outside any pass (see the module docstring)."""

    state: PassState | None = None


_current = _ThreadPass()


@contextlib.contextmanager
def expansion_pass() -> Iterator[None]:
    """Keep collected SDFG contexts (and resolved settings) until the outermost pass of this thread ends."""
    if _current.state is not None:  # nested: the outer pass keeps what is collected
        yield
        return
    _current.state = PassState()
    try:
        yield
    finally:
        _current.state = None


def resolve(settings: AISettings | dict[str, Any] | None) -> AISettings:
    """Settings from an object, a dict of overrides, or the usual sources (once per pass)."""
    if isinstance(settings, AISettings):
        return settings
    if settings:
        return resolve_settings(settings)
    state = _current.state
    if state is not None:
        if state.settings is None:
            state.settings = resolve_settings()
        return state.settings
    return resolve_settings()


def node_context(sdfg: Any, state: Any, node: Any, settings: AISettings) -> NodeContext:
    """The node's context, from the SDFG context collected once per pass."""
    kept = _current.state
    root = sdfg
    while root.parent_sdfg is not None:  # one context per SDFG tree (nested SDFGs share it)
        root = root.parent_sdfg
    key = (id(root), id(settings))
    if kept is not None and key in kept.contexts:
        try:
            return kept.contexts[key][1].node_context(state, node)
        except (KeyError, LookupError, ValueError):
            pass  # the SDFG changed under the pass: collect it again below

    for _, nstate, pending in pending_nodes(root):
        compat.name_unnamed_connectors(nstate, pending)
    compat.name_unnamed_connectors(state, node)
    sdfg_ctx = collect_sdfg_context(sdfg, settings)
    if kept is not None:
        kept.contexts[key] = (root, sdfg_ctx)  # keep the SDFG alive so its id is not reused
    return sdfg_ctx.node_context(state, node)
