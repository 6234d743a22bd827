"""``dace-ai generate FILE.sdfg``: ask for every AI node of a saved program at once and fill the answer cache.

Loads a saved SDFG and runs :func:`dace_ai.generate` on it: the provider is asked
here (keys stay on this machine), each answer's checks run on the executor
(``--executor threads|local|dask|slurm|pbs|lsf``, ``--scheduler``, ``--workers``, the
batch options of :mod:`dace_ai.cli.executor_args`). The SDFG file is not changed;
compiling the program afterwards finds every checked answer in the cache. Exit
status 1 when a node got no answer. ``--dry-run`` prints the executor's job script.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import dace_ai
from dace_ai.cli.executor_args import add_executor_arguments, dry_run, settings_overrides
from dace_ai.cli.help import add_example
from dace_ai.errors import AIUsageError


def load_sdfg(path: Path, command: str) -> Any:
    import dace

    if not path.is_file():
        raise AIUsageError(f"dace-ai {command}: no such file {str(path)!r}")
    try:
        return dace.SDFG.from_file(str(path))
    except Exception as exc:  # noqa: BLE001 - any parse failure is the file's problem
        raise AIUsageError(
            f"dace-ai {command}: {str(path)!r} is not a readable SDFG file: {type(exc).__name__}: {exc}"
        ) from None


def add_parser(sub: Any) -> None:
    """Register the ``generate`` subcommand on ``dace-ai``'s subparsers."""
    parser = sub.add_parser(
        "generate",
        help="ask for every AI node at once and cache the checked answers",
        description="Ask the provider for every pending AI node of a saved SDFG concurrently, check each answer "
        "(on the executor you name) and cache the ones that pass. The file is not changed.",
    )
    parser.add_argument("file", nargs="?", help="an SDFG saved with sdfg.save() (.sdfg or .sdfgz)")
    add_executor_arguments(parser, dry_run=True)
    parser.add_argument("--json", action="store_true", help="machine-readable summary")
    add_example(
        parser,
        "dace-ai generate prog.sdfg --executor dask --workers 2",
        "dace-ai generate prog.sdfg --executor slurm --queue normal --walltime 01:00:00 --cores 32",
        "dace-ai generate --executor slurm --queue normal --dry-run   # the job script, nothing started",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.dry_run:
        return dry_run(args)
    if not args.file:
        raise AIUsageError("dace-ai generate: name the SDFG file (only --dry-run runs without one)")
    sdfg = load_sdfg(Path(args.file), "generate")
    summary = dace_ai.generate(
        sdfg,
        settings=settings_overrides(args) or None,
        executor=args.executor,
        scheduler=args.scheduler,
        workers=args.workers,
    )
    if args.json:
        data = {
            "provider": summary.provider,
            "executor": summary.executor,
            "requests": summary.requests,
            "seconds": summary.seconds,
            "nodes": [{k: v for k, v in asdict(n).items() if k != "usage"} for n in summary.nodes],
        }
        json.dump(data, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print(summary)
    return 1 if summary.failures else 0
