"""This machine's roofline next to what NumPy reaches: nothing measured may exceed the roofline.

Measures the roofline (``dace-ai targets --roofline``: peak FMA throughput per element
type, bandwidth per memory level, one thread and all cores; stored, so a second run
reads it unless ``--remeasure``), then NumPy's sgemm and dgemm and a NumPy copy of
arrays far beyond the last-level cache, and prints each as a ratio of the matching
roofline figure:

* one thread (OpenBLAS limited to one thread, timed by the CPU time of the calling
  thread, as the roofline is): a ratio above 1.0 would mean the roofline is wrong;
* all cores (NumPy's OpenBLAS with its own thread count, wall time): on a loaded
  machine this ratio says more about the neighbours than about NumPy.

A healthy machine shows ratios between about 0.5 and 1.0 for sgemm/dgemm and between
0.5 and 1.0 for the copy (a copy moves two bytes per byte read).

    .venv/bin/python bench/roofline.py [--remeasure] [--n 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import json, sys, time
    import numpy as np

    clock = time.thread_time if sys.argv[3] == "cpu" else time.perf_counter

    def best(call, runs):
        call()
        times = []
        for _ in range(runs):
            start = clock()
            call()
            times.append(clock() - start)
        return min(times)

    n, copy_bytes = int(sys.argv[1]), int(sys.argv[2])
    rng = np.random.default_rng(0)
    out = {}
    for name, dtype in (("sgemm", np.float32), ("dgemm", np.float64)):
        a, b = rng.random((n, n)).astype(dtype), rng.random((n, n)).astype(dtype)
        c = np.empty_like(a)
        out[name] = 2 * n ** 3 / best(lambda: np.matmul(a, b, out=c), 7) / 1e9
    src = np.ones(copy_bytes // 16)
    dst = np.zeros_like(src)
    out["copy"] = 2 * src.nbytes / best(lambda: np.copyto(dst, src), 5) / 1e9
    print(json.dumps(out))
""")


def numpy_figures(n: int, copy_bytes: int, one_thread: bool) -> dict[str, float]:
    """NumPy's GFLOP/s and GB/s in a child (OpenBLAS's threads are fixed when it loads)."""
    env = dict(os.environ)
    if one_thread:
        env["OPENBLAS_NUM_THREADS"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(n), str(copy_bytes), "cpu" if one_thread else "wall"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--remeasure", action="store_true", help="measure the roofline again")
    parser.add_argument("--n", type=int, default=1024, help="matrix size of sgemm/dgemm (default 1024)")
    args = parser.parse_args()

    from dace_ai.performance import machine_roofline

    roofline = machine_roofline(remeasure=args.remeasure)
    memory = next(level for level in roofline.levels if level.name == "memory")
    print(
        f"roofline of {roofline.cpu} ({roofline.compiler} {' '.join(roofline.flags)}), "
        f"measured {roofline.measured_at} in {roofline.seconds:.1f} s"
    )
    print(f"{'':<26}{'NumPy':>12}{'roofline':>12}{'ratio':>8}")
    for threads, one in ((1, True), (roofline.threads, False)):
        figures = numpy_figures(args.n, memory.measured_bytes, one)
        clock = "CPU time" if one else "wall time"
        for name, dtype in (("sgemm", "float32"), ("dgemm", "float64")):
            peak = roofline.peak(dtype, threads)
            print(
                f"{name} {threads} thread(s) GFLOP/s".ljust(26)
                + f"{figures[name]:>12.1f}{peak:>12.1f}{figures[name] / peak:>8.2f}  ({clock})"
            )
        bandwidth, level = roofline.bandwidth(threads, memory.measured_bytes)
        copy_threads = 1  # NumPy copies on one thread whatever OpenBLAS uses
        print(
            f"copy {copy_threads} thread, {level} GB/s".ljust(26)
            + f"{figures['copy']:>12.1f}{bandwidth:>12.1f}{figures['copy'] / bandwidth:>8.2f}  "
            f"({clock}; roofline at {threads} thread(s))"
        )


if __name__ == "__main__":
    main()
