"""The runner of ``dace-ai bench`` (its options: :mod:`dace_ai.cli.bench`): the configurations to run, the
evaluation, its reports and export. Loaded when the command runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dace_ai.errors import SettingsError
from dace_ai.evaluation.campaign import Configuration, EvaluationPlan, run_evaluation, shipped_answers
from dace_ai.evaluation.export import export_jsonl, parse_weights
from dace_ai.evaluation.report import attempt_verdict, write_reports
from dace_ai.execution.jobs import ExecutorOptions


def configurations(args: argparse.Namespace, shipped: str) -> list[Any]:
    """The configurations to run; ``shipped``: the ``--offline`` value that names the answers shipped with the suite."""
    targets = args.target or [None]
    if args.offline:
        if args.provider or args.model:
            raise SettingsError("--offline replays recorded answers; it takes no --provider/--model")
        if args.record:
            raise SettingsError("--record records live answers; it cannot be combined with --offline")
        folder = shipped_answers(args.suite) if args.offline == shipped else Path(args.offline)
        if not folder.is_dir():
            raise SettingsError(f"--offline {args.offline}: no such folder")
        model = "recorded" if args.offline == shipped else f"recorded:{folder.name}"
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


def main(args: argparse.Namespace, shipped: str) -> int:
    """Run the evaluation the options ask for, write its reports (and export), say where they are."""

    if args.samples < 1:
        raise SettingsError(f"--samples must be at least 1, got {args.samples}")
    weights = parse_weights(args.reward)
    plan = EvaluationPlan(
        suite=args.suite,
        configurations=configurations(args, shipped),
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
