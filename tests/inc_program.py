"""The small AI-node program several tests expand (``B[i] = A[i] + 1`` over 8 elements) and its answers."""

from __future__ import annotations

import dace
import dace_ai

GOOD = {"code": "for (int i = 0; i < 8; ++i) _out[i] = _a[i] + 1.0;"}
BROKEN = {"code": "for (int i = 0; i < 8; ++i) _out[i] = _a[i] + undefined_thing;"}


def inc_sdfg(name: str) -> tuple[dace.SDFG, dace.SDFGState, dace_ai.AINode]:
    """A fresh program ``name`` holding one AINode ``inc`` (a new node guid, so a new session)."""
    sdfg = dace.SDFG(name)
    sdfg.add_array("A", [8], dace.float64)
    sdfg.add_array("B", [8], dace.float64)
    state = sdfg.add_state()
    node = dace_ai.AINode("inc", "Write _out[i] = _a[i] + 1.", inputs={"_a"}, outputs={"_out"})
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet("A[0:8]"))
    state.add_edge(node, "_out", state.add_write("B"), None, dace.Memlet("B[0:8]"))
    return sdfg, state, node
