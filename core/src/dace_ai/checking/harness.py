"""Run a candidate against its node's reference in the sandbox: to verify it, or to time it.

:func:`run_against_reference` is the one entry point for the verify and bench stages
and for anything that benchmarks candidates: it compiles the candidate once, builds
(or reuses) the node's native program, makes the cases (seeds x sizes; thread runs
at the larger sizes, see :mod:`dace_ai.checking.runner`; the bench section when
given a plan), runs them in one sandboxed child (:mod:`dace_ai.checking.sandbox`)
and returns a :class:`~dace_ai.checking.sandbox_run.SandboxRun` (a frozen record; its fields as a dict)::

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

The job, its cases and the child's records are the TypedDicts of :mod:`dace_ai.checking.child.records`
(:class:`~dace_ai.checking.child.records.SandboxJob`, :class:`~dace_ai.checking.child.records.Case`,
:class:`~dace_ai.checking.child.records.CaseRecord`, :class:`~dace_ai.checking.child.records.Problem`), defined
there once because the child imports nothing else. Callers that act on a failure read
``result.problem`` (:class:`~dace_ai.checking.sandbox_run.RunProblem`), never the message, which is worded for the model.

Sizes: the size ladder of :mod:`dace_ai.checking.ladder` (small odd sizes, multiples
of every vector width, several tiles, the bench size; only sizes the program's
subsets allow, each map at several points); ``"skipped"`` lists the
:class:`~dace_ai.checking.ladder.SkippedSize` records of sizes not run and
``"ladder"`` the rungs run (sizes, seeds, map points, adjustments). Messages name
the rung and the map point of the failing case.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from dace_ai.checking import distributions
from dace_ai.checking.api import CheckRequest, Status
from dace_ai.checking.candidate import candidate_library
from dace_ai.checking.child.inputs import case_inputs, view
from dace_ai.checking.child.records import Case, CaseRecord, Connector, Container, LibrarySpec, Problem, SandboxJob
from dace_ai.checking.constraints import first_point, point_text
from dace_ai.checking.ladder import GivenSizes, Ladder, SkippedSize, build_ladder, case_place
from dace_ai.checking.reference import (
    build_native_reference,
    call_reference,
    implemented_node,
    reference_function,
    reference_implementation,
)
from dace_ai.checking.runner import (
    all_cores,
    baseline_timing_file,
    cache_reference_outputs,
    case_key,
    native_timing_file,
    plan_threads,
    thread_counts,
    uses_openmp,
)
from dace_ai.checking.sandbox import ChildOutcome, SandboxLimits, run_child
from dace_ai.checking.sandbox_run import RunProblem, SandboxRun
from dace_ai.checking.units import scope_parameters
from dace_ai.context.types import ConnectorInfo
from dace_ai.state import STATE

if TYPE_CHECKING:
    from dace_ai.checking.runner import BenchPlan

DEFAULT_SEEDS = (0, 1, 2)
_EPS = {"f": {2: 9.8e-4, 4: 1.2e-7, 8: 2.3e-16}, "c": {8: 1.2e-7, 16: 2.3e-16}}
#: The largest relative tolerance of any element type but half precision (see :func:`tolerance`).
MAX_RTOL = 1e-2


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
    ladder: list[dict[str, Any]]
    cases: list[CaseRecord]
    distributions: dict[str, Any]
    reference: dict[str, Any]
    threads: dict[str, Any]
    bench: dict[str, Any] | None
    library: str
    seconds: dict[str, float]


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
        "access": _access_word(fault.get("write"), "write", "read", ""),
    }


def _access_word(write: bool | None, wrote: str, read: str, unknown: str) -> str:
    """How a fault's access reads: its ``write`` flag is None where the signal did not say."""
    if write is None:
        return unknown
    return wrote if write else read


# ----------------------------------------------------------------------------- sizes and cases
@functools.lru_cache(maxsize=4096)
def _sym(expr: str) -> Any:
    """A symbolic expression from its text, parsed once (every case evaluates the same few)."""
    from dace import symbolic

    return symbolic.pystr_to_symbolic(str(expr))


def evaluate(expr: Any, values: Mapping[str, Any]) -> int:
    """An integer from a symbolic expression and symbol values (``KeyError`` names a missing symbol)."""
    value = _sym(expr) if isinstance(expr, str) else expr
    if hasattr(value, "free_symbols"):
        missing = [str(s) for s in value.free_symbols if str(s) not in values]
        if missing:
            raise KeyError(", ".join(sorted(missing)))
        return _substituted(value, tuple(sorted((str(s), values[str(s)]) for s in value.free_symbols)))
    return int(value)


@functools.lru_cache(maxsize=16384)
def _substituted(value: Any, items: tuple[tuple[str, Any], ...]) -> int:
    """``value`` with its symbols replaced by ``items``: remembered, since every case asks the same few."""
    named = dict(items)
    return int(value.subs({s: named[str(s)] for s in value.free_symbols}))


def size_cases(
    request: CheckRequest, sizes: GivenSizes | None = None, bench_sizes: Mapping[str, int] | str | None = None
) -> list[dict[str, int]]:
    """Symbol values to run: ``sizes`` as given (list of dicts, or dict of lists zipped), else the size ladder.

    The ladder's rungs in order (see :func:`dace_ai.checking.ladder.build_ladder`, which
    also says which sizes were skipped and why); ``bench_sizes`` (a dict or the
    ``bench_sizes`` setting's text) sets its bench rung.
    """
    return build_ladder(request, sizes, bench_sizes=bench_sizes).sizes()


def parse_sizes_setting(text: str | None) -> dict[str, list[int]] | None:
    """``"N=13,67 M=11,61"`` -> ``{"N": [13, 67], "M": [11, 61]}`` (the ``verify_sizes`` setting)."""
    if not text or not text.strip():
        return None
    result: dict[str, list[int]] = {}
    for part in text.replace(";", " ").split():
        name, _, values = part.partition("=")
        if not name or not values:
            raise ValueError(f"setting 'verify_sizes': {part!r} is not NAME=SIZE[,SIZE...]")
        result[name.strip()] = [int(v) for v in values.split(",") if v.strip()]
    return result


def _param_values(request: CheckRequest, values: dict[str, int]) -> dict[str, int]:
    """Enclosing map parameters at the first point of their range (when the ladder gave no point)."""
    return first_point(request, values)


def _dims(conn: ConnectorInfo, values: Mapping[str, int]) -> tuple[list[int], list[int]]:
    """Shape and element strides of what a connector sees (size-1 dimensions squeezed like DaCe does)."""
    from dace import subsets

    rng = subsets.Range.from_string(conn.subset)
    strides = [evaluate(s, values) for s in conn.container_strides] or [1] * len(rng.ranges)
    dims = []
    for (b, e, s), stride in zip(rng.ranges, strides):
        begin, end, step = evaluate(b, values), evaluate(e, values), evaluate(s, values)
        dims.append((max(0, (end - begin) // step + 1), stride * step))
    keep = len(conn.shape)
    while len(dims) > keep and any(n == 1 for n, _ in dims):
        dims.pop(next(i for i, (n, _) in enumerate(dims) if n == 1))
    return [n for n, _ in dims], [s for _, s in dims]


def _live_sdfg(request: CheckRequest) -> Any:
    """The node's live SDFG: its data descriptors give the containers' element types and extents.

    Without one no case can be made; the ``AttributeError`` ends the run as the other
    failures to give the symbols values do.
    """
    sdfg = (request.node.live or {}).get("sdfg")
    if sdfg is None:
        raise AttributeError("the node has no live SDFG")
    return sdfg


def _dtype(request: CheckRequest, conn: ConnectorInfo) -> np.dtype:
    desc = _live_sdfg(request).arrays[conn.container]
    return np.dtype(desc.dtype.type)


def _container_elements(desc: Any, values: Mapping[str, int]) -> int:
    shape = [evaluate(s, values) for s in getattr(desc, "shape", [1])]
    strides = [evaluate(s, values) for s in getattr(desc, "strides", [1])]
    extent = sum((n - 1) * s for n, s in zip(shape, strides)) + 1 if all(n > 0 for n in shape) else 1
    for attr in ("total_size",):
        try:
            extent = max(extent, evaluate(getattr(desc, attr), values))
        except (AttributeError, KeyError, TypeError):
            pass
    try:
        extent += evaluate(desc.start_offset, values)
    except (AttributeError, KeyError, TypeError):
        pass
    return max(1, extent)


def tolerance(dtype: np.dtype, reduction: int) -> float:
    """Relative tolerance: 16 ulps of the element type per element of the longest input dimension, capped.

    The cap (1 %, or 128 ulps for types coarser than that) keeps every tolerance far
    below 1/2: the comparison's floor is the tolerance times the largest output, so
    an all-zero answer, or zeros for tiny outputs, can never pass (a correct sum of
    2**20 floats is off by about 1e-4 of the largest output, well inside it).
    """
    eps = _EPS.get(dtype.kind, {}).get(dtype.itemsize)
    return 0.0 if eps is None else min(16 * eps * max(1, reduction), max(MAX_RTOL, 128 * eps))


def make_case(
    request: CheckRequest,
    seed: int,
    sizes: dict[str, int],
    point: Mapping[str, int] | None = None,
    rung: str = "",
    point_words: str = "",
) -> Case:
    """One case of the job: values, containers (flat element counts), connector views, tolerances.

    ``point`` gives the enclosing maps' parameters (default: the first point of
    each range); ``rung`` and ``point_words`` name the case in messages.
    """
    live_sdfg = _live_sdfg(request)
    values = dict(sizes)
    values.update(dict(point) if point is not None else _param_values(request, values))
    containers: dict[str, Container] = {}
    connectors: list[Connector] = []
    for conn in request.node.connectors:
        shape, strides = _dims(conn, values)
        offset = evaluate(conn.offset, values)
        desc = live_sdfg.arrays[conn.container]
        cont = containers.setdefault(
            conn.container,
            {
                "name": conn.container,
                "dtype": _dtype(request, conn).str,
                "input": False,
                "output": False,
                "elements": _container_elements(desc, values),
            },
        )
        if conn.direction == "in":
            cont["input"] = True
        else:
            cont["output"] = True
        extent = offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1
        cont["elements"] = max(cont["elements"], extent)
        connectors.append(
            {
                "name": conn.name,
                "container": conn.container,
                "direction": conn.direction,
                "offset": offset,
                "shape": shape,
                "strides": strides,
                "wcr": conn.wcr,
            }
        )
    for cont in containers.values():
        if cont["output"] and any(c["wcr"] for c in connectors if c["container"] == cont["name"]):
            cont["input"] = True  # accumulating outputs start from data, like the program's
    reduction = max([n for c in connectors if c["direction"] == "in" for n in c["shape"]] or [1])
    rtol = {
        c["name"]: tolerance(np.dtype(containers[c["container"]]["dtype"]), reduction)
        for c in connectors
        if c["direction"] == "out"
    }
    return {
        "seed": seed,
        "sizes": dict(sizes),
        "values": values,
        "containers": list(containers.values()),
        "connectors": connectors,
        "rtol": rtol,
        "rung": rung,
        "point": dict(point or {}),
        "point_words": point_words,
    }


# ----------------------------------------------------------------------------- input distributions, second calls
def distribution_cases(request: CheckRequest, ladder: Ladder | None, reference: str | None) -> list[Case]:
    """The extra cases of :mod:`dace_ai.checking.distributions` for the rungs of ``ladder``.

    Each runs at its rung's sizes with the rung's first seed, at the rung's map points
    from the last one back; ``large`` and ``heavy`` come as a group per rung, one case
    per magnitude from the top (the child runs the first the reference keeps finite).
    """
    if ladder is None:
        return []
    kinds = {_dtype(request, c).kind for c in request.node.connectors if c.direction == "in"}
    extra = []
    for rung in ladder.rungs:
        made: dict[int, Case] = {}  # one case per map point, copied for each distribution
        for j, (name, magnitude) in enumerate(distributions.planned(rung.name, kinds, reference)):
            at = -1 - j % len(rung.points)
            if at not in made:
                made[at] = make_case(
                    request,
                    rung.seeds[0],
                    rung.sizes,
                    rung.points[at],
                    rung.name,
                    point_text(rung.points[at], ladder.scope_kinds),
                )
            case = copy.deepcopy(made[at])
            case["distribution"] = name
            if magnitude is not None:
                case.update({"magnitude": magnitude, "group": f"{rung.name}:{name}"})
            extra.append(case)
    return extra


#: The second call of :func:`add_second_call` uses inputs of this seed offset from its case's.
SECOND_CALL_SEED = 1000


def add_second_call(request: CheckRequest, cases: list[Case]) -> None:
    """Give one case a second call on the same buffers and state with other inputs (``case["again"]``).

    The first case of the vector rung (or the first case): a result kept from the
    first call (a static cache keyed on the sizes or the addresses) is then wrong.
    """
    host = next((c for c in cases if c["rung"] == "vector"), cases[0] if cases else None)
    if host is None:
        return
    host["again"] = make_case(
        request,
        host["seed"] + SECOND_CALL_SEED,
        host["sizes"],
        host["point"] or None,
        host["rung"],
        host["point_words"],
    )


#: How many more calls the repeated case makes: at least this many, at most twice as many, chosen per run.
REPEATED_CALLS = 40


def add_repeated_calls(cases: list[Case]) -> None:
    """Give the first case ``repeat``: that many calls more on its inputs before one judged call with its
    outputs poisoned again (a number chosen at random per run, so code cannot count up to it)."""
    import secrets

    if cases:
        cases[0]["repeat"] = REPEATED_CALLS + secrets.randbelow(REPEATED_CALLS + 1)


# ----------------------------------------------------------------------------- references
def reference_kind(request: CheckRequest) -> tuple[str | None, Any]:
    """("native", None), ("function", fn), or (None, reason) for the node of ``request``."""

    node = implemented_node(request.node)
    if node is None:
        return None, "the node is not available in this process"
    key = getattr(node, "reference", None)
    if isinstance(key, str) and key:
        function = reference_function(key)
        if function is None:
            return None, f"reference function {key.split('#')[0]!r} is not registered in this process"
        return "function", function
    if reference_implementation(node) is not None:
        return "native", None
    return None, "no reference"


#: Outputs of reference functions per (function, case), kept for the next candidate of the node.
_expected_memo: dict[tuple[int, str], dict[str, Any]] = STATE.register("checking.harness.expected_memo", {})
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


# ----------------------------------------------------------------------------- words
def _connectors_of(case: Case, container: str | None) -> str:
    names = [c["name"] for c in case["connectors"] if c["container"] == container]
    return f" (connector {', '.join(names)})" if names else ""


def _precision_hint(problem: Problem, case: Case) -> str:
    """A sentence when a double output is off by about single-precision rounding: computed in float."""
    dtype = next(
        (
            c["dtype"]
            for c in case["containers"]
            for conn in case["connectors"]
            if conn["name"] == problem["connector"] and conn["container"] == c["name"]
        ),
        None,
    )
    scale = problem.get("scale") or 0.0
    if dtype is None or np.dtype(dtype) not in (np.dtype(np.float64), np.dtype(np.complex128)) or not scale:
        return ""
    max_error = problem["max_error"]
    if not isinstance(max_error, float):  # "inf" or "nan": no rounding error
        return ""
    relative = max_error / scale
    if 1e-9 < relative < 1e-4:
        return (
            f" The error, {relative:.1g} of the largest output, is the size of single-precision rounding: "
            f"compute in the output's precision (double), not in float."
        )
    return ""


def _describe_nondeterministic(problem: Problem, where: str) -> str:
    """The sentence for runs that differ: by thread count, by a run leaving an output unwritten, or
    between runs with the same threads; each points at its likely cause."""
    counts = " then ".join(f"{n} thread{'s' if n != 1 else ''}" for n in problem["threads"])
    if problem.get("single_ok"):
        return (
            f"The result is not deterministic ({where}): with {problem['threads'][0]} threads output "
            f"{problem['connector']} at index {problem['index']} is {problem.get('got', 'not written')}, expected "
            f"{problem['expected']} ({problem['count']} of {problem['elements']} elements differ beyond the "
            f"reduction tolerance), while with 1 thread it is right. A data race (threads updating shared data "
            f"without atomics or a reduction clause) or a reduction whose order depends on the threads' timing."
        )
    if problem.get("was") == "unwritten":
        return (
            f"The result is not deterministic ({where}; runs with {counts}): in run {problem['runs']} output "
            f"{problem['connector']} at index {problem['index']} was never written ({problem['count']} of "
            f"{problem['elements']} elements), though the first run wrote it. Every call must compute its "
            f"outputs (no results kept from an earlier call; no thread may skip its share)."
        )
    return (
        f"The result is not deterministic ({where}; runs with {counts}): output {problem['connector']} at "
        f"index {problem['index']} was {problem['expected']} in the first run and {problem.get('got')} in run "
        f"{problem['runs']}; {problem['count']} of {problem['elements']} elements differ beyond the reduction "
        f"tolerance. A data race (threads updating shared data without atomics or a reduction clause) or a "
        f"reduction whose order depends on the threads' timing."
    )


def _describe_mismatch(problem: Problem, case: Case, where: str) -> tuple[str, str]:
    """(reason, sentence) for outputs that differ from the reference: not finite, or off by more than the tolerance."""
    if problem.get("not_finite"):
        return "not_finite", (
            f"Wrong result ({where}): output {problem['connector']} at index {problem['index']} is {problem['got']} "
            f"where the reference is finite ({problem['expected']}); {problem['not_finite']} of "
            f"{problem['elements']} elements are NaN or infinite. The computation overflows or is unstable at "
            f"these inputs (e.g. exp of large values: subtract the maximum first; sums of squares: scale them)."
        )
    return "mismatch", (
        f"Wrong result ({where}): output {problem['connector']} at index {problem['index']} is {problem['got']}, "
        f"expected {problem['expected']}; {problem['count']} of {problem['elements']} elements differ, "
        f"largest error {problem['max_error']:.3g} (tolerance {problem['rtol']:.2g} relative)."
        + _precision_hint(problem, case)
        if isinstance(problem["max_error"], float)
        else f"Wrong result ({where}): output {problem['connector']} at index {problem['index']} is {problem['got']}, "
        f"expected {problem['expected']}; {problem['count']} of {problem['elements']} elements differ, "
        f"largest error {problem['max_error']}."
    )


def _describe_outside(problem: Problem, case: Case, where: str) -> tuple[str, str]:
    """(reason, sentence) for a write outside what the code may change: an input, past its subset or its buffer."""
    if problem["kind"] == "outside_subset":
        if problem.get("input"):
            return "outside_subset", (
                f"The code modified its input container {problem['container']}"
                f"{_connectors_of(case, problem['container'])} at element {problem['element']} "
                f"({where}); inputs must stay unchanged."
            )
        return "outside_subset", (
            f"The code wrote to element {problem['element']} of {problem['container']}, "
            f"outside the part its output connector covers ({where}); "
            f"{problem['count']} such element(s)."
        )
    side = "past the end of" if problem.get("side") == "after" else "before the start of"
    return "outside_buffer", (
        f"The code wrote {side} container {problem['container']}{_connectors_of(case, problem['container'])} ({where})."
    )


def describe_problem(problem: Problem, case: Case) -> tuple[str, str]:
    """(reason, sentence for the model) for a problem the child found in one case."""
    where = case_place(case)
    kind = problem["kind"]
    if kind == "nondeterministic":
        return "nondeterministic", _describe_nondeterministic(problem, where)
    if problem.get("threads") and isinstance(problem["threads"], int) and problem["threads"] == 1:
        where += ", 1 thread"
    if kind == "repeated":
        wrote = "did not write" if problem.get("was") == "unwritten" else "wrote a wrong value to"
        return "repeated", (
            f"Behaves differently when called repeatedly ({where}): called {problem.get('calls')} times on the same "
            f"inputs (as a program's loop or a timing loop calls it), the last call {wrote} output "
            f"{problem.get('connector', '?')} (index {problem.get('index')}: {problem.get('got', 'not written')}, "
            f"expected {problem.get('expected')}). Compute the outputs from the inputs on every call: no call "
            f"counter, no warm-up or timing detection, no result reused after some calls."
        )
    if kind == "stale":
        how = (
            "called a second time on the same buffers and state with new inputs"
            if problem.get("again")
            else "for new inputs the code returned its outputs of an earlier call"
        )
        return "stale", (
            f"Results kept across calls ({where}): {how} (seed {problem.get('seed', case['seed'])} after seed "
            f"{problem.get('first_seed')}), output {problem.get('connector', '?')} at index {problem.get('index')} "
            f"is {problem.get('got', 'not written')}, expected {problem.get('expected')}. "
            f"Every call must compute its outputs from the inputs it is given: no static cache keyed on the sizes "
            f"or the addresses, no result kept from an earlier call."
        )
    if kind == "late_write":
        return "late_write", (
            f"Work left running after the call returned ({where}): output container {problem['container']}"
            f"{_connectors_of(case, problem['container'])} changed after the call had returned ({problem['count']} "
            f"element(s), first at element {problem['element']}). Finish all work before returning: join every "
            f"thread (no detached std::thread, no std::async left pending, no task not waited for)."
        )
    if kind == "read_before_write":
        name = problem["connector"]
        return "read_before_write", (
            f"Output read before it is written ({where}): {name} at index {problem['index']} holds a NaN computed "
            f"from the undefined contents the output had before the call (expected {problem['expected']}); "
            f"{problem['count']} of {problem['elements']} elements. The code reads `{name}` before writing it: "
            f"an output starts undefined, so zero it or write it first (e.g. `{name}[i] = sum` after accumulating "
            f"in a local, not `{name}[i] += ...`)."
        )
    if kind == "read_outside":
        return "read_outside", (
            f"Read outside its data ({where}): output {problem['connector']} at index {problem['index']} holds the "
            f"NaN that fills the memory just outside the buffers (expected {problem['expected']}); "
            f"{problem['count']} of {problem['elements']} elements. The code reads past the end (or before the "
            f"start) of an input or of the part of it its connector sees: check the loop bounds and the strides."
        )
    if kind == "mismatch":
        return _describe_mismatch(problem, case, where)
    if kind == "unwritten":
        return "unwritten", (
            f"Output not written ({where}): {problem['connector']} at index {problem['index']} still holds the "
            f"fill pattern it had before the call (expected {problem['expected']}); {problem['count']} of "
            f"{problem['elements']} elements were never written."
        )
    return _describe_outside(problem, case, where)


def describe_outcome(outcome: ChildOutcome, cases: list[Case], limits: SandboxLimits) -> tuple[Status, str, str]:
    """(status, reason, message) for a child that did not finish normally."""
    phase = outcome.phase
    matching = [c for c in cases if c["seed"] == phase.get("seed") and c["sizes"] == phase.get("sizes")]
    case = matching[0] if matching else None
    if len(matching) > 1:  # several map points share seed and sizes: the child does not say which one ran
        case = {**matching[0], "point": {}}
    where = f" ({case_place(case)})" if case else ""
    who = outcome.who
    if outcome.status == "timeout":
        reason, text = (
            "timeout",
            f"did not finish within {limits.wall_seconds:g} s of wall time{where} (an endless loop?)",
        )
    elif outcome.status == "cpu_time":
        reason, text = (
            "cpu_time",
            f"used more than {limits.cpu_seconds:g} s of CPU time per thread{where} (an endless loop?)",
        )
    elif outcome.status == "memory":
        reason, text = "memory", f"exceeded the memory limit of {limits.memory_bytes >> 20} MiB{where}"
    elif outcome.status == "crashed":
        fault = outcome.fault or {}
        if fault.get("where") in ("after", "before") and case is not None:
            access = _access_word(fault.get("write"), "wrote", "read", "accessed memory")
            side = "past the end of" if fault["where"] == "after" else "before the start of"
            reason = "outside_buffer"
            text = (
                f"crashed with {outcome.signal}: it {access} {fault['bytes']} byte(s) {side} container "
                f"{fault['container']}{_connectors_of(case, fault['container'])}{where}"
            )
        else:
            reason = "crash"
            address = ""
            if fault and fault.get("where") == "null":
                address = f" at address {fault['address']:#x} (a null or near-null pointer)"
            elif fault:
                address = f" at address {fault['address']:#x} (outside every buffer)"
            text = f"crashed with {outcome.signal}{address}{where}"
    else:
        reason, text = "harness", f"could not be run: {outcome.output.strip()[-1500:]}"
    if who == "reference":
        return (
            "inconclusive",
            "reference failed",
            f"The node's reference program {text}; nothing is known about the candidate.",
        )
    if who == "baseline":  # one of DaCe's own library implementations, timed next to the candidate
        return (
            "inconclusive",
            "baseline failed",
            f"The baseline {phase.get('label', '?')} {text}; nothing is known about the candidate.",
        )
    if who == "loader" and outcome.status == "error":
        step = phase.get("step", "candidate")
        if step == "reference":
            return (
                "inconclusive",
                "reference failed",
                f"The node's reference program could not be loaded: {outcome.output.strip()[-1500:]}",
            )
        return "failed", "load", f"The compiled code could not be loaded: {outcome.output.strip()[-1500:]}"
    return "failed", reason, f"The code {text}."


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
    (the bench section's), ``agains`` (second calls on the same buffers), and the ladder they came from."""

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
    if plan.bench_cases:
        plan.bench_cases[0]["threads"] = thread_counts(count)
    all_cases = plan.all_cases
    for index, case in enumerate(all_cases):
        case["id"] = index
    plan.agains = [c["again"] for c in all_cases if c.get("again")]
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
    return library


def _build_device_candidate(
    request: CheckRequest, plan: _Plan, result: RunDraft, build_device_program: DeviceBuilder
) -> tuple[Path, LibrarySpec]:
    """The device program's library and spec; a program that does not build ends the run."""
    from dace_ai.compat import compilation_error_types

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
    for case in plan.all_cases:  # one GPU: thread counts of the host do not apply
        case.pop("threads", None)
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
        unit = (case.get("distribution") or "unit") == "unit"
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


def _read_child(outcome: ChildOutcome, plan: _Plan, limits: SandboxLimits, result: RunDraft) -> dict[str, Any]:
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
        reason, message = describe_problem(problem, case)
        result["problem"] = case_problem(reason, problem, case)
        raise _Stop("failed", reason, message)
    return written


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
        + ("; a second call on the same buffers with new inputs" if plan.agains else "")
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

    With ``device`` (a builder such as :func:`dace_ai.checking.gpu_verify.build_device_program`), the
    candidate is the program it builds (it runs the node on the GPU);
    ``wrapper`` runs the child under a tool (:func:`dace_ai.checking.sandbox.run_child`).

    ``mode="verify"`` compares outputs (stops at the first failing case); the
    larger cases run with 1 thread and then twice with all cores (``threads``,
    default :func:`~dace_ai.checking.runner.all_cores`), and runs that differ are
    refused as not deterministic. ``mode="time"`` also times both sides per case:
    ``warmup`` calls, then ``repeats`` samples (fewer, at least 3, for a slow side), each
    of as many calls as fill the child's one minimum sample time, as seconds per call
    (the bench section's algorithm, :func:`dace_ai.checking.child.timing.time_calls`). ``mode="bench"`` runs only the bench
    section. ``bench`` (a :class:`~dace_ai.checking.runner.BenchPlan`) adds the bench
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
        written = _read_child(outcome, plan, limits, result)
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
