"""Import cost of dace-ai relative to DaCe itself.

``import dace_ai`` must stay cheap: it registers the config category and the
user API but loads no plugin and imports no provider SDK. Both commands are
timed alternately in one run (the machine is shared and noisy); the ratio of
the median wall times is the figure of merit, with the ratios of median CPU time
(user + system of the child, less sensitive to other load) and of the fastest
runs printed beside it.

Run: .venv/bin/python bench/import_cost.py [repeats]
Target: ratio <= 1.15.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time


def measure(code: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``python -c code``."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu


def main(repeats: int = 9) -> None:
    measure("import dace_ai")  # warm the file-system cache and byte-code for both
    runs: dict[str, list[tuple[float, float]]] = {"dace": [], "dace_ai": []}
    for _ in range(repeats):
        for module in runs:
            runs[module].append(measure(f"import {module}"))
    for module, samples in runs.items():
        walls = [w for w, _ in samples]
        cpus = [c for _, c in samples]
        print(
            f"import {module:<8} wall min {min(walls):.3f} s, median {statistics.median(walls):.3f} s; "
            f"cpu median {statistics.median(cpus):.3f} s ({repeats} runs)"
        )
    wall = {m: [w for w, _ in s] for m, s in runs.items()}
    cpu = {m: [c for _, c in s] for m, s in runs.items()}
    median_wall = statistics.median(wall["dace_ai"]) / statistics.median(wall["dace"])
    median_cpu = statistics.median(cpu["dace_ai"]) / statistics.median(cpu["dace"])
    fastest = min(wall["dace_ai"]) / min(wall["dace"])
    print(f"ratio dace_ai/dace, fastest runs (wall) = {fastest:.3f}; median cpu = {median_cpu:.3f}")
    print(f"ratio dace_ai/dace, median wall = {median_wall:.3f} (target <= 1.15)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 9)
