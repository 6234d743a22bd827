"""Arm the spot checks of a compiled program around DaCe's calls of it, and judge what they recorded.

Registered with DaCe once this process places a checked tasklet (:func:`install`), so programs of
a process that places none pay nothing. The recorder in the tasklet records by itself the first
call of every new shape (symbol values, shapes, strides: :mod:`~dace_ai.runtime_check.cpp`);
this hook counts the program's calls and arms a recorder for a sampled call when one is due
(``auto``: calls drawn at random, each gap at most the calls so far, so calls 2, 3-4, 5-8, ...,
while the checks of a shape already checked stay within ``runtime_check_share`` of the node's
own time, measured on its recorded calls; ``every:N``: every N-th; ``first``: none). After the
call it reads one int per checked tasklet; only when a call was recorded does it compare it with
the reference (:func:`~dace_ai.runtime_check.judge.judge`). A wrong output raises
:class:`~dace_ai.errors.RuntimeCheckFailed` from the program's call (or warns,
``runtime_check_action=warn``), is recorded in the answer's session round and moves its cache
entry aside, so the answer is not served again; from then on the node is not trusted in this
process: every later program call that runs it raises too (under ``warn``, every call is
checked). A recording that started and did not finish is a failure, never "not called".
"""

from __future__ import annotations

import ctypes
import random
import threading
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dace_ai import compat
from dace_ai.errors import RuntimeCheckFailed, RuntimeCheckWarning
from dace_ai.runtime_check import registry
from dace_ai.runtime_check.cpp import RECORD_LIMIT_BYTES, ident_of
from dace_ai.runtime_check.plan import SpotPlan
from dace_ai.state import STATE
from dace_ai.storage.cache import AnswerCache
from dace_ai.storage.session_store import Session

#: What a recorder is armed with (see :mod:`~dace_ai.runtime_check.cpp`).
OFF, WATCH, RECORD, FAILED = -1, 1, 2, 3


@dataclass(frozen=True)
class Checked:
    """One run-time check done in this process: the node, the program call, how, how long, what was wrong."""

    node: str
    call: int
    checked: str
    seconds: float
    wrong: str | None

    def __str__(self) -> str:
        verdict = f"WRONG: {self.wrong}" if self.wrong else "agrees"
        return f"{self.node}: call {self.call}, {self.checked}, {self.seconds * 1e3:.1f} ms: {verdict}"


@dataclass
class _Track:
    """One placed check's schedule in this process: program calls seen, the next sampled call (0: none),
    seconds its checks took, the first one's, the longest recorded node call, and its failure."""

    plan: SpotPlan
    placed: int = 0  #: the placement it counts (:func:`registry.placed`)
    gone: bool = False  #: the process state was reset
    calls: int = 0
    due: int = 1
    spent: float = 0.0
    first: float | None = None
    node_seconds: float = 0.0
    stopped: bool = False
    failed: str = ""
    failed_call: int = 0
    seen: tuple[int, ...] = ()  #: the recorded numbers (symbols, shapes, strides) of the last recorded call

    def want(self) -> int:
        """What the recorder is armed with for the program call now counted."""
        if self.stopped:
            return OFF
        if self.failed:
            return RECORD if self.plan.action == "warn" else FAILED
        return RECORD if self.due and self.calls >= self.due else WATCH

    def checked(self, seconds: float, node_seconds: float) -> None:
        """Count a check of the program call now counted and draw the next sampled call."""
        self.spent += seconds
        self.first = seconds if self.first is None else self.first
        self.node_seconds = max(self.node_seconds, node_seconds)
        every, calls = self.plan.every, self.calls
        if every:
            self.due = calls + every
        elif self.plan.mode != "auto":
            self.due = 0
        else:
            due = calls + random.randint(1, max(calls, 1))
            # checks after the first stay within the share of the node's time its calls have taken by then
            rate = self.plan.share * self.node_seconds
            over = self.spent + seconds - self.first
            if over > 0:
                due = max(due, int(over / rate) + 1) if rate > 0 else 0
            self.due = due


@dataclass(eq=False)
class _Spot:
    """A checked tasklet of a loaded program: its recorder's C functions, the ints it leaves, how it is armed."""

    ident: str
    label: str
    arm: Any
    fetch: Any
    number: Any
    elapsed: Any
    seen: Any
    status: Any  #: ctypes array of 2 ints in the program's library
    state: int = 0
    track: _Track | None = field(default=None)


_spots: weakref.WeakKeyDictionary[Any, tuple[int | None, list[_Spot]]] = weakref.WeakKeyDictionary()


#: The schedule of each placed check (by :func:`registry.placement`), notices given, checks done.
class _Tracks(dict[str, _Track]):
    """The schedules by placement; emptied by a reset of the process state, which every track then sees."""

    def clear(self) -> None:
        for track in self.values():
            track.gone = True
        super().clear()


_tracks: _Tracks = STATE.register("runtime_check.tracks", _Tracks())
_told: set[str] = STATE.register("runtime_check.told", set())
_done: list[Checked] = STATE.register("runtime_check.done", [])
_lock = threading.Lock()


def _spot(compiled: Any, ident: str, label: str) -> _Spot | None:
    name = f"__dace_ai_spot_{ident}"
    arm = compat.program_function(compiled, f"{name}_arm", None, [ctypes.c_int])
    fetch = compat.program_function(
        compiled, f"{name}_fetch", ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
    )
    number = compat.program_function(compiled, f"{name}_number", ctypes.c_longlong, [ctypes.c_int])
    elapsed = compat.program_function(compiled, f"{name}_elapsed", ctypes.c_longlong, [])
    seen = compat.program_function(compiled, f"{name}_seen", None, [ctypes.POINTER(ctypes.c_longlong)])
    status = compat.program_function(compiled, f"{name}_status", ctypes.POINTER(ctypes.c_int * 2), [])
    if None in (arm, fetch, number, elapsed, seen, status):
        return None
    return _Spot(ident, label, arm, fetch, number, elapsed, seen, status().contents)


def _spots_of(compiled: Any) -> list[_Spot]:
    """Every checked tasklet in ``compiled``'s program (found once per loaded library)."""
    handle = compat.program_handle(compiled)
    known = _spots.get(compiled)
    if known is not None and known[0] == handle:
        return known[1]
    found: list[_Spot] = []
    sdfg = getattr(compiled, "sdfg", None)
    if sdfg is not None:
        for node, _ in sdfg.all_nodes_recursive():
            code = getattr(getattr(node, "code", None), "as_string", None)
            ident = ident_of(code) if isinstance(code, str) and "__dace_ai_spot_" in code else None
            spot = _spot(compiled, ident, str(node.label)) if ident else None
            if spot is not None:
                found.append(spot)
    try:
        _spots[compiled] = (handle, found)
    except TypeError:
        pass
    return found


def _tell(key: str, message: str) -> None:
    with _lock:
        if key in _told:
            return
        _told.add(key)
    warnings.warn(message, RuntimeCheckWarning, stacklevel=4)


def _track(spot: _Spot) -> _Track | None:
    """The schedule ``spot`` follows now (None: its plan is not known in this process)."""
    counted = registry.placement(spot.ident)
    track = _tracks.get(counted)
    if track is None:
        plan = registry.plan(spot.ident)
        if plan is None:
            _tell(
                f"unknown:{spot.ident}",
                f"tasklet {spot.label!r}: its run-time check does nothing in this process (the program was "
                "expanded in another one, where its reference lives)",
            )
            return None
        with _lock:
            track = _tracks.setdefault(counted, _Track(plan, registry.placed(spot.ident)))
    return track


def _set(spot: _Spot, state: int) -> None:
    """Arm ``spot``'s recorder with ``state`` (which also forgets what it recorded)."""
    spot.arm(state)
    spot.state = state


def _before(spot: _Spot) -> None:
    """Count the program call about to be made and arm ``spot`` for it."""
    track = spot.track
    if track is None or track.gone or track.placed != registry.placed(spot.ident):
        track = spot.track = _track(spot)
        if track is None:
            if spot.state != OFF:
                _set(spot, OFF)
            return
        spot.state = 0  # a new placement, or the process state was reset: arm afresh
    if spot.state == 0 and track.seen:  # a library loaded again: the shape checked already is not new
        spot.seen((ctypes.c_longlong * len(track.seen))(*track.seen))
    track.calls += 1
    want = track.want()
    if want != spot.state:
        _set(spot, want)


def _recorded(
    spot: _Spot, plan: SpotPlan
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, int]] | None:
    """The recorded call's inputs, outputs and symbol values; None when nothing was recorded."""
    numbers = [int(spot.number(k)) for k in range(plan.numbers)]
    layout = plan.layout()
    inputs: dict[str, np.ndarray] = {}
    outputs: dict[str, np.ndarray] = {}
    for k, conn in enumerate(plan.connectors):
        address = ctypes.c_void_p()
        if not spot.fetch(k, ctypes.byref(address)):
            return None
        dtype = np.dtype(conn.numpy)
        shape: tuple[int, ...] = ()
        if conn.is_pointer:
            at, nd = layout[conn.name]
            shape = tuple(numbers[at : at + nd])
        count = int(np.prod(shape)) if shape else 1
        if address.value is None:
            array = np.empty(shape, dtype)
        else:
            raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(address.value)
            array = np.frombuffer(memoryview(raw).cast("B"), dtype=dtype).copy().reshape(shape)
        (inputs if conn.direction == "in" else outputs)[conn.name] = array
    values = {name: numbers[i] for i, (name, _) in enumerate(plan.values)}
    return inputs, outputs, values


def _mark_wrong(ident: str, plan: SpotPlan, words: str) -> str:
    """Record the wrong output in the answer's session round and move its cache entry aside; what was done."""
    origin = registry.origin(ident)
    done: list[str] = []
    if origin.session and origin.round:
        try:
            Session(Path(origin.session)).update_round(origin.round, runtime_check=f"wrong: {words}")
            done.append(f"recorded in session {Path(origin.session).name} round {origin.round}")
        except (OSError, ValueError, KeyError):
            pass
    if origin.cache_key:
        cache = AnswerCache(plan.root)
        path = cache.path(origin.cache_key)
        if path.exists() and cache.quarantine(path) is not None:
            done.append("its cache entry moved aside (the next expansion asks again)")
    return "; ".join(done)


def _fail(spot: _Spot, track: _Track, wrong: str, message: str) -> None:
    """Mark the answer ``wrong``, keep the node failed in this process, and raise or warn ``message``."""
    plan = track.plan
    marked = _mark_wrong(spot.ident, plan, wrong)
    track.failed = track.failed or message
    track.failed_call = track.failed_call or track.calls
    _set(spot, track.want())
    message = f"node {plan.node!r}: {message}" + (f"; {marked}" if marked else "")
    if plan.action == "warn":
        warnings.warn(message, RuntimeCheckWarning, stacklevel=4)
    else:
        raise RuntimeCheckFailed(message, node=plan.node, session=registry.origin(spot.ident).session)


def _after(spot: _Spot) -> None:
    """Judge what ``spot`` recorded in the program call just made (its status is not 0)."""
    from dace_ai.runtime_check.judge import (  # local: import cost (the checking package loads once a check is due)
        judge,
        sizes_words,
    )

    track = spot.track
    if track is None:
        return
    plan, ident, state = track.plan, spot.ident, int(spot.status[0])
    if spot.status[1]:  # called after a failure, under raise
        spot.status[1] = 0
        raise RuntimeCheckFailed(
            f"node {plan.node!r}: its generated tasklet wrote a wrong output in call {track.failed_call} of "
            f"this program ({track.failed}); it is not trusted in this process, and call {track.calls} ran it "
            "again (every call that runs it raises; expand the program again for another answer)",
            node=plan.node,
            session=registry.origin(ident).session,
        )
    if state == 3:
        _fail(
            spot,
            track,
            "a recorded call never finished",
            f"its generated tasklet's call in this program's call {track.calls} started and never finished "
            "(it left the tasklet past the check's scope guard: longjmp, a thread, or a jump the guard cannot "
            "follow); its output is not trusted",
        )
        return
    if state == 2:
        track.checked(0.0, 0.0)
        _set(spot, track.want())
        _tell(
            f"large:{ident}",
            f"node {plan.node!r}: not checked at run time: its call's data is over the "
            f"{RECORD_LIMIT_BYTES >> 30} GiB a check may copy",
        )
        return
    recorded = _recorded(spot, plan)
    node_seconds = int(spot.elapsed()) * 1e-9
    if recorded is None:
        _set(spot, track.want())
        return
    inputs, outputs, values = recorded
    track.seen = tuple(int(spot.number(k)) for k in range(plan.numbers))
    try:
        with warnings.catch_warnings():  # NumPy's note on flush-to-zero, set by a program built with -ffast-math
            warnings.filterwarnings("ignore", message="The value of the smallest subnormal")
            finding = judge(plan, inputs, outputs, values)
    except Exception as exc:  # noqa: BLE001 - the user's reference, or shapes it cannot take
        track.stopped = True
        _set(spot, OFF)
        _tell(f"failed:{ident}", f"node {plan.node!r}: the run-time check could not compare ({exc}); not checked again")
        return
    with _lock:
        _done.append(Checked(plan.node, track.calls, finding.checked, finding.seconds, finding.wrong))
    track.checked(finding.seconds, node_seconds)
    if finding.seconds > plan.budget and finding.wrong is None:
        track.stopped = True
        _tell(
            f"budget:{ident}",
            f"node {plan.node!r}: the run-time check's reference took {finding.seconds:.2f} s (budget "
            f"{plan.budget:g} s, runtime_check_budget); later calls are not checked in this process",
        )
    if finding.wrong is None:
        _set(spot, track.want())
        return
    _fail(
        spot,
        track,
        finding.wrong,
        f"its generated tasklet wrote a wrong output in this program's call {track.calls}: {finding.wrong} "
        f"(sizes {sizes_words(values, inputs)}; checked: {finding.checked})",
    )


class _Around:
    """DaCe's compiled-program call hook: arm the due checks, let the program run, judge what was recorded."""

    __slots__ = ("spots",)

    def __init__(self, compiled: Any, args: Any) -> None:
        self.spots = _spots_of(compiled)

    def __enter__(self) -> None:
        for spot in self.spots:
            track = spot.track
            if track is None or track.gone or track.placed != registry.placed(spot.ident) or spot.state != WATCH:
                _before(spot)
            else:  # what almost every call does: count it, and arm the recorder when a sample is due
                track.calls += 1
                if track.calls >= track.due > 0:
                    _set(spot, track.want())

    def __exit__(self, kind: Any, value: Any, trace: Any) -> Literal[False]:
        if kind is None:
            for spot in self.spots:
                if spot.status[0] or spot.status[1]:
                    _after(spot)
        return False


around_call = _Around


def runtime_checks() -> list[Checked]:
    """The run-time checks done in this process so far, oldest first."""
    with _lock:
        return list(_done)


_installed: list[bool] = []


def install() -> None:
    """Register :func:`around_call` with DaCe (once per process)."""
    if not _installed:
        compat.register_compiled_call_hook(around_call)
        _installed.append(True)
