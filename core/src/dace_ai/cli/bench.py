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
import sys
from pathlib import Path
from typing import Any

from dace_ai.cli.help import add_example
from dace_ai.errors import SettingsError

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


def configurations(args: argparse.Namespace) -> list[Any]:
    from dace_ai.evaluation.campaign import (  # local: CLI startup (loaded when the command runs)
        Configuration,
        shipped_answers,
    )

    targets = args.target or [None]
    if args.offline:
        if args.provider or args.model:
            raise SettingsError("--offline replays recorded answers; it takes no --provider/--model")
        if args.record:
            raise SettingsError("--record records live answers; it cannot be combined with --offline")
        folder = shipped_answers(args.suite) if args.offline == SHIPPED else Path(args.offline)
        if not folder.is_dir():
            raise SettingsError(f"--offline {args.offline}: no such folder")
        model = "recorded" if args.offline == SHIPPED else f"recorded:{folder.name}"
        return [Configuration("offline", model, t, str(folder.resolve())) for t in targets]
    if not args.provider:
        raise SettingsError("give --offline to replay recorded answers, or --provider P --model M for a live run")
    providers, models = args.provider, args.model or [""]
    if len(providers) == 1:
        pairs = [(providers[0], m) for m in models]
    elif len(providers) == len(models):
        pairs = list(zip(providers, models))
    else:
        raise SettingsError(
            f"{len(providers)} --provider but {len(models)} --model: give one provider for "
            "several models, or one --model per --provider"
        )
    return [Configuration(p, m, t) for p, m in pairs for t in targets]


def main(args: argparse.Namespace) -> int:
    from dace_ai.evaluation.campaign import (  # local: CLI startup (loaded when the command runs)
        EvaluationPlan,
        run_evaluation,
    )
    from dace_ai.evaluation.export import (  # local: CLI startup (loaded when the command runs)
        export_jsonl,
        parse_weights,
    )
    from dace_ai.evaluation.report import write_reports  # local: CLI startup (loaded when the command runs)
    from dace_ai.execution.jobs import ExecutorOptions  # local: CLI startup (loaded when the command runs)

    if args.samples < 1:
        raise SettingsError(f"--samples must be at least 1, got {args.samples}")
    weights = parse_weights(args.reward)
    plan = EvaluationPlan(
        suite=args.suite,
        configurations=configurations(args),
        samples=args.samples,
        out=args.out,
        tasks=[t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None,
        executor=args.executor,
        options=ExecutorOptions(workers=args.workers, scheduler=args.scheduler),
        record=args.record,
        repeats=args.repeats,
        build=args.build,
    )

    def progress(a: dict[str, Any]) -> None:
        if args.quiet:
            return
        from dace_ai.evaluation.report import attempt_verdict  # local: CLI startup (loaded when the command runs)

        state = attempt_verdict(a)
        retry = f" (retried {a['retries']}x)" if a.get("retries") else ""
        print(f"{a['configuration']}  {a['task']}#{a['sample']}: {state}{retry}", file=sys.stderr)

    try:
        data = run_evaluation(plan, progress)
        md, png, hint = write_reports(data, args.out)
    except OSError as exc:  # an output or build folder that cannot be written: a short message, no traceback
        raise SettingsError(f"bench: {exc.strerror or exc}: {exc.filename or args.out}") from None
    print(f"results: {args.out / 'results.json'}\nreport: {md}\nplot: {png if png else hint}")
    if args.export_jsonl:
        count = export_jsonl(data, args.export_jsonl, weights)
        print(f"exported {count} attempt(s) to {args.export_jsonl}")
    return 0
