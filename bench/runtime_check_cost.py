"""What the run-time spot check costs: ``runtime_check=auto`` (the default) beside ``off``, on a tiny node and
in the demo's programs.

First a tiny node (16 float64 elements scaled by 3, the answer supplied, every default check stage) is
built twice, once with each setting, and called ``--tiny-calls`` times each through its compiled program,
in interleaved rounds (each side a slice of the calls per round): per call, best and median round, and
their ratio, which is what a program pays per call for carrying the check when no check is due (the
recorder's call counter and shape compare in C++, and the call hook's count; the first call, checked,
is made before the rounds). The call hook is installed once a process places a checked tasklet, and
then runs around both programs' calls.

Then the demo: builds the demo's three programs (``samples/tiled_gemm``, the shipped answers of one ISA variant,
every default check stage) twice, once with each setting, then, in one process and on the same
inputs:

* the first call of each compiled program (with ``first`` it records the node's call and compares
  it with the reference in this process; the check's own time is printed beside it; the ``off``
  program is called first, so what a process pays once, thread pools and fresh pages, lands on it), and
* later calls, in interleaved rounds (each side once per round, after a pause), best and median:
  what a program pays for carrying the check once it has run (a few loads and a compare per node call
  and the call hook's count; a sampled call, when one is due, is checked there too).

    .venv/bin/python bench/runtime_check_cost.py [--variant avx2|avx512] [--rounds 11] [--size 1024]
        [--tiny-calls 20000] [--tiny-only]
"""

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

import dace
import dace_ai

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "tiled_gemm" / "tiled_gemm.py"


def load_sample():
    spec = importlib.util.spec_from_file_location("tiled_gemm_demo", SAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


N = dace.symbol("N")


def scaled(x):
    return 3 * x


@dace.program
def tiny_scale(x: dace.float64[N], y: dace.float64[N]):
    y[:] = dace_ai.ai("_out[i] = 3 * _x[i] for every i < N", x=x, reference=scaled)


def tiny(calls: int, rounds: int) -> None:
    """The tiny node's per-call cost with the default schedule beside ``off``."""
    import json

    import numpy as np
    from dace_ai.expansion.pending import pending_nodes

    answer = json.dumps({"code": "for (int i = 0; i < N; ++i) _out[i] = 3 * _x[i];"})
    programs = {}
    for mode in ("auto", "off"):
        sdfg = tiny_scale.to_sdfg()
        sdfg.name = f"runtime_check_tiny_{mode}"
        ((parent, state, node),) = pending_nodes(sdfg)
        dace_ai.implement(parent, state, node, {"bench": "off", "runtime_check": mode}, supplied=answer)
        programs[mode] = sdfg.compile()
    x, y = np.random.rand(16), np.zeros(16)
    for program in programs.values():
        program(x=x, y=y, N=16)  # the first call (checked under auto)
    per_round = max(calls // rounds, 1)
    times: dict[str, list[float]] = {"auto": [], "off": []}
    for turn in range(rounds):
        for mode in ("auto", "off") if turn % 2 else ("off", "auto"):  # each side first every other round
            program = programs[mode]
            start = time.perf_counter()
            for _ in range(per_round):
                program(x=x, y=y, N=16)
            times[mode].append((time.perf_counter() - start) / per_round)
    best = {m: min(t) for m, t in times.items()}
    median = {m: statistics.median(t) for m, t in times.items()}
    checks = [c for c in dace_ai.runtime_checks() if c.node == "ai"]
    print(
        f"\nTiny node (16 elements), {per_round * rounds} calls a side in {rounds} interleaved rounds, per call "
        f"(best / median round):\n  auto {best['auto'] * 1e6:6.2f} / {median['auto'] * 1e6:6.2f} us   "
        f"off {best['off'] * 1e6:6.2f} / {median['off'] * 1e6:6.2f} us   ratio {best['auto'] / best['off']:.3f} "
        f"(best), {median['auto'] / median['off']:.3f} (median); checks made under auto: "
        f"{', '.join(f'call {c.call}' for c in checks) or 'none'}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", choices=("avx2", "avx512"), default=None)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--pause", type=float, default=0.05)
    parser.add_argument("--tiny-calls", type=int, default=20000)
    parser.add_argument("--tiny-rounds", type=int, default=100)
    parser.add_argument("--tiny-only", action="store_true", help="measure the tiny node only")
    args = parser.parse_args()

    tiny(args.tiny_calls, args.tiny_rounds)
    if args.tiny_only:
        return 0

    import dace
    import dace_ai
    import numpy as np

    demo = load_sample()
    variant = args.variant or demo.variant_for_this_cpu()
    demo.setup(variant)
    programs = {}
    for mode in ("auto", "off"):
        dace.Config.set("ai", "runtime_check", value=mode)
        programs[mode], _ = demo.build_programs(variant, Path(tempfile.mkdtemp(prefix="rc-bench-")), show_code=False)
    dace.Config.set("ai", "runtime_check", value="auto")

    n = args.size
    rng = np.random.default_rng(0)
    A = rng.random((n, n), dtype=np.float32) - 0.5
    B = rng.random((n, n), dtype=np.float32) - 0.5
    C = np.zeros((n, n), dtype=np.float32)
    DA = rng.random((2048, 64), dtype=np.float32) - 0.5
    DB = rng.random((64, 2048), dtype=np.float32) - 0.5
    bias = rng.random(2048, dtype=np.float32) - 0.5
    DC = np.zeros((2048, 2048), dtype=np.float32)
    calls = {
        "tiled_gemm": lambda p: p(A=A, B=B, C=C, M=n, N=n, K=n),
        "matmul": lambda p: p(A=A, B=B, M=n, N=n, K=n),
        "dense_relu": lambda p: p(A=DA, B=DB, bias=bias, C=DC, M=2048, N=2048, K=64),
    }

    print(f"\nFirst call of each compiled program ({n}^3 products, dense 2048x2048x64, float32):")
    for name, call in calls.items():
        row = []
        for mode in ("off", "auto"):  # off first: the process's own first-call costs (threads, pages) land there
            before = len(dace_ai.runtime_checks())
            start = time.perf_counter()
            call(programs[mode][name])
            seconds = time.perf_counter() - start
            checks = dace_ai.runtime_checks()[before:]
            spent = sum(c.seconds for c in checks)
            how = f" (check {spent * 1e3:.1f} ms: {checks[0].checked})" if checks else ""
            row.append(f"{mode} {seconds * 1e3:8.2f} ms{how}")
        print(f"  {name:11s} " + "  |  ".join(row))

    print(f"\nLater calls, {args.rounds} interleaved rounds (best / median), ratio auto/off:")
    for name, call in calls.items():
        times: dict[str, list[float]] = {"auto": [], "off": []}
        for _ in range(args.rounds):
            for mode in ("auto", "off"):
                time.sleep(args.pause)
                start = time.perf_counter()
                call(programs[mode][name])
                times[mode].append(time.perf_counter() - start)
        best = {m: min(t) for m, t in times.items()}
        median = {m: statistics.median(t) for m, t in times.items()}
        print(
            f"  {name:11s} auto {best['auto'] * 1e3:7.2f} / {median['auto'] * 1e3:7.2f} ms   "
            f"off {best['off'] * 1e3:7.2f} / {median['off'] * 1e3:7.2f} ms   "
            f"ratio {best['auto'] / best['off']:.3f} (best), {median['auto'] / median['off']:.3f} (median)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
