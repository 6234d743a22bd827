"""Wall time of ``dace-ai bench --offline`` on one worker process, on the local pool, and on dask.

Three runs of the same offline suite, each in a fresh output and build folder (so
each pays for its own compiles, as a first run does), measured side by side:

* local pool with 1 worker process (the serial baseline),
* local pool with one worker per core (the default),
* a 2-worker dask ``LocalCluster`` (real worker processes).

Prints the wall times and the ratios: serial / pool against the ideal (the number of
cores; goal: within 1.3x of it) and dask / pool (the cost of running on dask).

    .venv/bin/python bench/bench_scaling.py [--tasks gemm,softmax,...] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def run(args: list[str]) -> float:
    from dace_ai.cli.main import main

    start = time.perf_counter()
    code = main(["bench", "--offline", "--quiet", *args])
    if code != 0:
        raise SystemExit(f"dace-ai bench {' '.join(args)} failed with {code}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", help="comma-separated task ids (default: the whole suite)")
    parser.add_argument("--repeats", default="3", help="timed runs per candidate (default 3)")
    opts = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    extra = ["--repeats", opts.repeats] + (["--tasks", opts.tasks] if opts.tasks else [])
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-scaling-") as tmp:
        for name, how in (
            ("serial", ["--workers", "1"]),
            ("pool", ["--workers", str(cores)]),
            ("dask", ["--executor", "dask", "--workers", "2"]),
        ):
            out = Path(tmp) / name
            times[name] = run([*extra, *how, "--out", str(out)])
            attempts = json.loads((out / "results.json").read_text())["attempts"]
            print(f"{name:<7} {times[name]:8.1f} s  ({len(attempts)} attempts)", flush=True)
    speedup = times["serial"] / times["pool"]
    print(f"cores: {cores}")
    print(f"serial / pool: {speedup:.2f}x (ideal {cores}x; ideal / measured = {cores / speedup:.2f}, goal <= 1.3)")
    print(f"dask (2 workers) / pool: {times['dask'] / times['pool']:.2f}")


if __name__ == "__main__":
    main()
