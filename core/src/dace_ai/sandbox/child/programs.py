"""The programs the child calls: the candidate's entry points, a program DaCe built, a trusted NumPy baseline.

Each is a :class:`Program`: ``prepare(case, buffers)`` (its arguments for one case's
buffers), ``call(prepared)`` and ``finish(prepared)``.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, NamedTuple, Protocol, TypeVar

from .buffers import GuardedBuffer
from .records import BaselineSpec, Case, LibrarySpec

P = TypeVar("P")


class Program(Protocol[P]):
    """What the child calls: arguments made once per case's buffers, a call, a finish that frees them."""

    def prepare(self, case: Case, buffers: dict[str, GuardedBuffer]) -> P: ...
    def call(self, prepared: P) -> None: ...
    def finish(self, prepared: P) -> None: ...


class CandidateArgs(NamedTuple):
    """The candidate's arguments for one case: its state (from ``dace_ai_entry_init``) and C arrays."""

    state: int | None
    symbols: Any  #: ``c_double`` array of the node's symbol values
    params: Any  #: ``c_double`` array of its scalar parameters
    pointers: Any  #: ``c_void_p`` array, one per connector, into the case's buffers


class BuiltArgs(NamedTuple):
    """A DaCe-built program's arguments for one case: its handle (from ``__dace_init``) and call arguments."""

    handle: ctypes.c_void_p
    args: list[Any]


class CandidateLibrary:
    """The candidate library's C entry points (written by the parent around the answer's code)."""

    def __init__(self, spec: LibrarySpec, fault_fd: int) -> None:
        self.lib = ctypes.CDLL(spec["library"], mode=os.RTLD_NOW | os.RTLD_LOCAL)
        self.lib.dace_ai_install_fault_handler.argtypes = [ctypes.c_int]
        self.lib.dace_ai_install_fault_handler(fault_fd)
        self.init = self.lib.dace_ai_entry_init
        self.init.restype = ctypes.c_void_p
        self.run = self.lib.dace_ai_entry_run
        self.run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.exit = self.lib.dace_ai_entry_exit
        self.exit.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.run_record = self.lib.dace_ai_entry_run_record
        self.run_record.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        self.run_record.argtypes += [ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        self.run_record.restype = ctypes.c_long
        #: The address of ``dace_ai_entry_team_member``, the body of the team that makes calls at once.
        self.team_member = ctypes.cast(self.lib.dace_ai_entry_team_member, ctypes.c_void_p).value
        self.spec = spec
        self._yield_signal: int | None = None

    def yield_on(self, signal: int) -> None:
        """From now on ``signal`` makes the thread it reaches give up the processor (in the middle of a call)."""
        if self._yield_signal != signal:
            handler = self.lib.dace_ai_install_yield_handler
            handler.argtypes = [ctypes.c_int]
            if handler(signal) != 0:
                raise OSError(f"could not handle signal {signal}")
            self._yield_signal = signal

    def in_call_yields(self) -> int:
        """How many yield signals so far landed inside a call of the candidate (the others fell between calls)."""
        count = self.lib.dace_ai_in_call_yields
        count.restype = ctypes.c_long
        return int(count())

    def prepare(self, case: Case, buffers: dict[str, GuardedBuffer]) -> CandidateArgs:
        syms, params, ptrs = self._arguments(case, buffers)
        return CandidateArgs(self.init(syms), syms, params, ptrs)

    def share(self, prepared: CandidateArgs, case: Case, buffers: dict[str, GuardedBuffer]) -> CandidateArgs:
        """Arguments for other buffers that use the state of ``prepared`` (as the calls of one program's
        map share its ``__state``); finishing ``prepared`` ends that state, these need no finish."""
        syms, params, ptrs = self._arguments(case, buffers)
        return CandidateArgs(prepared.state, syms, params, ptrs)

    def _arguments(self, case: Case, buffers: dict[str, GuardedBuffer]) -> tuple[Any, Any, Any]:
        values = case["values"]
        syms = (ctypes.c_double * max(1, len(self.spec["symbols"])))(*[values[s] for s in self.spec["symbols"]])
        params = (ctypes.c_double * max(1, len(self.spec["params"])))(*[values[p] for p in self.spec["params"]])
        conns = {c["name"]: c for c in case["connectors"]}
        ptrs = (ctypes.c_void_p * max(1, len(self.spec["connectors"])))()
        for i, name in enumerate(self.spec["connectors"]):
            buf = buffers[conns[name]["container"]]
            ptrs[i] = buf.start + conns[name]["offset"] * buf.dtype.itemsize
        return syms, params, ptrs

    def call(self, prepared: CandidateArgs) -> None:
        self.run(prepared.state, prepared.pointers, prepared.symbols, prepared.params)

    def call_record(
        self, prepared: CandidateArgs, times: int, ranges: list[tuple[int, int]], to: int, stop: Any
    ) -> int:
        """Up to ``times`` calls back to back inside the library (no Python between them; the GIL released),
        at least one, fewer once the ``ctypes.c_int`` ``stop`` is set; each followed by a copy of the byte
        ranges ``ranges`` (address, bytes) to the memory at ``to``, in order. Returns the calls made."""
        sources = (ctypes.c_void_p * max(1, len(ranges)))(*[a for a, _ in ranges])
        sizes = (ctypes.c_long * max(1, len(ranges)))(*[b for _, b in ranges])
        return int(
            self.run_record(
                prepared.state,
                prepared.pointers,
                prepared.symbols,
                prepared.params,
                times,
                sources,
                sizes,
                len(ranges),
                to,
                ctypes.byref(stop),
            )
        )

    def finish(self, prepared: CandidateArgs) -> None:
        self.exit(prepared.state, prepared.symbols)


def _ctype(name: str) -> Any:
    """A ctypes type by its name as the parent recorded it (``c_int``, ``c_double``, ...)."""
    value = getattr(ctypes, name, None)
    if not (isinstance(value, type) and issubclass(value, ctypes._SimpleCData)):
        raise TypeError(f"unknown argument type {name!r}")
    return value


class Reference:
    """A program DaCe built from the node's native expansion: ``__dace_init``/``__program``/``__dace_exit``."""

    def __init__(self, spec: LibrarySpec) -> None:
        self.lib = ctypes.CDLL(spec["library"], mode=os.RTLD_NOW | os.RTLD_LOCAL)
        name = spec["name"]
        self.init = self.lib[f"__dace_init_{name}"]
        self.init.restype = ctypes.c_void_p
        self.program = self.lib[f"__program_{name}"]
        self.exit = self.lib[f"__dace_exit_{name}"]
        self.exit.restype = ctypes.c_int
        self.spec = spec

    def prepare(self, case: Case, buffers: dict[str, GuardedBuffer]) -> BuiltArgs:
        values = case["values"]
        init_args = [_ctype(t)(values[n]) for n, t in self.spec["init"]]
        args = [
            ctypes.c_void_p(buffers[n].start) if t == "array" else _ctype(t)(values[n]) for n, t in self.spec["args"]
        ]
        handle = self.init(*init_args)
        if not handle:
            raise RuntimeError("the reference program failed to initialise")
        return BuiltArgs(ctypes.c_void_p(handle), args)

    def call(self, prepared: BuiltArgs) -> None:
        self.program(prepared.handle, *prepared.args)

    def finish(self, prepared: BuiltArgs) -> None:
        self.exit(prepared.handle)


class PythonBaseline:
    """A trusted project function timed as a baseline: a task's NumPy reference, imported by module path.

    The parent names it (``"module:function"`` of the suite's own module), never model
    text. It is called on NumPy views of the case's buffers (``arrays``: name -> shape)
    plus the scalars and sizes the task's reference takes.
    """

    def __init__(self, spec: BaselineSpec) -> None:
        import importlib

        module, _, attribute = spec["function"].partition(":")
        function: Any = importlib.import_module(module)
        for part in attribute.split("."):
            function = getattr(function, part)
        self.function = function
        self.spec = spec

    def prepare(self, case: Case, buffers: dict[str, GuardedBuffer]) -> dict[str, Any]:
        arrays = {name: buffers[name].array.reshape(shape) for name, shape in self.spec["arrays"].items()}
        return {**arrays, **self.spec.get("scalars", {})}

    def call(self, prepared: dict[str, Any]) -> None:
        self.function(**prepared)

    def finish(self, prepared: dict[str, Any]) -> None:
        return None
