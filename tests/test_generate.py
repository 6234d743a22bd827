"""dace_ai.generate: every pending node at once, concurrently, de-duplicated, into the cache.

The provider is the real anthropic SDK talking to FakeLLMServer on 127.0.0.1; the
fake answers by node name (each prompt names its node).
"""

import json
import re

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.errors import AIUsageError, ProviderError
from dace_ai.storage.cache import AnswerCache
from dace_ai.workflows.generate import GenerateSummary

from tests.dace_versions import add_nested_sdfg
from tests.fakes.llm_server import (
    Fault,
    Reply,
    fake_llm_server_fixture,  # noqa: F401 - the fake_llm_server fixture
)
from tests.provider_cases import DOUBLE_CODE, DOUBLE_DESCRIPTION, SECRET, use_provider

N = dace.symbol("N")
CODES = {
    "double_it": DOUBLE_CODE,
    "add_one": "for (int i = 0; i < N; ++i) _out[i] = _in0[i] + 1.0;",
}


def node_name(request) -> str:
    match = re.search(r"Implement the node `([^`]+)`", request.text())
    assert match, "every prompt names its node"
    return match.group(1)


def answer_by_node(request):
    name = node_name(request)
    code = CODES.get(name, f"/* {name} */ for (int i = 0; i < N; ++i) _out[i] = _in0[i];")
    return Reply(text=json.dumps({"code": code, "notes": name}), input_tokens=100, output_tokens=10)


@pytest.fixture
def server(fake_llm_server, monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "anthropic-config"))
    use_provider(monkeypatch, "anthropic", fake_llm_server.url, model="claude-test-1")
    fake_llm_server.respond_with(answer_by_node)
    return fake_llm_server


def _scale_sdfg():
    """A helper SDFG with one AINode; used twice, its two nodes ask the identical question."""
    sdfg = dace.SDFG("scale")
    sdfg.add_array("a", [N], dace.float64)
    sdfg.add_array("x", [N], dace.float64)
    state = sdfg.add_state("compute")
    node = dace_ai.AINode("double_it", DOUBLE_DESCRIPTION, inputs={"_in0"}, outputs={"_out"})
    state.add_node(node)
    state.add_edge(state.add_read("a"), None, node, "_in0", dace.Memlet("a[0:N]"))
    state.add_edge(node, "_out", state.add_write("x"), None, dace.Memlet("x[0:N]"))
    return sdfg


def _outer_sdfg():
    sdfg = dace.SDFG("generate_outer")
    for name in "ABCXYZ":
        sdfg.add_array(name, [N], dace.float64)
    state = sdfg.add_state("main")
    for src, dst in (("A", "X"), ("B", "Y")):
        nested = add_nested_sdfg(state, _scale_sdfg(), sdfg, {"a"}, {"x"}, symbol_mapping={"N": "N"})
        state.add_edge(state.add_read(src), None, nested, "a", dace.Memlet(f"{src}[0:N]"))
        state.add_edge(nested, "x", state.add_write(dst), None, dace.Memlet(f"{dst}[0:N]"))
    node = dace_ai.AINode("add_one", "Write _out[i] = _in0[i] + 1 for every i < N.", inputs={"_in0"}, outputs={"_out"})
    state.add_node(node)
    state.add_edge(state.add_read("C"), None, node, "_in0", dace.Memlet("C[0:N]"))
    state.add_edge(node, "_out", state.add_write("Z"), None, dace.Memlet("Z[0:N]"))
    return sdfg


@dace.program
def three_nodes(A: dace.float64[N]):
    x = dace_ai.ai("Copy _in0 to _out.", A, name="good")
    y = dace_ai.ai("Copy _in0 to _out, but the server fails.", A, name="bad_http")
    z = dace_ai.ai("Copy _in0 to _out, but the answer is malformed.", A, name="bad_json")
    return x + y + z


@dace.program
def six_nodes(A: dace.float64[N]):
    a = dace_ai.ai("Copy _in0 to _out (1).", A, name="n1")
    b = dace_ai.ai("Copy _in0 to _out (2).", A, name="n2")
    c = dace_ai.ai("Copy _in0 to _out (3).", A, name="n3")
    d = dace_ai.ai("Copy _in0 to _out (4).", A, name="n4")
    e = dace_ai.ai("Copy _in0 to _out (5).", A, name="n5")
    f = dace_ai.ai("Copy _in0 to _out (6).", A, name="n6")
    return a + b + c + d + e + f


def _cache_entries() -> list[dict]:
    return [json.loads(p.read_text()) for p in AnswerCache().folder.rglob("*.json")]


def test_generate_deduplicates_then_expansion_uses_the_cache(server):
    sdfg = _outer_sdfg()
    summary = dace_ai.generate(sdfg)

    assert isinstance(summary, GenerateSummary) and summary.provider == "anthropic"
    assert sorted(n.name for n in summary.nodes) == ["add_one", "double_it", "double_it"]
    assert summary.requests == 2 and len(server.requests) == 2  # the two double_it nodes ask once
    assert (summary.generated, summary.cached, summary.failed) == (3, 0, 0)
    assert [n.shared for n in summary.nodes if n.name == "double_it"].count(True) == 1
    assert summary.usage.input_tokens == 200 and summary.usage.output_tokens == 20
    assert sorted(node_name(r) for r in server.requests) == ["add_one", "double_it"]
    assert {e["node"] for e in _cache_entries()} == {"add_one", "double_it"}

    server.stop()  # the expansion must not need the provider any more
    values = {name: np.random.rand(23) for name in "ABC"}
    outputs = {name: np.zeros(23) for name in "XYZ"}
    sdfg(**values, **outputs, N=23)
    np.testing.assert_allclose(outputs["X"], 2 * values["A"])
    np.testing.assert_allclose(outputs["Y"], 2 * values["B"])
    np.testing.assert_allclose(outputs["Z"], values["C"] + 1)


def test_failed_requests_cache_nothing(server, monkeypatch):
    monkeypatch.setenv("DACE_ai_max_retries", "1")

    def respond(request):
        name = node_name(request)
        if name == "bad_http":
            return Fault(500, message="model overloaded", headers={"retry-after-ms": "5"})
        if name == "bad_json":
            return Reply(text='{"cod": "x = 1;"}')
        return answer_by_node(request)

    server.respond_with(respond)
    sdfg = three_nodes.to_sdfg()
    summary = dace_ai.generate(sdfg)
    by_name = {n.name: n for n in summary.nodes}
    assert by_name["good"].status == "generated"
    assert by_name["bad_http"].status == "failed" and "HTTP 500" in by_name["bad_http"].error
    assert "after 1 retry" in by_name["bad_http"].error
    assert by_name["bad_json"].status == "failed" and "'code'" in by_name["bad_json"].error
    assert [e["node"] for e in _cache_entries()] == ["good"]
    with pytest.raises(ProviderError, match=r"(?s)2 of 3 node\(s\) failed.*'bad_http'.*'bad_json'"):
        summary.raise_for_failures()

    server.requests.clear()
    again = dace_ai.generate(sdfg)
    assert (again.cached, again.failed, again.requests) == (1, 2, 2)
    assert sorted(node_name(r) for r in server.requests) == ["bad_http", "bad_http", "bad_json"]


def test_requests_run_concurrently_up_to_the_limit(server, monkeypatch):
    monkeypatch.setenv("DACE_ai_max_concurrency", "3")
    server.respond_with(lambda request: Reply(text=json.dumps({"code": "/* copy */"}), delay=0.8))
    summary = dace_ai.generate(six_nodes.to_sdfg())
    assert summary.generated == 6 and summary.requests == 6
    assert server.max_in_flight == 3  # never more than max_concurrency, and the limit was used


def test_all_cached_needs_no_key(server, monkeypatch):
    sdfg = six_nodes.to_sdfg()
    assert dace_ai.generate(sdfg).generated == 6
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    server.stop()
    summary = dace_ai.generate(sdfg)
    assert (summary.cached, summary.requests) == (6, 0)
    assert "6 cached" in str(summary)


def test_missing_key_fails_before_any_request(server, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY"):
        dace_ai.generate(six_nodes.to_sdfg())
    assert server.requests == []


def test_cache_off_is_refused(server, monkeypatch):
    monkeypatch.setenv("DACE_ai_cache", "0")
    with pytest.raises(AIUsageError, match="cache setting is off.*DACE_ai_cache"):
        dace_ai.generate(six_nodes.to_sdfg())


def test_progress_bar(server, capsys):
    sdfg = three_nodes.to_sdfg()
    dace_ai.generate(sdfg, progress=True)
    err = capsys.readouterr().err
    assert "dace-ai generate" in err and "3/3" in err and "3 done" in err and "0 failed" in err


def test_no_pending_nodes():
    sdfg = dace.SDFG("nothing_to_do")
    sdfg.add_state()
    summary = dace_ai.generate(sdfg, {"provider": "anthropic"})
    assert summary.nodes == [] and summary.requests == 0
