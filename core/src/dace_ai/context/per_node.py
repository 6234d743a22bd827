"""Values computed from one node's context, remembered for that context object.

The checks of one node ask the same questions of its context for every case and every
candidate (its program's sizes, its work); :class:`PerNode` answers them once per
context object. Keyed by identity (the context's and its live objects'), so a new context
(a new expansion) or live objects given to it afresh are asked again; the last few contexts are kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from dace_ai.context.types import NodeContext

T = TypeVar("T")


class PerNode(Generic[T]):
    """``make(node)``, remembered for the node object and its ``live`` mapping (the last :attr:`size` nodes); an
    exception is not kept."""

    def __init__(self, make: Callable[[NodeContext], T], size: int = 8) -> None:
        self.make = make
        self.size = size
        self._held: dict[int, tuple[NodeContext, object, T]] = {}
        self._lock = threading.Lock()

    def __call__(self, node: NodeContext) -> T:
        held = self._held.get(id(node))
        if held is not None and held[0] is node and held[1] is node.live:
            return held[2]
        value = self.make(node)
        with self._lock:
            while len(self._held) >= self.size:
                self._held.pop(next(iter(self._held)))
            self._held[id(node)] = (node, node.live, value)
        return value
