"""The manual exchange: prompt files, response files, MissingAnswer during a compile."""

import json

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.errors import MissingAnswer
from dace_ai.expansion.expansion_pass import node_context, resolve
from dace_ai.expansion.pending import pending_nodes
from dace_ai.providers.manual import PROMPT_SUFFIX, RESPONSE_SUFFIX, prompt_hash
from dace_ai.solving.requests import build_request

N = dace.symbol("N")


@dace.program
def inner(X: dace.float64[N], Y: dace.float64[N]):
    dace_ai.ai("Write _out[i] = _a[i] + 1 for i < N.", a=X, out=Y, name="plus_one")


@dace.program
def two_nodes(A: dace.float64[N], B: dace.float64[N], C: dace.float64[N]):
    dace_ai.ai("Write _out[i] = 2 * _a[i] for i < N.", a=A, out=B, name="twice")
    inner(B, C)


PLUS_ONE = {"code": "for (int i = 0; i < N; ++i) _out[i] = _a[i] + 1;"}
TWICE = {"code": "for (int i = 0; i < N; ++i) _out[i] = 2 * _a[i];"}


@pytest.fixture
def manual(tmp_path):
    dace.Config.set("ai", "provider", value="manual")
    dace.Config.set("ai", "compile_check", value=False)
    yield tmp_path / "prompts"
    dace.Config.set("ai", "provider", value="")
    dace.Config.set("ai", "compile_check", value=True)


def test_generate_prompts_for_nested_nodes_hash_of_content(manual):
    sdfg = two_nodes.to_sdfg(simplify=False)
    files = dace_ai.generate_prompts(sdfg, manual)
    assert sorted(f.node for f in files) == ["plus_one", "twice"]
    settings = resolve(None)
    for f in files:
        assert f.prompt.name.endswith(PROMPT_SUFFIX) and f.prompt.is_file()
        assert f.response.name == f.prompt.name.replace(PROMPT_SUFFIX, RESPONSE_SUFFIX)
        text = f.prompt.read_text()
        assert f.response.name in text and "## Answer schema" in text
    (nested,) = [(s, st, n) for s, st, n in pending_nodes(sdfg) if n.name == "plus_one"]
    assert nested[0] is not sdfg
    request = build_request(node_context(*nested, settings), settings)
    (plus,) = [f for f in files if f.node == "plus_one"]
    assert plus.prompt.name == f"plus_one_{prompt_hash(request)}{PROMPT_SUFFIX}"
    assert "_a[i] + 1" in plus.prompt.read_text()


def test_compile_stops_with_missing_answer_then_uses_saved_response(manual):
    dace.Config.set("ai", "prompt_dir", value=str(manual))
    try:
        sdfg = two_nodes.to_sdfg(simplify=False)
        A, B, C = np.arange(5.0), np.zeros(5), np.zeros(5)
        answers = {"twice": TWICE, "plus_one": PLUS_ONE}
        for _ in range(2):  # one MissingAnswer per node, answered in turn
            with pytest.raises(MissingAnswer) as info:
                sdfg(A=A, B=B, C=C, N=5)
            message = str(info.value)
            prompt, response = info.value.prompt_path, info.value.response_path
            assert str(prompt) in message and str(response) in message and prompt.is_file()
            node = prompt.name.rsplit("_", 2)[0]
            response.write_text(json.dumps(answers[node]))
        sdfg(A=A, B=B, C=C, N=5)
        np.testing.assert_allclose(C, 2 * A + 1)
    finally:
        dace.Config.set("ai", "prompt_dir", value="")


def test_read_prompt_responses_expands_answered_and_reports_the_rest(manual):
    sdfg = two_nodes.to_sdfg(simplify=False)
    files = {f.node: f for f in dace_ai.generate_prompts(sdfg, manual)}
    files["twice"].response.write_text(json.dumps(TWICE))
    report = dace_ai.read_prompt_responses(sdfg, manual)
    assert report.expanded == ["twice"]
    assert [m.node for m in report.missing] == ["plus_one"]
    assert report.missing[0].response == files["plus_one"].response
    assert [n.name for _, _, n in pending_nodes(sdfg)] == ["plus_one"]
    assert "save it as" in str(report)


def test_per_node_prompt_and_response(manual):
    sdfg = dace.SDFG("per_node")
    sdfg.add_array("A", [6], dace.float64)
    sdfg.add_array("B", [6], dace.float64)
    state = sdfg.add_state()
    node = dace_ai.AINode("square", "Write _out[i] = _a[i] * _a[i] for i < 6.", inputs={"_a"}, outputs={"_out"})
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet("A[0:6]"))
    state.add_edge(node, "_out", state.add_write("B"), None, dace.Memlet("B[0:6]"))

    text = node.generate_prompt(state)
    assert "_a[i] * _a[i]" in text and "square_" in text
    tasklet = node.read_prompt_response(state, {"code": "for (int i = 0; i < 6; ++i) _out[i] = _a[i] * _a[i];"})
    assert tasklet in state.nodes() and node not in state.nodes()
    A, B = np.arange(6.0), np.zeros(6)
    sdfg(A=A, B=B)
    np.testing.assert_allclose(B, A * A)


def test_edited_response_wins_over_the_cache_and_a_deleted_one_falls_back_to_it(manual):
    def tasklet_codes(sdfg):
        return {
            n.label: n.code.as_string
            for n, _ in sdfg.all_nodes_recursive()
            if isinstance(n, dace.nodes.Tasklet) and "dace-ai:" in n.code.as_string
        }

    files = {f.node: f for f in dace_ai.generate_prompts(two_nodes.to_sdfg(simplify=False), manual)}
    files["twice"].response.write_text(json.dumps(TWICE))
    files["plus_one"].response.write_text(json.dumps(PLUS_ONE))
    first = two_nodes.to_sdfg(simplify=False)
    assert sorted(dace_ai.read_prompt_responses(first, manual).expanded) == ["plus_one", "twice"]
    assert "source=manual" in tasklet_codes(first)["twice"]

    # A person edits the answer: the edited file is used, not the cached first version.
    edited = {"code": "// second thoughts\n" + TWICE["code"]}
    files["twice"].response.write_text(json.dumps(edited))
    second = two_nodes.to_sdfg(simplify=False)
    dace_ai.read_prompt_responses(second, manual)
    assert "// second thoughts" in tasklet_codes(second)["twice"]

    # The response files are gone (a temporary folder): the cached answers still expand, and
    # nobody is asked and no prompt file is written again.
    for f in files.values():
        f.response.unlink()
        f.prompt.unlink()
    third = two_nodes.to_sdfg(simplify=False)
    report = dace_ai.read_prompt_responses(third, manual)
    assert sorted(report.expanded) == ["plus_one", "twice"] and report.missing == []
    codes = tasklet_codes(third)
    assert "source=cache" in codes["twice"] and "// second thoughts" in codes["twice"]
    assert list(manual.glob("*")) == []
    A = np.arange(5, dtype=np.float64)
    B, C = np.zeros(5), np.zeros(5)
    third(A=A, B=B, C=C, N=5)
    np.testing.assert_allclose(C, 2 * A + 1)
