"""What went wrong in a sandboxed run, worded for the model: a problem the child found in one case
(:func:`describe_problem`) and a child that did not finish (:func:`describe_outcome`). The failure as data
is the run's ``problem``; these sentences are only read by the model."""

from __future__ import annotations

import numpy as np

from dace_ai.checking.api import Status
from dace_ai.sandbox.child.records import Case, Problem
from dace_ai.sandbox.child_process import ChildOutcome, SandboxLimits
from dace_ai.sandbox.ladder import case_place


def access_word(write: bool | None, wrote: str, read: str, unknown: str) -> str:
    """How a fault's access reads: its ``write`` flag is None where the signal did not say."""
    if write is None:
        return unknown
    return wrote if write else read


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


#: What calls at the same time may share, and the fix: the close of every "share state" refusal (the verify
#: child's calls at once, the sanitizers checker's ThreadSanitizer run across them).
SHARED_STATE_FIX = (
    "The node's calls run concurrently in the program (a parallel map, or a state shared by every call): a "
    "`static` or file-scope variable, or a state field written by the calls, is one object for all of them. Use "
    "a local array or memory allocated in the call, or `thread_local` storage; a state field may hold only what "
    "is read-only after `code_init`, or per-thread data indexed by `omp_get_thread_num()` and sized by "
    "`omp_get_max_threads()` in `code_init`."
)


def shared_state_lead(shared: str) -> str:
    """The first sentence of a refusal of calls at once that share state (``shared``: what they share)."""
    return f"Calls that run at the same time share state: {shared}; keep scratch per call or per thread."


def _describe_concurrent(problem: Problem, case: Case, shared: str) -> str:
    """The sentence for calls wrong only when they overlap (state shared by the calls)."""
    sizes = ", ".join(f"{k}={v}" for k, v in (case.get("sizes") or {}).items())
    return (
        f"{shared_state_lead(shared)} "
        f"{problem.get('threads')} threads called the code at once on one program state, each on buffers and "
        f"inputs of its own (sizes {sizes or 'of the node'}): {problem.get('wrong_calls')} of "
        f"{problem.get('calls')} calls were wrong (seed {problem.get('seed')}: output "
        f"{problem.get('connector', '?')} at index {problem.get('index')} is {problem.get('got', 'not written')}, "
        f"expected {problem.get('expected')}), while the same call alone is right. {SHARED_STATE_FIX}"
    )


def _number(value: object) -> str:
    """A value for a message: floats to 6 significant digits."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _change_words(problem: Problem) -> str:
    """``input 'x' changed in place (element 17 set to 0.25)``: the change before a ``kept`` call."""
    change = problem.get("change") or {}
    if change.get("kind") == "element":
        index = change.get("index") or []
        at = f"[{', '.join(map(str, index))}]" if index else str(change.get("element"))
        return (
            f"input '{change.get('connector') or change.get('container')}' changed in place (element {at} "
            f"set to {_number(problem.get('value'))})"
        )
    if change.get("kind") == "shift":
        return f"every input changed in place (every element shifted by {change.get('by')}, integers by 1)"
    return f"every input changed in place (every element scaled by {change.get('by')}, integers by 2)"


def _describe_later_call(problem: Problem, case: Case, where: str) -> tuple[str, str]:
    """(reason, sentence) for a call after the first that went wrong: ``repeated``, ``elsewhere`` or ``stale``."""
    kind = problem["kind"]
    if kind == "repeated":
        wrote = "did not write" if problem.get("was") == "unwritten" else "wrote a wrong value to"
        return "repeated", (
            f"Behaves differently when called repeatedly ({where}): called {problem.get('calls')} times on the same "
            f"inputs (as a program's loop or a timing loop calls it), the last call {wrote} output "
            f"{problem.get('connector', '?')} (index {problem.get('index')}: {problem.get('got', 'not written')}, "
            f"expected {problem.get('expected')}). Compute the outputs from the inputs on every call: no call "
            f"counter, no warm-up or timing detection, no result reused after some calls."
        )
    if kind == "elsewhere":
        wrote = "did not write" if problem.get("was") == "unwritten" else "wrote a wrong value to"
        return "elsewhere", (
            f"Depends on where it runs ({where}): called once more on the same inputs with other "
            f"{', '.join(problem.get('changed') or ['surroundings'])}, the call {wrote} output "
            f"{problem.get('connector', '?')} (index {problem.get('index')}: {problem.get('got', 'not written')}, "
            f"expected {problem.get('expected')}). Compute the outputs from the inputs only: do not read the "
            f"environment, the working directory, resource limits, the CPUs or anything else about the process; "
            f"a result that depends on the threads' timing (a data race) also differs from call to call."
        )
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


def describe_problem(problem: Problem, case: Case, shared: str = "unknown") -> tuple[str, str]:
    """(reason, sentence for the model) for a problem the child found in one case; ``shared`` names
    the state the calls share, for a problem of calls at once."""
    where = case_place(case)
    kind = problem["kind"]
    if kind == "concurrent":
        return "shared state", _describe_concurrent(problem, case, shared)
    if kind == "kept":
        earlier = " (the output was the earlier call's, unchanged)" if problem.get("unchanged") else ""
        return "kept results", (
            f"Keeps results across calls ({where}): after {_change_words(problem)} between two calls on the same "
            f"buffers (call {problem.get('calls')}, as a loop calls it), output {problem.get('connector', '?')} at "
            f"index {problem.get('index')} is {problem.get('got', 'not written')}, expected "
            f"{problem.get('expected')}; {problem.get('count')} of {problem.get('elements')} elements wrong"
            f"{earlier}. Compute the outputs from the inputs' current values on every call: no cache keyed on "
            f"addresses, sizes or sampled elements."
        )
    if kind == "nondeterministic":
        return "nondeterministic", _describe_nondeterministic(problem, where)
    if problem.get("threads") and isinstance(problem["threads"], int) and problem["threads"] == 1:
        where += ", 1 thread"
    if kind in ("repeated", "elsewhere", "stale"):
        return _describe_later_call(problem, case, where)
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
            access = access_word(fault.get("write"), "wrote", "read", "accessed memory")
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
    if phase.get("step") == "concurrent" and who == "candidate":
        text += f" while {phase.get('threads', 'several')} threads called it at once on one program state"
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
