"""Overhead of ``dace_ai.optimize`` beyond the candidates' own compile and run time.

One Gemm (``C[:] = A @ B`` with ``blas.default_implementation = 'ai'``) is
optimized with ``--samples`` candidates and ``--rounds`` refinement rounds; the
provider is the real ``openai`` SDK talking to FakeLLMServer (tests/fakes) on
127.0.0.1, answering at once. Checks run one candidate at a time
(``check_concurrency=1``) so that their times add up to the wall time they
occupy. The candidates' own time is what their checks took (compiling, building,
verifying and timing each candidate, the native program built once); everything
else (plugin loading, context collection, prompts, requests, sessions, choosing,
placing the tasklet) is optimize's overhead.

Prints the wall time, the candidates' check time and their ratio
(overhead = wall / checks - 1, target: under 20%).

    .venv/bin/python bench/optimize.py [--samples 4] [--rounds 1] [--size 96]
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FAST = (
    "for (int i = 0; i < M; ++i) { for (int j = 0; j < N; ++j) _c[i * N + j] = 0.0;"
    " for (int k = 0; k < K; ++k) { const double a = _a[i * K + k];"
    " for (int j = 0; j < N; ++j) _c[i * N + j] += a * _b[k * N + j]; } }"
)
NAIVE = (
    "for (int i = 0; i < M; ++i) for (int j = 0; j < N; ++j) { double s = 0.0;"
    " for (int k = 0; k < K; ++k) s += _a[i * K + k] * _b[k * N + j]; _c[i * N + j] = s; }"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--size", type=int, default=96, help="M = K = N of the timing runs")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="dace-ai-bench-optimize-"))
    os.chdir(work)
    import dace
    import dace_ai
    from dace.libraries import blas

    from tests.fakes.llm_server import FakeLLMServer, Reply

    counter = {"n": 0}

    def answer(request):
        counter["n"] += 1  # alternate two correct answers, each candidate slightly different text
        code = (FAST if counter["n"] % 2 else NAIVE) + f" /* candidate {counter['n']} */"
        return Reply(text=json.dumps({"code": code}), input_tokens=2000, output_tokens=150)

    server = FakeLLMServer().start().respond_with(answer)
    os.environ.update(
        {
            "OPENAI_API_KEY": "bench-key-not-secret",
            "DACE_ai_provider": "openai",
            "DACE_ai_base_url": server.openai_url,
            "DACE_ai_model": "gpt-bench",
            "DACE_ai_check_concurrency": "1",
        }
    )
    dace.Config.set("default_build_folder", value=str(work / ".dacecache"))
    M, K, N = (dace.symbol(s) for s in "MKN")

    @dace.program
    def mm(A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]):
        C[:] = A @ B

    blas.default_implementation = "ai"
    try:
        sdfg = mm.to_sdfg()
        started = time.perf_counter()
        report = dace_ai.optimize(
            sdfg, samples=args.samples, rounds=args.rounds, sizes={"M": args.size, "K": args.size, "N": args.size}
        )
        wall = time.perf_counter() - started
    finally:
        blas.default_implementation = None
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    checks = report.check_seconds
    [node] = report.nodes
    print(
        f"optimize of one Gemm: {len(node.candidates)} candidates ({args.samples} samples x "
        f"{1 + args.rounds} rounds), outcome {node.outcome}, winner {node.speedup_text()}"
    )
    print(f"wall time of optimize:                 {wall:7.2f} s")
    print(f"candidates' own checks (compile, run): {checks:7.2f} s")
    print(f"overhead = wall / checks - 1 = {100 * (wall / checks - 1):.1f}%  (target < 20%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
