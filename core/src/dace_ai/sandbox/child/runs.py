"""The candidate's runs of one case, judged: each thread count, the second call, the reference's outputs.

A run allocates its buffers with :func:`~.buffers.allocated` in an
:class:`contextlib.ExitStack` of its own: a thread run's buffers are freed once the
next run's are allocated (so that each run sees new addresses), the first run's are
handed to the caller's stack when it keeps them for the bench timing, and every one
is freed when the case ends, however it ends.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .at_once import call_at_once
from .buffers import GuardedBuffer, allocated
from .compare import (
    against_reference,
    compare,
    connector_views,
    expected_of,
    nan_reads,
    outputs_now,
    outside_problem,
    written_late,
)
from .elsewhere import elsewhere
from .in_place import call_in_place
from .inputs import case_data, fill_values, output_containers, view
from .process import Phase, Threads
from .programs import P, Program
from .records import Case, CaseRecord, Problem, SandboxJob
from .reuse import save_array
from .timing import time_calls

Outputs = dict[str, np.ndarray]


def where(case: Case, buffers: dict[str, GuardedBuffer]) -> dict[str, Any]:
    """What the phase file says of a run: its seed, sizes and buffers (to place a fault)."""
    return {"seed": case["seed"], "sizes": case["sizes"], "buffers": [b.layout() for b in buffers.values()]}


def time_side(
    label: str, program: Program[P], prepared: P, job: SandboxJob, phase: Phase, context: dict[str, Any]
) -> list[float]:
    """The ``time`` mode's samples of one side on its prepared buffers (:func:`~.timing.time_calls`, one side)."""
    timed = time_calls(
        {label: lambda: program.call(prepared)},
        int(job.get("repeats", 5)),
        lambda **step: phase(**step, **context),
        warmup=int(job.get("warmup", 1)),
    )
    return timed["samples"][label]


def time_reference(reference: Program[P], case: Case, job: SandboxJob, phase: Phase, threads: Threads) -> list[float]:
    """The ``time`` mode's samples of the native reference on the case's inputs, in buffers of its own."""
    threads.use(None)
    with allocated(case, case_data(case)) as buffers:
        context = where(case, buffers)
        phase(who="reference", step="time", **context)
        prepared = reference.prepare(case, buffers)
        seconds = time_side("reference", reference, prepared, job, phase, context)
        reference.finish(prepared)
    return seconds


def reference_outputs(reference: Program[P], case: Case, phase: Phase, threads: Threads) -> dict[str, np.ndarray]:
    """The reference's output containers (flat) for one case: from its cache files, else run and cached.

    Runs before any candidate code is loaded into this process, so what is cached
    comes from the reference alone.
    """
    cache = case.get("reference_cache") or {}
    names = output_containers(case)
    if cache and all(os.path.isfile(cache.get(n, "")) for n in names):
        try:
            return {n: np.load(cache[n], allow_pickle=False) for n in names}
        except (OSError, ValueError):
            pass
    threads.use(None)
    with allocated(case, case_data(case)) as buffers:
        phase(
            who="reference",
            step="run",
            seed=case["seed"],
            sizes=case["sizes"],
            buffers=[b.layout() for b in buffers.values()],
        )
        prepared = reference.prepare(case, buffers)
        reference.call(prepared)
        reference.finish(prepared)
        phase(who="reference", step="done", seed=case["seed"], sizes=case["sizes"])
        outputs = {n: buffers[n].array.copy() for n in names}
    for name in names:
        if cache.get(name):
            try:
                save_array(cache[name], outputs[name])
            except OSError:
                pass
    return outputs


def _call_again(
    case: Case,
    candidate: Program[P],
    prepared: P,
    buffers: dict[str, GuardedBuffer],
    native: dict[str, np.ndarray] | None,
    phase: Phase,
) -> Problem | None:
    """A second call on the same buffers and state with other inputs (``case["again"]``), judged like the first.

    Results kept from an earlier call (a static cache keyed on the size or the
    addresses) come out as the first call's outputs and are refused here.
    """
    again = case["again"]
    data = case_data(again)
    for name, buf in buffers.items():
        buf.array[:] = data[name]
    phase(
        who="candidate",
        step="run",
        seed=again["seed"],
        sizes=again["sizes"],
        again=True,
        buffers=[b.layout() for b in buffers.values()],
    )
    candidate.call(prepared)
    returned = outputs_now(again, buffers)
    problem = outside_problem(again, buffers, data, "candidate")
    if problem is None:
        problem = against_reference(again, connector_views(again, returned), native)
    if problem is None:
        return None
    return {
        **problem,
        "again": True,
        "was": problem["kind"],
        "kind": "stale",
        "first_seed": case["seed"],
        "seed": again["seed"],
    }


def _call_elsewhere(
    case: Case,
    candidate: Program[P],
    prepared: P,
    buffers: dict[str, GuardedBuffer],
    data: dict[str, np.ndarray],
    native: dict[str, np.ndarray] | None,
    phase: Phase,
    threads: Threads,
    count: int | None,
) -> Problem | None:
    """One more call on the case's inputs (put back where a call changed them) with the process made another
    place (:func:`~.elsewhere.elsewhere`) and one thread, judged: output that depends on where it runs is refused."""
    for name, buf in buffers.items():
        buf.array[:] = data[name]
    phase(who="candidate", step="elsewhere", seed=case["seed"], sizes=case["sizes"])
    threads.use(1)  # one CPU, one thread: a data race cannot pass for output that depends on the place
    try:
        with elsewhere() as changed:
            problem = poisoned_call(case, candidate, prepared, buffers, native)
    finally:
        threads.use(count)
    if problem is None:
        return None
    return {**problem, "was": problem["kind"], "kind": "elsewhere", "changed": changed}


def _call_repeatedly(
    case: Case,
    candidate: Program[P],
    prepared: P,
    buffers: dict[str, GuardedBuffer],
    native: dict[str, np.ndarray] | None,
    phase: Phase,
) -> Problem | None:
    """``case["repeat"]`` more calls on the same inputs (as a program's loop or a timing loop makes them), then
    one with the outputs poisoned again, judged: code that counts its calls and stops computing is caught.
    Outputs that are also inputs are not poisoned (their contents are the next call's input)."""
    count = int(case["repeat"])
    phase(who="candidate", step="repeat", seed=case["seed"], sizes=case["sizes"], calls=count)
    for _ in range(count):
        candidate.call(prepared)
    problem = poisoned_call(case, candidate, prepared, buffers, native)
    if problem is None:
        return None
    return {**problem, "was": problem["kind"], "kind": "repeated", "calls": count + 2}


def poisoned_call(
    case: Case,
    candidate: Program[P],
    prepared: P,
    buffers: dict[str, GuardedBuffer],
    native: dict[str, np.ndarray] | None,
) -> Problem | None:
    """One more call on ``buffers`` (their inputs unchanged) with the output-only containers filled again,
    judged against the reference. Outputs that are also inputs keep their contents (the call's input)."""
    inputs = {c["container"] for c in case["connectors"] if c["direction"] == "in"}
    for name in output_containers(case):
        if name not in inputs:
            buffers[name].array[:] = fill_values(buffers[name].array.dtype, buffers[name].array.size)
    candidate.call(prepared)
    return against_reference(case, connector_views(case, outputs_now(case, buffers)), native)


def _save_outputs(job: SandboxJob, case: Case, returned: dict[str, np.ndarray]) -> None:
    """The candidate's outputs as .npy files, when the parent asked (whole programs it judges itself)."""
    if job.get("save_outputs"):
        for name in output_containers(case):
            save_array(os.path.join(job["save_outputs"], f"{case.get('id', 0)}-candidate-{name}.npy"), returned[name])


def _first_run_problem(
    problem: Problem,
    case: Case,
    candidate: Program[P],
    native: dict[str, np.ndarray] | None,
    phase: Phase,
    threads: Threads,
    job: SandboxJob,
    data: dict[str, np.ndarray],
    buffers: dict[str, GuardedBuffer],
    returned: dict[str, np.ndarray],
    count: int | None,
) -> Problem:
    """What to report for a first run that differs from the reference: work still running after
    the call returned explains a wrong result best; a wrong result with several threads that is
    right with one is the threads' doing (not deterministic), which says where to look."""
    if job["mode"] != "time":  # an answer that returns before its work is done
        problem = written_late(buffers, returned, wait=0.05) or problem
    if problem["kind"] == "late_write":
        return problem
    problem = {**problem, "threads": count or threads.count}
    if (
        (count or threads.count) > 1
        and threads.runtime is not None
        and _right_with_one_thread(case, candidate, native, phase, threads, data)
    ):
        problem = {
            **problem,
            "kind": "nondeterministic",
            "was": problem["kind"],
            "threads": [count or threads.count, 1],
            "runs": 2,
            "single_ok": True,
        }
    return problem


def _differs_from_first(
    case: Case, first: dict[str, np.ndarray], outs: dict[str, np.ndarray], counts: list[int]
) -> Problem | None:
    """A later thread run's outputs against the first run's: a difference beyond the tolerance
    means the result depends on the threads' timing. ``counts``: the thread counts run so far."""
    for conn in case["connectors"]:
        if conn["direction"] != "out":
            continue
        problem = compare(conn, first[conn["name"]], outs[conn["name"]], case["rtol"][conn["name"]])
        if problem is not None:
            return {
                **problem,
                "kind": "nondeterministic",
                "was": problem["kind"],
                "threads": counts,
                "runs": len(counts),
            }
    return None


def _right_with_one_thread(
    case: Case,
    candidate: Program[P],
    native: dict[str, np.ndarray] | None,
    phase: Phase,
    threads: Threads,
    data: dict[str, np.ndarray],
) -> bool:
    """Whether the case, wrong with all cores, comes out right with one thread (then the threads are to blame)."""
    threads.use(1)
    with allocated(case, data) as buffers:
        phase(
            who="candidate",
            step="run",
            seed=case["seed"],
            sizes=case["sizes"],
            threads=1,
            buffers=[b.layout() for b in buffers.values()],
        )
        prepared = candidate.prepare(case, buffers)
        candidate.call(prepared)
        candidate.finish(prepared)
        phase(who="candidate", step="done", seed=case["seed"], sizes=case["sizes"])
        right = outside_problem(case, buffers, data, "candidate") is None
        for conn in case["connectors"]:
            if not right or conn["direction"] != "out":
                continue
            expected = expected_of(case, conn, native)
            got = np.array(view(buffers[conn["container"]].array, conn))
            right = expected is None or compare(conn, np.asarray(expected), got, case["rtol"][conn["name"]]) is None
    threads.use(None)
    return right


def _run_once(
    case: Case,
    candidate: Program[P],
    native: Outputs | None,
    phase: Phase,
    threads: Threads,
    job: SandboxJob,
    run: tuple[int, int | None, bool],
    data: Outputs,
    buffers: dict[str, GuardedBuffer],
    record: CaseRecord,
    again_native: Outputs | None,
    riders: Mapping[Any, Outputs | None],
) -> tuple[Problem | None, Outputs, P]:
    """One thread run of the candidate on ``buffers``, judged: (its problem or None, its outputs per
    connector, its prepared call). ``run``: its index, thread count, and whether it is kept (not finished)."""
    index, count, held = run
    judge = case.get("judge", True)  # False: whole programs, whose outputs the parent judges
    phase(
        who="candidate",
        step="run",
        seed=case["seed"],
        sizes=case["sizes"],
        threads=count or threads.count,
        buffers=[b.layout() for b in buffers.values()],
    )
    prepared = candidate.prepare(case, buffers)
    start = time.perf_counter()
    candidate.call(prepared)
    record["call_seconds"].append(time.perf_counter() - start)
    returned = outputs_now(case, buffers)
    if job["mode"] == "time" and index == 0:
        record["candidate_seconds"] = time_side("candidate", candidate, prepared, job, phase, where(case, buffers))
    problem = outside_problem(case, buffers, data, "candidate") if judge else None
    if problem is None and judge and job["mode"] != "time":
        problem = written_late(buffers, returned)
    outs = connector_views(case, returned)
    if problem is None and judge and index == 0:
        problem = against_reference(case, outs, native)
        if problem is not None:
            problem = _first_run_problem(
                problem, case, candidate, native, phase, threads, job, data, buffers, returned, count
            )
        if problem is None and case.get("elsewhere") and not held:
            problem = _call_elsewhere(case, candidate, prepared, buffers, data, native, phase, threads, count)
        if problem is None and case.get("repeat") and not held:
            problem = _call_repeatedly(case, candidate, prepared, buffers, native, phase)
        if problem is None and case.get("in_place") and not held:
            problem = call_in_place(case, candidate, prepared, buffers, riders, phase)
        if problem is None and case.get("again") and not held:
            problem = _call_again(case, candidate, prepared, buffers, again_native, phase)
    if not held:
        candidate.finish(prepared)
    phase(who="candidate", step="done", seed=case["seed"], sizes=case["sizes"])
    if index == 0:
        _save_outputs(job, case, returned)
        record["returned"] = outs
    return problem, outs, prepared


def _judge_run(
    record: CaseRecord, case: Case, index: int, outs: Outputs, native: Outputs | None, first: Outputs, counts: list[int]
) -> Problem | None:
    """Record a run without problem: the first run's outputs and reads outside; a later run against the first."""
    if not case.get("judge", True):
        record["reads_outside"] = []
        record["outputs"] = outs
    elif index == 0:
        record["reads_outside"] = nan_reads(case, outs, native)
        record["outputs"] = outs
    else:
        return _differs_from_first(case, first, outs, counts[: index + 1])
    return None


def run_case(
    case: Case,
    candidate: Program[P],
    native: Outputs | None,
    phase: Phase,
    threads: Threads,
    job: SandboxJob,
    keep: contextlib.ExitStack | None = None,
    again_native: Outputs | None = None,
    riders: Mapping[Any, Outputs | None] | None = None,
) -> tuple[CaseRecord, tuple[P, dict[str, GuardedBuffer]] | None]:
    """Run the candidate on one case (once per thread count of ``case["threads"]``) and judge it.

    What is judged is what the outputs held the moment the call returned; an output
    that changes afterwards is refused as work left running. The first run is
    compared with the reference, then (``case["again"]``) called a second time on the
    same buffers with other inputs, and (``case["in_place"]``) on the same buffers after
    its inputs changed in place; every further run is compared with the first (a
    difference beyond the tolerance: the result depends on the threads' timing). Then
    (``case["concurrent"]``) several threads call one state at once
    (:func:`~.at_once.call_at_once`). ``riders``: the reference's outputs of the cases
    riding in ``case`` (in place, concurrent), by their ids.
    Returns the record and, with ``keep`` (a stack of the caller's) and no problem,
    the first run's prepared call and its buffers, which then belong to ``keep`` with its
    ``finish`` (for the timing); otherwise None.
    """
    data = case_data(case)
    record: CaseRecord = {"seed": case["seed"], "sizes": case["sizes"], "call_seconds": []}
    # no OpenMP runtime loaded: the thread count changes nothing, run once
    counts: Sequence[int | None] = (case.get("threads") or [None]) if threads.runtime is not None else [None]
    first: Outputs = {}
    kept: tuple[contextlib.ExitStack, P, dict[str, GuardedBuffer]] | None = None
    with contextlib.ExitStack() as runs:
        previous: contextlib.ExitStack | None = None
        for index, count in enumerate(counts):
            threads.use(count)
            this = runs.enter_context(contextlib.ExitStack())
            buffers = this.enter_context(allocated(case, data))
            if previous is not None:  # freed only now: each run sees buffers at new addresses
                previous.close()
            held = keep is not None and index == 0
            problem, outs, prepared = _run_once(
                case,
                candidate,
                native,
                phase,
                threads,
                job,
                (index, count, held),
                data,
                buffers,
                record,
                again_native,
                riders or {},
            )
            if held and problem is None:
                this.callback(candidate.finish, prepared)  # before the buffers are freed
                kept = (this, prepared, buffers)
            else:
                previous = this
            problem = problem or _judge_run(
                record, case, index, outs, native, first, [c or threads.count for c in counts]
            )
            if problem is not None:
                record["problem"] = problem
                break
            first = first or outs
        if "problem" not in record and case.get("concurrent") and case.get("judge", True):
            problem = call_at_once(case, candidate, riders or {}, phase, threads)
            if problem is not None:
                record["problem"] = problem
        if kept is None or "problem" in record or keep is None:
            return record, None
        keep.enter_context(kept[0].pop_all())
    return record, (kept[1], kept[2])
