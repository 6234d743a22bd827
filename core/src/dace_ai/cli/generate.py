"""``dace-ai generate FILE.sdfg``: ask for every AI node of a saved program at once and fill the answer cache.

Loads a saved SDFG and runs :func:`dace_ai.generate` on it: the provider is asked
here (keys stay on this machine), each answer's checks run on the executor
(``--executor threads|local|dask``, ``--scheduler``, ``--workers``). The SDFG file is
not changed; compiling the program afterwards finds every checked answer in the
cache. Exit status 1 when a node got no answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dace_ai.cli.help import add_example
from dace_ai.errors import AIUsageError


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """``--executor``, ``--scheduler``, ``--workers``: where the candidates' checks run."""
    parser.add_argument("--executor", default=None,
                        help="executor plugin running the checks: threads (this process, the default), local "
                             "(worker processes), dask, ... (setting 'executor')")
    parser.add_argument("--scheduler", default=None, metavar="ADDR",
                        help="address of a running scheduler, e.g. tcp://head:8786 (dask)")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="workers the executor starts when there is no scheduler")


def load_sdfg(path: Path, command: str) -> Any:
    import dace

    if not path.is_file():
        raise AIUsageError(f"dace-ai {command}: no such file {str(path)!r}")
    try:
        return dace.SDFG.from_file(str(path))
    except Exception as exc:  # noqa: BLE001 - any parse failure is the file's problem
        raise AIUsageError(f"dace-ai {command}: {str(path)!r} is not a readable SDFG file: "
                           f"{type(exc).__name__}: {exc}") from None


def add_parser(sub: Any) -> None:
    """Register the ``generate`` subcommand on ``dace-ai``'s subparsers."""
    parser = sub.add_parser(
        "generate", help="ask for every AI node at once and cache the checked answers",
        description="Ask the provider for every pending AI node of a saved SDFG concurrently, check each answer "
                    "(on the executor you name) and cache the ones that pass. The file is not changed.")
    parser.add_argument("file", help="an SDFG saved with sdfg.save() (.sdfg or .sdfgz)")
    add_executor_arguments(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable summary")
    add_example(parser, "dace-ai generate prog.sdfg --executor dask --workers 2")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import dace_ai

    sdfg = load_sdfg(Path(args.file), "generate")
    summary = dace_ai.generate(sdfg, executor=args.executor, scheduler=args.scheduler, workers=args.workers)
    if args.json:
        data = {"provider": summary.provider, "executor": summary.executor, "requests": summary.requests,
                "seconds": summary.seconds, "nodes": [{k: v for k, v in asdict(n).items() if k != "usage"}
                                                      for n in summary.nodes]}
        json.dump(data, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print(summary)
    return 1 if summary.failures else 0
