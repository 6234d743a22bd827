"""What the run-time spot check costs in the demo's programs: ``runtime_check=first`` (the default) beside ``off``.

Builds the demo's three programs (``samples/tiled_gemm``, the shipped answers of one ISA variant,
every default check stage) twice, once with each setting, then, in one process and on the same
inputs:

* the first call of each compiled program (with ``first`` it records the node's call and compares
  it with the reference in this process; the check's own time is printed beside it; the ``off``
  program is called first, so what a process pays once, thread pools and fresh pages, lands on it), and
* later calls, in interleaved rounds (each side once per round, after a pause), best and median:
  what a program pays for carrying the check once it has run (one atomic load per node call and
  the call hook's lookup).

    .venv/bin/python bench/runtime_check_cost.py [--variant avx2|avx512] [--rounds 11] [--size 1024]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "tiled_gemm" / "tiled_gemm.py"


def load_sample():
    spec = importlib.util.spec_from_file_location("tiled_gemm_demo", SAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", choices=("avx2", "avx512"), default=None)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--pause", type=float, default=0.05)
    args = parser.parse_args()

    import dace
    import dace_ai
    import numpy as np

    demo = load_sample()
    variant = args.variant or demo.variant_for_this_cpu()
    demo.setup(variant)
    programs = {}
    for mode in ("first", "off"):
        dace.Config.set("ai", "runtime_check", value=mode)
        programs[mode], _ = demo.build_programs(variant, Path(tempfile.mkdtemp(prefix="rc-bench-")), show_code=False)
    dace.Config.set("ai", "runtime_check", value="first")

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
        for mode in ("off", "first"):  # off first: the process's own first-call costs (threads, pages) land there
            before = len(dace_ai.runtime_checks())
            start = time.perf_counter()
            call(programs[mode][name])
            seconds = time.perf_counter() - start
            checks = dace_ai.runtime_checks()[before:]
            spent = sum(c.seconds for c in checks)
            how = f" (check {spent * 1e3:.1f} ms: {checks[0].checked})" if checks else ""
            row.append(f"{mode} {seconds * 1e3:8.2f} ms{how}")
        print(f"  {name:11s} " + "  |  ".join(row))

    print(f"\nLater calls, {args.rounds} interleaved rounds (best / median), ratio first/off:")
    for name, call in calls.items():
        times: dict[str, list[float]] = {"first": [], "off": []}
        for _ in range(args.rounds):
            for mode in ("first", "off"):
                time.sleep(args.pause)
                start = time.perf_counter()
                call(programs[mode][name])
                times[mode].append(time.perf_counter() - start)
        best = {m: min(t) for m, t in times.items()}
        median = {m: statistics.median(t) for m, t in times.items()}
        print(
            f"  {name:11s} first {best['first'] * 1e3:7.2f} / {median['first'] * 1e3:7.2f} ms   "
            f"off {best['off'] * 1e3:7.2f} / {median['off'] * 1e3:7.2f} ms   "
            f"ratio {best['first'] / best['off']:.3f} (best), {median['first'] / median['off']:.3f} (median)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
