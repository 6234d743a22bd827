"""The bench section: its cases at the bench sizes, the run rules' findings, and the interleaved timing.

The first bench case's buffers outlive its run: the candidate is timed on them,
side by side with the native reference and the baselines, each on buffers of its
own holding the same inputs (:func:`~.timing.time_calls`). Every one of those
buffers (and each side's ``finish``) belongs to a :class:`contextlib.ExitStack`, so
they are freed when the section ends, however it ends. What the anti-deception rules
of :mod:`dace_ai.sandbox.deception` read (``input_independent``, ``reads_outside``,
``bytes``, ``bandwidth``, ``candidate``) is in the :class:`~.records.BenchResult`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import time
from collections.abc import Callable
from typing import TypedDict

import numpy as np

from .buffers import GuardedBuffer, allocated
from .compare import against_reference, connector_views, outputs_now, same_outputs
from .inputs import case_data, output_containers
from .process import Phase, Threads
from .programs import P, Program, PythonBaseline, Reference
from .records import BaselineSpec, BenchJob, BenchResult, Case, CaseRecord, Problem, SandboxJob, Timed
from .reuse import REUSE_NATIVE_SECONDS, Known, known_samples, save_array, save_samples
from .runs import Outputs, poisoned_call, run_case
from .timing import bench_lock, measure_bandwidth, time_calls


class _Side(TypedDict, total=False):
    """A baseline of the bench timing: timed now (``call``) or ``known`` from an earlier candidate."""

    label: str
    known: Known
    call: Callable[[], None]  #: one call of the baseline on its prepared buffers
    timing: str | None


def _input_independent(bench: BenchJob, natives: list[Outputs | None], outputs: list[dict[str, np.ndarray]]) -> bool:
    """Whether the candidate gave the same outputs for different inputs whose references differ
    (a result precomputed or kept, not computed from the inputs)."""
    refs_differ = True
    first_native, second_native = natives[0], natives[1] if len(natives) > 1 else None
    if first_native is not None and second_native is not None:
        refs_differ = not same_outputs(first_native, second_native)
    elif bench["cases"][0].get("expected") and len(bench["cases"]) > 1:
        refs_differ = not same_outputs(
            *({k: np.load(v, allow_pickle=False) for k, v in c["expected"].items()} for c in bench["cases"][:2])
        )
    has_inputs = any(c["direction"] == "in" for c in bench["cases"][0]["connectors"])
    return bool(
        has_inputs and len(outputs) > 1 and refs_differ and all(same_outputs(outputs[0], o) for o in outputs[1:])
    )


def _held(
    program: Program[P], case: Case, threads: Threads, stack: contextlib.ExitStack
) -> tuple[dict[str, GuardedBuffer], P]:
    """``program`` prepared on buffers of its own holding the case's inputs; the buffers and its
    ``finish`` belong to ``stack`` (finished first, then freed)."""
    threads.use(None)
    buffers = stack.enter_context(allocated(case, case_data(case)))
    prepared = program.prepare(case, buffers)
    stack.callback(program.finish, prepared)
    return buffers, prepared


def _held_call(
    program: Program[P], case: Case, threads: Threads, stack: contextlib.ExitStack
) -> tuple[dict[str, GuardedBuffer], Callable[[], None]]:
    """``program``'s buffers and one call of it on them (see :func:`_held`): a baseline is timed
    through its call alone, whatever its kind prepares."""
    buffers, prepared = _held(program, case, threads, stack)
    return buffers, functools.partial(program.call, prepared)


def _baseline_sides(
    bench: BenchJob, phase: Phase, threads: Threads, job: SandboxJob, stack: contextlib.ExitStack
) -> list[_Side]:
    """Load and prepare the bench section's baselines (DaCe's library implementations, a NumPy reference).

    Each gets its own buffers holding the first bench case's inputs (the candidate's
    and the reference's very inputs), is called once there (its outputs saved for the
    parent with ``save_outputs``: a baseline that computes something else is left
    out there), and is then timed with the other sides. A baseline whose samples an
    earlier candidate measured is not timed again (``known``).
    """
    case = bench["cases"][0]
    sides: list[_Side] = []
    for index, spec in enumerate(bench.get("baselines") or []):
        label = spec["label"]
        known = known_samples(spec.get("timing"))
        if known is not None:
            sides.append({"label": label, "known": known})
            continue
        phase(who="baseline", label=label, step="load")
        if spec.get("kind") == "python":
            buffers, call = _held_call(PythonBaseline(spec), case, threads, stack)
        else:
            buffers, call = _held_call(Reference(spec["program"]), case, threads, stack)
        phase(who="baseline", label=label, step="run", seed=case["seed"], sizes=case["sizes"])
        call()
        _save_baseline_outputs(job, case, spec, index, buffers)
        sides.append({"label": label, "call": call, "timing": spec.get("timing")})
    return sides


def _save_baseline_outputs(
    job: SandboxJob, case: Case, spec: BaselineSpec, index: int, buffers: dict[str, GuardedBuffer]
) -> None:
    if job.get("save_outputs") and spec.get("kind") != "python":
        for name in output_containers(case):
            save_array(
                os.path.join(job["save_outputs"], f"{case.get('id', 0)}-baseline{index}-{name}.npy"),
                buffers[name].array,
            )


def _native_samples(bench: BenchJob, known: Known | None, timed: Timed, result: BenchResult) -> list[float] | None:
    """The native reference's samples: reused from an earlier candidate (a slow reference), or
    timed now and saved for the node's next candidate."""
    native_samples = timed["samples"].get("native")
    if known is not None:
        native_samples = known["samples"]
        timed["batch"]["native"] = known["batch"]
        result["native_reused"] = True
    elif native_samples:
        save_samples(bench.get("native_timing"), native_samples, timed["batch"]["native"])
    return native_samples


def _baseline_samples(sides: list[_Side], timed: Timed) -> tuple[dict[str, list[float]], list[str]]:
    """Each baseline's samples (timed now, or known from an earlier candidate: ``reused``); saves
    the samples of those timed now for the node's next candidate."""
    baselines: dict[str, list[float]] = {}
    reused: list[str] = []
    for side in sides:
        label = side["label"]
        if "known" in side:
            baselines[label] = side["known"]["samples"]
            timed["batch"][label] = side["known"]["batch"]
            reused.append(label)
            continue
        baselines[label] = timed["samples"].pop(f"baseline:{label}")
        timed["batch"][label] = timed["batch"].pop(f"baseline:{label}")
        save_samples(side.get("timing"), baselines[label], timed["batch"][label])
    return baselines, reused


def _time_bench(
    job: SandboxJob,
    candidate: Program[P],
    held: tuple[P, dict[str, GuardedBuffer]],
    reference: Reference | None,
    records: list[CaseRecord],
    phase: Phase,
    threads: Threads,
    native: Outputs | None,
) -> BenchResult:
    """The bench section's timing under the lock: the candidate on its kept buffers, interleaved with
    the native reference and the baselines on the same inputs and threads, and the memory bandwidth.
    A slow native reference timed by an earlier candidate of the node is neither prepared nor timed again.

    What the timer sees is not a fixed pattern: 0 to 3 more candidate calls come before the timing, and
    the outputs left by one timed sample, chosen at random, are judged against the reference
    (``timed_call``) where no output is also an input."""
    prepared = held[0]
    bench = job["bench"]
    assert bench is not None
    result: BenchResult = {}
    calls: dict[str, Callable[[], None]] = {"candidate": lambda: candidate.call(prepared)}
    known = known_samples(bench.get("native_timing"), REUSE_NATIVE_SECONDS)
    with contextlib.ExitStack() as sides_held:
        if reference is not None and known is None:
            _, ref_prepared = _held(reference, bench["cases"][0], threads, sides_held)
            calls = {"native": lambda: reference.call(ref_prepared), **calls}
        sides = _baseline_sides(bench, phase, threads, job, sides_held)
        for side in sides:  # the same inputs, interleaved with the candidate, the same threads
            if "call" in side:
                calls[f"baseline:{side['label']}"] = side["call"]
        threads.use(None)
        with bench_lock(bench.get("lock")):
            # the thread runs just called the candidate on these buffers, the last one with all cores
            last = records[0]["call_seconds"][-1] if len(records[0]["call_seconds"]) > 1 else None
            pick = random.SystemRandom()
            for _ in range(pick.randint(0, 3)):
                candidate.call(prepared)
            judged: list[Problem | None] = []
            timed = time_calls(
                calls,
                int(bench.get("repeats", 7)),
                phase,
                warm={"candidate": last} if last is not None else None,
                after_sample=_judge_a_timed_call(bench["cases"][0], held[1], native, judged, pick.randrange(3)),
            )
            if judged and judged[0] is not None:
                result["timed_call"] = judged[0]
            phase(who="loader", step="bandwidth")
            result["bandwidth"] = measure_bandwidth(int(bench.get("bytes") or 0))
    native_samples = _native_samples(bench, known, timed, result)
    baselines, reused = _baseline_samples(sides, timed)
    result.update(
        {
            "candidate": timed["samples"]["candidate"],
            "native": native_samples,
            "batch": timed["batch"],
            "timer_resolution": timed["timer_resolution"],
            "baselines": baselines,
            "baselines_reused": reused,
        }
    )
    return result


def _judge_a_timed_call(
    case: Case, buffers: dict[str, GuardedBuffer], native: Outputs | None, judged: list[Problem | None], index: int
) -> tuple[str, int, Callable[[], None]] | None:
    """The timing's ``after_sample`` that judges the candidate's outputs as timed sample ``index`` left them
    (None where the case is not judged here or an output is also an input, so repeated calls change it)."""
    inputs = {c["container"] for c in case["connectors"] if c["direction"] == "in"}
    if not case.get("judge", True) or inputs & set(output_containers(case)):
        return None

    def judge() -> None:
        judged.append(against_reference(case, connector_views(case, outputs_now(case, buffers)), native))

    return ("candidate", index, judge)


def _after_timing(
    case: Case, candidate: Program[P], held: tuple[P, dict[str, GuardedBuffer]], native: Outputs | None, phase: Phase
) -> Problem | None:
    """One more call after the timed ones, on the timed buffers with their outputs poisoned again, judged
    against the reference: code that counts its calls or notices the timing loop and stops computing (a
    no-op timed, stale outputs later) is caught here. Outputs that are also inputs are left as they are."""
    if not case.get("judge", True):  # a whole program, whose outputs the parent judges
        return None
    phase(who="candidate", step="after timing", seed=case["seed"], sizes=case["sizes"])
    return poisoned_call(case, candidate, held[0], held[1], native)


def run_bench(
    job: SandboxJob,
    candidate: Program[P],
    reference: Reference | None,
    natives: list[Outputs | None],
    phase: Phase,
    threads: Threads,
) -> tuple[BenchResult, list[CaseRecord]]:
    """The bench section: its cases (seeds at the bench sizes), the run rules, then the timing under the lock."""
    bench = job["bench"]
    assert bench is not None
    began = time.perf_counter()
    records: list[CaseRecord] = []
    with contextlib.ExitStack() as kept:  # the first case's buffers, for the timing
        held: tuple[P, dict[str, GuardedBuffer]] | None = None
        for index, case in enumerate(bench["cases"]):
            ran = run_case(case, candidate, natives[index], phase, threads, job, keep=kept if index == 0 else None)
            record = ran[0]
            record.pop("returned", None)
            records.append(record)
            if index == 0:
                held = ran[1]
            if "problem" in record:
                return {}, records
        outputs = [r.pop("outputs") for r in records]
        result: BenchResult = {
            "bytes": bench.get("bytes"),
            "call_seconds": records[0]["call_seconds"][:1],
            "reads_outside": sorted({c for r in records for c in r["reads_outside"]}),
        }
        result["input_independent"] = _input_independent(bench, natives, outputs)
        if bench.get("time") and held is not None:
            result.update(_time_bench(job, candidate, held, reference, records, phase, threads, natives[0]))
            problem = _after_timing(bench["cases"][0], candidate, held, natives[0], phase)
            if problem is not None:
                result["after_timing"] = problem
    result["seconds"] = time.perf_counter() - began
    return result, records
