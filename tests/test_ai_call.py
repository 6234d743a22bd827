"""``dace_ai.ai(...)`` in programs: connector naming, outputs, and clear errors for bad calls.

These tests only parse programs (no compile): the end-to-end runs are in test_expansion.py.
"""

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.errors import AIUsageError

from tests.dace_versions import only_dace1

N = dace.symbol("N")
UNRELATED = np.zeros(3)


def _ai_nodes(sdfg):
    return [(n, p) for n, p in sdfg.all_nodes_recursive() if isinstance(n, dace_ai.AINode)]


def test_connector_names_and_output_allocation():
    @dace.program
    def prog(A: dace.float64[N, 4], B: dace.float64[N]):
        x = dace_ai.ai("Write _out = f(_in0, _b).", A, b=B, name="f")
        y = dace.ai("Write _out = g(_in0).", A, shape=(3,), dtype=dace.int32)
        return x, y

    sdfg = prog.to_sdfg(simplify=False)
    (g, gstate), (f, fstate) = sorted(_ai_nodes(sdfg), key=lambda t: t[0].name)
    assert f.name == "f" and g.name == "ai"
    assert set(f.in_connectors) == {"_in0", "_b"} and set(f.out_connectors) == {"_out"}
    assert f.description == "Write _out = f(_in0, _b)."
    out_f = fstate.out_edges(f)[0].data.data
    assert [str(s) for s in sdfg.arrays[out_f].shape] == ["N", "4"]  # shaped like the first input
    out_g = sdfg.arrays[gstate.out_edges(g)[0].data.data]
    assert [int(s) for s in out_g.shape] == [3] and out_g.dtype == dace.int32


def test_several_outputs_are_numbered():
    @dace.program
    def prog(A: dace.float64[N], C: dace.float64[N], D: dace.float64[N]):
        dace_ai.ai("split", a=A, out=[C, D])

    ((node, _),) = _ai_nodes(prog.to_sdfg())
    assert set(node.out_connectors) == {"_out0", "_out1"}


def _parse_error(func) -> str:
    with pytest.raises(AIUsageError) as info:
        dace.program(func).to_sdfg()
    return str(info.value)


def test_empty_description():
    def prog(A: dace.float64[N]):
        return dace_ai.ai("   ", a=A)

    message = _parse_error(prog)
    assert "description is empty" in message and "test_ai_call.py" in message  # points at the call


def test_container_as_description():
    def prog(A: dace.float64[N]):
        return dace_ai.ai(A)

    assert "description string" in _parse_error(prog)


def test_symbol_and_constant_inputs():
    def with_symbol(A: dace.float64[N]):
        return dace_ai.ai("x", A, n=N)

    def with_constant(A: dace.float64[N]):
        return dace_ai.ai("x", A, 2.5)

    assert "input 'n' is a constant or a symbol" in _parse_error(with_symbol)
    assert "positional input 1 is a constant or a symbol" in _parse_error(with_constant)


def test_unknown_container():
    def prog(A: dace.float64[N]):
        return dace_ai.ai("x", A, b=UNRELATED.shape)

    assert "not a data container of this program" in _parse_error(prog)


def test_shape_with_out_and_missing_inputs():
    def shape_and_out(A: dace.float64[N], B: dace.float64[N]):
        dace_ai.ai("x", A, out=B, shape=(4,))

    def nothing_to_shape_from(B: dace.float64[N]):
        return dace_ai.ai("make something")

    assert "'shape'" in _parse_error(shape_and_out) and "'out'" in _parse_error(shape_and_out)
    assert "no inputs and no 'shape'" in _parse_error(nothing_to_shape_from)


def test_duplicate_name():
    def prog(A: dace.float64[N]):
        x = dace_ai.ai("x", A, name="same")
        y = dace_ai.ai("y", A, name="same")
        return x + y

    assert "already named 'same'" in _parse_error(prog)


@only_dace1("a slice given as 'out' is a writable view, so nothing is lost and nothing is refused")
def test_slice_as_out_inside_map_is_refused():
    def prog(A: dace.float32[16, 16], C: dace.float32[16, 16]):
        for i in dace.map[0:16:8]:
            dace_ai.ai("x", a=A[i : i + 8, :], out=C[i : i + 8, :])

    assert "assign the result instead" in _parse_error(prog)


def test_outside_a_program():
    with pytest.raises(AIUsageError, match="only works inside a @dace.program"):
        dace_ai.ai("x", np.zeros(3))
    assert dace.ai is dace_ai.ai


def test_ainode_constructor_errors():
    with pytest.raises(AIUsageError, match="set or dict"):
        dace_ai.AINode("n", "d", inputs="_a")
    with pytest.raises(AIUsageError, match="both inputs and outputs"):
        dace_ai.AINode("n", "d", inputs={"_a"}, outputs={"_a"})
    node = dace_ai.AINode("n", "", inputs={"_a"}, outputs={"_b"})
    with pytest.raises(AIUsageError, match="no description"):
        node.validate(None, None)
