"""The verify stage and the sandbox: real compiles, real DaCe reference builds, real child processes.

Each test states the code a model could have written and what verification must say
about it. Wrong, crashing, looping and overrunning answers run only in the sandbox
child; this test process survives every one of them.
"""

import json
import os
import re
import warnings

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.checking.api import CheckRequest
from dace_ai.checking.stages import check_workdir, run_checks
from dace_ai.config.settings import resolve_settings
from dace_ai.errors import CheckFailed, NativeFallbackWarning, UnverifiedWarning
from dace_ai.expansion.ainode import AINode
from dace_ai.expansion.expansion_pass import node_context
from dace_ai.expansion.pending import pending_nodes
from dace_ai.prompt.answer import Answer
from dace_ai.sandbox.cases import parse_sizes_setting
from dace_ai.sandbox.child_process import watched_from_outside
from dace_ai.sandbox.harness import run_against_reference
from dace_ai.testing import FakeProvider

N, M, K = (dace.symbol(s) for s in "NMK")

MATMUL = (
    "for (int i = 0; i < N; ++i) for (int j = 0; j < M; ++j) { double acc = 0;"
    " for (int k = 0; k < K; ++k) acc += _a[i * K + k] * _b[k * M + j]; _c[i * M + j] = acc; }"
)
#: Correct only when M is a multiple of 8 (the remainder columns are never written).
MATMUL_BY_8 = (
    "for (int i = 0; i < N; ++i) for (int j = 0; j < M / 8 * 8; ++j) { double acc = 0;"
    " for (int k = 0; k < K; ++k) acc += _a[i * K + k] * _b[k * M + j]; _c[i * M + j] = acc; }"
)
ONES = "for (int i = 0; i < N * M; ++i) _c[i] = 1.0;"
SOFTMAX = (
    "double m = _a[0]; for (int i = 1; i < N; ++i) m = _a[i] > m ? _a[i] : m;"
    " double s = 0; for (int i = 0; i < N; ++i) { _out[i] = std::exp(_a[i] - m); s += _out[i]; }"
    " for (int i = 0; i < N; ++i) _out[i] /= s;"
)


def twice(a):
    return 2 * a


def softmax_reference(a):
    e = np.exp(a - a.max())
    return e / e.sum()


@dace.program
def matmul(A: dace.float64[N, K], B: dace.float64[K, M], C: dace.float64[N, M]):
    C[:] = A @ B


def _only_node(sdfg, implementation=None):
    if implementation:
        for node, _ in sdfg.all_nodes_recursive():
            if isinstance(node, dace.nodes.LibraryNode):
                node.implementation = implementation
    (found,) = pending_nodes(sdfg)
    return found


def request_for(sdfg, code: str, implementation: str | None = "ai", code_global: str = "", **settings) -> CheckRequest:
    """A check request for the program's one 'ai' node and ``code`` (verify only unless told)."""
    settings.setdefault("checkers", "verify")
    settings = resolve_settings(settings)
    parent, state, node = _only_node(sdfg, implementation)
    ctx = node_context(parent, state, node, settings)
    answer = Answer(code=code, code_global=code_global)
    return CheckRequest(answer, ctx, settings, check_workdir(ctx, answer))


def verify(sdfg, code: str, **settings):
    (report,) = run_checks(request_for(sdfg, code, **settings))
    assert report.checker == "verify" and report.stage == "verify"
    return report


def _softmax_program(name: str, reference=softmax_reference):
    def body(A: dace.float64[N]):
        return dace_ai.ai("Softmax of _a over its N elements.", a=A, reference=reference)

    body.__name__ = name
    return dace.program(body).to_sdfg()


def _loaded_libraries() -> str:
    with open("/proc/self/maps", encoding="utf-8") as handle:
        return handle.read()


# ----------------------------------------------------------------------------- native references
def test_matmul_answer_writing_ones_is_refused_with_the_mismatch():
    report = verify(matmul.to_sdfg(), ONES)
    assert report.status == "failed"
    text = report.diagnostics
    assert "Wrong result (seed 0, sizes" in text and "output _c at index [0, 0] is 1.0, expected" in text
    assert "largest error" in text and report.reason == "mismatch"
    assert report.details["reference"] == {"kind": "native", "implementation": "specialize"}


def test_correct_matmul_is_accepted_over_three_seeds_and_the_size_ladder():
    report = verify(matmul.to_sdfg(), MATMUL)
    assert report.status == "passed", report.diagnostics
    assert report.seeds == 3 and report.reason == "" and "reason" not in report.details
    sizes = report.sizes
    assert all(v % 2 == 1 for s in sizes[:2] for v in s.values())  # small odd sizes first
    assert all(v % 64 == 0 for v in sizes[2].values())  # then multiples of every vector width
    assert [r["rung"] for r in report.details["ladder"]][-1] == "bench"
    assert "candidate.so" not in _loaded_libraries() and "ai_reference" not in _loaded_libraries()


def test_answer_correct_only_for_multiples_of_eight_is_refused():
    report = verify(matmul.to_sdfg(), MATMUL_BY_8)
    assert report.status == "failed"
    assert report.reason == "unwritten"
    assert "_c at index [0, 8] still holds the fill pattern" in report.diagnostics


@pytest.fixture
def scripted(register_dace_ai_plugin):
    """A scripted provider (real pipeline) answering every request with the codes queued in ``codes``."""
    fake = FakeProvider()
    fake.codes = []

    def answer(request):
        return json.dumps({"code": fake.codes.pop(0) if len(fake.codes) > 1 else fake.codes[0]})

    fake.queue(*[answer] * 20)
    register_dace_ai_plugin(fake.plugin("scripted"), "scripted-provider")
    dace.Config.set("ai", "provider", value="scripted")
    dace.Config.set("ai", "max_repair_attempts", value=1)
    yield fake
    for key, value in (("provider", ""), ("max_repair_attempts", 2), ("on_failure", "")):
        dace.Config.set("ai", key, value=value)


def test_refused_matmul_goes_back_to_the_model_then_runs_natively_with_a_warning(scripted):
    scripted.codes[:] = [ONES]
    sdfg = matmul.to_sdfg()
    _only_node(sdfg, "ai")
    with pytest.warns(NativeFallbackWarning) as record:
        compiled = sdfg.compile()
    # (DaCe 2's own native expansions warn about set-valued connectors too.)
    assert "MatMul" in str(next(r for r in record if issubclass(r.category, NativeFallbackWarning)).message)
    assert len(scripted.requests) == 2  # the repair round received the mismatch
    repair = scripted.requests[1].messages[-1].content
    assert "Check 'verify' (stage verify) failed" in repair and "output _c at index [0, 0] is 1.0" in repair
    A, B, C = np.random.rand(9, 5), np.random.rand(5, 7), np.zeros((9, 7))
    compiled(A=A, B=B, C=C, N=9, M=7, K=5)
    np.testing.assert_allclose(C, A @ B)


def test_refused_matmul_with_on_failure_error_names_the_mismatch(scripted):
    scripted.codes[:] = [ONES]
    sdfg = matmul.to_sdfg()
    parent, state, node = _only_node(sdfg, "ai")
    with pytest.raises(CheckFailed) as info:
        dace_ai.implement(parent, state, node, {"on_failure": "error"})
    assert "[verify] Wrong result (seed 0, sizes" in str(info.value)


def test_correct_matmul_is_marked_verified_in_its_tasklet(scripted):
    scripted.codes[:] = [MATMUL]
    sdfg = matmul.to_sdfg()
    parent, state, node = _only_node(sdfg, "ai")
    tasklet = dace_ai.implement(parent, state, node)
    first = tasklet.code.as_string.splitlines()[0]
    assert re.search(r"verification=verified \(3 seeds, \d+ sizes, \d distributions[^)]*\)$", first), first
    A, B, C = np.random.rand(9, 5), np.random.rand(5, 7), np.zeros((9, 7))
    sdfg(A=A, B=B, C=C, N=9, M=7, K=5)
    np.testing.assert_allclose(C, A @ B)


# ----------------------------------------------------------------------------- sandbox
@pytest.mark.parametrize(
    "code, reason, words",
    [
        ("double* p = nullptr; p[3] = _a[0];", "crash", "crashed with SIGSEGV at address 0x18 (a null"),
        ("volatile long x = 0; while (true) { x = x + 1; }", None, "(an endless loop?)"),
        (MATMUL + " _c[N * M + 1000] = 2.0;", "outside_buffer", "wrote 8000 byte(s) past the end of container C"),
        (MATMUL + " _c[N * M] = 2.0;", "outside_buffer", "past the end of container C (connector _c)"),
    ],
    ids=["segfault", "endless-loop", "write-past-output", "write-just-past-output"],
)
def test_crashes_loops_and_overruns_are_reported_and_this_process_survives(code, reason, words):
    pid = os.getpid()
    report = verify(matmul.to_sdfg(), code, sandbox_wall_seconds=4, sandbox_cpu_seconds=2)
    assert report.status == "failed", report.diagnostics
    assert words in report.diagnostics
    if reason is None:
        assert report.reason in ("timeout", "cpu_time")
    else:
        assert report.reason == reason
    assert os.getpid() == pid and "candidate.so" not in _loaded_libraries()


def test_a_candidate_over_the_memory_limit_is_killed_from_outside_and_said():
    code = (
        "const size_t n = size_t(64) << 20; double* hog = new double[n];"  # 512 MiB, every page touched
        " for (size_t i = 0; i < n; i += 512) hog[i] = 1; _c[0] = hog[n - 512] - 1; delete[] hog; " + MATMUL
    )
    report = verify(matmul.to_sdfg(), code, sandbox_memory_mb=256)
    assert report.status == "failed" and report.reason == "memory", report.diagnostics
    assert "exceeded the memory limit of 256 MiB" in report.diagnostics


@pytest.mark.skipif(not watched_from_outside(), reason="the child limits itself where /proc cannot be read")
def test_the_sandbox_has_no_limits_of_its_own_that_code_could_read():
    """What getrlimit says in the sandbox is what it says in this process: a sniffer that slipped past the
    no-probing rule (switched off here) computes in the sandbox what it computes in the user's program."""
    import resource

    mine = {name: resource.getrlimit(getattr(resource, name))[0] for name in ("RLIMIT_CPU", "RLIMIT_AS")}
    code = (
        "struct rlimit cpu, as; getrlimit(RLIMIT_CPU, &cpu); getrlimit(RLIMIT_AS, &as);"
        f" const bool same = cpu.rlim_cur == (rlim_t){mine['RLIMIT_CPU']}ULL && as.rlim_cur == (rlim_t){mine['RLIMIT_AS']}ULL;"
        " " + MATMUL + " if (!same) _c[0] = -1;"
    )
    report = verify(matmul.to_sdfg(), code, code_global="#include <sys/resource.h>")
    assert report.status == "passed", report.diagnostics


def test_time_mode_times_candidate_and_reference_on_the_same_inputs():
    result = run_against_reference(
        request_for(matmul.to_sdfg(), MATMUL), mode="time", seeds=1, sizes=[{"N": 33, "M": 31, "K": 35}], repeats=3
    )
    assert result.status == "passed" and list(result.sizes) == [{"K": 35, "M": 31, "N": 33}]
    (case,) = result.cases
    assert len(case["candidate_seconds"]) == 3 and len(case["reference_seconds"]) == 3
    assert all(t > 0 for t in case["candidate_seconds"] + case["reference_seconds"])


def test_strided_subset_views_are_honoured_and_writes_outside_the_subset_caught():
    """A node on every other column of a bigger array: the view, its strides and its offset are real."""

    @dace.program
    def scaled(A: dace.float64[N, 2 * M], B: dace.float64[N, 2 * M]):
        B[:, 1::2] = dace_ai.ai("Write _out[i][j] = 2 * _a[i][j].", a=A[:, 1::2], reference=twice)

    sdfg = scaled.to_sdfg()
    parent, state, node = _only_node(sdfg)
    assert node.reference  # the frontend kept the reference's key
    settings = resolve_settings({"checkers": "verify"})
    ctx = node_context(parent, state, node, settings)
    a, out = ctx.inputs[0], ctx.outputs[0]
    assert out.offset == "1" and out.strides == ("(2 * M)", "2")  # every other column, from the second on

    def at(conn):
        return conn.index_formula.replace("i0", "i").replace("i1", "j")

    good = f"for (int i = 0; i < N; ++i) for (int j = 0; j < M; ++j) {at(out)} = 2 * {at(a)};"
    answer = Answer(code=good)
    (report,) = run_checks(CheckRequest(answer, ctx, settings, check_workdir(ctx, answer)))
    assert report.status == "passed", report.diagnostics
    bad = good + " _out[1] = 0.5;"  # the element between two of the view's columns
    answer = Answer(code=bad)
    (report,) = run_checks(CheckRequest(answer, ctx, settings, check_workdir(ctx, answer)))
    assert report.status == "failed" and report.reason == "outside_subset"
    assert "wrote to element 2 of B, outside the part its output connector covers" in report.diagnostics


# ----------------------------------------------------------------------------- AINode references
def test_softmax_with_reference_accepts_correct_code_and_refuses_zeros():
    sdfg = _softmax_program("softmax_checked")
    good = verify(sdfg, SOFTMAX, implementation=None)
    assert good.status == "passed", good.diagnostics
    assert good.details["reference"]["kind"] == "function" and good.seeds == 3
    zeros = verify(sdfg, "for (int i = 0; i < N; ++i) _out[i] = 0.0;", implementation=None)
    assert zeros.status == "failed" and zeros.reason == "mismatch"
    assert "output _out at index [0] is 0.0, expected" in zeros.diagnostics


def test_ainode_without_reference_is_inconclusive_and_told_once_per_program():
    @dace.program
    def two_unreferenced(A: dace.float64[N], B: dace.float64[N]):
        B[:] = dace_ai.ai("Write _out[i] = _a[i] + 1.", a=A, name="first")
        A[:] = dace_ai.ai("Write _out[i] = _a[i] * 3.", a=B, name="second")

    sdfg = two_unreferenced.to_sdfg()
    settings = resolve_settings({"checkers": "verify"})
    reports = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for parent, state, node in pending_nodes(sdfg):
            ctx = node_context(parent, state, node, settings)
            answer = Answer(code="for (int i = 0; i < N; ++i) _out[i] = _a[i];")
            reports += run_checks(CheckRequest(answer, ctx, settings, check_workdir(ctx, answer)))
    assert [r.status for r in reports] == ["inconclusive", "inconclusive"]
    assert all(r.reason == "no reference" for r in reports)
    told = [w for w in caught if issubclass(w.category, UnverifiedWarning)]
    assert len(told) == 1 and "two_unreferenced" in str(told[0].message) and "reference=" in str(told[0].message)


def test_hand_built_ainode_reference_survives_saving_in_this_process():
    sdfg = dace.SDFG("hand_built_reference")
    sdfg.add_array("A", [N], dace.float64)
    sdfg.add_array("B", [N], dace.float64)
    state = sdfg.add_state()
    node = AINode("twice", "Write _out[i] = 2 * _a[i].", inputs={"_a"}, outputs={"_out"}, reference=lambda a: 2 * a)
    state.add_node(node)
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet("A[0:N]"))
    state.add_edge(node, "_out", state.add_write("B"), None, dace.Memlet("B[0:N]"))
    copy = dace.SDFG.from_json(sdfg.to_json())
    report = verify(copy, "for (int i = 0; i < N; ++i) _out[i] = 2 * _a[i];", implementation=None)
    assert report.status == "passed", report.diagnostics
    with pytest.raises(dace_ai.AIUsageError, match="reference must be a NumPy function"):
        AINode("bad", "x", inputs={"_a"}, outputs={"_out"}, reference="np.sum")


def test_sizes_setting_is_parsed_and_used():
    assert parse_sizes_setting("N=5,9 M=3") == {"N": [5, 9], "M": [3]}
    report = verify(
        _softmax_program("softmax_sizes"), SOFTMAX, implementation=None, verify_sizes="N=5,9", verify_seeds=2
    )
    assert report.status == "passed" and report.sizes == [{"N": 5}, {"N": 9}]
    assert report.seeds == 2


def test_a_library_that_does_not_link_is_refused_in_the_default_linkers_words():
    """The candidate's library is linked by GNU gold where installed (faster); what does not link is said as
    the compiler's default linker says it."""
    from dace_ai.compilation.candidate import _gold
    from dace_ai.prompt.answer import EnvironmentRequest

    request = request_for(_softmax_program("softmax_unlinkable"), SOFTMAX)
    need = EnvironmentRequest(name="NoSuchLib", libraries=["dace_ai_no_such_library"])
    request.answer = request.answer.model_copy(update={"environments": [need]})
    request.workdir = check_workdir(request.node, request.answer)
    (report,) = run_checks(request)
    assert report.status == "failed"
    assert "does not link into a shared library" in report.diagnostics
    assert "dace_ai_no_such_library" in report.diagnostics
    if _gold(("c++",)):
        assert "ld.gold" not in report.diagnostics  # the retry with the default linker gave the words
