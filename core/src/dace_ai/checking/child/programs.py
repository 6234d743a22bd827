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
        self.spec = spec

    def prepare(self, case: Case, buffers: dict[str, GuardedBuffer]) -> CandidateArgs:
        values = case["values"]
        syms = (ctypes.c_double * max(1, len(self.spec["symbols"])))(*[values[s] for s in self.spec["symbols"]])
        params = (ctypes.c_double * max(1, len(self.spec["params"])))(*[values[p] for p in self.spec["params"]])
        conns = {c["name"]: c for c in case["connectors"]}
        ptrs = (ctypes.c_void_p * max(1, len(self.spec["connectors"])))()
        for i, name in enumerate(self.spec["connectors"]):
            buf = buffers[conns[name]["container"]]
            ptrs[i] = buf.start + conns[name]["offset"] * buf.dtype.itemsize
        return CandidateArgs(self.init(syms), syms, params, ptrs)

    def call(self, prepared: CandidateArgs) -> None:
        self.run(prepared.state, prepared.pointers, prepared.symbols, prepared.params)

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
