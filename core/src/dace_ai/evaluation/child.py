"""The sandboxed child of a task run: build, compile and run candidate and baseline, compare, time.

Started by :func:`dace_ai.evaluation.sandbox.run_task` as ``python -m
dace_ai.evaluation.child SPEC.json RESULT.json`` under CPU-time, memory and wall-time
limits. The candidate's library is loaded only here, never in the caller's process.
Results are plain JSON; a crash of the candidate kills only this process.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def _compiled(sdfg: Any, build_root: Path, prepare: Any = None) -> Any:
    """Compile ``sdfg`` once per name (a lock and a ready marker under the build root); reuse afterwards."""
    from dace.sdfg.utils import load_precompiled_sdfg
    from filelock import FileLock

    folder = build_root / sdfg.name
    marker = folder / "ai-bench-ready"
    locks = build_root / "ai-bench-locks"
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks / f"{sdfg.name}.lock")):
        if marker.is_file():
            return load_precompiled_sdfg(str(folder))
        if prepare is not None:
            prepare()
        compiled = sdfg.compile()
        marker.write_text("ok\n")
        return compiled


#: A timed sample lasts at least this long: short kernels are called several times per sample,
#: so the timer's resolution and the call overhead do not decide the ratio.
MIN_SAMPLE_SECONDS = 0.005
MAX_CALLS_PER_SAMPLE = 1000


def _calls_per_sample(call: Any) -> int:
    start = time.perf_counter()
    call()
    once = max(time.perf_counter() - start, 1e-7)
    return max(1, min(MAX_CALLS_PER_SAMPLE, int(MIN_SAMPLE_SECONDS / once) + 1))


def _sample(call: Any, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls


def run(spec: dict[str, Any]) -> dict[str, Any]:
    import dace

    from dace_ai.config.settings import resolve_settings
    from dace_ai.evaluation.programs import baseline_sdfg, compare, make_arguments, program_sdfg, task_digest
    from dace_ai.evaluation.tasks import find_task, suite_member
    from dace_ai.expansion.pipeline import _environments, node_context
    from dace_ai.expansion.tasklet import make_tasklet, place_tasklet
    from dace_ai.prompt.answer import Answer

    build_root = Path(spec["build_root"])
    dace.Config.set("default_build_folder", value=str(build_root))
    suite, task = spec["suite"], find_task(spec["suite"], spec["task"])
    digest = task_digest(suite, task)
    answer = Answer.model_validate(spec["answer"])
    answer_hash = hashlib.sha256(answer.model_dump_json().encode()).hexdigest()[:10]
    result: dict[str, Any] = {}

    baseline = _compiled(baseline_sdfg(suite, task, f"bench_{task.id}_native_{digest}"), build_root)
    sdfg, state, node = program_sdfg(suite, task, f"bench_{task.id}_{digest}_{answer_hash}")

    def place() -> None:
        settings = resolve_settings(spec.get("settings") or {})
        ctx = node_context(sdfg, state, node, settings)
        resolution = _environments(answer, ctx)
        if resolution.problems:
            raise ValueError("; ".join(resolution.problems))
        tasklet = make_tasklet(node, answer, ctx, {"bench": task.id}, resolution.paths)
        place_tasklet(state, node, tasklet)

    try:
        candidate = _compiled(sdfg, build_root, place)
    except Exception as exc:  # noqa: BLE001 - a build failure is an outcome
        result.update(candidate_compiled=False, compile_error=f"{type(exc).__name__}: {str(exc)[-4000:]}")
        return result
    result["candidate_compiled"] = True

    reference = suite_member(suite, task.reference)
    result["correct"], result["baseline_correct"] = True, True
    for seed in spec.get("seeds", [0, 1]):
        expected = reference(**{k: (v.copy() if hasattr(v, "copy") else v)
                                for k, v in make_arguments(sdfg, task, seed).items()}, **task.sizes)
        for which, compiled in (("baseline", baseline), ("candidate", candidate)):
            args = make_arguments(sdfg, task, seed)
            compiled(**args, **task.sizes)
            problem = compare(task, args, expected)
            if problem is not None:
                result["correct" if which == "candidate" else "baseline_correct"] = False
                result.setdefault(f"{which}_mismatch", f"seed {seed}, sizes {task.sizes}: {problem}")
    if not result["correct"] or not spec.get("time", True):
        return result

    repeats = int(spec.get("repeats", 5))
    args_b, args_c = make_arguments(sdfg, task, 0), make_arguments(sdfg, task, 0)
    from dace_ai.compat import fast_caller

    runs = {"baseline": fast_caller(baseline, {**args_b, **task.sizes}),
            "candidate": fast_caller(candidate, {**args_c, **task.sizes})}
    if spec.get("baselines"):  # the strongest implementations (DaCe's library expansions, NumPy): timed alongside
        from dace_ai.evaluation.baselines import native_label, task_baseline_runs

        result["native_label"] = native_label(suite, task)

        extra, result["baselines_left_out"] = task_baseline_runs(suite, task, sdfg, build_root, digest, _compiled)
        runs.update(extra)
    calls = {label: _calls_per_sample(run) for label, run in runs.items()}  # also the warm-up
    times: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(repeats):  # interleaved, so every side sees the same machine state
        for label, run in runs.items():
            times[label].append(_sample(run, calls[label]))
    tb, tc = statistics.median(times["baseline"]), statistics.median(times["candidate"])
    result.update(baseline_seconds=tb, candidate_seconds=tc, speedup=tb / tc if tc > 0 else None,
                  baseline_spread=[min(times["baseline"]), max(times["baseline"])],
                  candidate_spread=[min(times["candidate"]), max(times["candidate"])], repeats=repeats,
                  calls_per_sample=[calls["baseline"], calls["candidate"]],
                  baselines_seconds={label: statistics.median(t) for label, t in times.items()
                                     if label not in ("baseline", "candidate")})
    return result


def main(argv: list[str]) -> int:
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    spec = json.loads(spec_path.read_text())
    try:
        result = run(spec)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=6)}
    out_path.write_text(json.dumps(result, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
