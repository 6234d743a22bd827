"""``dace-ai optimize FILE.sdfg [NODE]``: best of several candidates per AI node, timed against native.

Loads a saved SDFG, runs :func:`dace_ai.optimize` on it, prints the report (a
table on a terminal, ``--json`` for scripts) and saves the optimized SDFG next
to the input (``FILE.optimized.sdfg``, or ``--output``); the input file is never
changed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import dace_ai
from dace_ai.cli.executor_args import add_executor_arguments, settings_overrides
from dace_ai.cli.generate import load_sdfg
from dace_ai.cli.help import add_example
from dace_ai.errors import AIUsageError


def add_parser(sub: Any) -> None:
    """Register the ``optimize`` subcommand on ``dace-ai``'s subparsers."""
    parser = sub.add_parser(
        "optimize",
        help="sample candidates per AI node, keep the fastest correct one",
        description="Ask for several candidates per AI node, check and time each against the node's native "
        "expansion, keep the fastest, refine it with its timings, and save the optimized SDFG.",
    )
    parser.add_argument("file", help="an SDFG saved with sdfg.save() (.sdfg or .sdfgz)")
    parser.add_argument("node", nargs="?", help="only this node (its label); default: every AI node")
    parser.add_argument("--samples", type=int, default=4, help="candidates per round (default 4)")
    parser.add_argument("--rounds", type=int, default=2, help="refinement rounds after the first (default 2)")
    parser.add_argument("--sizes", default=None, help="symbol values for timing, e.g. N=4096,M=512")
    parser.add_argument("--output", default=None, help="where to save the optimized SDFG (default FILE.optimized.sdfg)")
    parser.add_argument("--json", action="store_true", help="machine-readable report")
    add_executor_arguments(parser)
    parser.set_defaults(func=run)
    add_example(
        parser,
        "dace-ai optimize prog.sdfg --executor slurm --queue normal --walltime 02:00:00 --adapt 0:8",
        "dace-ai optimize prog.sdfg --samples 4 --rounds 2 --sizes N=4096 --output fast.sdfg",
    )


def run(args: argparse.Namespace) -> int:
    from dace_ai.sandbox.bench_sizes import parse_sizes  # local: CLI startup (loaded when the command runs)

    path = Path(args.file)
    if not path.is_file():
        raise AIUsageError(f"dace-ai optimize: no such file {str(path)!r}")
    try:
        sizes = parse_sizes(args.sizes)
    except ValueError as exc:
        raise AIUsageError(f"dace-ai optimize --sizes {args.sizes!r}: {exc}") from None
    sdfg = load_sdfg(path, "optimize")
    report = dace_ai.optimize(
        sdfg,
        args.node,
        samples=args.samples,
        rounds=args.rounds,
        sizes=sizes or None,
        settings=settings_overrides(args) or None,
        executor=args.executor,
        scheduler=args.scheduler,
        workers=args.workers,
    )
    output = Path(args.output) if args.output else path.with_name(path.name.split(".")[0] + ".optimized.sdfg")
    sdfg.save(str(output))
    if args.json:
        json.dump({**report.to_json(), "output": str(output)}, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        report.print()
        print(f"optimized SDFG saved to {output}")
    return 0 if all(n.outcome != "failed" for n in report.nodes) else 1
