"""Import cost of dace-ai relative to DaCe itself.

``import dace_ai`` must stay cheap: it registers the config category and the
user API but loads no plugin and imports no provider SDK. Both commands are
timed alternately in one run (the machine is shared and noisy) and the median
wall times are compared.

Run: .venv/bin/python bench/import_cost.py [repeats]
Target: ratio <= 1.15.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time


def wall(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def main(repeats: int = 9) -> None:
    wall("import dace_ai")  # warm the file-system cache and byte-code for both
    dace_times, ai_times = [], []
    for _ in range(repeats):
        dace_times.append(wall("import dace"))
        ai_times.append(wall("import dace_ai"))
    t_dace, t_ai = statistics.median(dace_times), statistics.median(ai_times)
    print(f"import dace     median {t_dace:.3f} s over {repeats} runs")
    print(f"import dace_ai  median {t_ai:.3f} s over {repeats} runs")
    print(f"ratio dace_ai/dace = {t_ai / t_dace:.3f} (target <= 1.15)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 9)
