"""Arm the spot checks of a compiled program around DaCe's calls of it, and judge what they recorded.

Registered with DaCe once this process places a checked tasklet (:func:`install`), so programs of
a process that places none pay nothing. Before a call, each checked
tasklet of the program is armed when its check is due (``first``: the first call of the
program in this process; ``every:N``: that one and every N-th after it; a due call that
never reached the node stays due); after the call, the recorded inputs and outputs are
compared with the reference (:func:`~dace_ai.runtime_check.judge.judge`). A wrong output
raises :class:`~dace_ai.errors.RuntimeCheckFailed` from the program's call (or warns,
``runtime_check_action=warn``), is recorded in the answer's session round and moves its
cache entry aside, so the answer is not served again. Programs without checked tasklets
cost one dictionary lookup per call.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import warnings
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dace_ai import compat
from dace_ai.errors import RuntimeCheckFailed, RuntimeCheckWarning
from dace_ai.runtime_check import registry
from dace_ai.runtime_check.cpp import RECORD_LIMIT_BYTES, ident_of
from dace_ai.runtime_check.plan import SpotPlan
from dace_ai.state import STATE


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


@dataclass(frozen=True)
class _Spot:
    """A checked tasklet of a loaded program, with its recorder's C functions."""

    ident: str
    label: str
    arm: Any
    fetch: Any
    number: Any


_spots: weakref.WeakKeyDictionary[Any, tuple[int | None, list[_Spot]]] = weakref.WeakKeyDictionary()
#: Program calls seen per check, checks still due, checks given up (over budget), and notices given.
_calls: dict[str, int] = STATE.register("runtime_check.calls", {})
_pending: set[str] = STATE.register("runtime_check.pending", set())
_stopped: set[str] = STATE.register("runtime_check.stopped", set())
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
    if arm is None or fetch is None or number is None:
        return None
    return _Spot(ident, label, arm, fetch, number)


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


def _due(ident: str, plan: SpotPlan) -> bool:
    counted = registry.placement(ident)
    with _lock:
        count = _calls.get(counted, 0)
        _calls[counted] = count + 1
        if counted in _stopped:
            return False
        due = counted in _pending or count == 0 or (plan.every > 0 and count % plan.every == 0)
        if due:
            _pending.add(counted)
        return due


def _arm(spots: list[_Spot]) -> list[tuple[_Spot, SpotPlan]]:
    armed: list[tuple[_Spot, SpotPlan]] = []
    for spot in spots:
        plan = registry.plan(spot.ident)
        if plan is None:
            _tell(
                f"unknown:{spot.ident}",
                f"tasklet {spot.label!r}: its run-time check does nothing in this process (the program was "
                "expanded in another one, where its reference lives)",
            )
            spot.arm(-1)
            continue
        due = _due(spot.ident, plan)
        spot.arm(1 if due else -1)
        if due:
            armed.append((spot, plan))
    return armed


def _recorded(
    spot: _Spot, plan: SpotPlan
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, int]] | str | None:
    """The recorded call's inputs, outputs and symbol values; None when the node was not called; why a call
    was not recorded."""
    numbers = [int(spot.number(k)) for k in range(plan.numbers)]
    if spot.fetch(0, ctypes.byref(ctypes.c_void_p())) == 2:
        return f"its call's data is over the {RECORD_LIMIT_BYTES >> 30} GiB a check may copy"
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
    from dace_ai.storage.cache import AnswerCache
    from dace_ai.storage.session_store import Session

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


def _judge(armed: list[tuple[_Spot, SpotPlan]]) -> None:
    from dace_ai.runtime_check.judge import judge, sizes_words  # the checking package: imported once a check is due

    for spot, plan in armed:
        ident = spot.ident
        recorded = _recorded(spot, plan)
        if recorded is None:
            continue  # the node was not called: still due
        counted = registry.placement(ident)
        with _lock:
            _pending.discard(counted)
        if isinstance(recorded, str):
            _tell(f"large:{ident}", f"node {plan.node!r}: not checked at run time: {recorded}")
            continue
        inputs, outputs, values = recorded
        try:
            with warnings.catch_warnings():  # NumPy's note on flush-to-zero, set by a program built with -ffast-math
                warnings.filterwarnings("ignore", message="The value of the smallest subnormal")
                finding = judge(plan, inputs, outputs, values)
        except Exception as exc:  # noqa: BLE001 - the user's reference, or shapes it cannot take
            with _lock:
                _stopped.add(counted)
            _tell(
                f"failed:{ident}",
                f"node {plan.node!r}: the run-time check could not compare ({exc}); not checked again",
            )
            continue
        with _lock:
            call = _calls.get(counted, 1)
            _done.append(Checked(plan.node, call, finding.checked, finding.seconds, finding.wrong))
        if finding.seconds > plan.budget:
            with _lock:
                _stopped.add(counted)
            _tell(
                f"budget:{ident}",
                f"node {plan.node!r}: the run-time check's reference took {finding.seconds:.2f} s (budget "
                f"{plan.budget:g} s, runtime_check_budget); later calls are not checked in this process",
            )
        if finding.wrong is None:
            continue
        sizes = sizes_words(values, inputs)
        marked = _mark_wrong(ident, plan, finding.wrong)
        message = (
            f"node {plan.node!r}: its generated tasklet wrote a wrong output in this program's call "
            f"{call}: {finding.wrong} (sizes {sizes}; checked: {finding.checked})" + (f"; {marked}" if marked else "")
        )
        if plan.action == "warn":
            warnings.warn(message, RuntimeCheckWarning, stacklevel=4)
        else:
            raise RuntimeCheckFailed(message, node=plan.node, session=registry.origin(ident).session)


@contextlib.contextmanager
def around_call(compiled: Any, args: Any) -> Iterator[None]:
    """DaCe's compiled-program call hook: arm the due checks, let the program run, judge what was recorded."""
    spots = _spots_of(compiled)
    if not spots:
        yield
        return
    armed = _arm(spots)
    yield
    if armed:
        _judge(armed)


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
