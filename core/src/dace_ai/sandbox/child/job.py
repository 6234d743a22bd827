"""The child's job from start to end: reference outputs, then the candidate's cases, then the bench section.

:func:`main` is what the entry file (``__main__.py``) calls with the job file.
"""

from __future__ import annotations

import json
import os

import numpy as np

from .bench_section import run_bench
from .compare import expected_of, same_outputs
from .process import Phase, Threads, apply_limits
from .programs import CandidateLibrary, P, Program, Reference
from .records import Case, CaseRecord, ChildResult, SandboxJob
from .reuse import save_array
from .runs import Outputs, reference_outputs, run_case, time_reference


def _name_stale(record: CaseRecord, case: Case, earlier: dict[str, tuple[int, dict[str, np.ndarray]]]) -> None:
    """A wrong result that is bit for bit the candidate's result of an earlier case of the same shape: stale.

    A static cache keyed on the sizes (or a result kept from the last call) returns
    the earlier inputs' outputs for new inputs; the record's problem then says so.
    """
    returned = record.pop("returned", None)
    if returned is None:
        return
    key = json.dumps([case["sizes"], case.get("point") or {}], sort_keys=True)
    problem = record.get("problem")
    before = earlier.get(key)
    if (
        problem is not None
        and problem["kind"] == "mismatch"
        and before is not None
        and same_outputs(before[1], returned)
    ):
        record["problem"] = {**problem, "kind": "stale", "was": "mismatch", "first_seed": before[0]}
    earlier[key] = (case["seed"], returned)


def _reference_for(
    reference: Reference | None, case: Case, job: SandboxJob, phase: Phase, threads: Threads
) -> dict[str, np.ndarray] | None:
    """The native reference's outputs of a case (None when a reference function's files give them)."""
    if reference is None or case.get("expected"):
        return None
    outputs = reference_outputs(reference, case, phase, threads)
    if job.get("save_outputs"):
        for name, value in outputs.items():
            save_array(os.path.join(job["save_outputs"], f"{case.get('id', 0)}-reference-{name}.npy"), value)
    return outputs


def _skip_reason(case: Case, native: dict[str, np.ndarray] | None, settled: set[str]) -> str | None:
    """Why a case of an input distribution other than ``unit`` is not run, or None to run it.

    Its reference must be defined there: a reference that failed on those inputs
    (``case["unfit"]``, said by the parent) or whose outputs are not all finite skips
    the case, never fails the candidate. Of a magnitude group (the same distribution
    at falling magnitudes) only the largest magnitude whose reference is finite runs.
    """
    if (case.get("distribution") or "unit") == "unit":
        return None
    if case.get("group") and case["group"] in settled:
        return "settled"
    if case.get("unfit"):
        return str(case["unfit"])
    for conn in case["connectors"]:
        if conn["direction"] != "out":
            continue
        expected = expected_of(case, conn, native)
        if expected is not None and np.asarray(expected).dtype.kind in "fc" and not np.all(np.isfinite(expected)):
            return "the reference is not finite there"
    return None


def run_job(job: SandboxJob) -> ChildResult:
    """Reference outputs first (before any candidate code is loaded), then the cases, then the bench section.

    ``job``: ``mode`` (``verify``: compare; ``time``: also time each side per case),
    ``candidate`` and ``reference`` (library specs), ``cases`` (each may carry
    ``threads``: thread counts of its runs, ``reference_cache``: files of the
    reference's outputs, ``expected``: files of a reference function's outputs,
    ``inputs``: files of its initial data, ``distribution`` and ``magnitude``: how its
    inputs are drawn, ``group``: its magnitude group, ``unfit``: why its reference is not
    defined there, ``again``: a case of other inputs for a second call on the same
    buffers, ``in_place``: cases of its inputs changed in place, ``concurrent``: cases
    called at once by several threads on one state), ``threads`` (the all-core count), ``bench`` (cases at the bench sizes,
    whether to time, repeats, lock file, bytes per call). Every case gets a record, in
    order: a skipped one says why (``skipped``).
    """
    phase = Phase(job["phase_file"])
    fault_fd = os.open(job["fault_file"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    threads = Threads(int(job.get("threads") or os.cpu_count() or 1))
    reference = None
    reference_spec = job.get("reference")
    if reference_spec:
        phase(who="loader", step="reference")
        reference = Reference(reference_spec)
        threads.attach()
    bench_cases = (job.get("bench") or {}).get("cases", [])
    natives: list[Outputs | None] = []
    for case in [*job["cases"], *bench_cases]:
        natives.append(_reference_for(reference, case, job, phase, threads))
    again_natives = {
        index: _reference_for(reference, case["again"], job, phase, threads)
        for index, case in enumerate(job["cases"])
        if case.get("again")
    }
    riders = {
        rider["id"]: None if rider.get("unfit") else _reference_for(reference, rider, job, phase, threads)
        for case in job["cases"]
        for rider in [*(case.get("in_place") or []), *(case.get("concurrent") or [])]
    }
    phase(who="loader", step="candidate")
    spec = job["candidate"]
    # the candidate side: the entry-point library of the one compile, or a program DaCe built
    if spec.get("kind") == "program":
        return _run_candidate(job, Reference(spec), reference, natives, again_natives, riders, phase, threads)
    return _run_candidate(
        job, CandidateLibrary(spec, fault_fd), reference, natives, again_natives, riders, phase, threads
    )


def _run_candidate(
    job: SandboxJob,
    candidate: Program[P],
    reference: Reference | None,
    natives: list[Outputs | None],
    again_natives: dict[int, Outputs | None],
    riders: dict[int | str, Outputs | None],
    phase: Phase,
    threads: Threads,
) -> ChildResult:
    """The candidate's cases in order (up to the first with a problem), then the bench section.

    Generic in what the candidate's ``prepare`` makes: the entry-point library and a
    whole program DaCe built run the very same steps. ``natives``: the reference's outputs per case, then per bench case; ``again_natives``:
    those of each second call, by its case's index (None: a reference function's files give them);
    ``riders``: those of the cases called in place or at once inside a case, by their ids.
    """
    threads.attach()
    results: list[CaseRecord] = []
    out: ChildResult = {
        "mode": job["mode"],
        "cases": results,
        "bench": None,
        "threads": {"count": threads.count, "runtime": threads.runtime},
    }
    settled: set[str] = set()  # magnitude groups whose largest finite magnitude has run
    earlier: dict[str, tuple[int, dict[str, np.ndarray]]] = {}  # the candidate's last outputs per sizes, point
    for index, case in enumerate(job["cases"]):
        skip = _skip_reason(case, natives[index], settled)
        if skip is not None:
            results.append({"seed": case["seed"], "sizes": case["sizes"], "skipped": skip})
            continue
        if case.get("group"):
            settled.add(case["group"])
        record, _ = run_case(
            case, candidate, natives[index], phase, threads, job, again_native=again_natives.get(index), riders=riders
        )
        record.pop("outputs", None)
        _name_stale(record, case, earlier)
        if job["mode"] == "time" and reference is not None and "problem" not in record:
            record["reference_seconds"] = time_reference(reference, case, job, phase, threads)
        results.append(record)
        if "problem" in record:
            return out
    if (job.get("bench") or {}).get("cases"):
        bench, records = run_bench(job, candidate, reference, natives[len(job["cases"]) :], phase, threads)
        for record in records:
            record.pop("outputs", None)
            record["bench"] = True
        results.extend(records)
        if not any("problem" in r for r in records):
            out["bench"] = bench
    return out


def main(argv: list[str]) -> int:
    """Run the job of the file ``argv[1]`` under its limits; write the result (or the error) to its result file."""
    with open(argv[1], encoding="utf-8") as handle:
        job = json.load(handle)
    apply_limits(job.get("limits", {}))
    try:
        result = run_job(job)
    except MemoryError as exc:
        result = {"error": "memory", "message": str(exc)}
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        result = {"error": "harness", "message": f"{type(exc).__name__}: {exc}"}
    tmp = job["result_file"] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    os.replace(tmp, job["result_file"])
    return 0
