"""SDFGs for the context and prompt tests: real graphs, built by hand, that place a library node.

No expansion or compilation is needed to collect a node's context, so a tiny
library node class without implementations is enough to hold connectors.
"""

from __future__ import annotations

from typing import ClassVar

import dace
import dace.library
from dace.sdfg import nodes as nd

from tests.dace_versions import add_nested_sdfg


@dace.library.node
class Probe(nd.LibraryNode):
    """Scale every element of `_a` by two into `_b` (a node that only exists to hold connectors)."""

    implementations: ClassVar[dict] = {}
    default_implementation = None
    factor = dace.properties.Property(dtype=int, default=2, desc="Scale factor")

    def __init__(self, name: str, inputs=(), outputs=()):
        super().__init__(name, inputs=set(inputs), outputs=set(outputs))


def strided_sdfg(rows=20, cols=5) -> tuple[dace.SDFG, dace.SDFGState, Probe]:
    """``A[2:10:2, 1:5]`` of a rows x cols array into a node; its scalar output goes to ``B[3]``."""
    sdfg = dace.SDFG("strided")
    sdfg.add_array("A", [rows, cols], dace.float64)
    sdfg.add_array("B", [10], dace.float64)
    state = sdfg.add_state("compute")
    probe = Probe("probe", ["_a"], ["_b"])
    state.add_node(probe)
    state.add_edge(state.add_read("A"), None, probe, "_a", dace.Memlet("A[2:10:2, 1:5]"))
    state.add_edge(probe, "_b", state.add_write("B"), None, dace.Memlet("B[3]"))
    return sdfg, state, probe


def map_nest_sdfg(outer_schedule=dace.ScheduleType.Default, storage=dace.StorageType.Default):
    """An outer map over i and an inner map over j around a node reading ``A[i, :]`` and host ``H``."""
    N = dace.symbol("N")
    sdfg = dace.SDFG("nest")
    sdfg.add_array("A", [N, 8], dace.float64, storage=storage)
    sdfg.add_array("H", [8], dace.float64)
    sdfg.add_array("B", [N, 8], dace.float64, storage=storage)
    state = sdfg.add_state("body")
    me, mx = state.add_map("outer", {"i": "0:N"}, schedule=outer_schedule)
    ie, ix = state.add_map("inner", {"j": "0:8"})
    probe = Probe("probe", ["_a", "_h"], ["_b"])
    a, h, b = state.add_read("A"), state.add_read("H"), state.add_write("B")
    state.add_memlet_path(a, me, ie, probe, dst_conn="_a", memlet=dace.Memlet("A[i, 0:8]"))
    state.add_memlet_path(h, me, ie, probe, dst_conn="_h", memlet=dace.Memlet("H[0:8]"))
    state.add_memlet_path(probe, ix, mx, b, src_conn="_b", memlet=dace.Memlet("B[i, j]"))
    return sdfg, state, probe, (me, ie)


def nested_sdfg():
    """A map over i around a nested SDFG whose only state holds the node (on a row of ``A``)."""
    N = dace.symbol("N")
    inner = dace.SDFG("inner")
    inner.add_array("row", [8], dace.float64)
    inner.add_array("out", [8], dace.float64)
    inner_state = inner.add_state("inner_body")
    probe = Probe("probe", ["_a"], ["_b"])
    inner_state.add_node(probe)
    inner_state.add_edge(inner_state.add_read("row"), None, probe, "_a", dace.Memlet("row[0:8]"))
    inner_state.add_edge(probe, "_b", inner_state.add_write("out"), None, dace.Memlet("out[0:8]"))

    outer = dace.SDFG("outer")
    outer.add_array("A", [N, 8], dace.float64)
    outer.add_array("B", [N, 8], dace.float64)
    state = outer.add_state("outer_body")
    me, mx = state.add_map("rows", {"i": "0:N"})
    nsdfg = add_nested_sdfg(state, inner, outer, {"row"}, {"out"})
    state.add_memlet_path(state.add_read("A"), me, nsdfg, dst_conn="row", memlet=dace.Memlet("A[i, 0:8]"))
    state.add_memlet_path(nsdfg, mx, state.add_write("B"), src_conn="out", memlet=dace.Memlet("B[i, 0:8]"))
    return outer, inner_state, probe
