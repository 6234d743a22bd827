"""One attempt of the harness: a task, a configuration, a sample and its answer -> outcomes.

:func:`evaluate_attempt` is the job function every executor runs (picklable by
reference; its payload is plain JSON). It rebuilds the task's SDFG from the suite,
renders the node's prompt (hashed; the text goes back for the JSONL export), runs
whatever checkers are installed at each stage through the stage runner, then runs
the task itself in a sandboxed child: the whole program with the candidate's
tasklet at the task's sizes, compared with the task's NumPy reference and timed
against the native baseline. Outcomes of each stage are read from the reports; the
task run fills in correctness and speed where no verify or bench checker ran (and
stands next to them where one did).
"""

from __future__ import annotations

import hashlib
import time
import warnings
from typing import Any

from dace_ai.errors import AnswerError


def prompt_hash(system: str, user: str) -> str:
    return hashlib.sha256((system + "\n\x00\n" + user).encode()).hexdigest()[:16]


def _stage_status(reports: list[Any], stage: str) -> str:
    """``failed`` / ``passed`` / ``inconclusive`` from a stage's reports; ``not run`` when none ran."""
    mine = [r for r in reports if r.details.get("stage") == stage]
    if not mine:
        return "not run"
    if any(r.status == "failed" for r in mine):
        return "failed"
    if any(r.status == "passed" for r in mine):
        return "passed"
    return "inconclusive"


def _bench_speedup(reports: list[Any]) -> float | None:
    for report in reports:
        if report.details.get("stage") == "bench" and isinstance(report.details.get("speedup"), (int, float)):
            return float(report.details["speedup"])
    return None


def evaluate_attempt(payload: dict[str, Any]) -> dict[str, Any]:
    """Outcomes of one attempt (see the module docstring); never raises for the candidate's faults."""
    import dace

    from dace_ai.config.settings import resolve_settings
    from dace_ai.evaluation.programs import program_sdfg, task_digest
    from dace_ai.evaluation.sandbox import run_task
    from dace_ai.evaluation.tasks import find_task, missing_requirements
    from dace_ai.expansion.pipeline import check_answer, node_context
    from dace_ai.prompt.answer import parse_answer
    from dace_ai.prompt.render import render_prompt

    start = time.perf_counter()
    dace.Config.set("default_build_folder", value=payload["build_root"])
    suite, task = payload["suite"], find_task(payload["suite"], payload["task"])
    out: dict[str, Any] = {"compile": "not run", "verify": "not run", "bench": "not run", "task_run": "not run",
                           "compiled": False, "correct": False, "speedup": None, "skipped": None, "checks": []}
    missing = missing_requirements(task)
    if missing:
        out["skipped"] = (f"needs environment generator(s) {', '.join(missing)}, not installed here "
                          f"(install the pack that provides them)")
        return out
    settings = resolve_settings(stage_settings(task, payload.get("settings") or {}, payload.get("repeats", 5)))
    _sdfg, state, node = program_sdfg(suite, task, f"bench_{task.id}_{task_digest(suite, task)}_ctx")
    ctx = node_context(state.sdfg, state, node, settings)
    prompt = render_prompt(ctx, settings)
    out["prompt_hash"] = prompt_hash(prompt.system, prompt.user)
    if payload.get("want_prompt"):
        out["prompt"] = {"system": prompt.system, "user": prompt.user}
    try:
        answer = parse_answer(payload["answer_text"], origin=f"answer for task {task.id!r}")
    except AnswerError as exc:
        out.update(compile="failed", error=str(exc))
        return out

    with warnings.catch_warnings():  # "not verified" and the like are recorded per attempt, not printed
        warnings.simplefilter("ignore")
        reports, _ = check_answer(answer, ctx, settings)  # as an expansion checks it (environments resolved)
    out["checks"] = [{"checker": r.checker, "stage": r.details.get("stage"), "status": r.status,
                      "seconds": round(r.seconds, 4), "diagnostics": r.diagnostics[-2000:],
                      **({"speedup": r.details["speedup"]} if "speedup" in r.details else {})} for r in reports]
    for stage in ("compile", "verify", "bench"):
        out[stage] = _stage_status(reports, stage)
    # A bench stage that refused the candidate (a gate, an implausible timing) says so; its figure is not used.
    out["node_speedup"] = _bench_speedup(reports) if out["bench"] == "passed" else None
    out["accepted"] = not any(r.status == "failed" for r in reports)
    if out["bench"] == "failed":
        out["bench_refusal"] = " ".join(r.diagnostics for r in reports
                                        if r.status == "failed" and r.details.get("stage") == "bench")[:500]

    if out["compile"] == "failed" or out["verify"] == "failed":
        out["seconds"] = time.perf_counter() - start
        return out
    staged = out["verify"] == "passed" and out["node_speedup"] is not None
    run: dict[str, Any] = {}
    if staged:
        out["task_run"] = "not needed: verified and timed by the checker stages"
    elif payload.get("target"):
        out["task_run"] = f"not run: the whole program runs on the host only, not on target {payload['target']!r}"
    else:
        run = run_task({"suite": suite, "task": task.id, "answer": answer.model_dump(mode="json"),
                        "build_root": payload["build_root"], "settings": payload.get("settings") or {},
                        "seeds": payload.get("seeds", [0, 1]), "repeats": payload.get("repeats", 5),
                        "time": payload.get("time", True) and out["node_speedup"] is None})
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
                out["task_problem"] = f"the native baseline disagrees with the reference: {run.get('baseline_mismatch')}"
            if not run.get("correct"):
                out["error"] = run.get("candidate_mismatch")
    program_built = bool(run.get("candidate_compiled")) if run else out["compile"] == "passed"
    out["compiled"] = out["compile"] != "failed" and program_built
    ran_correct = out["task_run"] == "passed" if run else out["verify"] == "passed"
    out["correct"] = out["compiled"] and out["verify"] != "failed" and ran_correct
    if out["node_speedup"] is not None:
        speedup, out["speedup_source"] = out["node_speedup"], "bench stage (node vs its native expansion)"
    else:
        speedup, out["speedup_source"] = run.get("speedup"), "task run (program vs native baseline)"
    out["speedup"] = float(speedup) if out["correct"] and speedup else None
    out["seconds"] = time.perf_counter() - start
    return out


def stage_settings(task: Any, settings: dict[str, Any], repeats: int) -> dict[str, Any]:
    """Settings for the checkers of one attempt: the bench stage times at the task's sizes.

    Only settings this installation knows are set (the bench stage is a plugin).
    """
    from dace_ai.config.settings import AISettings

    known = set(AISettings.model_fields)
    extra: dict[str, Any] = {}
    if "bench_sizes" in known:
        extra["bench_sizes"] = ",".join(f"{k}={v}" for k, v in task.sizes.items())
    if "bench_repeats" in known:
        extra["bench_repeats"] = repeats
    return {**extra, **settings}
