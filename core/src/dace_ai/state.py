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
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, TypeVar


class _Clearable(Protocol):
    def clear(self) -> None: ...


C = TypeVar("C", bound=_Clearable)


class ProcessState:
    """Named containers (anything with ``clear()``: dicts, sets, lists) that :meth:`reset` empties."""

    def __init__(self) -> None:
        self._parts: dict[str, Any] = {}
        self._lock = threading.Lock()

    def register(self, name: str, container: C) -> C:
        """Keep ``container`` under ``name`` (``"checking.verify.told"``) and return it, so a module
        writes ``_told: set[str] = STATE.register("checking.verify.told", set())``."""
        with self._lock:
            if name in self._parts and self._parts[name] is not container:
                raise ValueError(f"process state {name!r} is registered already")
            self._parts[name] = container
        return container

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
