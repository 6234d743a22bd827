"""An evaluation campaign (``dace-ai bench``): tasks x configurations x samples -> answers -> jobs -> results.json.

Answers come from recordings (``--offline``: the suite's shipped ``answers/`` or a
folder written by ``--record``) or live from providers (asked here, in the driver,
where keys live; never in workers). Every attempt becomes a self-contained job
(:func:`dace_ai.evaluation.attempt.evaluate_attempt`) run by the chosen executor.
``results.json`` is rewritten atomically after each finished attempt, so a run that
is stopped resumes where it was: attempts already in it are not run again.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dace_ai.config.settings import resolve_settings
from dace_ai.errors import SettingsError
from dace_ai.evaluation.attempt import evaluate_attempt, prompt_hash
from dace_ai.evaluation.task_programs import program_sdfg
from dace_ai.evaluation.tasks import Task, load_suite, recorded_answers, suite_registration
from dace_ai.execution.jobs import ExecutorOptions, Job, JobResult
from dace_ai.expansion.expansion_pass import node_context
from dace_ai.performance.bench_figure import roofline_for
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.plugins.registrations import Executor
from dace_ai.prompt.render import render_prompt
from dace_ai.providers.select import make_client, select_provider
from dace_ai.solving.answer_source import ask_for_node
from dace_ai.solving.requests import request_for
from dace_ai.storage.files import atomic_write

RESULTS_VERSION = 1


@dataclass(frozen=True)
class Configuration:
    """One column of the report: where answers come from, and for which target."""

    provider: str
    model: str
    target: str | None = None
    #: Folder of recorded answers to replay (``None``: ask the provider live).
    offline: str | None = None

    @property
    def label(self) -> str:
        return "/".join(p for p in (self.provider, self.model, self.target) if p)


@dataclass
class EvaluationPlan:
    """What ``dace-ai bench`` runs: a suite's tasks, the configurations, samples, executor and where results go."""

    suite: str
    configurations: list[Configuration]
    samples: int = 1
    out: Path = Path("bench-results")
    tasks: list[str] | None = None
    executor: str = "local"
    options: ExecutorOptions = field(default_factory=ExecutorOptions)
    record: Path | None = None
    repeats: int = 5
    want_prompts: bool = True
    #: Where programs are built (default ``<out>/build``); runs may share one to reuse compiled programs.
    build: Path | None = None


def attempt_id(config: Configuration, suite: str, task: str, sample: int) -> str:
    raw = json.dumps([config.label, config.offline or "", suite, task, sample])
    return f"{task}-s{sample}-" + hashlib.sha256(raw.encode()).hexdigest()[:10]


def selected_tasks(plan: EvaluationPlan) -> list[Task]:
    tasks = list(load_suite(plan.suite))
    if plan.tasks:
        known = {t.id for t in tasks}
        unknown = [t for t in plan.tasks if t not in known]
        if unknown:
            raise SettingsError(
                f"--tasks names unknown task(s) {unknown} of suite {plan.suite!r}; tasks: {', '.join(sorted(known))}"
            )
        tasks = [t for t in tasks if t.id in plan.tasks]
    return tasks


def shipped_answers(suite: str) -> Path:
    return Path(suite_registration(suite).path) / "answers"


def load_results(out: Path) -> dict[str, Any]:
    path = out / "results.json"
    if not path.is_file():
        return {"version": RESULTS_VERSION, "attempts": []}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{path}: not JSON ({exc}); move it away to start afresh") from None
    if data.get("version") != RESULTS_VERSION:
        raise SettingsError(f"{path}: results version {data.get('version')!r}, expected {RESULTS_VERSION}")
    return data


def _usage(sample: dict[str, Any]) -> dict[str, Any]:
    usage = sample.get("usage") or {}
    return {
        "input_tokens": usage.get("input_tokens"),
        "output_tokens": usage.get("output_tokens"),
        "cost_usd": usage.get("cost_usd"),
    }


def _answer_text(sample: dict[str, Any]) -> str:
    if "text" in sample:
        return str(sample["text"])
    return json.dumps(sample["answer"])


class LiveAsker:
    """Asks a configuration's provider for one task's answer, as the pipeline would."""

    def __init__(self, config: Configuration) -> None:
        overrides = {"provider": config.provider, "model": config.model}
        if config.target:
            overrides["target"] = config.target
        self.settings = resolve_settings(overrides)
        self.provider = select_provider(self.settings)
        self.client = make_client(self.provider, self.settings)

    def ask(self, suite: str, task: Task) -> dict[str, Any]:
        _sdfg, state, node = program_sdfg(suite, task, f"bench_{task.id}_ask")
        ctx = node_context(state.sdfg, state, node, self.settings)
        prompt = render_prompt(ctx, self.settings)
        reply = ask_for_node(self.provider, self.client, request_for(prompt.system, prompt.user, self.settings), ctx)
        return {
            "text": reply.text,
            "provider": self.provider.name,
            "model": reply.model or self.settings.model,
            "usage": reply.usage.as_dict(),
            "prompt_hash": prompt_hash(prompt.system, prompt.user),
        }


def _record(folder: Path, task: str, sample: dict[str, Any]) -> None:
    path = folder / f"{task}.json"
    data: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {"task": task, "samples": []}
    data["samples"].append(sample)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(data, indent=1) + "\n")


def plan_attempts(plan: EvaluationPlan, done: set[str]) -> Iterator[tuple[dict[str, Any], Job]]:
    """(attempt record without outcomes, job) for every attempt not in ``done``; live answers asked here."""
    build_root = str((plan.build or plan.out / "build").resolve())
    tasks = selected_tasks(plan)
    for config in plan.configurations:
        asker = None
        for task in tasks:
            recorded = recorded_answers(Path(config.offline), task.id) if config.offline else None
            for sample_index in range(plan.samples):
                aid = attempt_id(config, plan.suite, task.id, sample_index)
                if aid in done:
                    continue
                if config.offline:
                    if not recorded:
                        raise SettingsError(f"no recorded answers for task {task.id!r} in {config.offline}")
                    sample = recorded[sample_index % len(recorded)]
                else:
                    asker = asker or LiveAsker(config)
                    sample = asker.ask(plan.suite, task)
                    if plan.record:
                        _record(plan.record, task.id, {k: v for k, v in sample.items() if k != "prompt_hash"})
                settings = {"target": config.target} if config.target else {}
                record = {
                    "id": aid,
                    "configuration": config.label,
                    "suite": plan.suite,
                    "task": task.id,
                    "sample": sample_index,
                    "provider": sample.get("provider", config.provider),
                    "model": sample.get("model", config.model),
                    "target": config.target,
                    "answer_text": _answer_text(sample),
                    **_usage(sample),
                }
                payload = {
                    "suite": plan.suite,
                    "task": task.id,
                    "answer_text": record["answer_text"],
                    "build_root": build_root,
                    "settings": settings,
                    "target": config.target,
                    "repeats": plan.repeats,
                    "want_prompt": plan.want_prompts,
                }
                yield record, Job(aid, evaluate_attempt, payload, stage="bench", target=config.target)


def write_results(out: Path, data: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "results.json", json.dumps(data, indent=1, default=float) + "\n")


def run_evaluation(plan: EvaluationPlan, progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run every attempt of ``plan`` not yet in ``<out>/results.json``; return the results."""
    data = load_results(plan.out)
    done = {a["id"] for a in data["attempts"]}
    data["suite"] = plan.suite
    data["configurations"] = sorted({*data.get("configurations", []), *(c.label for c in plan.configurations)})
    records: dict[str, dict[str, Any]] = {}
    jobs: list[Job] = []
    for record, job in plan_attempts(plan, done):
        records[job.id] = record
        jobs.append(job)
    roofline = results_roofline(str((plan.build or plan.out / "build").resolve()))
    if roofline is not None:
        data["roofline"] = roofline
    runs = data.setdefault("runs", [])
    run_info = {
        "executor": plan.executor,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "attempts": len(jobs),
        "resumed_from": len(done),
    }
    runs.append(run_info)
    start = time.perf_counter()
    if jobs:
        registration = get_plugin_manager().get_as("executors", plan.executor, Executor)
        with registration.factory(plan.options) as runner:
            for result in runner.run(jobs):
                attempt = _finish(records[result.id], result)
                data["attempts"].append(attempt)
                write_results(plan.out, data)
                if progress:
                    progress(attempt)
    run_info["wall_seconds"] = time.perf_counter() - start
    run_info["retried_attempts"] = sum(1 for a in data["attempts"][len(done) :] if a.get("retries"))
    write_results(plan.out, data)
    return data


def results_roofline(build_root: str) -> dict[str, Any] | None:
    """This machine's roofline as ``results.json`` records it (its JSON form, or None), measured under the
    run's build root here, once, before any job runs, so the workers read it instead of measuring beside
    each other's benches."""
    import dace

    previous = dace.Config.get("default_build_folder")
    dace.Config.set("default_build_folder", value=build_root)
    try:
        roofline, _ = roofline_for("on")
    finally:
        dace.Config.set("default_build_folder", value=previous)
    if roofline is None:
        return None
    data = roofline.to_json()
    data.pop("kernels", None)
    return data


def _finish(record: dict[str, Any], result: JobResult) -> dict[str, Any]:
    attempt = dict(record)
    attempt.update(worker=result.worker, retries=result.retries, lost_workers=result.lost_workers)
    if result.error is not None:
        attempt.update(
            compile="not run",
            verify="not run",
            bench="not run",
            task_run="not run",
            compiled=False,
            correct=False,
            speedup=None,
            speedup_native=None,
            strongest=None,
            speed_of_light=None,
            skipped=None,
            error=f"the job failed: {result.error}",
        )
        attempt["verdict"] = f"not judged: {attempt['error'][:200]}"
        return attempt
    attempt.update(result.value or {})
    return attempt
