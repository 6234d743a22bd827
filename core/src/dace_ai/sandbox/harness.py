"""Run a candidate against its node's reference in the sandbox: to verify it, or to time it.

:func:`run_against_reference` is the one entry point for the verify and bench stages
and for anything that benchmarks candidates: it compiles the candidate once, builds
(or reuses) the node's native program, makes the cases (seeds x sizes; thread runs
at the larger sizes, see :mod:`dace_ai.sandbox.run_plan`; the bench section when
given a plan), runs them in one sandboxed child (:mod:`dace_ai.sandbox.child_process`)
and returns a :class:`~dace_ai.sandbox.sandbox_run.SandboxRun` (a frozen record; its fields as a dict)::

    {"mode": "verify" | "time" | "bench",
     "status": "passed" | "failed" | "inconclusive",
     "reason": None | "mismatch" | "unwritten" | "nondeterministic" | "outside_subset" | "outside_buffer"
               | "crash" | "timeout"
               | "cpu_time" | "memory" | "compile" | "load" | "no reference" | "reference failed" | ...,
     "message": "worded for the model: seed, sizes, first wrong index, expected vs got, max error",
     "seeds": [0, 1, 2], "sizes": [{"N": 13}, {"N": 67}, {"N": 64}, {"N": 520}, {"N": 65536}],
     "skipped": [SkippedSize(...)], "ladder": [{"rung": "small", "sizes": ..., "seeds": ..., "points": ...}],
     "cases": [{"seed": 0, "sizes": {"N": 13}, "problem": {...},            # verify: only a failing case
                "candidate_seconds": [...], "reference_seconds": [...]}],  # time: per-run seconds
     "reference": {"kind": "native" | "function" | None, "implementation": "pure"},
     "threads": {"count": 2, "runs": [{"sizes": ..., "seed": 0, "threads": [1, 2, 2]}], "runtime": "libgomp.so.1"},
     "bench": None | {"candidate": [...], "native": [...], "batch": ..., "bandwidth": ..., "sizes": ...,
                      "timed": True, "library": ".../candidate.so", "input_independent": False, ...},
     "library": ".../sandbox/candidate.so",
     "problem": None | RunProblem,  # the failure as data: kind, container, connector, index, expected, got, access
     "seconds": {"compile": ..., "reference": ..., "run": ..., "total": ...}}

The job, its cases and the child's records are the TypedDicts of :mod:`dace_ai.sandbox.child.records`
(:class:`~dace_ai.sandbox.child.records.SandboxJob`, :class:`~dace_ai.sandbox.child.records.Case`,
:class:`~dace_ai.sandbox.child.records.CaseRecord`, :class:`~dace_ai.sandbox.child.records.Problem`), defined
there once because the child imports nothing else. Callers that act on a failure read
``result.problem`` (:class:`~dace_ai.sandbox.sandbox_run.RunProblem`), never the message, which is worded for the model.

Sizes: the size ladder of :mod:`dace_ai.sandbox.ladder` (small odd sizes, multiples
of every vector width, several tiles, the bench size; only sizes the program's
subsets allow, each map at several points); ``"skipped"`` lists the
:class:`~dace_ai.sandbox.ladder.SkippedSize` records of sizes not run and
``"ladder"`` the rungs run (sizes, seeds, map points, adjustments). Messages name
the rung and the map point of the failing case.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from dace_ai.checking.api import CheckRequest, Status
from dace_ai.compat import compilation_error_types
from dace_ai.compilation.candidate import candidate_library
from dace_ai.compilation.shared_names import shared_state_words
from dace_ai.compilation.units import scope_parameters
from dace_ai.sandbox import distributions
from dace_ai.sandbox.cases import (
    add_call_elsewhere,
    add_concurrent_calls,
    add_in_place_calls,
    add_repeated_calls,
    add_second_call,
    distribution_cases,
    make_case,
)
from dace_ai.sandbox.child.inputs import case_inputs, view
from dace_ai.sandbox.child.records import Case, CaseRecord, Connector, LibrarySpec, Problem, SandboxJob
from dace_ai.sandbox.child_process import ChildOutcome, SandboxLimits, run_child
from dace_ai.sandbox.ladder import GivenSizes, Ladder, SkippedSize, build_ladder
from dace_ai.sandbox.reference import build_native_reference, call_reference, reference_kind
from dace_ai.sandbox.run_plan import (
    all_cores,
    baseline_timing_file,
    cache_reference_outputs,
    case_key,
    native_timing_file,
    plan_threads,
    thread_counts,
    uses_openmp,
)
from dace_ai.sandbox.run_records import DistributionsRun, ReferenceInfo, RungRecord, RunSeconds, RunThreads
from dace_ai.sandbox.sandbox_run import RunProblem, SandboxRun
from dace_ai.sandbox.wording import access_word, describe_outcome, describe_problem
from dace_ai.state import STATE

if TYPE_CHECKING:
    from dace_ai.sandbox.run_plan import BenchPlan

DEFAULT_SEEDS = (0, 1, 2)


#: Builds the device program of a candidate: (its library, the child's program spec).
DeviceBuilder = Callable[[CheckRequest], tuple[Path, LibrarySpec]]


class RunDraft(TypedDict, total=False):
    """The run's record while :func:`run_against_reference` fills it (it returns it as a :class:`SandboxRun`)."""

    mode: str
    status: Status
    reason: str | None
    message: str
    problem: RunProblem | None
    seeds: list[int]
    sizes: list[dict[str, int]]
    skipped: list[SkippedSize]
    ladder: list[RungRecord]
    cases: list[CaseRecord]
    distributions: DistributionsRun
    reference: ReferenceInfo
    threads: RunThreads
    bench: dict[str, Any] | None
    library: str
    seconds: RunSeconds


def case_problem(reason: str, problem: Problem, case: Case) -> RunProblem:
    """The :class:`RunProblem` of a problem the child found in ``case``."""
    container = problem.get("container") or next(
        (c["container"] for c in case["connectors"] if c["name"] == problem.get("connector")), None
    )
    access = {"outside_buffer": "write", "outside_subset": "write", "read_outside": "read"}.get(problem["kind"], "")
    out: RunProblem = {"kind": reason, "container": container, "access": access, "input": bool(problem.get("input"))}
    for key in ("connector", "index", "expected", "got"):
        if key in problem:
            out[key] = problem[key]
    return out


def fault_problem(reason: str, fault: dict[str, Any] | None) -> RunProblem:
    """The :class:`RunProblem` of a child that did not finish (a fault names the container it hit)."""
    fault = fault or {}
    return {
        "kind": reason,
        "container": fault.get("container"),
        "access": access_word(fault.get("write"), "write", "read", ""),
    }


# ----------------------------------------------------------------------------- references
#: Outputs of reference functions per (function, case), kept for the next candidate of the node.
_expected_memo: dict[tuple[int, str], dict[str, Any]] = STATE.register("sandbox.harness.expected_memo", {})
_EXPECTED_MEMO_BYTES = 256 << 20


def _reference_results(function: Any, case: Case, outputs: list[Connector]) -> dict[str, Any]:
    """The user's reference on the case's inputs; remembered per function and case in this process."""

    key = (id(function), case_key(case))
    known = _expected_memo.get(key)
    if known is not None and known["function"] is function:
        return known["results"]
    data = case_inputs(case)
    inputs = {c["name"]: np.array(view(data[c["container"]], c)) for c in case["connectors"] if c["direction"] == "in"}
    results = call_reference(function, inputs, case["values"], [c["name"] for c in outputs])
    size = sum(getattr(np.asarray(v), "nbytes", 0) for v in results.values())
    while _expected_memo and size + sum(m["bytes"] for m in _expected_memo.values()) > _EXPECTED_MEMO_BYTES:
        _expected_memo.pop(next(iter(_expected_memo)))
    if size <= _EXPECTED_MEMO_BYTES:
        _expected_memo[key] = {"function": function, "results": results, "bytes": size}
    return results


def _expected_outputs(case: Case, function: Any, folder: Path, index: int | str) -> dict[str, str]:
    """Run the user's reference on the case's inputs; save its outputs as .npy files for the child."""
    outputs = [c for c in case["connectors"] if c["direction"] == "out"]
    results = _reference_results(function, case, outputs)
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for conn in outputs:
        dtype = np.dtype(next(c["dtype"] for c in case["containers"] if c["name"] == conn["container"]))
        value = np.asarray(results[conn["name"]])
        if value.shape != tuple(conn["shape"]):
            if value.size == int(np.prod(conn["shape"])) and (not conn["shape"] or value.ndim == 0):
                value = value.reshape(tuple(conn["shape"]))
            else:
                raise ValueError(
                    f"the reference returned shape {value.shape} for {conn['name']}, "
                    f"which sees shape {tuple(conn['shape'])}"
                )
        path = folder / f"expected-{index}-{conn['name']}.npy"
        np.save(path, value.astype(dtype), allow_pickle=False)
        files[conn["name"]] = str(path)
    return files


# ----------------------------------------------------------------------------- entry point
class _Stop(Exception):
    """The run ends early with this (status, reason, message). The steps of
    :func:`run_against_reference` raise it, so a step that finds the run cannot go on says why
    in one statement, and only the entry point writes the result."""

    def __init__(self, status: Status, reason: str | None, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


@dataclass
class _Plan:
    """The cases of one run: ``cases`` (the ladder's, then the distributions'), ``bench_cases``
    (the bench section's), ``agains`` (the cases that ride inside another: second calls on the same
    buffers, calls after inputs changed in place, calls at once), and the ladder they came from."""

    ladder: Ladder | None
    sizes: list[dict[str, int]]
    cases: list[Case]
    bench_cases: list[Case]
    agains: list[Case] = field(default_factory=list)

    @property
    def all_cases(self) -> list[Case]:
        """What the child runs, in order (the second calls ride inside their first case)."""
        return [*self.cases, *self.bench_cases]


_NO_VALUES = "Not verified: could not give the node's symbols values ({})."


def _ladder_cases(
    request: CheckRequest, mode: str, seeds: list[int], sizes: GivenSizes | None, bench: BenchPlan | None
) -> _Plan:
    """The ladder's cases and the bench section's; which rungs depends on the mode, since the
    bench section checks the bench sizes against the reference itself."""
    if mode == "time":
        rungs: tuple[str, ...] = ("bench",)
    elif bench is not None:
        rungs = ("small", "odd", "vector", "multi-tile")
    else:
        rungs = ("small", "odd", "vector", "multi-tile", "bench")
    try:
        ladder = (
            None
            if mode == "bench"
            else build_ladder(request, sizes, bench_sizes=request.settings.bench_sizes, seeds=seeds, rungs=rungs)
        )
        size_list = ladder.sizes() if ladder is not None else []
        cases = (
            [make_case(request, c.seed, c.sizes, c.point, c.rung, c.point_words) for c in ladder.cases()]
            if ladder is not None
            else []
        )
        bench_cases = (
            [make_case(request, seed, bench.sizes, rung="bench") for seed in bench.seeds] if bench is not None else []
        )
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise _Stop("inconclusive", "sizes", _NO_VALUES.format(exc)) from exc
    return _Plan(ladder, size_list, cases, bench_cases)


def _plan_cases(
    request: CheckRequest,
    mode: str,
    seeds: list[int],
    sizes: GivenSizes | None,
    bench: BenchPlan | None,
    kind: str | None,
    count: int,
    result: RunDraft,
) -> _Plan:
    """Make every case the child runs, numbered in the order it runs them: the ladder, thread runs,
    other input distributions and second calls (verify), the bench section. Records the sizes,
    the skipped sizes and the ladder in ``result``."""

    plan = _ladder_cases(request, mode, seeds, sizes, bench)
    result["sizes"] = plan.sizes
    result["skipped"] = plan.ladder.skipped if plan.ladder is not None else []
    result["ladder"] = plan.ladder.describe() if plan.ladder is not None else []
    if not plan.cases and not plan.bench_cases:
        raise _Stop(
            "inconclusive",
            "sizes",
            "Not verified: the program allows none of the sizes tried: " + "; ".join(map(str, result["skipped"])) + ".",
        )
    if mode == "verify":
        plan_threads(plan.cases, count)
        try:
            plan.cases += distribution_cases(request, plan.ladder, kind)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            raise _Stop("inconclusive", "sizes", _NO_VALUES.format(exc)) from exc
        add_second_call(request, plan.cases)
        add_repeated_calls(plan.cases)
        add_call_elsewhere(plan.cases)
        try:
            add_in_place_calls(request, plan.cases)
            add_concurrent_calls(request, plan.cases)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            raise _Stop("inconclusive", "sizes", _NO_VALUES.format(exc)) from exc
    if plan.bench_cases:
        plan.bench_cases[0]["threads"] = thread_counts(count)
    all_cases = plan.all_cases
    for index, case in enumerate(all_cases):
        case["id"] = index
    plan.agains = [c["again"] for c in all_cases if c.get("again")]
    plan.agains += [r for c in all_cases for r in [*(c.get("in_place") or []), *(c.get("concurrent") or [])]]
    for index, case in enumerate(plan.agains, start=len(all_cases)):
        case["id"] = index
    result["threads"]["runs"] = [
        {"sizes": c["sizes"], "seed": c["seed"], "threads": c["threads"]} for c in all_cases if c.get("threads")
    ]
    return plan


def _compile_candidate(request: CheckRequest, plan: _Plan, result: RunDraft) -> Path:
    """The candidate's shared library; a candidate that does not build ends the run. Without
    OpenMP in the code one thread or all run the same code, so each case runs once."""

    start = time.perf_counter()
    library, build, link = candidate_library(request)
    result["seconds"]["compile"] = time.perf_counter() - start
    if library is None:
        if build.missing_compiler:
            raise _Stop("inconclusive", "compiler", build.result.output)
        if not build.ok:
            raise _Stop("failed", "compile", "The code does not compile as DaCe builds it:\n" + build.diagnostics)
        raise _Stop(
            "failed",
            "link",
            "The code compiles but does not link into a shared library:\n"
            + (link.output.strip()[-3000:] if link is not None else ""),
        )
    result["library"] = str(library)
    if not uses_openmp(library):
        for case in plan.all_cases:
            case.pop("threads", None)
        result["threads"]["runs"] = []
    else:  # its calls at once come from an OpenMP team: omp_get_thread_num() differs between them, as in the program
        for case in plan.all_cases:
            if case.get("concurrent"):
                case["concurrent_team"] = True
    return library


def _build_device_candidate(
    request: CheckRequest, plan: _Plan, result: RunDraft, build_device_program: DeviceBuilder
) -> tuple[Path, LibrarySpec]:
    """The device program's library and spec; a program that does not build ends the run."""
    compilation_error, _ = compilation_error_types()
    start = time.perf_counter()
    try:
        library, spec = build_device_program(request)
    except compilation_error as exc:
        raise _Stop(
            "failed", "compile", "The code does not build as DaCe's GPU program:\n" + str(exc)[-3000:]
        ) from None
    except Exception as exc:  # noqa: BLE001 - the program could not be made: undecidable, not the model's fault
        raise _Stop("inconclusive", "device program", f"could not build the device program: {exc}") from None
    result["seconds"]["compile"] = time.perf_counter() - start
    result["library"] = str(library)
    for case in plan.all_cases:  # one GPU: thread counts and concurrent host calls do not apply
        case.pop("threads", None)
        case.pop("concurrent", None)
    result["threads"]["runs"] = []
    return library, spec


def _child_job(
    request: CheckRequest,
    mode: str,
    plan: _Plan,
    library: Path,
    bench: BenchPlan | None,
    count: int,
    repeats: int,
    warmup: int,
) -> SandboxJob:
    """The job the child reads: its cases, the candidate, the bench section (reference added later)."""

    bench_job = bench.job(plan.bench_cases) if bench is not None else None
    job: SandboxJob = {
        "mode": "verify" if mode == "bench" else mode,
        "repeats": repeats,
        "warmup": warmup,
        "threads": count,
        "candidate": {
            "library": str(library),
            "symbols": list(request.node.symbols),
            "params": _scope_params(request),
            "connectors": [c.name for c in request.node.connectors],
        },
        "reference": None,
        "cases": plan.cases,
        "bench": bench_job,
    }
    if plan.bench_cases and bench_job is not None and bench_job["baselines"]:
        for side in bench_job["baselines"]:  # slow ones timed once per node, like the native reference
            side["timing"] = baseline_timing_file(side["program"]["library"], plan.bench_cases[0], count)
    return job


def _add_native_reference(request: CheckRequest, job: SandboxJob, plan: _Plan, count: int, result: RunDraft) -> None:
    """Build (or reuse) the node's native program and give it to the job; one DaCe cannot build
    says nothing about the candidate, so the run ends inconclusive."""

    start = time.perf_counter()
    try:
        native = build_native_reference(request)
    except Exception as exc:  # noqa: BLE001 - a reference DaCe cannot build says nothing about the candidate
        result["seconds"]["reference"] = time.perf_counter() - start
        raise _Stop(
            "inconclusive",
            "reference failed",
            f"Not verified: the node's native reference could not be built: {type(exc).__name__}: "
            f"{str(exc).strip()[-1500:]}",
        ) from exc
    result["seconds"]["reference"] = time.perf_counter() - start
    result["reference"]["implementation"] = native.implementation
    job["reference"] = native.spec()
    cache_reference_outputs([*plan.all_cases, *plan.agains], native.library)
    bench_job = job["bench"]
    if plan.bench_cases and bench_job is not None:
        bench_job["native_timing"] = native_timing_file(plan.bench_cases[0], count)


def _add_function_outputs(function: Any, plan: _Plan, folder: Path) -> None:
    """Run the user's reference function here and save its outputs for the child. It failing on
    unit inputs ends the run (not the candidate's fault); on another distribution marks the case unfit."""
    for case in [*plan.all_cases, *plan.agains]:
        unit = (case.get("distribution") or "unit") == "unit" and not case.get("changes")
        try:
            with np.errstate(all="ignore" if not unit else "warn"):
                case["expected"] = _expected_outputs(case, function, folder, case["id"])
        except Exception as exc:  # noqa: BLE001 - the user's reference failed: not the candidate's fault
            if unit:
                raise _Stop(
                    "inconclusive",
                    "reference failed",
                    f"Not verified: the reference function raised {type(exc).__name__}: {exc}",
                ) from exc
            case["unfit"] = f"the reference raised {type(exc).__name__}: {' '.join(str(exc).split())[:160]}"


def _read_child(
    outcome: ChildOutcome, plan: _Plan, limits: SandboxLimits, result: RunDraft, request: CheckRequest
) -> dict[str, Any]:
    """Copy what the child wrote into ``result``; a child that did not finish, or the first case
    with a problem, ends the run with the problem as data and a sentence for the model."""
    result["seconds"]["run"] = outcome.seconds
    all_cases = plan.all_cases
    if outcome.status != "finished":
        status, reason, message = describe_outcome(outcome, all_cases, limits)
        result["problem"] = fault_problem(reason, outcome.fault if outcome.status == "crashed" else None)
        raise _Stop(status, reason, message)
    written = outcome.result
    assert written is not None  # a finished child wrote its result
    result["cases"] = written["cases"]
    result["distributions"] = distributions.summary(all_cases, result["cases"])
    result["threads"]["runtime"] = (written.get("threads") or {}).get("runtime")
    for case, record in zip(all_cases, result["cases"]):  # the child runs the cases in order
        problem = record.get("problem")
        if problem is None:
            continue
        shared = "unknown"
        if problem["kind"] == "concurrent":
            answer = request.answer
            shared = shared_state_words(answer.code, answer.code_global, answer.state_fields)
        reason, message = describe_problem(problem, case, shared)
        result["problem"] = case_problem(reason, problem, case)
        raise _Stop("failed", reason, message)
    return written


def _in_place_words(calls: list[Case]) -> str:
    """``; called again after its inputs changed in place (8 calls: 6 elements one at a time, shifted, scaled)``."""
    elements = sum(1 for c in calls if (c.get("changes") or [{}])[-1].get("kind") == "element")
    return (
        f"; called again after its inputs changed in place ({len(calls)} calls: {elements} element(s) one at a "
        "time, shifted, scaled)"
    )


def _passed_message(plan: _Plan, bench: BenchPlan | None, count: int, result: RunDraft) -> str:
    """What a passed verification covered, in words: seeds, sizes, rungs, threads, distributions."""
    skipped = f"; not run: {'; '.join(map(str, result['skipped']))}" if result["skipped"] else ""
    rungs = plan.ladder.rungs if plan.ladder is not None else []  # verify runs the ladder
    rung_names = list(dict.fromkeys([r.name for r in rungs] + (["bench"] if bench is not None else [])))
    return (
        f"matches the reference on {len(result['seeds'])} seed(s) x {len(plan.sizes)} size(s) "
        f"({len(plan.all_cases)} cases: {', '.join(rung_names)})"
        + (
            " and at the bench sizes " + ", ".join(f"{k}={v}" for k, v in bench.sizes.items())
            if bench is not None
            else ""
        )
        + (
            f"; deterministic with 1 and {count} threads"
            if result["threads"]["runs"]
            else "; no OpenMP in the code: each case run once"
        )
        + f"; {distributions.summary_words(result['distributions'])}"
        + ("; a second call on the same buffers with new inputs" if any(c.get("again") for c in plan.cases) else "")
        + next(
            (_in_place_words(c["in_place"]) for c in plan.cases if c.get("in_place")),
            "",
        )
        + next(
            (f"; {len(c['concurrent'])} threads calling one state at once" for c in plan.cases if c.get("concurrent")),
            "",
        )
        + skipped
    )


def _new_result(mode: str, seeds: list[int], count: int) -> RunDraft:
    """The run's record before any step: inconclusive, nothing run, no time spent."""
    result: RunDraft = {
        "mode": mode,
        "status": "inconclusive",
        "reason": None,
        "message": "",
        "seeds": seeds,
        "sizes": [],
        "cases": [],
        "bench": None,
        "skipped": [],
        "ladder": [],
        "reference": {"kind": None, "implementation": None},
        "problem": None,
        "threads": {"count": count, "runs": [], "runtime": None},
        "seconds": {"compile": 0.0, "reference": 0.0, "run": 0.0, "total": 0.0},
    }
    return result


def _bench_record(written: dict[str, Any], bench: BenchPlan, job: SandboxJob, library: Path) -> dict[str, Any]:
    """``result["bench"]``: what the child's bench section wrote, with the plan it ran and the library it timed."""
    bench_job = job["bench"]
    assert bench_job is not None  # a bench plan gives the job its bench section
    return {
        **(written.get("bench") or {}),
        "sizes": bench.sizes,
        "timed": bool(bench_job["time"]),
        "library": str(library),
        "native_label": bench.native_label,
        "baselines_left_out": dict(bench.baselines_left_out),
    }


def run_against_reference(
    request: CheckRequest,
    *,
    mode: str = "verify",
    seeds: Sequence[int] | int = DEFAULT_SEEDS,
    sizes: GivenSizes | None = None,
    repeats: int = 5,
    warmup: int = 1,
    limits: SandboxLimits | None = None,
    bench: BenchPlan | None = None,
    threads: int | None = None,
    device: DeviceBuilder | None = None,
    wrapper: Sequence[str] = (),
) -> SandboxRun:
    """Run the candidate of ``request`` and the node's reference on the same inputs in a sandboxed child.

    With ``device`` (a builder such as :func:`dace_ai.sandbox.device_program.build_device_program`), the
    candidate is the program it builds (it runs the node on the GPU);
    ``wrapper`` runs the child under a tool (:func:`dace_ai.sandbox.child_process.run_child`).

    ``mode="verify"`` compares outputs (stops at the first failing case); the
    larger cases run with 1 thread and then twice with all cores (``threads``,
    default :func:`~dace_ai.sandbox.run_plan.all_cores`), and runs that differ are
    refused as not deterministic. ``mode="time"`` also times both sides per case:
    ``warmup`` calls, then ``repeats`` samples (fewer, at least 3, for a slow side), each
    of as many calls as fill the child's one minimum sample time, as seconds per call
    (the bench section's algorithm, :func:`dace_ai.sandbox.child.timing.time_calls`). ``mode="bench"`` runs only the bench
    section. ``bench`` (a :class:`~dace_ai.sandbox.run_plan.BenchPlan`) adds the bench
    section to the same child run, after the verify cases passed: cases at the bench
    sizes compared with the reference, the run rules, and the interleaved timing of
    this very library against the native reference (``result["bench"]``). ``seeds`` is a
    list or a count; ``sizes`` a list of ``{symbol: value}`` or a ``{symbol: [values]}``
    (zipped). ``limits`` default to the settings' ``sandbox_*`` values. Never raises
    for the candidate's faults.

    The steps: plan the cases, compile the candidate, write the job (with the reference's
    outputs or program), run the child, read its result; any step may end the run early.
    """

    if mode not in ("verify", "time", "bench"):
        raise ValueError(f"mode must be 'verify', 'time' or 'bench', got {mode!r}")
    if mode == "bench" and bench is None:
        raise ValueError("mode 'bench' needs a bench plan")
    total_start = time.perf_counter()
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    limits = limits or SandboxLimits.from_settings(request.settings)
    count = threads or all_cores(request.settings)
    result = _new_result(mode, seeds, count)
    kind, detail = reference_kind(request)
    result["reference"]["kind"] = kind
    try:
        if kind is None and mode == "verify":
            raise _Stop("inconclusive", "no reference", f"Not verified: {detail}.")
        plan = _plan_cases(request, mode, seeds, sizes, bench, kind, count, result)
        if device is not None:
            library, spec = _build_device_candidate(request, plan, result, device)
            job = _child_job(request, mode, plan, library, bench, count, repeats, warmup)
            job["candidate"] = spec
        else:
            library = _compile_candidate(request, plan, result)
            job = _child_job(request, mode, plan, library, bench, count, repeats, warmup)
        folder = Path(request.workdir) / "sandbox"
        if kind == "native":
            _add_native_reference(request, job, plan, count, result)
        elif kind == "function":
            _add_function_outputs(detail, plan, folder)
        outcome = run_child(job, folder / "run", limits, threads=count, wrapper=wrapper)
        written = _read_child(outcome, plan, limits, result, request)
        if bench is not None:
            result["bench"] = _bench_record(written, bench, job, library)
        status: Status = "passed"
        reason: str | None = None
        message = "" if mode in ("time", "bench") else _passed_message(plan, bench, count, result)
    except _Stop as stop:
        status, reason, message = stop.status, stop.reason, stop.message
    result.update({"status": status, "reason": reason, "message": message})
    result["seconds"]["total"] = time.perf_counter() - total_start
    return SandboxRun.from_draft(result)


def _scope_params(request: CheckRequest) -> list[str]:

    return scope_parameters(request.node)
