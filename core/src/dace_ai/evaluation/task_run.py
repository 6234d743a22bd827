"""Run a task's whole program with the candidate in the sandbox child every check uses.

The task run builds two programs with DaCe, never loading either here: the task's
program with the candidate's tasklet placed, and the native baseline (built once
per task under a lock). It runs both in one run of the sandbox child
(:mod:`dace_ai.sandbox.child`, through :func:`dace_ai.sandbox.child_process.run_child`: the
same limits, fault attribution and machine-wide timing lock as the verify and
bench stages) on the task's inputs for each seed, and compares their outputs
with the task's NumPy reference here. When timed, the child times the two
interleaved on the first seed's inputs, and with them the task's baselines
(:mod:`dace_ai.evaluation.task_baselines`: DaCe's installed library implementations and
the task's NumPy reference, which the child imports from the suite's own module). The result is the plain dict the
campaign records (``candidate_compiled``, ``correct``, ``baseline_correct``,
``*_mismatch``, ``baseline_seconds``, ``candidate_seconds``, ``speedup``, ...), or
``{"error": ...}`` saying how the run ended.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dace_ai.compat import compile_without_loading, debugprint_off
from dace_ai.config.settings import resolve_settings
from dace_ai.evaluation import tasks
from dace_ai.evaluation.task_baselines import job_side, native_label, task_baseline_sides
from dace_ai.evaluation.task_programs import baseline_sdfg, compare, make_arguments, program_sdfg, task_digest
from dace_ai.evaluation.tasks import suite_member
from dace_ai.expansion.expansion_pass import node_context
from dace_ai.prompt.answer import Answer
from dace_ai.sandbox import child_process
from dace_ai.sandbox.child.records import BenchJob, Case, Connector, Container, LibrarySpec, SandboxJob
from dace_ai.sandbox.child_process import SandboxLimits
from dace_ai.sandbox.reference import program_spec
from dace_ai.solving.checked_answer import answer_environments
from dace_ai.solving.tasklet import make_tasklet, place_tasklet
from dace_ai.storage.files import ai_folder, atomic_write_json, lock_for

if TYPE_CHECKING:
    from dace_ai.evaluation.task_baselines import TaskSide
    from dace_ai.evaluation.tasks import Task
    from dace_ai.sandbox.child_process import ChildOutcome

#: Limits of the child: wall seconds, CPU seconds, address space bytes.
WALL_SECONDS = 600
CPU_SECONDS = 900
MEMORY_BYTES = 16 * 2**30


def _built(sdfg: Any, build_root: Path, prepare: Any = None) -> LibrarySpec:
    """Build ``sdfg`` once per name under the build root (a lock and a ready spec); how to call it."""
    import json

    folder = build_root / sdfg.name
    ready = folder / "ai-bench-program.json"
    with lock_for(folder):
        if ready.is_file():
            spec = json.loads(ready.read_text(encoding="utf-8"))
            if Path(spec["library"]).is_file():
                return spec
        if prepare is not None:
            prepare()
        sdfg.expand_library_nodes()  # the init signature is the expanded program's
        sdfg.build_folder = str(folder)
        with debugprint_off():
            library = compile_without_loading(sdfg)
        spec = program_spec(sdfg, library)
        atomic_write_json(ready, spec)
        return spec


def _case(sdfg: Any, task: Task, seed: int, folder: Path) -> tuple[Case, dict[str, Any]]:
    """(the child's case for one seed: the program's arrays, inputs from files; the arguments here)."""
    args = make_arguments(sdfg, task, seed)
    containers: list[Container] = []
    connectors: list[Connector] = []
    inputs: dict[str, str] = {}
    values = dict(task.sizes)
    for name, value in args.items():
        if not isinstance(value, np.ndarray):
            values[name] = value.item() if hasattr(value, "item") else value
            continue
        output = name in task.outputs
        containers.append(
            {"name": name, "dtype": value.dtype.str, "input": True, "output": output, "elements": int(value.size)}
        )
        connectors.append(
            {
                "name": name,
                "container": name,
                "direction": "out" if output else "in",
                "offset": 0,
                "shape": [int(value.size)],
                "strides": [1],
                "wcr": None,
            }
        )
        path = folder / f"input-{seed}-{name}.npy"
        np.save(path, np.ascontiguousarray(value).reshape(-1), allow_pickle=False)
        inputs[name] = str(path)
    case: Case = {
        "seed": seed,
        "sizes": dict(task.sizes),
        "values": values,
        "containers": containers,
        "connectors": connectors,
        "rtol": {},
        "inputs": inputs,
        "judge": False,
        "id": seed,
    }
    return case, args


def _child_failure(outcome: ChildOutcome, wall_seconds: float) -> str:
    """Who (the native baseline, the candidate, a baseline) made the child stop, and how, in words."""
    who = {
        "reference": "the native baseline",
        "candidate": "the candidate",
        "baseline": f"the baseline {outcome.phase.get('label', '?')}",
    }.get(outcome.who, "the child")
    how = {
        "timeout": f"timed out after {wall_seconds:.0f} s (wall)",
        "cpu_time": "ran out of CPU time",
        "memory": "ran out of memory",
        "crashed": f"died of {outcome.signal}",
    }.get(outcome.status, "could not run")
    return f"{who}'s process {how}"


def _judge_outputs(
    task: Task,
    reference: Any,
    cases: Sequence[Case],
    arguments: Sequence[dict[str, Any]],
    outputs: Path,
    sides: list[TaskSide],
    timed_baselines: bool,
    result: dict[str, Any],
) -> None:
    """Compare what the child saved (the native baseline's and the candidate's outputs per case, and
    the timed baselines' on the first) with the task's Python reference, run here on the same
    arguments; records ``correct``, ``baseline_correct`` and the mismatches, and leaves out of the
    timing each baseline whose outputs differ."""
    result["correct"], result["baseline_correct"] = True, True
    for case, args in zip(cases, arguments):
        expected = reference(**{k: (v.copy() if hasattr(v, "copy") else v) for k, v in args.items()}, **task.sizes)
        for which, side in (("baseline", "reference"), ("candidate", "candidate")):
            got = {
                name: np.load(outputs / f"{case['id']}-{side}-{name}.npy").reshape(args[name].shape)
                for name in task.outputs
            }
            problem = compare(task, got, expected)
            if problem is not None:
                result["correct" if which == "candidate" else "baseline_correct"] = False
                result.setdefault(f"{which}_mismatch", f"seed {case['seed']}, sizes {task.sizes}: {problem}")
        if case is cases[0] and timed_baselines:  # DaCe's library implementations: same answer?
            for index, timed_side in enumerate(sides):
                files = {name: outputs / f"timed-baseline{index}-{name}.npy" for name in task.outputs}
                if timed_side["kind"] != "program" or not all(f.is_file() for f in files.values()):
                    continue
                got = {name: np.load(f).reshape(args[name].shape) for name, f in files.items()}
                problem = compare(task, got, expected)
                if problem is not None:
                    result.setdefault("baselines_left_out", {})[timed_side["name"]] = (
                        f"its outputs differ from the reference: {problem}"[:300]
                    )


def _timing_figures(bench: dict[str, Any], sides: list[TaskSide], left_out: dict[str, str]) -> dict[str, Any]:
    """Medians, spreads and the speed-up of the task run's interleaved samples; the baselines whose
    outputs were wrong are not timed against."""
    base_times, cand_times = bench["native"], bench["candidate"]
    tb, tc = statistics.median(base_times), statistics.median(cand_times)
    figures: dict[str, Any] = dict(
        baseline_seconds=tb,
        candidate_seconds=tc,
        speedup=tb / tc if tc > 0 else None,
        baseline_spread=[min(base_times), max(base_times)],
        candidate_spread=[min(cand_times), max(cand_times)],
        repeats=len(cand_times),
        calls_per_sample=[bench["batch"].get("native"), bench["batch"].get("candidate")],
    )
    wrong = {side["label"] for side in sides if side.get("name") in left_out}
    figures["baselines_seconds"] = {
        label: statistics.median(times)
        for label, times in (bench.get("baselines") or {}).items()
        if times and label not in wrong
    }
    return figures


def _verify_job(candidate: LibrarySpec, baseline: LibrarySpec, cases: Sequence[Case], outputs: Path) -> SandboxJob:
    """The child's job without its bench section: both programs on every case, outputs saved for judging here."""
    job: SandboxJob = {
        "mode": "verify",
        "candidate": candidate,
        "reference": baseline,
        "cases": list(cases),
        "save_outputs": str(outputs),
        "bench": None,
    }
    return job


def _bench_section(
    spec: dict[str, Any],
    suite: str,
    task: Task,
    digest: str,
    case: Case,
    args: dict[str, Any],
    build_root: Path,
    result: dict[str, Any],
) -> tuple[BenchJob, list[TaskSide]]:
    """(the job's bench section, the baselines' sides): the first seed's case timed against the native
    baseline and, unless turned off, the task's baselines (records their label and those left out)."""
    sides: list[TaskSide] = []
    bench_case: Case = {**case, "id": "timed"}
    if spec.get("baselines", True):  # the strongest implementations here, timed in the same child
        result["native_label"] = native_label(suite, task)
        sides, result["baselines_left_out"] = task_baseline_sides(
            suite, task, digest, args, lambda program: _built(program, build_root)
        )
    bench: BenchJob = {
        "cases": [bench_case],
        "time": True,
        "repeats": int(spec.get("repeats", 5)),
        "lock": str(ai_folder("ai-check") / "bench.lock"),
        "bytes": None,
        "baselines": [job_side(side) for side in sides],
    }
    return bench, sides


def run_task(spec: dict[str, Any], *, wall_seconds: float = WALL_SECONDS) -> dict[str, Any]:
    """The task run's result for ``spec`` (suite, task, answer, build_root, settings, seeds, repeats, time)."""
    import dace

    build_root = Path(spec["build_root"])
    dace.Config.set("default_build_folder", value=str(build_root))
    suite, task = spec["suite"], tasks.find_task(spec["suite"], spec["task"])
    digest = task_digest(suite, task)
    answer = Answer.model_validate(spec["answer"])
    answer_hash = hashlib.sha256(answer.model_dump_json().encode()).hexdigest()[:10]
    result: dict[str, Any] = {}
    try:
        baseline = _built(baseline_sdfg(suite, task, f"bench_{task.id}_native_{digest}"), build_root)
    except Exception as exc:  # noqa: BLE001 - the suite's own program: the run cannot say anything
        return {"error": f"the native baseline did not build: {type(exc).__name__}: {str(exc)[-2000:]}"}
    sdfg, state, node = program_sdfg(suite, task, f"bench_{task.id}_{digest}_{answer_hash}")

    def place() -> None:
        settings = resolve_settings(spec.get("settings") or {})
        ctx = node_context(sdfg, state, node, settings)
        resolution = answer_environments(answer, ctx)
        if resolution.problems:
            raise ValueError("; ".join(resolution.problems))
        tasklet = make_tasklet(node, answer, ctx, {"bench": task.id}, resolution.paths, sdfg)
        place_tasklet(state, node, tasklet)

    try:
        candidate = _built(sdfg, build_root, place)
    except Exception as exc:  # noqa: BLE001 - a build failure is an outcome
        result.update(candidate_compiled=False, compile_error=f"{type(exc).__name__}: {str(exc)[-4000:]}")
        return result
    result["candidate_compiled"] = True

    seeds = list(spec.get("seeds", [0, 1]))
    timed = bool(spec.get("time", True))
    with tempfile.TemporaryDirectory(prefix="dace-ai-task-") as tmp:
        folder = Path(tmp)
        cases, arguments = zip(*(_case(sdfg, task, seed, folder) for seed in seeds)) if seeds else ((), ())
        outputs = folder / "outputs"
        outputs.mkdir()
        job = _verify_job(candidate, baseline, cases, outputs)
        sides: list[TaskSide] = []
        if timed and cases:
            job["bench"], sides = _bench_section(spec, suite, task, digest, cases[0], arguments[0], build_root, result)
        limits = SandboxLimits(cpu_seconds=CPU_SECONDS, wall_seconds=wall_seconds, memory_bytes=MEMORY_BYTES)
        threads = int(os.environ.get("OMP_NUM_THREADS", "1") or 1)  # single-threaded unless the user says
        job["threads"] = threads
        outcome = child_process.run_child(job, folder / "run", limits, threads=threads)
        if outcome.status != "finished":
            return {**result, "error": _child_failure(outcome, wall_seconds), "stderr": outcome.output[-2000:]}
        _judge_outputs(
            task,
            suite_member(suite, task.reference),
            cases,
            arguments,
            outputs,
            sides,
            job["bench"] is not None,
            result,
        )
        bench = (outcome.result or {}).get("bench") or {}
    if not result["correct"] or not timed or not bench.get("candidate"):
        return result
    result.update(_timing_figures(bench, sides, result.get("baselines_left_out") or {}), threads=threads)
    return result
