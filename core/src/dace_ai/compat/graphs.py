"""Editing and reading an SDFG's graph: putting one node in another's place, node order, what a view looks into,
and which node a code marker names.
"""

from __future__ import annotations

from typing import Any


def replace_node(state: Any, old: Any, new: Any) -> None:
    """Put ``new`` where ``old`` is: same edges (connectors kept), then remove ``old``."""
    from dace.sdfg import utils as sdutil

    state.add_node(new)
    sdutil.change_edge_dest(state, old, new)
    sdutil.change_edge_src(state, old, new)
    state.remove_node(old)


def restore_node_order(state: Any, order: list[Any]) -> None:
    """Put the nodes of ``state`` back in ``order`` (nodes not in it last): DaCe numbers nodes by position,
    and node ids name sessions, so a node put back after a failed run keeps its id."""
    nodes = state._nodes  # an OrderedDict in DaCe's ordered graphs
    listed = {id(n) for n in order}
    for node in [n for n in order if n in nodes] + [n for n in list(nodes) if id(n) not in listed]:
        nodes.move_to_end(node)


def node_at_marker(sdfg: Any, cfg_id: int, state_id: int, node_id: int) -> tuple[Any, Any] | None:
    """(state, node) that a ``////__DACE:cfg:state:node`` marker names, or None."""
    try:
        state = sdfg.cfg_list[cfg_id].node(state_id)
        return state, state.node(node_id)
    except (IndexError, KeyError, AttributeError, TypeError):
        return None


def viewed_subsets(sdfg: Any, state: Any, container: str, depth: int = 8) -> list[tuple[str, str, tuple[Any, ...]]]:
    """What a view container looks into, following chains of views: (viewed container, subset, its shape).

    A frontend slice ``A[:, 0:K]`` becomes a view ``A_0`` (shape ``M x K``, strides
    of ``A``) fed by the memlet ``A[0:M, 0:K]``; the subset must fit ``A``'s own
    shape at the sizes a check runs, which the view's shape alone does not say.
    Empty for a container that is not a view.
    """
    from dace import data
    from dace.sdfg import utils as sdutil

    view_edge = getattr(sdutil, "get_view_edge", None)
    found: list[tuple[str, str, tuple[Any, ...]]] = []
    if view_edge is None:
        return found
    seen = {container}
    for _ in range(depth):
        if not isinstance(sdfg.arrays.get(container), data.View):
            break
        edge = next(
            (e for n in state.data_nodes() if n.data == container for e in [view_edge(state, n)] if e is not None), None
        )
        if edge is None or edge.data.data is None:
            break
        memlet = edge.data
        viewed = memlet.data if memlet.data != container else None
        subset = memlet.subset if viewed is not None else None
        if viewed is None:  # the memlet is written from the view's side: the other subset is the viewed one
            other = edge.src if edge.dst.data == container else edge.dst
            viewed, subset = other.data, memlet.other_subset
        if viewed in seen or viewed not in sdfg.arrays or subset is None:
            break
        seen.add(viewed)
        found.append((viewed, str(subset), tuple(sdfg.arrays[viewed].shape)))
        container = viewed
    return found
