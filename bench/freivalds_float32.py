"""How well the run-time check's Freivalds' test sees a wrong element of a float32 product, and that it
raises no false alarm on right ones (:func:`dace_ai.runtime_check.judge.freivalds_rows`).

* caught: one element of a right float32 ``n^3`` product (NumPy's, so OpenBLAS's SGEMM) is zeroed, at a
  random place, in each of ``--trials`` trials; the count of trials where the test names a row is printed
  (inputs uniform in [-0.5, 0.5), as the demo's);
* false alarms: right float32 products, several input distributions (centered, non-negative, normal,
  rows of very different scales) and sizes up to ``--largest``, computed by SGEMM and, at 1024, by plain
  recursive summation in float32 (the least accurate right way), each tested ``--repeats`` times.

    .venv/bin/python bench/freivalds_float32.py [--trials 100] [--largest 4096]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from dace_ai.runtime_check.judge import freivalds_excess, freivalds_rows


def inputs(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if kind == "centered":
        return (rng.random((n, n), np.float32) - 0.5, rng.random((n, n), np.float32) - 0.5)
    if kind == "non-negative":
        return rng.random((n, n), np.float32), rng.random((n, n), np.float32)
    if kind == "normal":
        return rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
    scales = np.float32(10.0) ** rng.integers(-3, 4, (n, 1)).astype(np.float32)  # rows of different scales
    return (rng.random((n, n), np.float32) * scales, rng.random((n, n), np.float32) - 0.5)


def recursive(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` summed one k at a time in float32 (each element's sum in order, no blocking, no FMA)."""
    c = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        c += a[:, k : k + 1] * b[k : k + 1, :]
    return c


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--largest", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(2026)

    n = args.size
    a, b = inputs("centered", n, rng)
    right = a @ b
    caught, start = 0, time.perf_counter()
    for _ in range(args.trials):
        c = right.copy()
        i, j = rng.integers(0, n, 2)
        c[i, j] = 0.0
        caught += bool(i in freivalds_rows(a, b, c, vectors=2, rng=rng))
    seconds = (time.perf_counter() - start) / args.trials
    print(
        f"one zeroed element of a float32 {n}^3 product: caught in {caught} of {args.trials} trials "
        f"(2 vectors, {seconds * 1e3:.1f} ms a test)"
    )

    print("false alarms on right float32 products (rows named / tests; largest row difference / bound):")
    sizes = [s for s in (256, 1024, 2048, 4096) if s <= args.largest]
    for size in sizes:
        for kind in ("centered", "non-negative", "normal", "scaled rows"):
            a, b = inputs(kind, size, rng)
            products = {"sgemm": a @ b}
            if size == 1024:
                products["recursive"] = recursive(a, b)
            for how, c in products.items():
                excess = [freivalds_excess(a, b, c, vectors=8, rng=rng) for _ in range(args.repeats)]
                alarms = sum(int((e > 1).sum()) for e in excess)
                worst = max(float(e.max()) for e in excess)
                print(f"  {size}^3 {kind:12s} {how:9s} {alarms} / {args.repeats} tests, {worst:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
