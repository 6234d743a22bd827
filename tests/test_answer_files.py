"""Damaged answer files give a clear error naming the problem and change nothing."""

import json

import dace
import dace_ai
import pytest
from dace_ai.errors import AnswerError
from dace_ai.expansion.pending import pending_nodes

DAMAGE = {
    "not JSON": ("this is not json {", "not JSON"),
    "missing code": (json.dumps({"notes": "forgot the code"}), "field 'code': missing"),
    "wrong type": (json.dumps({"code": "_out = 1;", "side_effects": "sometimes"}), "field 'side_effects'"),
    "unknown field": (json.dumps({"code": "_out = 1;", "kode": "x"}), "field 'kode': unknown field"),
    "empty code": (json.dumps({"code": "  \n"}), "field 'code'"),
}


def _sdfg():
    sdfg = dace.SDFG("damaged")
    sdfg.add_array("A", [4], dace.float64)
    sdfg.add_array("B", [4], dace.float64)
    state = sdfg.add_state()
    node = dace_ai.AINode("copy4", "Copy _a to _out.", inputs={"_a"}, outputs={"_out"})
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet("A[0:4]"))
    state.add_edge(node, "_out", state.add_write("B"), None, dace.Memlet("B[0:4]"))
    return sdfg


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_response_file(damage, tmp_path, _isolated_dace_ai):
    text, expected = DAMAGE[damage]
    sdfg = _sdfg()
    folder = tmp_path / "prompts"
    (files,) = dace_ai.generate_prompts(sdfg, folder)
    files.response.write_text(text)
    before = json.dumps(sdfg.to_json(), sort_keys=True)

    with pytest.raises(AnswerError) as info:
        dace_ai.read_prompt_responses(sdfg, folder)
    message = str(info.value)
    assert expected in message and "copy4" in message

    assert json.dumps(sdfg.to_json(), sort_keys=True) == before
    assert len(pending_nodes(sdfg)) == 1
    cache = _isolated_dace_ai / "ai-cache"
    assert not cache.exists() or not any(p.is_file() for p in cache.rglob("*"))

    # The same damage handed to one node directly is refused the same way.
    ((_, state, node),) = pending_nodes(sdfg)
    with pytest.raises(AnswerError, match="copy4"):
        node.read_prompt_response(state, text)
    assert node in state.nodes()
