"""The caches and once-only notices of this process, in one place that can forget them all.

Modules keep their own containers (the detections of targets and libraries, the
reference outputs of the last candidates, the names a warning was already given for),
but register them here when they are made, so :func:`reset` empties every one of them:
the tests call it before each test (``tests/conftest.py``), so no test sees what an
earlier one detected or was told, and a long-lived host whose machine changed (a
library installed, a variable fixed) can call it too. What ``import dace_ai`` installed
into DaCe (the 'ai' implementation, patches, hooks) and the registries that live
objects are looked up in (reference functions, jobs of this process) are not
forgettable state and are not registered.

Functions whose answers are facts of this machine that can change while a process
lives (is clang's OpenMP runtime installed, which headers a library pack finds, what a
compiler says it is, the source digests the check fingerprint reads) are cached with
:meth:`ProcessState.cached` instead of a bare :func:`functools.lru_cache`, so the
same :func:`reset` forgets them: after the warning "install libomp-dev", installing it
and calling ``dace_ai.state.reset()`` is enough. Pure functions (parsing a size
expression) keep plain caches. The measured roofline is not forgotten: measuring
takes seconds and a machine's speed does not change under a running process.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar


class _Clearable(Protocol):
    def clear(self) -> None: ...


C = TypeVar("C", bound=_Clearable)
R = TypeVar("R")


class _CacheOf:
    """A :func:`functools.lru_cache` wrapper seen as a container: ``clear()`` empties its cache."""

    def __init__(self, cached: Any) -> None:
        self.cached = cached

    def clear(self) -> None:
        self.cached.cache_clear()


class ProcessState:
    """Named containers (anything with ``clear()``: dicts, sets, lists) that :meth:`reset` empties."""

    def __init__(self) -> None:
        self._parts: dict[str, Any] = {}
        self._lock = threading.Lock()

    def register(self, name: str, container: C) -> C:
        """Keep ``container`` under ``name`` (``"sandbox.run_report.told"``) and return it, so a module
        writes ``_told: set[str] = STATE.register("sandbox.run_report.told", set())``."""
        with self._lock:
            if name in self._parts and self._parts[name] is not container:
                raise ValueError(f"process state {name!r} is registered already")
            self._parts[name] = container
        return container

    def cached(self, name: str, maxsize: int | None = 32) -> Callable[[Callable[..., R]], Callable[..., R]]:
        """:func:`functools.lru_cache` whose cache is registered under ``name``, so :meth:`reset` forgets it."""

        def decorate(function: Callable[..., R]) -> Callable[..., R]:
            kept = functools.lru_cache(maxsize=maxsize)(function)
            self.register(name, _CacheOf(kept))
            return kept

        return decorate

    def names(self) -> list[str]:
        """The registered containers' names, sorted."""
        with self._lock:
            return sorted(self._parts)

    def reset(self) -> None:
        """Empty every registered container (each keeps its identity: modules hold it by reference)."""
        with self._lock:
            parts = list(self._parts.values())
        for container in parts:
            container.clear()


#: This process's state.
STATE = ProcessState()


def reset() -> None:
    """Forget every cache and once-only notice of this process (see the module docstring)."""
    STATE.reset()
