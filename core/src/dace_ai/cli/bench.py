"""``dace-ai bench``: score providers, models and targets on a task suite.

    dace-ai bench --offline                       # replay the answers shipped with the suite
    dace-ai bench --provider anthropic --model claude-sonnet-4-5 --samples 4 --record answers/
    dace-ai bench --offline answers/ --executor dask --scheduler tcp://head:8786

Writes ``results.json`` (every attempt), ``report.md`` and ``report.png`` (with
matplotlib: ``pip install 'dace-ai[bench]'``) under ``--out``; rerunning with the same
``--out`` skips finished attempts. Exit status 0 when the harness ran, whatever the
attempts scored; 1 with a short message when it could not.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dace_ai.cli.help import add_example

SHIPPED = "shipped"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="score providers/models/targets on a task suite",
        description="Generate (or replay) answers for every task of a suite, check, verify and "
        "time them, and write results.json, report.md and report.png.",
    )
    p.add_argument("--suite", default="core", help="task suite (default: core)")
    p.add_argument("--tasks", help="comma-separated task ids (default: every task of the suite)")
    p.add_argument("--provider", action="append", default=[], help="provider of a configuration (repeatable)")
    p.add_argument(
        "--model",
        action="append",
        default=[],
        help="model of a configuration (repeatable; paired with --provider in order)",
    )
    p.add_argument(
        "--target",
        action="append",
        default=[],
        help="target to ask and check for (repeatable; default: this machine's)",
    )
    p.add_argument("--samples", type=int, default=1, help="answers per task and configuration (default 1)")
    p.add_argument(
        "--offline",
        nargs="?",
        const=SHIPPED,
        metavar="DIR",
        help="replay recorded answers: the suite's own without DIR, or those in DIR",
    )
    p.add_argument("--record", type=Path, metavar="DIR", help="record the live answers into DIR for --offline DIR")
    p.add_argument("--executor", default="local", help="executor plugin running the jobs (default: local)")
    p.add_argument("--scheduler", help="address of a running scheduler (executors that use one, e.g. dask)")
    p.add_argument("--workers", type=int, help="worker processes (local pool, or dask workers started here)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per candidate and baseline (default 5)")
    p.add_argument("--out", type=Path, default=Path("bench-results"), help="output folder (default bench-results)")
    p.add_argument(
        "--build", type=Path, metavar="DIR", help="build folder of the programs (default OUT/build); runs may share one"
    )
    p.add_argument("--export-jsonl", type=Path, metavar="FILE", help="one JSON line per attempt (RL export)")
    p.add_argument("--reward", help="reward weights for the export, e.g. compile=0.1,correct=0.5,speedup=0.4")
    p.add_argument("--quiet", action="store_true", help="no line per finished attempt")
    p.set_defaults(func=main)
    add_example(p, "dace-ai bench --offline --tasks axpy,gemm --out bench-results")


def main(args: argparse.Namespace) -> int:
    """Run the bench command (:mod:`dace_ai.cli.bench_run`)."""
    from dace_ai.cli.bench_run import main as run  # local: CLI startup (the evaluation loads when the command runs)

    return run(args, SHIPPED)
