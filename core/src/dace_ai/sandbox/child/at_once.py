"""Calls at the same time on one state, as the threads of a program's parallel map make them.

:func:`call_at_once`: ``case["concurrent"]`` holds one case per thread (the same sizes and map
point, other seeds). One state is made (``dace_ai_entry_init`` once, as the program's one
``__state``) and shared by every thread; each thread has buffers and inputs of its own.

The threads meet at a :class:`threading.Barrier`, then each makes calls back to back inside the
library (``dace_ai_entry_run_record``: no Python between them, the GIL released, each call's
outputs copied aside so that every call is judged), for ``concurrent_repeats`` rounds. Two calls
collide on shared scratch only when one runs between the other's start and end, which on a busy
machine with few cores the scheduler alone seldom arranges; so the threads share one core, and
the main thread sends them a signal in turn, one every :data:`YIELD_EVERY` seconds, whose handler (the
candidate library's, our code) gives up the core (``sched_yield``) in the middle of a call: another
thread's calls run before that call ends. A round ends after :data:`SIGNALS` signals per thread
(or :data:`MOST_CALLS` calls). The library counts the signals that found a thread inside a call; until
:data:`IN_CALL_YIELDS` per thread have, the rounds are made again (a busy machine gives the threads little
time). Every distinct result is compared with its case's reference; a wrong
one whose case comes out right when called alone is the overlap's doing (kind ``concurrent``).

For code that calls OpenMP (``case["concurrent_team"]``) the calls are made by an OpenMP team instead of
Python threads, as the program's parallel map makes them: one Python thread per run starts the team
through the runtime (``GOMP_parallel``, :attr:`~.process.Threads.parallel`) on the library's
``dace_ai_entry_team_member``, each member taking one case's calls, so ``omp_get_thread_num()`` differs
between the calls and a state field indexed by it is per thread. The state is made with the runtime's
thread count set to the number of threads (``omp_get_max_threads()`` in ``code_init`` sizes such a field
as in the program, whose map runs with at most that many). The members publish their thread and whether
they are in their calls; the main thread signals them as it signals Python threads.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .buffers import GuardedBuffer, allocated
from .compare import against_reference, connector_views, outputs_now
from .in_place import finite_reference
from .inputs import case_data, output_containers
from .process import Phase, Threads
from .programs import CandidateArgs, CandidateLibrary, Program
from .records import Case, Connector, Problem

Outputs = dict[str, np.ndarray]
#: The signal that makes a thread give up its core in the middle of a call, and how often one is sent.
YIELD_SIGNAL = signal.SIGUSR2
YIELD_EVERY = 1e-4
#: Signals each thread gets per round (one thread after the other, one every :data:`YIELD_EVERY` seconds).
SIGNALS = 4
#: Calls per thread and round at most, and bytes of recorded outputs per thread at most.
MOST_CALLS = 25_000
RECORD_BYTES = 8 << 20
#: Yield signals that must land inside a call (where another thread's calls then run before that call ends), per
#: thread, counted over all threads: the rounds are made again, up to :data:`MOST_EXTRA_RUNS` more times, until as
#: many have (on a busy machine the threads get little time, and few signals find them inside a call).
IN_CALL_YIELDS = 8
MOST_EXTRA_RUNS = 6
#: How many distinct results per thread are compared in full (the others are bit for bit equal to one of them).
DISTINCT_RESULTS = 16


@dataclass(frozen=True)
class _Calls:
    """What the rounds of calls at once work on: one entry per thread (its case, inputs, buffers, prepared
    arguments and recorded output ranges), the library, the OpenMP runtime and the number of rounds."""

    cases: list[Case]
    datas: list[dict[str, np.ndarray]]
    buffers: list[dict[str, GuardedBuffer]]
    prepared: list[CandidateArgs]
    ranges: list[list[tuple[int, int, Connector]]]
    candidate: CandidateLibrary
    threads: Threads
    rounds: int


def _one_core() -> int | None:
    """The core the threads share (the last this process may use), or None where affinity cannot be set."""
    try:
        return max(os.sched_getaffinity(0))
    except (AttributeError, OSError, ValueError):
        return None


def _output_ranges(case: Case, buffers: dict[str, GuardedBuffer]) -> list[tuple[int, int, Connector]]:
    """(address, bytes, connector) of every output connector's view, first element to last."""
    ranges = []
    for conn in case["connectors"]:
        if conn["direction"] != "out":
            continue
        buf = buffers[conn["container"]]
        extent = sum((n - 1) * abs(s) for n, s in zip(conn["shape"], conn["strides"])) + 1 if conn["shape"] else 1
        ranges.append((buf.start + conn["offset"] * buf.dtype.itemsize, extent * buf.dtype.itemsize, conn))
    return ranges


class _Member(ctypes.Structure):
    """One member's calls (``dace_ai_member_t`` of the entry code)."""

    _fields_ = [
        ("st", ctypes.c_void_p),
        ("b", ctypes.c_void_p),
        ("s", ctypes.c_void_p),
        ("p", ctypes.c_void_p),
        ("n", ctypes.c_long),
        ("source", ctypes.c_void_p),
        ("bytes", ctypes.c_void_p),
        ("count", ctypes.c_long),
        ("to", ctypes.c_void_p),
        ("made", ctypes.c_long),
        ("busy", ctypes.c_int),
        ("thread", ctypes.c_ulong),
    ]


class _Team(ctypes.Structure):
    """The team's slots (``dace_ai_team_t`` of the entry code)."""

    _fields_ = [
        ("next", ctypes.c_long),
        ("members", ctypes.c_long),
        ("core", ctypes.c_int),
        ("stop", ctypes.c_void_p),
        ("member", ctypes.c_void_p),
    ]


def _team(case: Case, candidate: CandidateLibrary, threads: Threads) -> bool:
    """Whether the calls at once are made by an OpenMP team (code that calls OpenMP, a runtime that can)."""
    return bool(case.get("concurrent_team")) and threads.parallel is not None and bool(candidate.team_member)


def call_at_once(
    case: Case, candidate: Program[Any], natives: Mapping[Any, Outputs | None], phase: Phase, threads: Threads
) -> Problem | None:
    """The cases of ``case["concurrent"]`` called at the same time on one state, each on its own buffers.

    Needs the entry-point library (:class:`~.programs.CandidateLibrary`); a program DaCe built is not run so.
    Returns the first wrong result as a problem (``concurrent`` when its case is right alone), or None.
    """
    cases = case.get("concurrent") or []
    if not isinstance(candidate, CandidateLibrary) or len(cases) < 2:
        return None
    rounds = max(1, int(case.get("concurrent_repeats") or 4))
    datas = [case_data(c) for c in cases]
    team = _team(case, candidate, threads)
    with allocated(cases[0], datas[0]) as first:
        if team:
            threads.use(len(cases))  # code_init sees as many OpenMP threads as the team has
        try:
            state = candidate.prepare(cases[0], first)
        finally:
            if team:
                threads.use(None)
        try:
            with contextlib.ExitStack() as stack:
                buffers = [first] + [stack.enter_context(allocated(c, d)) for c, d in zip(cases[1:], datas[1:])]
                prepared = [state] + [candidate.share(state, c, b) for c, b in zip(cases[1:], buffers[1:])]
                ranges = [_output_ranges(c, b) for c, b in zip(cases, buffers)]
                phase(
                    who="candidate",
                    step="concurrent",
                    seed=cases[0]["seed"],
                    sizes=cases[0]["sizes"],
                    threads=len(cases),
                    buffers=[b.layout() for bs in buffers for b in bs.values()],
                )
                run = _run_team_rounds if team else _run_rounds
                calls = _Calls(cases, datas, buffers, prepared, ranges, candidate, threads, rounds)
                before = candidate.in_call_yields()
                records = run(calls)
                extra = 0
                while candidate.in_call_yields() - before < IN_CALL_YIELDS * len(cases) and extra < MOST_EXTRA_RUNS:
                    # few signals landed inside a call (a busy machine gave the threads little time): more rounds
                    more = run(calls)
                    records = [np.concatenate([r, m]) for r, m in zip(records, more)]
                    extra += 1
                phase(who="candidate", step="done", seed=cases[0]["seed"], sizes=cases[0]["sizes"])
                return _judge(cases, datas, records, ranges, candidate, natives, phase)
        finally:
            candidate.finish(state)


def _run_rounds(calls: _Calls) -> list[np.ndarray]:
    """The threads' rounds of calls, the main thread sending the yield signals; each thread's recorded
    results (one row of bytes per call)."""
    cases, datas, buffers, prepared, ranges = calls.cases, calls.datas, calls.buffers, calls.prepared, calls.ranges
    candidate, threads, rounds = calls.candidate, calls.threads, calls.rounds
    count = len(cases)
    per_call, most = _calls_per_round(cases[0], ranges[0], rounds)
    rows: list[list[np.ndarray]] = [[] for _ in cases]
    errors: list[BaseException] = []
    start, finish = threading.Barrier(count + 1), threading.Barrier(count + 1)
    stop = ctypes.c_int(0)
    busy = [False] * count  # in its calls: may be sent the signal (read and written with the GIL held)
    core = _one_core()

    def work(k: int) -> None:
        try:
            threads.use(1)  # as inside the program's parallel map: no nested team
            if core is not None:
                os.sched_setaffinity(0, {core})  # this thread only: the threads take turns on one core
            spans = [(a, b) for a, b, _ in ranges[k]]
            for _ in range(rounds):
                for name in output_containers(cases[k]):  # outputs poisoned (and in-out inputs reset)
                    buffers[k][name].array[:] = datas[k][name]
                record = np.zeros((most, per_call), np.uint8)
                busy[k] = True  # a signal at the barrier only makes it yield there
                start.wait()
                made = candidate.call_record(prepared[k], most, spans, record.ctypes.data, stop)
                busy[k] = False
                rows[k].append(record[:made])
                finish.wait()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            busy[k] = False
            errors.append(exc)
            start.abort()
            finish.abort()

    candidate.yield_on(YIELD_SIGNAL)
    workers = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(count)]
    for worker in workers:
        worker.start()
    try:
        for _ in range(rounds):
            stop.value = 0
            start.wait()
            for tick in range(SIGNALS * count):
                time.sleep(YIELD_EVERY)
                if not any(busy):
                    break
                k, ident = tick % count, workers[tick % count].ident
                if busy[k] and ident is not None:  # busy: alive, in its calls (the GIL is held here)
                    signal.pthread_kill(ident, YIELD_SIGNAL)
            stop.value = 1
            finish.wait()
    except threading.BrokenBarrierError:
        pass
    finally:
        stop.value = 1
        for worker in workers:
            worker.join()
        threads.use(None)
    failure = next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)), None)
    if failure is not None:
        raise failure
    return [np.concatenate(r) if r else np.zeros((0, per_call), np.uint8) for r in rows]


def _calls_per_round(case: Case, ranges: list[tuple[int, int, Connector]], rounds: int) -> tuple[int, int]:
    """(bytes recorded per call, calls per thread and round at most)."""
    per_call = max(1, sum(b for _, b, _ in ranges))
    in_out = any(c["input"] and c["output"] for c in case["containers"])  # each call changes the next's input
    return per_call, 1 if in_out else max(1, min(MOST_CALLS, RECORD_BYTES // (per_call * rounds)))


def _set_member(
    members: Any,
    k: int,
    case: Case,
    data: dict[str, np.ndarray],
    buffers: dict[str, GuardedBuffer],
    args: CandidateArgs,
    ranges: list[tuple[int, int, Connector]],
    most: int,
    per_call: int,
    kept: list[Any],
) -> np.ndarray:
    """Member ``k``'s calls of the next round: its outputs poisoned (and in-out inputs reset), its slot filled;
    returns the array its calls are recorded in (``kept`` keeps the C arrays the slot points to)."""
    for name in output_containers(case):
        buffers[name].array[:] = data[name]
    record = np.zeros((most, per_call), np.uint8)
    sources = (ctypes.c_void_p * max(1, len(ranges)))(*[a for a, _, _ in ranges])
    sizes = (ctypes.c_long * max(1, len(ranges)))(*[b for _, b, _ in ranges])
    kept += [sources, sizes]
    members[k] = _Member(
        args.state,
        ctypes.addressof(args.pointers),
        ctypes.addressof(args.symbols),
        ctypes.addressof(args.params),
        most,
        ctypes.addressof(sources),
        ctypes.addressof(sizes),
        len(ranges),
        record.ctypes.data,
        0,
        0,
        0,
    )
    return record


def _run_team_rounds(calls: _Calls) -> list[np.ndarray]:
    """The rounds made by an OpenMP team (one member per case), the main thread sending the yield signals;
    each member's recorded results (one row of bytes per call)."""
    cases, datas, buffers, prepared, ranges = calls.cases, calls.datas, calls.buffers, calls.prepared, calls.ranges
    candidate, threads, rounds = calls.candidate, calls.threads, calls.rounds
    count = len(cases)
    per_call, most = _calls_per_round(cases[0], ranges[0], rounds)
    rows: list[list[np.ndarray]] = [[] for _ in cases]
    errors: list[BaseException] = []
    start, finish = threading.Barrier(2), threading.Barrier(2)
    stop = ctypes.c_int(0)
    members = (_Member * count)()
    core = _one_core()
    team = _Team(0, count, -1 if core is None else core, ctypes.addressof(stop), ctypes.addressof(members))
    kept: list[Any] = []  # the ctypes arrays the members point to, alive until the round ends

    def launch() -> None:
        try:
            threads.use(1)  # the members' own parallel regions: one thread, as inside the program's map
            for _ in range(rounds):
                start.wait()
                threads.parallel(candidate.team_member, ctypes.byref(team), count, 0)
                finish.wait()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)
            start.abort()
            finish.abort()
        finally:
            threads.use(None)

    candidate.yield_on(YIELD_SIGNAL)
    launcher = threading.Thread(target=launch, daemon=True)
    launcher.start()
    try:
        for _ in range(rounds):
            kept.clear()
            records = [
                _set_member(members, k, cases[k], datas[k], buffers[k], prepared[k], ranges[k], most, per_call, kept)
                for k in range(count)
            ]
            team.next = 0
            stop.value = 0
            start.wait()
            for tick in range(SIGNALS * count):
                time.sleep(YIELD_EVERY)
                if all(m.thread for m in members) and not any(m.busy for m in members):
                    break
                member = members[tick % count]
                if member.busy and member.thread:
                    signal.pthread_kill(member.thread, YIELD_SIGNAL)
            stop.value = 1
            finish.wait()
            for k, record in enumerate(records):
                rows[k].append(record[: members[k].made])
    except threading.BrokenBarrierError:
        pass
    finally:
        stop.value = 1
        start.abort()  # (past the last round: nothing waits there any more)
        finish.abort()
        launcher.join()
    failure = next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)), None)
    if failure is not None:
        raise failure
    return [np.concatenate(r) if r else np.zeros((0, per_call), np.uint8) for r in rows]


def _recorded(record: np.ndarray, ranges: list[tuple[int, int, Connector]], dtypes: dict[str, np.dtype]) -> Outputs:
    """One call's recorded outputs per output connector (its view, from the bytes recorded)."""
    outs: Outputs = {}
    at = 0
    for _, size, conn in ranges:
        dtype = dtypes[conn["container"]]
        flat = np.ascontiguousarray(record[at : at + size]).view(dtype)
        at += size
        if conn["shape"]:
            strides = tuple(s * dtype.itemsize for s in conn["strides"])
            outs[conn["name"]] = np.lib.stride_tricks.as_strided(flat, tuple(conn["shape"]), strides).copy()
        else:
            outs[conn["name"]] = flat[:1].reshape(()).copy()
    return outs


def _distinct(rows: np.ndarray) -> list[tuple[int, int]]:
    """(first row, how many rows) of each distinct row of bytes, in order: the first row's equals found
    at once, the few others sorted out among themselves."""
    same = np.all(rows == rows[0], axis=1)
    found = [(0, int(np.count_nonzero(same)))]
    others = np.flatnonzero(~same)
    if len(others):
        _, first_at, counts = np.unique(
            np.ascontiguousarray(rows[others]).view(np.dtype((np.void, rows.shape[1]))).ravel(),
            return_index=True,
            return_counts=True,
        )
        found += sorted((int(others[i]), int(n)) for i, n in zip(first_at, counts))
    return found


def _judge(
    cases: list[Case],
    datas: list[dict[str, np.ndarray]],
    records: list[np.ndarray],
    ranges: list[list[tuple[int, int, Connector]]],
    candidate: Program[Any],
    natives: Mapping[Any, Outputs | None],
    phase: Phase,
) -> Problem | None:
    """Every thread's every recorded result against its case's reference (each distinct result compared
    once); the first wrong one's case is then called again alone, to tell the overlap from a plain error."""
    wrong: list[tuple[int, Problem]] = []
    wrong_calls = 0
    for k, sub in enumerate(cases):
        native = natives.get(sub.get("id"))
        if sub.get("unfit") or not finite_reference(sub, native) or not len(records[k]):
            continue
        dtypes = {c["name"]: np.dtype(c["dtype"]) for c in sub["containers"]}
        for index, times in _distinct(np.ascontiguousarray(records[k]))[:DISTINCT_RESULTS]:
            rows = records[k]
            problem = against_reference(sub, _recorded(rows[index], ranges[k], dtypes), native)
            if problem is not None:
                wrong.append((k, problem))
                wrong_calls += int(times)
    if not wrong:
        return None
    k, problem = wrong[0]
    if _wrong_alone(cases[k], datas[k], candidate, natives.get(cases[k].get("id")), phase):
        return {**problem, "seed": cases[k]["seed"]}
    return {
        **problem,
        "kind": "concurrent",
        "was": problem["kind"],
        "threads": len(cases),
        "calls": sum(len(r) for r in records),
        "wrong_calls": wrong_calls,
        "seed": cases[k]["seed"],
    }


def _wrong_alone(
    case: Case, data: dict[str, np.ndarray], candidate: Program[Any], native: Outputs | None, phase: Phase
) -> bool:
    """Whether ``case`` called alone (a state of its own, no other call running) is wrong too."""
    with allocated(case, data) as buffers:
        phase(who="candidate", step="run", seed=case["seed"], sizes=case["sizes"], alone=True)
        prepared = candidate.prepare(case, buffers)
        try:
            candidate.call(prepared)
        finally:
            candidate.finish(prepared)
        return against_reference(case, connector_views(case, outputs_now(case, buffers)), native) is not None
