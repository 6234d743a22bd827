"""End to end: nodes -> scripted provider -> tasklets -> real DaCe compiles, checked numerically.

The provider is the scripted FakeProvider of ``dace_ai.testing`` registered at runtime;
answers are chosen by node name (``dace_ai.plugin.current_node()``), so each test
states exactly the code a model would have written.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.expansion.pending import pending_nodes
from dace_ai.providers.api import current_node
from dace_ai.testing import FakeProvider

from tests.dace_versions import DACE2

N = dace.symbol("N")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def provider(register_dace_ai_plugin):
    """A scripted provider answering by node name; compile checks off (checks have their own tests)."""
    answers: dict[str, dict] = {}
    fake = FakeProvider()

    def answer(request):
        name = current_node().name
        return json.dumps(answers[name] if name in answers else answers["*"])

    fake.queue(*[answer] * 50)
    register_dace_ai_plugin(fake.plugin("scripted"), "scripted-provider")
    dace.Config.set("ai", "provider", value="scripted")
    dace.Config.set("ai", "compile_check", value=False)
    fake.answers = answers
    yield fake
    dace.Config.set("ai", "provider", value="")
    dace.Config.set("ai", "compile_check", value=True)


def _tasklets(sdfg):
    return [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet)]


def test_keyword_inputs_allocated_output(provider):
    provider.answers["scale_add"] = {"code": "for (int i = 0; i < N; ++i) _out[i] = 2.0 * _a[i] + _b[i];"}

    @dace.program
    def prog(A: dace.float64[N], B: dace.float64[N]):
        return dace_ai.ai("Write _out[i] = 2 * _a[i] + _b[i] for every i < N.", a=A, b=B, name="scale_add")

    A, B = np.random.rand(33), np.random.rand(33)
    np.testing.assert_allclose(prog(A, B), 2 * A + B)
    prompt = provider.requests[0].messages[0].content
    assert "`_a`" in prompt and "`_b`" in prompt and "`_out`" in prompt and "2 * _a[i] + _b[i]" in prompt


def test_positional_inputs_and_several_outputs(provider):
    provider.answers["sumdiff"] = {
        "code": "for (int i = 0; i < N; ++i) { _out0[i] = _in0[i] + _in1[i]; _out1[i] = _in0[i] - _in1[i]; }"
    }

    @dace.program
    def prog(A: dace.float32[N], B: dace.float32[N], C: dace.float32[N], D: dace.float32[N]):
        dace.ai("Write _out0 = _in0 + _in1 and _out1 = _in0 - _in1 elementwise.", A, B, out=(C, D), name="sumdiff")

    A, B = np.random.rand(17).astype(np.float32), np.random.rand(17).astype(np.float32)
    C, D = np.zeros_like(A), np.zeros_like(A)
    prog(A, B, C, D)
    np.testing.assert_allclose(C, A + B, rtol=1e-6)
    np.testing.assert_allclose(D, A - B, rtol=1e-6)


def test_ainode_in_hand_built_map(provider):
    """An AINode inside a map sees one element per iteration: value connectors, not pointers."""
    provider.answers["fma"] = {"code": "_out = _a * _b + _c;"}
    sdfg = dace.SDFG("hand_built")
    for name in "ABCD":
        sdfg.add_array(name, [20], dace.float64)
    state = sdfg.add_state()
    me, mx = state.add_map("m", {"i": "0:20"}, schedule=dace.ScheduleType.Sequential)
    node = dace_ai.AINode("fma", "Compute _out = _a * _b + _c.", inputs={"_a", "_b", "_c"}, outputs={"_out"})
    for conn, name in (("_a", "A"), ("_b", "B"), ("_c", "C")):
        state.add_memlet_path(state.add_read(name), me, node, dst_conn=conn, memlet=dace.Memlet(f"{name}[i]"))
    state.add_memlet_path(node, mx, state.add_write("D"), src_conn="_out", memlet=dace.Memlet("D[i]"))
    assert [n for _, _, n in pending_nodes(sdfg)] == [node]

    A, B, C, D = (np.random.rand(20) for _ in range(4))
    sdfg(A=A, B=B, C=C, D=D)
    np.testing.assert_allclose(D, A * B + C)
    prompt = provider.requests[0].messages[0].content
    assert "`i`" in prompt and "0:20" in prompt  # the enclosing map is described


def test_matmul_through_blas_default_ai(provider, monkeypatch):
    """``blas.default_implementation = 'ai'``: A @ B -> MatMul -> Gemm, which dace-ai implements."""
    from dace.libraries import blas

    monkeypatch.setattr(blas, "default_implementation", "ai")
    code = (
        "for (int i = 0; i < 6; ++i) for (int j = 0; j < 5; ++j) { double s = 0;"
        " for (int k = 0; k < 7; ++k) s += _a[i * 7 + k] * _b[k * 5 + j]; _c[i * 5 + j] = s; }"
    )

    @dace.program
    def prog(A: dace.float64[6, 7], B: dace.float64[7, 5]):
        return A @ B

    sdfg = prog.to_sdfg()
    provider.answers["*"] = {"code": code}  # the Gemm node exists only once MatMul has specialized
    A, B = np.random.rand(6, 7), np.random.rand(7, 5)
    np.testing.assert_allclose(sdfg(A=A, B=B), A @ B)
    assert len(provider.requests) == 1 and "`Gemm`" in provider.requests[0].messages[0].content


def test_reduce_with_ai_implementation(provider):
    provider.answers["sum_rows"] = {
        "code": "for (int i = 0; i < 4; ++i) { double s = 0; "
        "for (int j = 0; j < 9; ++j) s += _in[i * 9 + j]; _out[i] = s; }"
    }

    @dace.program
    def prog(A: dace.float64[4, 9]):
        return np.sum(A, axis=1)

    sdfg = prog.to_sdfg()
    ((reduce_node, _),) = [(n, p) for n, p in sdfg.all_nodes_recursive() if type(n).__name__ == "Reduce"]
    reduce_node.implementation = "ai"
    reduce_node.name = reduce_node.label = "sum_rows"
    A = np.random.rand(4, 9)
    np.testing.assert_allclose(sdfg(A=A), A.sum(axis=1))
    assert "Reduce" in provider.requests[0].messages[0].content


def test_library_node_class_defined_after_import(provider):
    """A library class defined after ``import dace_ai`` (DaCe-decorated or not) gets 'ai' too."""
    import dace.library

    @dace.library.node
    class Saxpy(dace.nodes.LibraryNode):
        """y = a * x + y elementwise."""

        implementations: dict = {}
        default_implementation = None
        a = dace.properties.Property(dtype=float, default=1.0)

        def __init__(self, name, a=1.0):
            super().__init__(name, inputs={"_x", "_y"}, outputs={"_res"})
            self.a = a

    class SaxpyVariant(Saxpy):
        pass

    if DACE2:  # 'ai' is DaCe's reserved name there, resolved per class through dace-ai
        from dace.libraries.ai.expansion import ExpandAI

        assert "ai" in Saxpy.available_implementations()
        assert ExpandAI.for_node_class(Saxpy) is not ExpandAI.for_node_class(SaxpyVariant)
        assert ExpandAI.for_node_class(Saxpy)._match_node is Saxpy
    else:
        assert "ai" in Saxpy.implementations and "ai" in SaxpyVariant.implementations
        assert Saxpy.implementations["ai"] is not SaxpyVariant.implementations["ai"]
        assert Saxpy.implementations["ai"]._match_node is Saxpy

    provider.answers["saxpy"] = {"code": "for (int i = 0; i < 10; ++i) _res[i] = 3.0 * _x[i] + _y[i];"}
    sdfg = dace.SDFG("custom_lib")
    for name in "XYR":
        sdfg.add_array(name, [10], dace.float64)
    state = sdfg.add_state()
    node = Saxpy("saxpy", a=3.0)
    node.implementation = "ai"
    state.add_node(node)
    state.add_edge(state.add_read("X"), None, node, "_x", dace.Memlet("X[0:10]"))
    state.add_edge(state.add_read("Y"), None, node, "_y", dace.Memlet("Y[0:10]"))
    state.add_edge(node, "_res", state.add_write("R"), None, dace.Memlet("R[0:10]"))
    X, Y, R = np.random.rand(10), np.random.rand(10), np.zeros(10)
    sdfg(X=X, Y=Y, R=R)
    np.testing.assert_allclose(R, 3 * X + Y)
    prompt = provider.requests[0].messages[0].content
    assert "Saxpy" in prompt and "y = a * x + y elementwise" in prompt


def test_nested_sdfg_node(provider):
    provider.answers["inner_double"] = {"code": "for (int i = 0; i < 12; ++i) _out[i] = 2 * _a[i];"}

    @dace.program
    def inner(X: dace.float64[12], Y: dace.float64[12]):
        dace_ai.ai("Write _out[i] = 2 * _a[i].", a=X, out=Y, name="inner_double")

    @dace.program
    def outer(A: dace.float64[12], B: dace.float64[12]):
        inner(A, B)

    sdfg = outer.to_sdfg(simplify=False)
    found = pending_nodes(sdfg)
    assert len(found) == 1 and found[0][0] is not sdfg  # the node lives in a nested SDFG
    A, B = np.random.rand(12), np.zeros(12)
    sdfg(A=A, B=B)
    np.testing.assert_allclose(B, 2 * A)


def test_expand_now_and_saved_sdfg_runs_in_fresh_process(provider, tmp_path):
    """An expanded, saved SDFG runs in a new process with no provider, key, cache or dace_ai import."""
    provider.answers["triple"] = {
        "code": "for (int i = 0; i < N; ++i) _out[i] = 3 * _a[i];",
        "code_global": "// helper-free",
        "notes": "scalar loop",
    }

    @dace.program
    def prog(A: dace.float64[N], B: dace.float64[N]):
        dace_ai.ai("Write _out[i] = 3 * _a[i].", a=A, out=B, name="triple")

    sdfg = prog.to_sdfg()
    ((_, state, node),) = pending_nodes(sdfg)
    tasklet = node.expand(state, "ai")  # seed spelling; DaCe's own is node.expand(sdfg, state)
    assert tasklet == "ai"
    (tasklet,) = [t for t in _tasklets(sdfg) if t.label == "triple"]
    assert "provider=scripted" in tasklet.code.as_string and "session=ai-sessions/" in tasklet.code.as_string
    assert {str(t) for t in tasklet.in_connectors.values()} == {"double*"}
    path = tmp_path / "expanded.sdfg"
    sdfg.save(str(path))

    script = (
        "import sys; sys.modules['dace_ai'] = None\n"  # importing dace_ai would fail: proves independence
        "import dace, numpy as np\n"
        f"sdfg = dace.SDFG.from_file({str(path)!r})\n"
        "A = np.arange(7.0); B = np.zeros(7)\n"
        "sdfg(A=A, B=B, N=7)\n"
        "assert np.allclose(B, 3 * A), B\n"
        "print('fresh-ok')\n"
    )
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DACE_ai_") and not k.endswith("_API_KEY")}
    env["DACE_default_build_folder"] = str(fresh / ".dacecache")
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=fresh, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "fresh-ok" in result.stdout
    assert not (fresh / ".dacecache" / "ai-cache").exists()


def test_dace_ai_expand_replaces_one_node_and_cache_answers_without_provider(provider, register_dace_ai_plugin):
    provider.answers["neg"] = {"code": "for (int i = 0; i < 5; ++i) _out[i] = -_a[i];"}
    sdfg = dace.SDFG("expand_now")
    sdfg.add_array("A", [5], dace.float64)
    sdfg.add_array("B", [5], dace.float64)
    state = sdfg.add_state()

    def add_node():
        node = dace_ai.AINode("neg", "Write _out[i] = -_a[i].", inputs={"_a"}, outputs={"_out"})
        state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet("A[0:5]"))
        state.add_edge(node, "_out", state.add_write("B"), None, dace.Memlet("B[0:5]"))
        return node

    tasklet = dace_ai.expand(sdfg, state, add_node())
    assert isinstance(tasklet, dace.nodes.Tasklet) and tasklet in state.nodes()
    assert not any(isinstance(n, dace_ai.AINode) for n in state.nodes())
    asked = len(provider.requests)

    # Same prompt again: answered from the cache, the provider is not asked.
    state.remove_node(tasklet)
    for n in [n for n in state.nodes() if state.degree(n) == 0]:
        state.remove_node(n)
    dace_ai.expand(sdfg, state, add_node())
    assert len(provider.requests) == asked
    sessions = dace_ai.list_sessions()  # a new node is a new session (sessions are named after node guids)
    assert len(sessions) == 2 and all(s["rounds"] == 1 and s["current"] == 1 for s in sessions)
    sources = sorted(json.loads(Path(s["folder"], "session.json").read_text())["rounds"][0]["source"] for s in sessions)
    assert sources == ["cache", "scripted"]
