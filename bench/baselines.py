"""A candidate against every baseline on this machine, side by side: Gemm, Gemv, Dot and a reduction.

For each task, the suite's recorded answer (written by the project) is built into the
task's program and timed in one sandboxed child against

* the native program (DaCe ``pure``: what the bench stage used to report alone),
* DaCe's own library implementations installed here (``OpenBLAS``, ``MKL``; for a
  reduction ``OpenMP`` and ``pure-seq``),
* the task's NumPy reference (NumPy's BLAS is OpenBLAS),

on the same inputs, in interleaved samples, with the same threads (``OMP_NUM_THREADS``,
default 1; NumPy's OpenBLAS follows it). Prints seconds per call and the candidate's
speedup over each baseline, and which one is the strongest.

    .venv/bin/python bench/baselines.py [--tasks gemm,gemv,dot,sum_axis1] [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path


def measure(task: str, build: Path, repeats: int) -> dict:
    from dace_ai.evaluation.campaign import shipped_answers
    from dace_ai.evaluation.task_run import run_task
    from dace_ai.evaluation.tasks import recorded_answers

    answer = recorded_answers(shipped_answers("core"), task)[0]["answer"]
    return run_task(
        {
            "suite": "core",
            "task": task,
            "answer": answer,
            "build_root": str(build),
            "seeds": [0],
            "repeats": repeats,
            "time": True,
            "baselines": True,
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="gemm,gemv,dot,sum_axis1", help="task ids of the core suite")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved timed samples per side (default 7)")
    parser.add_argument("--build", type=Path, help="build folder (default: a fresh temporary one)")
    opts = parser.parse_args()
    build = opts.build or Path(tempfile.mkdtemp(prefix="dace-ai-baselines-"))
    print(
        f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} on {os.cpu_count()} cores; "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1 (default)')}; build {build}"
    )
    for task in opts.tasks.split(","):
        run = measure(task.strip(), build, opts.repeats)
        if "error" in run or not run.get("correct"):
            print(f"\n{task}: not timed: {run.get('error') or run.get('candidate_mismatch') or run}")
            continue
        candidate = run["candidate_seconds"]
        sides = {run.get("native_label", "native"): run["baseline_seconds"], **run.get("baselines_seconds", {})}
        strongest = min(sides, key=sides.get)
        print(f"\n{task}: candidate (recorded answer) {candidate * 1e6:10.1f} us per call")
        for label, seconds in sides.items():
            mark = "  <- strongest" if label == strongest else ""
            print(f"  {label:32s} {seconds * 1e6:10.1f} us   candidate {seconds / candidate:7.2f}x vs {label}{mark}")
        for name, reason in sorted((run.get("baselines_left_out") or {}).items()):
            if "not for cpu" not in reason:
                print(f"  (not timed: DaCe '{name}': {reason})")


if __name__ == "__main__":
    main()
