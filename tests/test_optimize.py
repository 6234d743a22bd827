"""dace_ai.optimize and the bench stage, with the real openai SDK against FakeLLMServer on 127.0.0.1.

Real DaCe builds of every candidate and of the node's native expansion, run and
timed in a child process. Each candidate's answer is chosen by the fake server
from the "candidate k of n" line of its prompt (the samples are asked concurrently).
"""

import json
import re
import warnings
from pathlib import Path

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.expansion.expansion_pass import expansion_pass, node_context
from dace_ai.expansion.pending import pending_nodes

from tests.fakes.llm_server import Reply, fake_llm_server_fixture  # noqa: F401 - the fake_llm_server fixture
from tests.provider_cases import SECRET, double_program

M, K, N = (dace.symbol(s) for s in "MKN")

# Candidates for the Gemm behind ``C[:] = A @ B`` (row-major, connectors _a, _b, _c).
FAST = (
    "for (int i = 0; i < M; ++i) { for (int j = 0; j < N; ++j) _c[i * N + j] = 0.0;"
    " for (int k = 0; k < K; ++k) { const double a = _a[i * K + k];"
    " for (int j = 0; j < N; ++j) _c[i * N + j] += a * _b[k * N + j]; } }"
)
SLOW = (
    "for (int r = 0; r < 200; ++r) for (int j = 0; j < N; ++j) for (int i = 0; i < M; ++i) {"
    " double s = 0.0; for (int k = 0; k < K; ++k) s += _a[i * K + k] * _b[k * N + j]; _c[i * N + j] = s; }"
)
WRONG = "for (int i = 0; i < M * N; ++i) _c[i] = 1.0;"
CRASH = "volatile double *p = nullptr; for (int i = 0; i < M * N; ++i) p[i] = _a[0];"
SIZES = {"M": 60, "K": 50, "N": 70}


@pytest.fixture
def openai_server(fake_llm_server, monkeypatch):
    """The openai provider on the fake server, probe + bench checks only (the x86 ISA scan is not under test)."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    for key, value in {
        "provider": "openai",
        "base_url": fake_llm_server.openai_url,
        "model": "gpt-test",
        "max_retries": "1",
        "timeout": "60",
        "checkers": "probe,bench",
        "bench_repeats": "5",
        "max_concurrency": "4",
    }.items():
        monkeypatch.setenv(f"DACE_ai_{key}", value)
    return fake_llm_server


@pytest.fixture
def blas_ai():
    """``A @ B`` becomes a MatMul that expands to a Gemm implemented by 'ai'."""
    from dace.libraries import blas

    previous = blas.default_implementation
    blas.default_implementation = "ai"
    yield
    blas.default_implementation = previous


def matmul_sdfg():
    @dace.program
    def mm(A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]):
        C[:] = A @ B

    return mm.to_sdfg()


def by_candidate(*codes: str):
    """A responder answering candidate k (from its prompt) with ``codes[k - 1]``; the same code when asked once."""

    def respond(request) -> Reply:
        text = request.text()
        found = re.findall(r"This is candidate (\d+) of", text)
        index = int(found[-1]) - 1 if found else 0
        return Reply(text=json.dumps({"code": codes[index % len(codes)]}), input_tokens=1000, output_tokens=100)

    return respond


def run_natively(sdfg):
    A, B = np.random.rand(33, 21), np.random.rand(21, 17)
    C = np.zeros((33, 17))
    sdfg(A=A, B=B, C=C, M=33, K=21, N=17)
    np.testing.assert_allclose(C, A @ B, rtol=1e-10)


def tasklets(sdfg):
    return [
        n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet) and "dace-ai:" in n.code.as_string
    ]


def test_optimize_keeps_the_fast_candidate_and_says_why_the_others_lost(openai_server, blas_ai, monkeypatch):
    monkeypatch.setenv("DACE_ai_checkers", "probe,verify,bench")  # compile, verify, then bench the survivors
    openai_server.respond_with(by_candidate(WRONG, CRASH, SLOW, FAST))
    sdfg = matmul_sdfg()
    report = dace_ai.optimize(sdfg, samples=4, rounds=0, sizes=SIZES)

    assert report.expanded == 1  # the MatMul was expanded to reveal the Gemm
    [node] = report.nodes
    assert node.node_type == "Gemm" and node.outcome == "optimized"
    wrong, crash, slow, fast = sorted(node.candidates, key=lambda c: c.sample)
    assert fast.winner and fast.status == "passed" and fast.speedup is not None
    assert fast.speedup_range[0] <= fast.speedup <= fast.speedup_range[1]
    assert wrong.status == "refused" and wrong.stage == "verify" and "Wrong result" in wrong.reason
    assert "is 1.0, expected" in wrong.reason
    assert crash.status == "refused" and crash.stage == "verify" and "crashed with SIGSEGV" in crash.reason
    assert slow.status == "passed" and not slow.winner and "slower than the winner" in slow.reason
    assert slow.seconds_per_call > fast.seconds_per_call
    assert node.input_tokens == 4000 and node.output_tokens == 400
    assert len(openai_server.requests) == 4
    assert len({r.text() for r in openai_server.requests}) == 4  # distinct approaches asked for
    text = str(report)
    assert "winner r0s3" in text and "crashed" in text

    [tasklet] = tasklets(sdfg)
    assert "optimize=r0s3" in tasklet.code.as_string and "_vs_native" in tasklet.code.as_string
    folder = dace_ai.list_sessions()[0]["folder"]
    session = json.loads(Path(folder, "session.json").read_text())
    assert session["optimize"]["outcome"] == "optimized" and session["current"] == fast.session_round
    checks = json.loads(Path(folder, f"round-{fast.session_round}", "checks.json").read_text())
    bench = next(row for row in checks if row["checker"] == "bench")
    assert bench["status"] == "passed" and bench["details"]["speedup"] == pytest.approx(fast.speedup)
    assert len(bench["details"]["candidate_seconds"]) == 5
    run_natively(sdfg)


def test_refinement_round_receives_the_timings(openai_server, blas_ai):
    openai_server.respond_with(by_candidate(FAST))
    sdfg = matmul_sdfg()
    report = dace_ai.optimize(sdfg, samples=1, rounds=1, sizes=SIZES)

    assert len(openai_server.requests) == 2
    first, second = (r.text() for r in openai_server.requests)
    assert "It runs in" not in first
    assert re.search(
        r"It runs in [\d.]+ (?:µs|ms|s) per call against [\d.]+ (?:µs|ms|s) for the native "
        r"expansion: speedup [\d.]+x \(range [\d.]+-[\d.]+ over 5 timed runs, sizes M=60, K=50, N=70\)",
        second,
    ), second[-1500:]
    assert FAST in second  # the best code so far goes back as the assistant's answer
    assert report.nodes[0].outcome == "optimized" and len(report.nodes[0].candidates) == 2


def test_bench_gate_keeps_the_native_expansion_when_every_candidate_is_slower(openai_server, blas_ai, monkeypatch):
    monkeypatch.setenv("DACE_ai_bench", "gate")
    openai_server.respond_with(by_candidate(SLOW, SLOW.replace("r < 200", "r < 201")))
    sdfg = matmul_sdfg()
    report = dace_ai.optimize(sdfg, samples=2, rounds=0, sizes=SIZES)

    [node] = report.nodes
    assert node.outcome == "native kept" and "min_speedup 1.03" in node.reason
    assert all(c.status == "refused" and c.stage == "bench" and c.speedup < 1 for c in node.candidates)
    assert all("below min_speedup 1.03" in c.reason for c in node.candidates)
    [(_, _, gemm)] = [
        (s, st, n) for n, st in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.LibraryNode) for s in [st.sdfg]
    ]
    assert gemm.implementation not in (None, "ai")
    assert tasklets(sdfg) == []
    run_natively(sdfg)


def test_bench_gate_in_the_expansion_keeps_native_with_a_warning(openai_server, blas_ai, monkeypatch):
    monkeypatch.setenv("DACE_ai_bench", "gate")
    monkeypatch.setenv("DACE_ai_max_repair_attempts", "0")
    monkeypatch.setenv("DACE_ai_bench_sizes", "M=60,K=50,N=70")
    openai_server.respond_with(by_candidate(SLOW))
    sdfg = matmul_sdfg()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sdfg.expand_library_nodes()
    assert any("slower than the native expansion" in str(w.message) for w in caught)
    assert tasklets(sdfg) == []
    run_natively(sdfg)
    [session] = dace_ai.list_sessions()
    checks = json.loads(Path(session["folder"], "round-1", "checks.json").read_text())
    bench = next(row for row in checks if row["checker"] == "bench")
    assert bench["status"] == "failed" and bench["rule"] == "gate" and bench["details"]["speedup"] < 1


def test_generate_finds_the_gemm_behind_a_matmul(openai_server, blas_ai):
    openai_server.respond_with(by_candidate(FAST))
    sdfg = matmul_sdfg()
    summary = dace_ai.generate(sdfg)
    assert [n.status for n in summary.nodes] == ["generated"] and len(openai_server.requests) == 1
    assert "Gemm" in openai_server.requests[0].text()


# ------------------------------------------------------------------ anti-deception, one test per rule
DOUBLE = "for (int i = 0; i < N; ++i) _out[i] = 2.0 * _in0[i];"


def _only_candidate(server, code: str, sizes=None, program=None, code_global=""):
    server.respond_with(lambda request: Reply(text=json.dumps({"code": code, "code_global": code_global})))
    sdfg = (program or double_program()).to_sdfg()
    report = dace_ai.optimize(sdfg, samples=1, rounds=0, sizes=sizes or {"N": 1001})
    [node] = report.nodes
    [candidate] = node.candidates
    return node, candidate


def test_refuses_outputs_that_do_not_depend_on_the_inputs(openai_server):
    node, candidate = _only_candidate(openai_server, "for (int i = 0; i < N; ++i) _out[i] = 2.0 * i;")
    assert candidate.status == "refused" and "do not depend on its inputs" in candidate.reason
    assert node.outcome == "failed"


def test_refuses_reads_and_writes_outside_the_connectors(openai_server):
    openai_server.respond_with(
        by_candidate(
            "for (int i = 0; i <= N; ++i) _out[i] = 2.0;",  # one element past the output
            "for (int i = 0; i < N; ++i) _out[i] = 2.0 * _in0[i + 1];",  # one element past the input
            DOUBLE,
        )
    )
    sdfg = double_program().to_sdfg()
    [node] = dace_ai.optimize(sdfg, samples=3, rounds=0, sizes={"N": 1001}).nodes
    writes, reads, honest = sorted(node.candidates, key=lambda c: c.sample)
    assert writes.status == "refused" and "writes outside its connectors' buffers" in writes.reason
    assert reads.status == "refused" and "reads outside its connectors' buffers" in reads.reason
    assert honest.winner and node.outcome == "optimized"


NO_LIBRARY = "Write _out[i] = 2 * _in0[i] for every i < N. Do not call BLAS or any other library."


def no_library_program():
    @dace.program
    def twice(A: dace.float64[N]):
        return dace_ai.ai(NO_LIBRARY, A, name="twice")

    return twice


def test_refuses_the_library_call_the_description_forbids(openai_server):
    _, candidate = _only_candidate(
        openai_server,
        "for (int i = 0; i < N; ++i) _out[i] = _in0[i]; cblas_dscal(N, 2.0, _out, 1);",
        program=no_library_program(),
        code_global='extern "C" void cblas_dscal(int, double, double *, int);',
    )
    assert candidate.status == "refused" and "calls the library the node's description forbids" in candidate.reason
    assert "cblas_dscal" in candidate.reason


def test_refuses_a_timing_below_the_memory_bandwidth_bound(openai_server):
    cheat = "static const double *last = nullptr; if (_in0 == last) return; last = _in0; " + DOUBLE
    _, candidate = _only_candidate(openai_server, cheat, sizes={"N": 1 << 21})
    assert candidate.status == "refused" and "timing is implausible" in candidate.reason
    assert "GB/s" in candidate.reason


def test_cli_optimize_writes_json_and_the_optimized_sdfg(openai_server, tmp_path, capsys):
    from dace_ai.cli.main import main

    openai_server.respond_with(by_candidate(DOUBLE, "for (int i = N - 1; i >= 0; --i) _out[i] = _in0[i] * 2.0;"))
    path = tmp_path / "double.sdfg"
    double_program().to_sdfg().save(str(path))
    assert main(["optimize", str(path), "--samples", "2", "--rounds", "0", "--sizes", "N=4099", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    [node] = data["nodes"]
    assert node["outcome"] == "optimized" and len(node["candidates"]) == 2
    assert sum(c["winner"] for c in node["candidates"]) == 1 and node["input_tokens"] == 2000
    optimized = dace.SDFG.from_file(data["output"])
    assert tasklets(optimized) and pending_nodes(optimized) == []
    assert pending_nodes(dace.SDFG.from_file(str(path)))  # the input file is unchanged


def test_optimize_skips_pinned_nodes(openai_server):
    from dace_ai.config.settings import resolve_settings
    from dace_ai.storage.session_store import open_session

    sdfg = double_program().to_sdfg()
    settings = resolve_settings()
    with expansion_pass():
        [(nsdfg, state, node)] = pending_nodes(sdfg)
        ctx = node_context(nsdfg, state, node, settings)
    open_session(ctx.sdfg_name, ctx.key).update_summary(pinned=True)
    report = dace_ai.optimize(sdfg, samples=2, rounds=1)
    assert [(n.outcome, n.reason) for n in report.nodes] == [("skipped", "pinned")]
    assert openai_server.requests == [] and len(pending_nodes(sdfg)) == 1


def test_optimize_names_a_missing_node(openai_server):
    with pytest.raises(dace_ai.AIUsageError, match="no pending AI node 'nope'.*double_it"):
        dace_ai.optimize(double_program().to_sdfg(), "nope")
