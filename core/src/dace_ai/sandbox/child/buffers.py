"""Guarded buffers: each container in its own ``mmap`` region, inaccessible pages right after it.

An access past the end faults at once; the bytes between the page start and the
buffer, and any gap before the guard page, hold a canary (:data:`~.inputs.POISON`
for floats) that is checked after each run.

Every buffer's lifetime is owned by a context manager: :func:`allocated` maps a
case's buffers and unmaps them when its block ends, however it ends (a buffer
mapped before a later one failed included). A run whose buffers outlive its block
(kept for the bench timing, or freed only after the next thread run is allocated so
that it gets new addresses) enters :func:`allocated` in a :class:`contextlib.ExitStack`
and hands the stack on (``ExitStack.pop_all``); nothing frees buffers by hand.
:func:`live` counts the buffers mapped now (the tests check that none outlive a run).
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
from collections.abc import Iterator
from typing import Any

import numpy as np

from .inputs import CANARY, POISON
from .records import Case

ALIGN = 64  #: buffers start on this boundary, as vector code may expect
PAGE = mmap.PAGESIZE
GUARD = max(PAGE, 1 << 20)  #: inaccessible bytes after each buffer: overruns up to this far fault at once
_PROT_NONE, _PROT_RW = 0, 3
_MAP_PRIVATE, _MAP_ANONYMOUS = 0x02, 0x20


class _Libc:
    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.mmap = libc.mmap
        self.mmap.restype = ctypes.c_void_p
        self.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        self.mprotect = libc.mprotect
        self.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.munmap = libc.munmap
        self.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


_libc: _Libc | None = None
_live: set[int] = set()  # the start of every region mapped and not yet unmapped


def live() -> int:
    """How many guarded buffers are mapped now."""
    return len(_live)


class GuardedBuffer:
    """``nbytes`` of memory followed by inaccessible pages; slack on both sides holds the canary.

    A context manager: the region is unmapped when its ``with`` block ends (or by :meth:`free`).
    """

    def __init__(self, name: str, dtype: str, elements: int) -> None:
        global _libc
        _libc = _libc or _Libc()
        self.name, self.dtype = name, np.dtype(dtype)
        self.nbytes = max(1, elements) * self.dtype.itemsize
        self.body = -(-(self.nbytes + ALIGN) // PAGE) * PAGE
        self.total = self.body + GUARD
        addr = _libc.mmap(None, self.total, _PROT_RW, _MAP_PRIVATE | _MAP_ANONYMOUS, -1, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise MemoryError(f"could not map {self.total} bytes for buffer {name}")
        self.addr, self.mapped = addr, True
        _live.add(addr)
        if _libc.mprotect(addr + self.body, GUARD, _PROT_NONE) != 0:
            error = ctypes.get_errno()
            self.free()
            raise OSError(error, "mprotect failed")
        self.start = (addr + self.body - self.nbytes) & ~(ALIGN - 1)
        self.raw = np.ctypeslib.as_array((ctypes.c_ubyte * self.body).from_address(addr))
        self.poison = POISON if self.dtype.kind in "fc" else CANARY
        self.raw[:] = self.poison
        lead = self.start - addr
        self.array = self.raw[lead : lead + self.nbytes].view(self.dtype)[:elements]

    def __enter__(self) -> GuardedBuffer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()

    def layout(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "start": self.start,
            "end": self.start + self.nbytes,
            "guard": [self.addr + self.body, self.addr + self.total],
            "lead": self.addr,
        }

    def slack_intact(self) -> str | None:
        """'before' or 'after' when canary bytes around the buffer changed, else None."""
        lead = self.start - self.addr
        if np.any(self.raw[:lead] != self.poison):
            return "before"
        if np.any(self.raw[lead + self.nbytes :] != self.poison):
            return "after"
        return None

    def free(self) -> None:
        """Unmap the region (once; a second call does nothing)."""
        if not self.mapped:
            return
        self.mapped = False
        self.array = self.raw = None  # type: ignore[assignment]  # dropped once unmapped; never read after free
        _live.discard(self.addr)
        _libc.munmap(self.addr, self.total)  # type: ignore[union-attr]  # libc is loaded whenever a buffer was mapped


@contextlib.contextmanager
def allocated(case: Case, data: dict[str, np.ndarray]) -> Iterator[dict[str, GuardedBuffer]]:
    """Guarded buffers of every container of ``case``, holding ``data``; unmapped when the block ends,
    however it ends (those mapped before one that failed too)."""
    with contextlib.ExitStack() as stack:
        buffers: dict[str, GuardedBuffer] = {}
        for cont in case["containers"]:
            buf = stack.enter_context(GuardedBuffer(cont["name"], cont["dtype"], cont["elements"]))
            buf.array[:] = data[cont["name"]]
            buffers[cont["name"]] = buf
        yield buffers
