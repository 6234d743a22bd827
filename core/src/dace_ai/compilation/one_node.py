"""A program holding one node, wired like a node of the user's program.

The faithful check builds it around the candidate tasklet, the verify stage around
the node's native expansion (its reference), the bench stage around both: the same
symbols (typed as in the user's program), the connectors' data and memlets.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from dace_ai.compat import element_types
from dace_ai.context.types import ConnectorInfo, NodeContext, ScopeInfo


def connector_memlet(conn: ConnectorInfo, live: dict[str, Any]) -> Any:
    """The memlet of ``conn`` in the user's program (a copy), or one made from the connector's subset."""
    import dace

    state, node = live.get("state"), live.get("node")
    if state is not None and node is not None:
        edges = (
            state.in_edges_by_connector(node, conn.name)
            if conn.direction == "in"
            else state.out_edges_by_connector(node, conn.name)
        )
        for edge in edges:
            return copy.deepcopy(edge.data)
    return dace.Memlet(data=conn.container, subset=conn.subset, wcr=conn.wcr)


def one_node_program(
    name: str,
    node_ctx: NodeContext,
    place: Callable[[Any], Any],
    descriptor: Callable[[ConnectorInfo], Any],
    maps: Sequence[ScopeInfo] = (),
) -> Any:
    """An SDFG ``name`` whose one state holds the node ``place(state)`` adds, wired to its connectors' data.

    ``descriptor(conn)`` gives the data descriptor of each connector's container;
    ``maps`` (outermost first) are map scopes put around the node with their
    parameters, ranges and schedules (a GPU kernel's maps, so the node is device code).
    """
    import dace

    live = node_ctx.live or {}
    live_sdfg = live.get("sdfg")
    sdfg = dace.SDFG(name)
    types = element_types()
    for sym, ctype in node_ctx.symbols.items():
        if live_sdfg is not None and sym in live_sdfg.symbols:
            sdfg.add_symbol(sym, live_sdfg.symbols[sym])
        else:
            sdfg.add_symbol(sym, types.get(ctype.strip(), dace.int64))
    state = sdfg.add_state("main")
    node = place(state)
    entries, exits = [], []
    for scope in maps:
        ranges = {p: r for p, r in zip(scope.params, scope.ranges)}
        entry, exit_ = state.add_map(scope.label or "map", ranges, schedule=getattr(dace.ScheduleType, scope.schedule))
        entries.append(entry)
        exits.append(exit_)
    for conn in node_ctx.connectors:
        if conn.container not in sdfg.arrays:
            sdfg.add_datadesc(conn.container, descriptor(conn))
        memlet = connector_memlet(conn, live)
        if conn.direction == "in":
            state.add_memlet_path(state.add_read(conn.container), *entries, node, dst_conn=conn.name, memlet=memlet)
        else:
            path = [node, *reversed(exits), state.add_write(conn.container)]
            state.add_memlet_path(*path, src_conn=conn.name, memlet=memlet)
    inner = [*entries[1:], node]
    for entry, target in zip(entries, inner):  # a map with nothing through it still needs its scope edges
        if not state.out_edges(entry):
            state.add_nedge(entry, target, dace.Memlet())
    for exit_, source in zip(exits, [*exits[1:], node]):
        if not state.in_edges(exit_):
            state.add_nedge(source, exit_, dace.Memlet())
    for sym in sorted(map(str, sdfg.free_symbols - set(sdfg.symbols))):
        sdfg.add_symbol(sym, dace.int64)  # enclosing map parameters seen by the memlets
    return sdfg
