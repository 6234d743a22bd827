"""One attempt of the harness: a task, a configuration, a sample and its answer -> one verdict.

:func:`evaluate_attempt` is the job function every executor runs (picklable by
reference; its payload is plain JSON). It rebuilds the task's SDFG from the suite,
renders the node's prompt (hashed; the text goes back for the JSONL export), runs
whatever checkers are installed at each stage through the stage runner, then runs
the task itself in a sandboxed child: the whole program with the candidate's
tasklet at the task's sizes, compared with the task's NumPy reference and timed
against every baseline (the native program, DaCe's installed library
implementations, NumPy) in the same child, interleaved.

One verdict per attempt: the first stage that refused it (including the bench
stage's anti-deception rules) makes it not correct and not fast, and no speed
figure is kept. A task the machine cannot run (a missing library, compiler or
target) is *skipped* with its reason, not failed. ``speedup`` is against the
strongest baseline (the fastest one timed), ``speedup_native`` against the native
expansion, each with the baseline's name; ``speed_of_light`` puts the same time against
this machine's roofline (:mod:`dace_ai.performance`).
"""

from __future__ import annotations

import hashlib
import time
import warnings
from typing import TYPE_CHECKING, Any

from dace_ai.config.settings import AISettings, resolve_settings
from dace_ai.errors import DaceAIError
from dace_ai.evaluation import tasks
from dace_ai.evaluation.task_programs import program_sdfg, task_digest
from dace_ai.evaluation.task_run import run_task
from dace_ai.evaluation.tasks import missing_requirements
from dace_ai.expansion.expansion_pass import node_context
from dace_ai.performance.bench_figure import roofline_for
from dace_ai.performance.speed_of_light import from_roofline
from dace_ai.performance.work import node_work
from dace_ai.prompt.render import render_prompt
from dace_ai.sandbox.baselines import compare_times
from dace_ai.solving.requests import request_for
from dace_ai.solving.rounds import Table, ask, check

if TYPE_CHECKING:
    from dace_ai.checking.verdict import Verdict
    from dace_ai.context.types import NodeContext
    from dace_ai.evaluation.tasks import Task
    from dace_ai.prompt.answer import Answer
    from dace_ai.prompt.render import Prompt
    from dace_ai.solving.rounds import Round


def prompt_hash(system: str, user: str) -> str:
    return hashlib.sha256((system + "\n\x00\n" + user).encode()).hexdigest()[:16]


def _stage_status(reports: list[Any], stage: str) -> str:
    """``failed`` / ``passed`` / ``inconclusive`` from a stage's reports; ``not run`` when none ran."""
    mine = [r for r in reports if r.stage == stage]
    if not mine:
        return "not run"
    if any(r.status == "failed" for r in mine):
        return "failed"
    if any(r.status == "passed" for r in mine):
        return "passed"
    return "inconclusive"


def _bench_speedup(reports: list[Any]) -> float | None:
    for report in reports:
        if report.stage == "bench" and report.bench is not None and report.bench.speedup is not None:
            return float(report.bench.speedup)
    return None


def _record_refusal(out: dict[str, Any], reports: list[Any], verdict: Verdict) -> None:
    """Name what refused the attempt: the first stage that failed (its diagnostics), or, when a
    check could not decide and ``on_inconclusive=reject``, the undecided stage (the verdict's reason)."""
    for stage in ("compile", "verify", "bench"):
        if out[stage] == "failed":  # the first stage that refused the attempt decides it
            out["refused_by"] = stage
            out["refusal"] = " ".join(
                r.diagnostics.strip() for r in reports if r.status == "failed" and r.stage == stage
            )[:500]
            break
    if not verdict.accepted and not out.get("refused_by"):  # a check could not decide and on_inconclusive=reject
        out["refused_by"] = str(verdict.inconclusive[0].stage or "compile")
        out["refusal"] = verdict.reason[:500]
    if out["bench"] == "failed":
        out["bench_refusal"] = out["refusal"] if out.get("refused_by") == "bench" else None


def _run_whole_program(
    payload: dict[str, Any], suite: str, task: Task, answer: Answer, out: dict[str, Any]
) -> dict[str, Any]:
    """Run the task's whole program with the answer in the sandbox, unless the target is not the
    host or the checks already verified it and nothing is timed; records ``task_run`` and errors.
    Returns the run's record (empty when not run)."""
    run: dict[str, Any] = {}
    if payload.get("target"):
        out["task_run"] = f"not run: the whole program runs on the host only, not on target {payload['target']!r}"
    elif out["verify"] == "passed" and not payload.get("time", True):
        out["task_run"] = "not needed: verified by the checker stages, timing off"
    else:
        run = run_task(
            {
                "suite": suite,
                "task": task.id,
                "answer": answer.model_dump(mode="json"),
                "build_root": payload["build_root"],
                "settings": payload.get("settings") or {},
                "seeds": payload.get("seeds", [0, 1]),
                "repeats": payload.get("repeats", 5),
                "time": payload.get("time", True),
                "baselines": payload.get("baselines", True),
            }
        )
        out["run"] = run
        if "error" in run:
            out["task_run"] = "failed"
            out["error"] = run["error"]
        elif not run.get("candidate_compiled"):
            out["task_run"] = "failed"
            out["error"] = run.get("compile_error", "the program did not build")
        else:
            out["task_run"] = "passed" if run.get("correct") else "failed"
            if not run.get("baseline_correct", True):
                out["task_problem"] = (
                    f"the native baseline disagrees with the reference: {run.get('baseline_mismatch')}"
                )
            if not run.get("correct"):
                out["error"] = run.get("candidate_mismatch")
    return run


def _new_outcomes() -> dict[str, Any]:
    """An attempt's outcomes before anything ran: no stage run, not compiled, not correct, no figures."""
    return {
        "compile": "not run",
        "verify": "not run",
        "bench": "not run",
        "task_run": "not run",
        "compiled": False,
        "correct": False,
        "speedup": None,
        "speedup_native": None,
        "strongest": None,
        "speed_of_light": None,
        "skipped": None,
        "checks": [],
    }


def _check_records(reports: list[Any]) -> list[dict[str, Any]]:
    """The attempt's record of each check: its stage, status, time, diagnostics' tail and bench figures."""
    return [
        {
            "checker": r.checker,
            "stage": r.stage,
            "status": r.status,
            "seconds": round(r.seconds, 4),
            "diagnostics": r.diagnostics[-2000:],
            **_bench_record(r),
        }
        for r in reports
    ]


def evaluate_attempt(payload: dict[str, Any]) -> dict[str, Any]:
    """Outcomes of one attempt (see the module docstring); never raises for the candidate's faults."""
    import dace

    start = time.perf_counter()
    dace.Config.set("default_build_folder", value=payload["build_root"])
    suite, task = payload["suite"], tasks.find_task(payload["suite"], payload["task"])
    out = _new_outcomes()
    missing = missing_requirements(task)
    if missing:
        out["skipped"] = "needs " + "; ".join(missing)
        return out
    try:
        settings = resolve_settings(stage_settings(task, payload.get("settings") or {}, payload.get("repeats", 5)))
        _sdfg, state, node = program_sdfg(suite, task, f"bench_{task.id}_{task_digest(suite, task)}_ctx")
        ctx = node_context(state.sdfg, state, node, settings)
    except DaceAIError as exc:  # an unknown or unusable target: skipped, not failed
        if not payload.get("target"):
            raise
        out["skipped"] = f"target {payload['target']!r} is not available here: {str(exc).splitlines()[0][:200]}"
        return out
    prompt = render_prompt(ctx, settings)
    out["prompt_hash"] = prompt_hash(prompt.system, prompt.user)
    if payload.get("want_prompt"):
        out["prompt"] = {"system": prompt.system, "user": prompt.user}
    rnd = _play(ctx, settings, prompt, task, payload["answer_text"])
    if isinstance(rnd, str):  # the answer did not parse
        out.update(compile="failed", error=rnd, refused_by="compile", refusal=rnd[:500])
        return finish_verdict(out, start)
    answer, reports, verdict = rnd.answer, rnd.checked.reports, rnd.verdict
    out["checks"] = _check_records(reports)
    for stage in ("compile", "verify", "bench"):
        out[stage] = _stage_status(reports, stage)
    skip = _machine_missing(reports, out)
    if skip:
        out["skipped"] = skip
        return finish_verdict(out, start)
    # The bench stage's node figures (node vs its native expansion and DaCe's library implementations).
    # The bench stage's node figures stay in its check record; the attempt's figures come from one place (below).
    node_speedup = _bench_speedup(reports) if out["bench"] == "passed" else None
    out["accepted"] = verdict.accepted
    _record_refusal(out, reports, verdict)
    if out.get("refused_by"):
        out["compiled"] = out["compile"] != "failed"
        return finish_verdict(out, start)
    run = _run_whole_program(payload, suite, task, answer, out)
    program_built = bool(run.get("candidate_compiled")) if run else out["compile"] == "passed"
    out["compiled"] = out["compile"] != "failed" and program_built
    ran_correct = out["task_run"] == "passed" if run else out["verify"] == "passed"
    out["correct"] = out["compiled"] and out["verify"] != "failed" and ran_correct
    _record_speed_figures(out, run, reports, node_speedup, ctx, task, settings)
    return finish_verdict(out, start)


def _play(ctx: NodeContext, settings: AISettings, prompt: Prompt, task: Task, text: str) -> Round | str:
    """One round of the supplied answer ``text`` as an expansion plays it (environments resolved, the same
    verdict), without a session or the cache; the parse error when it does not parse."""
    table = Table(ctx, settings, "", None, None, reuse_checks=False)
    request = request_for(prompt.system, prompt.user, settings)
    with warnings.catch_warnings():  # "not verified" and the like are recorded per attempt, not printed
        warnings.simplefilter("ignore")
        asked = ask(table, request, origin=lambda _source: f"answer for task {task.id!r}", supplied=text, limit=False)
        if asked.error is not None:
            return str(asked.error)
        return check(table, asked)


def _record_speed_figures(
    out: dict[str, Any],
    run: dict[str, Any],
    reports: list[Any],
    node_speedup: float | None,
    ctx: NodeContext,
    task: Task,
    settings: AISettings,
) -> None:
    """Speed figures from one place: the task run when it was timed, else the bench stage's node figures."""
    if run.get("speedup") is not None:
        out["speedup_source"] = "task run (the whole program vs each baseline, same child, interleaved)"
        out.update(speedups(run))
        out["speed_of_light"] = attempt_speed_of_light(
            ctx, task, run["candidate_seconds"], run.get("threads"), out, settings.speed_of_light
        )
    elif node_speedup is not None:
        out["speedup_source"] = "bench stage (the node vs its baselines)"
        out.update(_node_figures(reports))
        out["speed_of_light"] = next(
            (r.speed_of_light.record() for r in reports if r.stage == "bench" and r.speed_of_light is not None),
            None,
        )


def attempt_speed_of_light(
    ctx: NodeContext, task: Task, seconds: float | None, threads: int | None, out: dict[str, Any], setting: str = "on"
) -> dict[str, Any] | None:
    """The task run's time against this machine's roofline: the node's work at the task's sizes.

    None (with ``out["speed_of_light_missing"]`` saying why) when the roofline cannot be had
    or the node's work is not known; the verdict does not depend on it.
    """
    if not seconds:
        return None
    roofline, reason = roofline_for(setting)
    if roofline is None:
        out["speed_of_light_missing"] = reason
        return None
    try:
        work = node_work(ctx)
        flops, nbytes = work.at(task.sizes)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        out["speed_of_light_missing"] = f"the node's work is not known at the task's sizes ({exc})"
        return None
    figure, _ = from_roofline(roofline, flops, nbytes, seconds, work.dtype, int(threads or 1))
    return figure


def _bench_record(report: Any) -> dict[str, Any]:
    """The bench stage's figures and speed of light that an attempt's check record copies (JSON data)."""
    found = {**(report.bench.record() if report.bench is not None else {})}
    if report.speed_of_light is not None:
        found["speed_of_light"] = report.speed_of_light.record()
    return {k: found[k] for k in BENCH_KEYS if k in found}


#: The bench stage's figures copied into an attempt's check records.
BENCH_KEYS = (
    "speedup",
    "native",
    "strongest",
    "speedup_strongest",
    "speedup_native",
    "baselines",
    "baselines_left_out",
    "speed_of_light",
    "speed_of_light_level",
)


def _machine_missing(reports: list[Any], out: dict[str, Any]) -> str | None:
    """Why the attempt cannot be judged on this machine (a compiler or a library is missing), or None.

    A compile stage that is inconclusive while no stage failed means the machine could not
    build the code at all: the task is skipped, not failed.
    """
    if any(r.status == "failed" for r in reports) or out["compile"] != "inconclusive":
        return None
    texts = [r.diagnostics.strip() for r in reports if r.stage == "compile" and r.status == "inconclusive"]
    first = next((t.splitlines()[0] for t in texts if t), "the compile stage could not run")
    return f"cannot be built on this machine: {first[:200]}"


def speedups(run: dict[str, Any]) -> dict[str, Any]:
    """An attempt's speed figures from its task run: vs the strongest baseline (headline) and vs native."""
    native = run.get("native_label") or "native"
    times = {native: run["baseline_seconds"], **(run.get("baselines_seconds") or {})}
    comparison = compare_times(run["candidate_seconds"], times, native).as_dict()
    return {
        "speedup": comparison["speedup_strongest"],
        "speedup_native": comparison["speedup_native"],
        "strongest": comparison["strongest"],
        "native_baseline": native,
        "baseline_seconds": comparison["baselines"],
        "candidate_seconds": run["candidate_seconds"],
        "baselines_left_out": run.get("baselines_left_out") or {},
    }


def _node_figures(reports: list[Any]) -> dict[str, Any]:
    for report in reports:
        fig = report.bench
        if report.stage == "bench" and fig is not None and fig.speedup is not None:
            compared = fig.baselines is not None
            return {
                "speedup": fig.speedup_strongest if compared else fig.speedup,
                "speedup_native": fig.speedup,
                "strongest": fig.strongest or fig.native,
                "native_baseline": fig.native,
                "baseline_seconds": dict(fig.baselines or {}),
                "candidate_seconds": fig.candidate_median,
                "baselines_left_out": dict(fig.baselines_left_out),
            }
    return {}


def finish_verdict(out: dict[str, Any], start: float) -> dict[str, Any]:
    """One verdict per attempt: refused or wrong means not correct and no speed figure at all."""
    if out.get("refused_by") or out.get("skipped"):
        out["correct"] = False
    if out.get("refused_by") and out["refused_by"] == "compile":
        out["compiled"] = False
    if not out.get("correct"):
        for key in ("speedup", "speedup_native", "strongest", "speed_of_light"):
            out[key] = None
    out["verdict"] = verdict(out)
    out["seconds"] = time.perf_counter() - start
    return out


def verdict(a: dict[str, Any]) -> str:
    """The attempt's one verdict in words (the report's row says the same)."""
    if a.get("skipped"):
        return f"skipped: {a['skipped']}"
    if a.get("refused_by"):
        return f"refused by the {a['refused_by']} stage: {(a.get('refusal') or a.get('error') or '').strip()[:200]}"
    if not a.get("compiled"):
        return f"did not build: {str(a.get('error') or '').strip()[:200]}"
    if not a.get("correct"):
        return f"wrong: {str(a.get('error') or '').strip()[:200]}"
    if a.get("speedup") is None:
        return "correct, not timed"
    return f"correct, {a['speedup']:.2f}x vs {a.get('strongest')}"


def stage_settings(task: Task, settings: dict[str, Any], repeats: int) -> dict[str, Any]:
    """Settings for the checkers of one attempt: the bench stage times at the task's sizes.

    Only settings this installation knows are set (the bench stage is a plugin).
    """
    known = set(AISettings.model_fields)
    extra: dict[str, Any] = {}
    if "bench_sizes" in known:
        extra["bench_sizes"] = ",".join(f"{k}={v}" for k, v in task.sizes.items())
    if "bench_repeats" in known:
        extra["bench_repeats"] = repeats
    return {**extra, **settings}
