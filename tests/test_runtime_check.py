"""The spot check inside the user's own program (``runtime_check``): a tasklet placed by dace-ai
records the first call of the compiled program, and that call is compared with the node's reference
in the user's process after the call returns."""

import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.errors import RuntimeCheckFailed, RuntimeCheckWarning
from dace_ai.expansion.pending import pending_nodes
from dace_ai.solving.provenance import body
from dace_ai.storage.session_store import Session

from tests.test_ladder import MATMUL, ladder_matmul

N = dace.symbol("N")
M, K = dace.symbol("M"), dace.symbol("K")
SCALE = "for (int i = 0; i < N; ++i) _out[i] = 3 * _x[i];"
#: Wrong at the last element only: what a hand edit (or a tail bug) does.
SCALE_WRONG_TAIL = "for (int i = 0; i < N; ++i) _out[i] = (i == N - 1 ? 2 : 3) * _x[i];"


def scaled(x):
    return 3 * x


@dace.program
def rc_scale(x: dace.float64[N]):
    return dace_ai.ai("_out[i] = 3 * _x[i] for every i < N", x=x, reference=scaled)


def _implemented(program, code, **settings):
    sdfg = program.to_sdfg()
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.LibraryNode) and type(node).__name__ != "AINode":
            node.implementation = "ai"
    ((parent, state, node),) = pending_nodes(sdfg)
    tasklet = dace_ai.implement(parent, state, node, {"bench": "off", **settings}, supplied=json.dumps({"code": code}))
    assert tasklet is not None
    return sdfg, tasklet


def _edit(tasklet, old, new):
    assert old in tasklet.code.as_string
    tasklet.code = dace.properties.CodeBlock(tasklet.code.as_string.replace(old, new), dace.Language.CPP)


def test_a_right_tasklet_is_checked_at_its_first_call_and_says_nothing():
    sdfg, tasklet = _implemented(rc_scale, SCALE)
    assert body(tasklet).strip() == SCALE  # sessions and hand-edit detection see the model's code only
    x = np.random.rand(100)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeCheckWarning)
        np.testing.assert_allclose(sdfg(x=x, N=100), 3 * x)
        np.testing.assert_allclose(sdfg(x=x, N=100), 3 * x)
    (done,) = dace_ai.runtime_checks()  # the first call only
    assert done.wrong is None and done.call == 1 and "every output element" in done.checked


def test_code_that_advances_its_output_pointer_is_recorded_where_its_outputs_are():
    sdfg, _ = _implemented(rc_scale, "for (int i = 0; i < N; ++i) *_out++ = 3 * _x[i];")
    x = np.random.rand(64)
    np.testing.assert_allclose(sdfg(x=x, N=64), 3 * x)
    (done,) = dace_ai.runtime_checks()
    assert done.wrong is None, done


def test_a_wrong_tasklet_placed_by_hand_is_caught_on_its_first_call():
    sdfg, tasklet = _implemented(rc_scale, SCALE)
    shown = dace_ai.show(sdfg)["session"]  # ai-sessions/<id>/round-1
    _edit(tasklet, "_out[i] = 3 * _x[i]", "_out[i] = (i == N - 1 ? 2 : 3) * _x[i]")
    x = np.random.rand(100)
    with pytest.raises(RuntimeCheckFailed) as caught:
        sdfg(x=x, N=100)
    message = str(caught.value)
    assert "node 'ai'" in message and "_out[99]" in message and "sizes N=100" in message, message
    assert "1 of 100 elements differ" in message and "cache entry moved aside" in message, message
    assert caught.value.node == "ai" and Path(caught.value.session).name in shown, (shown, caught.value.session)
    record = Session(Path(caught.value.session)).round_entry(1) or {}
    assert "wrong: _out[99]" in str(record.get("runtime_check", "")), record
    for _ in range(2):  # the node is not trusted again in this process: every later call raises
        with pytest.raises(RuntimeCheckFailed, match=r"wrote a wrong output in call 1 of this program .*not trusted"):
            sdfg(x=x, N=100)


def test_every_nth_call_and_warn_instead_of_raise():
    sdfg, tasklet = _implemented(rc_scale, SCALE, runtime_check="every:2", runtime_check_action="warn")
    x = np.random.rand(50)
    compiled = sdfg.compile()
    for _ in range(5):
        compiled(x=x, N=50)
    assert [d.call for d in dace_ai.runtime_checks()] == [1, 3, 5]

    sdfg, tasklet = _implemented(rc_scale, SCALE, runtime_check="every:3", runtime_check_action="warn")
    _edit(tasklet, "_out[i] = 3 * _x[i]", "_out[i] = (i == N - 1 ? 2 : 3) * _x[i]")
    compiled = sdfg.compile()
    with pytest.warns(RuntimeCheckWarning, match=r"_out\[49\]"):
        for _ in range(4):
            compiled(x=x, N=50)
    # after a wrong output under warn, every later call is checked (and warns)
    assert [d.call for d in dace_ai.runtime_checks()[3:]] == [1, 2, 3, 4]


def test_off_puts_no_check_code_in_the_tasklet():
    sdfg, tasklet = _implemented(rc_scale, SCALE, runtime_check="off")
    assert "dace-ai run-time check" not in tasklet.code.as_string + tasklet.code_global.as_string
    x = np.random.rand(10)
    np.testing.assert_allclose(sdfg(x=x, N=10), 3 * x)
    assert dace_ai.runtime_checks() == []


def test_a_product_too_large_for_its_reference_is_checked_by_freivalds_within_the_budget():
    sdfg, tasklet = _implemented(ladder_matmul, MATMUL, runtime_check_budget=0.5)
    n = 384  # DaCe's naive product at this size takes longer than the budget; Freivalds' test takes O(n^2)
    A, B = np.random.rand(n, n), np.random.rand(n, n)
    C = np.zeros((n, n))
    sdfg(A=A, B=B, C=C, N=n, M=n, K=n)
    (done,) = dace_ai.runtime_checks()
    assert done.wrong is None and "Freivalds" in done.checked and done.seconds < 0.5, done
    np.testing.assert_allclose(C, A @ B)

    sdfg, tasklet = _implemented(ladder_matmul, MATMUL)
    _edit(tasklet, "_c[i * M + j] = acc;", "if (i != N - 1 || j != M - 1) _c[i * M + j] = acc;")
    C = np.zeros((n, n))
    with pytest.raises(RuntimeCheckFailed, match=r"_c\[383, 383\] = 0\.0, the product gives .*Freivalds"):
        sdfg(A=A, B=B, C=C, N=n, M=n, K=n)


def test_a_saved_program_runs_where_dace_ai_is_not_imported_and_says_so_once_per_load(tmp_path):
    sdfg, _ = _implemented(rc_scale, SCALE)
    path = tmp_path / "scale.sdfg"
    sdfg.save(str(path))
    script = textwrap.dedent(
        f"""
        import sys, dace, numpy as np
        sdfg = dace.SDFG.from_file({str(path)!r})
        sdfg.build_folder = {str(tmp_path / "build")!r}
        compiled = sdfg.compile()
        x = np.arange(5.0)
        for _ in range(3):
            assert np.allclose(compiled(x=x, N=5), 3 * x)
        assert "dace_ai" not in sys.modules
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        done.stderr.count("the run-time check of node 'ai' is off in this process (no dace-ai hook arms it here)") == 1
    )


def test_a_shape_already_checked_is_sampled_sparsely_within_the_share_of_the_nodes_time():
    sdfg, _ = _implemented(rc_scale, SCALE, runtime_check_share=1e9)  # a share that allows every sample
    compiled = sdfg.compile()
    x = np.random.rand(64)
    for _ in range(64):
        compiled(x=x, N=64)
    calls = [d.call for d in dace_ai.runtime_checks()]
    assert calls[:2] == [1, 2] and 6 <= len(calls) <= 20, calls  # each gap at most the calls so far: ~9 expected
    assert all(b <= 2 * a for a, b in zip(calls, calls[1:])), calls

    sdfg, _ = _implemented(rc_scale, SCALE)  # the default share: a tiny node's checks cost far more than 1%
    compiled = sdfg.compile()
    for _ in range(64):
        compiled(x=x, N=64)
    assert [d.call for d in dace_ai.runtime_checks()[len(calls) :]] == [1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_freivalds_test_sees_one_wrong_element_and_passes_right_products(dtype):
    from dace_ai.runtime_check.judge import freivalds_rows

    rng = np.random.default_rng(7)
    n = 512
    a = (rng.random((n, n)) - 0.5).astype(dtype)
    b = (rng.random((n, n)) - 0.5).astype(dtype)
    right = a @ b
    summed = np.zeros_like(right)  # the least accurate right way: one k at a time, in the element type
    for k in range(n):
        summed += a[:, k : k + 1] * b[k : k + 1, :]
    assert freivalds_rows(a, b, right, vectors=8).size == 0
    assert freivalds_rows(a, b, summed, vectors=8).size == 0
    caught = 0
    for _ in range(20):
        c = right.copy()
        i, j = rng.integers(0, n, 2)
        c[i, j] = 0 if abs(c[i, j]) > 0.05 else 1  # one element wrong by more than float32's rounding here
        caught += list(freivalds_rows(a, b, c)) == [i]
    assert caught == 20
