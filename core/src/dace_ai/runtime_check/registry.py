"""The spot checks placed by this process, by id, and the answer each one checks (its session round and cache key).

A program saved and run in another process is not checked there: its reference is not
known (the hook says so once).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from dace_ai.runtime_check.plan import SpotPlan


@dataclass(frozen=True)
class Origin:
    """Where the checked answer is kept: its session folder, round and answer-cache key ("" when unknown)."""

    session: str = ""
    round: int = 0
    cache_key: str = ""


_plans: dict[str, SpotPlan] = {}
_origins: dict[str, Origin] = {}
_placed: dict[str, int] = {}
_lock = threading.Lock()


def remember(plan: SpotPlan, origin: Origin) -> None:
    """Keep ``plan`` (placed again: its checks count their calls from the start)."""
    with _lock:
        _plans[plan.ident] = plan
        _origins[plan.ident] = origin
        _placed[plan.ident] = _placed.get(plan.ident, 0) + 1


def placement(ident: str) -> str:
    """What a check's call count is kept under: the id and how often this process placed it."""
    with _lock:
        return f"{ident}#{_placed.get(ident, 0)}"


def placed(ident: str) -> int:
    """How often this process placed the check ``ident`` (read without the lock: one dictionary lookup per call)."""
    return _placed.get(ident, 0)


def plan(ident: str) -> SpotPlan | None:
    with _lock:
        return _plans.get(ident)


def origin(ident: str) -> Origin:
    with _lock:
        return _origins.get(ident, Origin())
