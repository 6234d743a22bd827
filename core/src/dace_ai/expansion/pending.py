"""Which library nodes the 'ai' expansion implements, and revealing those that other expansions create.

A node is pending when it would expand with 'ai' (its resolved implementation, nested
SDFGs included). Some are not there yet: ``A @ B`` is a ``MatMul``, implemented natively,
whose expansion creates the ``Gemm`` that 'ai' implements. ``dace_ai.generate``,
``dace_ai.optimize`` and the manual exchange expand such nodes first, so that they see
every node the compile would ask for.
"""

from __future__ import annotations

from typing import Any

from dace_ai import compat
from dace_ai.expansion.charge import IMPLEMENTATION


def pending_nodes(sdfg: Any) -> list[tuple[Any, Any, Any]]:
    """``(sdfg, state, node)`` for every library node that would expand with 'ai' (nested SDFGs included)."""
    from dace.sdfg import nodes

    found = []
    for node, parent in sdfg.all_nodes_recursive():
        if isinstance(node, nodes.LibraryNode) and compat.resolved_implementation(node) == IMPLEMENTATION:
            found.append((parent.sdfg, parent, node))
    return found


def expand_other_nodes(sdfg: Any) -> int:
    """Expand every library node whose implementation is not 'ai', until none is left; return how many.

    Compiling does this anyway; doing it first reveals the nodes such expansions
    create (``A @ B`` is a ``MatMul`` that becomes a ``Gemm``, which 'ai' implements).
    """
    from dace.sdfg import nodes

    count = 0
    while True:
        others = [
            (parent, node)
            for node, parent in sdfg.all_nodes_recursive()
            if isinstance(node, nodes.LibraryNode) and compat.resolved_implementation(node) != IMPLEMENTATION
        ]
        if not others:
            return count
        for state, node in others:
            node.expand(state.sdfg, state)
            count += 1


def expand_nodes_leading_to_ai(sdfg: Any) -> int:
    """Expand the library nodes whose expansion creates 'ai' nodes, until none is left; return how many.

    ``A @ B`` with ``dace.libraries.blas.default_implementation = 'ai'`` is a ``MatMul``
    (implemented natively) that expands to a ``Gemm``, which 'ai' implements: without
    this, :func:`dace_ai.generate` and :func:`dace_ai.optimize` would find no node and the
    request would happen later inside ``compile()``. Each candidate is tried on a copy of
    the SDFG first, so nodes that lead to no 'ai' node stay as they are.
    """
    count = 0
    while True:
        for node, parent in _other_library_nodes(sdfg):
            if _leads_to_ai(sdfg, node):
                node.expand(parent.sdfg, parent)
                count += 1
                break
        else:
            return count


def _other_library_nodes(sdfg: Any) -> list[tuple[Any, Any]]:
    from dace.sdfg import nodes

    return [
        (node, parent)
        for node, parent in sdfg.all_nodes_recursive()
        if isinstance(node, nodes.LibraryNode) and compat.resolved_implementation(node) != IMPLEMENTATION
    ]


def _leads_to_ai(sdfg: Any, node: Any) -> bool:
    """Expand ``node`` on a copy of ``sdfg`` (and what it creates): does an 'ai' node appear?"""
    import copy

    trial = copy.deepcopy(sdfg)
    before = {n.guid for n, _ in trial.all_nodes_recursive()}
    found = [(n, p) for n, p in _other_library_nodes(trial) if n.guid == node.guid]
    if not found:
        return False
    try:
        found[0][0].expand(found[0][1].sdfg, found[0][1])
        for _ in range(16):  # nested expansions (a node that expands to another library node)
            created = [(n, p) for n, p in _other_library_nodes(trial) if n.guid not in before]
            if not created:
                break
            for n, p in created:
                n.expand(p.sdfg, p)
    except Exception:  # noqa: BLE001 - a node that cannot expand here is left to the compiler
        return False
    return any(n.guid not in before for _, _, n in pending_nodes(trial))
