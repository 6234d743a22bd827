"""The sandbox child: runs a candidate (and its native reference) on generated inputs.

Started by :mod:`dace_ai.checking.sandbox` as ``python -I <this file> JOB.json`` in a
process of its own, with limits it applies to itself before anything else. It reads
only data (the JSON job written by the parent, ``.npy`` files of expected outputs):
never model text as Python. It imports nothing but the standard library and NumPy
(importing DaCe would cost seconds per candidate); the parent imports this module
too, for :func:`case_inputs`, so both sides generate the very same inputs.

Buffers live in their own ``mmap`` regions with inaccessible (``PROT_NONE``) pages
right after them, so an access past the end faults at once; the bytes between the
page start and the buffer, and any gap before the guard page, hold a canary that is
checked after each run. Output buffers are pre-filled with the same canary, so an
element the candidate did not write is found. Before each call the child appends a
line to the *phase file* saying who runs and where the buffers are; if the process
dies, the parent reads the last line to say what crashed, and the fault handler in
the candidate library adds the faulting address to the *fault file*.

Modes: ``verify`` compares the candidate with the reference (or expected outputs);
``time`` times both on the same inputs (warm-up, then repeated runs).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import mmap
import os
import sys
import time
from collections.abc import Iterator
from typing import Any, TypedDict

import numpy as np

CANARY = 0xA5  #: byte that fills non-float output buffers (and the slack around buffers of non-float elements)
#: Byte of the slack around floating-point buffers: 0xFF... is a NaN, so a read outside a buffer
#: shows as a NaN in the outputs (the poison the bench's read rule looks for).
POISON = 0xFF
ALIGN = 64  #: buffers start on this boundary, as vector code may expect
PAGE = mmap.PAGESIZE
GUARD = max(PAGE, 1 << 20)  #: inaccessible bytes after each buffer: overruns up to this far fault at once
_PROT_NONE, _PROT_RW = 0, 3
_MAP_PRIVATE, _MAP_ANONYMOUS = 0x02, 0x20

#: What fills floating-point outputs before every call: a *signalling* NaN with a recognisable payload,
#: per element size in bytes. An element never written keeps these exact bits; any arithmetic on it
#: (``C += ...`` on an output never zeroed) gives the *quiet* NaN with the same payload, so "never
#: written" and "read before written" are told apart (:func:`fill_derived`). Integer outputs hold the
#: large pattern 0xA5A5... (-1.5e9 as int32), so an integer accumulated into it is far off too.
OUTPUT_NAN = {2: 0x7DA5, 4: 0x7FA5A5A5, 8: 0x7FF5A5A5A5A5A5A5}
_QUIET_BIT = {2: 1 << 9, 4: 1 << 22, 8: 1 << 51}
_SIGN_BIT = {2: 1 << 15, 4: 1 << 31, 8: 1 << 63}

# ----------------------------------------------------------------------------- records (shared with the parent)
# What the parent writes (the job and its cases) and what the child writes back (a record per case, its
# problem). Defined here, once: the child imports nothing of dace_ai (it runs under ``python -I``), and
# the parents (:mod:`dace_ai.checking.harness`, :mod:`dace_ai.evaluation.sandbox`) import them from here.


class Connector(TypedDict):
    """How one connector sees its container: element offset, shape and strides in elements."""

    name: str
    container: str
    direction: str  #: "in" or "out"
    offset: int
    shape: list[int]
    strides: list[int]
    wcr: Any  #: the write-conflict resolution of an accumulating output, or None


class Container(TypedDict):
    """One data container of the node: flat element count and NumPy dtype string."""

    name: str
    dtype: str
    input: bool
    output: bool
    elements: int


class Case(TypedDict, total=False):
    """One call of the candidate: its sizes, seed, containers and connectors, and how its inputs are drawn."""

    id: int | str
    seed: int
    sizes: dict[str, int]
    values: dict[str, int]  #: sizes and the enclosing maps' parameters
    containers: list[Container]
    connectors: list[Connector]
    rtol: dict[str, float]  #: per output connector
    rung: str
    point: dict[str, int]
    point_words: str
    threads: list[int]  #: thread counts of its runs (OpenMP code)
    distribution: str  #: see :data:`DISTRIBUTIONS`
    magnitude: float
    group: str
    unfit: str  #: why the reference is not defined at these inputs
    again: Case  #: other inputs for a second call on the same buffers
    expected: dict[str, str]  #: files of a reference function's outputs
    inputs: dict[str, str]  #: files of the initial data
    reference_cache: dict[str, str]  #: files of the native reference's outputs
    judge: Any


class Problem(TypedDict, total=False):
    """What went wrong in a case, as data: the parent words it for the model.

    ``kind``: ``unwritten``, ``read_before_write``, ``read_outside``, ``mismatch``,
    ``outside_subset``, ``outside_buffer``, ``late_write``, ``stale`` or ``nondeterministic``.
    """

    kind: str
    connector: str  #: the output connector (element problems)
    container: str  #: the container (problems outside the connectors' data)
    index: list[int]  #: the first wrong element, in the connector's shape
    element: int  #: the first wrong element, in the flat container
    count: int
    elements: int
    expected: Any
    got: Any
    max_error: float | str
    rtol: float
    not_finite: int
    scale: float
    who: str
    side: str  #: "before" or "after" the buffer
    input: bool
    threads: Any
    runs: int
    single_ok: bool
    was: str  #: the kind it had before it was found to be stale or nondeterministic
    again: bool
    first_seed: int
    seed: int


class CaseRecord(TypedDict, total=False):
    """The child's record of one case, in the order of the job's cases."""

    seed: int
    sizes: dict[str, int]
    skipped: str
    problem: Problem
    call_seconds: list[float]
    candidate_seconds: list[float]
    reference_seconds: list[float]
    reads_outside: list[str]
    bench: bool
    outputs: dict[str, Any]  #: inside the child only (removed before the record is written)
    returned: dict[str, Any]  #: inside the child only


class Job(TypedDict, total=False):
    """The JSON job the parent writes for one child run (see :func:`run_job`)."""

    mode: str  #: "verify" or "time"
    repeats: int
    warmup: int
    min_sample_seconds: float
    threads: int
    candidate: dict[str, Any]  #: the library spec
    reference: dict[str, Any] | None
    cases: list[Case]
    bench: dict[str, Any] | None
    save_outputs: str
    phase_file: str
    fault_file: str
    result_file: str
    limits: dict[str, Any]


class ChildResult(TypedDict, total=False):
    """What the child writes back: the case records, the bench section's figures, or an error."""

    mode: str
    cases: list[CaseRecord]
    bench: dict[str, Any] | None
    threads: dict[str, Any]
    error: str
    message: str


# ----------------------------------------------------------------------------- inputs (shared with the parent)
#: Input distributions, by name (``case["distribution"]``; ``unit`` when absent). Each rung runs
#: ``unit``; the parent adds cases with the others (:mod:`dace_ai.checking.distributions`).
#: ``magnitude`` scales ``large`` and bounds ``heavy``. Integer inputs take ``zeros``, ``ties`` and
#: ``edge``; under the float-only ones (``small``, ``large``, ``heavy``) they keep ``unit`` values.
DISTRIBUTIONS = ("unit", "small", "large", "zeros", "ties", "heavy", "edge")
_STREAM = {name: index for index, name in enumerate(DISTRIBUTIONS)}


def _unit(rng: np.random.Generator, dtype: np.dtype, count: int) -> np.ndarray:
    """[-1, 1) for floats (both parts of complex), small integers otherwise."""
    if dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, count).astype(dtype)
    if dtype.kind == "c":
        return (rng.uniform(-1.0, 1.0, count) + 1j * rng.uniform(-1.0, 1.0, count)).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, count).astype(dtype)
    if dtype.kind == "u":
        return rng.integers(0, 10, count).astype(dtype)
    return rng.integers(-10, 11, count).astype(dtype)


def _edges(dtype: np.dtype) -> np.ndarray:
    """An integer type's extreme values and the values next to them and to zero."""
    info = np.iinfo(dtype)
    values = {info.min, info.min + 1, info.max - 1, info.max, 0, 1} | ({-1} if info.min < 0 else set())
    return np.array(sorted(values), dtype=dtype)


def random_values(rng: np.random.Generator, dtype: np.dtype, count: int, distribution: str = "unit",
                  magnitude: float = 1.0) -> np.ndarray:
    """Values of one input container drawn from ``distribution`` (see :data:`DISTRIBUTIONS`)."""
    dtype = np.dtype(dtype)
    unit = _unit(rng, dtype, count)
    floating = dtype.kind in "fc"
    if distribution == "unit" or dtype.kind == "b" and distribution != "zeros":
        return unit
    if distribution == "zeros":  # half the elements exactly zero (some of them -0.0), the rest unit values
        zero = rng.random(count) < 0.5
        out = np.where(zero, np.zeros(1, dtype), unit).astype(dtype)
        if floating:
            out[zero & (rng.random(count) < 0.3)] *= -1  # 0.0 * -1 = -0.0
        return out
    if distribution == "ties":  # every element one of four values: equal keys, equal maxima
        return rng.choice(unit[:4] if count >= 4 else unit, count).astype(dtype)
    if distribution == "edge":
        return rng.choice(_edges(dtype), count).astype(dtype) if dtype.kind in "iu" else unit
    if not floating:
        return unit
    if distribution == "small":
        return (unit * 1e-3).astype(dtype)
    if distribution == "large":
        return (unit * magnitude).astype(dtype)
    if distribution == "heavy":  # Cauchy: most values near 1, a few up to the bound
        draw = rng.standard_cauchy(count)
        if dtype.kind == "c":
            draw = draw + 1j * rng.standard_cauchy(count)
            return (np.clip(draw.real, -magnitude, magnitude) + 1j * np.clip(draw.imag, -magnitude, magnitude)
                    ).astype(dtype)
        return np.clip(draw, -magnitude, magnitude).astype(dtype)
    raise ValueError(f"unknown input distribution {distribution!r}")


def fill_values(dtype: np.dtype, count: int) -> np.ndarray:
    """``count`` elements of the fill pattern outputs hold before every call (:data:`OUTPUT_NAN`, or 0xA5 bytes)."""
    dtype = np.dtype(dtype)
    half = dtype.itemsize // 2 if dtype.kind == "c" else dtype.itemsize
    if dtype.kind in "fc" and half in OUTPUT_NAN:
        words = np.full(count * (2 if dtype.kind == "c" else 1), OUTPUT_NAN[half], dtype=_WORDS[half])
        return words.view(dtype).copy()
    return np.frombuffer(bytes([CANARY]) * (dtype.itemsize * count), dtype=dtype).copy()


def case_inputs(case: Case) -> dict[str, np.ndarray]:
    """The initial contents of every container of a case, flat: inputs drawn from its seed and distribution.

    ``unit`` cases draw from the seed alone (the same inputs as ever); the other
    distributions from a stream of their own per seed. Outputs hold the fill pattern.
    """
    distribution = case.get("distribution") or "unit"
    stream = case["seed"] if distribution == "unit" else [case["seed"], _STREAM[distribution]]
    rng = np.random.default_rng(stream)
    magnitude = float(case.get("magnitude") or 1.0)
    data = {}
    for cont in case["containers"]:
        if cont["input"]:
            data[cont["name"]] = random_values(rng, cont["dtype"], cont["elements"], distribution, magnitude)
        else:
            data[cont["name"]] = fill_values(cont["dtype"], cont["elements"])
    return data


def view(flat: np.ndarray, conn: dict[str, Any]) -> np.ndarray:
    """The elements a connector sees: offset, shape and element strides into its container."""
    if not conn["shape"]:
        return flat[conn["offset"]:conn["offset"] + 1].reshape(())
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat[conn["offset"]:], shape=tuple(conn["shape"]),
                                           strides=tuple(s * item for s in conn["strides"]), writeable=False)


# ----------------------------------------------------------------------------- guarded buffers
class _Libc:
    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.mmap = libc.mmap
        self.mmap.restype = ctypes.c_void_p
        self.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        self.mprotect = libc.mprotect
        self.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.munmap = libc.munmap
        self.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


_libc: _Libc | None = None


class GuardedBuffer:
    """``nbytes`` of memory followed by inaccessible pages; slack on both sides holds the canary."""

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
        self.addr = addr
        if _libc.mprotect(addr + self.body, GUARD, _PROT_NONE) != 0:
            raise OSError(ctypes.get_errno(), "mprotect failed")
        self.start = (addr + self.body - self.nbytes) & ~(ALIGN - 1)
        self.raw = np.ctypeslib.as_array((ctypes.c_ubyte * self.body).from_address(addr))
        self.poison = POISON if self.dtype.kind in "fc" else CANARY
        self.raw[:] = self.poison
        lead = self.start - addr
        self.array = self.raw[lead:lead + self.nbytes].view(self.dtype)[:elements]

    def layout(self) -> dict[str, Any]:
        return {"name": self.name, "start": self.start, "end": self.start + self.nbytes,
                "guard": [self.addr + self.body, self.addr + self.total], "lead": self.addr}

    def slack_intact(self) -> str | None:
        """'before' or 'after' when canary bytes around the buffer changed, else None."""
        lead = self.start - self.addr
        if np.any(self.raw[:lead] != self.poison):
            return "before"
        if np.any(self.raw[lead + self.nbytes:] != self.poison):
            return "after"
        return None

    def free(self) -> None:
        self.array = self.raw = None  # type: ignore[assignment]
        _libc.munmap(self.addr, self.total)  # type: ignore[union-attr]


# ----------------------------------------------------------------------------- programs
class Candidate:
    """The candidate library's C entry points (written by the parent around the answer's code)."""

    def __init__(self, spec: dict[str, Any], fault_fd: int) -> None:
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

    def prepare(self, case: dict[str, Any], buffers: dict[str, GuardedBuffer]) -> Any:
        values = case["values"]
        syms = (ctypes.c_double * max(1, len(self.spec["symbols"])))(*[values[s] for s in self.spec["symbols"]])
        params = (ctypes.c_double * max(1, len(self.spec["params"])))(*[values[p] for p in self.spec["params"]])
        conns = {c["name"]: c for c in case["connectors"]}
        ptrs = (ctypes.c_void_p * max(1, len(self.spec["connectors"])))()
        for i, name in enumerate(self.spec["connectors"]):
            buf = buffers[conns[name]["container"]]
            ptrs[i] = buf.start + conns[name]["offset"] * buf.dtype.itemsize
        state = self.init(syms)
        return state, syms, params, ptrs

    def call(self, prepared: Any) -> None:
        state, syms, params, ptrs = prepared
        self.run(state, ptrs, syms, params)

    def finish(self, prepared: Any) -> None:
        self.exit(prepared[0], prepared[1])


def _ctype(name: str) -> Any:
    """A ctypes type by its name as the parent recorded it (``c_int``, ``c_double``, ...)."""
    value = getattr(ctypes, name, None)
    if not (isinstance(value, type) and issubclass(value, ctypes._SimpleCData)):
        raise TypeError(f"unknown argument type {name!r}")
    return value


class Reference:
    """A program DaCe built from the node's native expansion: ``__dace_init``/``__program``/``__dace_exit``."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.lib = ctypes.CDLL(spec["library"], mode=os.RTLD_NOW | os.RTLD_LOCAL)
        name = spec["name"]
        self.init = self.lib[f"__dace_init_{name}"]
        self.init.restype = ctypes.c_void_p
        self.program = self.lib[f"__program_{name}"]
        self.exit = self.lib[f"__dace_exit_{name}"]
        self.exit.restype = ctypes.c_int
        self.spec = spec

    def prepare(self, case: dict[str, Any], buffers: dict[str, GuardedBuffer]) -> Any:
        values = case["values"]
        init_args = [_ctype(t)(values[n]) for n, t in self.spec["init"]]
        args = [ctypes.c_void_p(buffers[n].start) if t == "array" else _ctype(t)(values[n])
                for n, t in self.spec["args"]]
        handle = self.init(*init_args)
        if not handle:
            raise RuntimeError("the reference program failed to initialise")
        return ctypes.c_void_p(handle), args

    def call(self, prepared: Any) -> None:
        handle, args = prepared
        self.program(handle, *args)

    def finish(self, prepared: Any) -> None:
        self.exit(prepared[0])


# ----------------------------------------------------------------------------- comparison
_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _words(values: np.ndarray) -> np.ndarray:
    """Each element's bytes as one unsigned word (or a row of bytes for other sizes), same shape."""
    flat = np.ascontiguousarray(values)
    word = _WORDS.get(flat.dtype.itemsize)
    if word is not None:
        return flat.view(word).reshape(values.shape)
    return flat.view(np.uint8).reshape(values.shape + (flat.dtype.itemsize,))


def _halves(values: np.ndarray) -> tuple[np.ndarray, int] | None:
    """The bits of each float (each part of a complex) as unsigned words, last axis the parts; None for others."""
    kind, size = values.dtype.kind, values.dtype.itemsize
    half = size // 2 if kind == "c" else size
    if kind not in "fc" or half not in OUTPUT_NAN:
        return None
    words = np.ascontiguousarray(values).view(_WORDS[half]).reshape(values.shape + ((2,) if kind == "c" else (1,)))
    return words, half


def is_fill(values: np.ndarray) -> np.ndarray:
    """Elements that still hold the exact fill pattern of :func:`fill_values` (never written)."""
    split = _halves(values)
    if split is not None:
        words, half = split
        return np.all(words == words.dtype.type(OUTPUT_NAN[half]), axis=-1)
    words = _words(values)
    if words.ndim == values.ndim:
        return words == words.dtype.type(int.from_bytes(bytes([CANARY]) * words.dtype.itemsize, "little"))
    return np.all(words == CANARY, axis=-1)


def fill_derived(values: np.ndarray) -> np.ndarray:
    """Float elements holding a NaN computed from the fill pattern: its payload, quieted or negated.

    Arithmetic on a NaN returns it quieted with its payload (x86, Arm), so an output read
    before it was written shows the pattern's payload with the quiet (or sign) bit set.
    """
    split = _halves(values)
    if split is None:
        return np.zeros(values.shape, bool)
    words, half = split
    keep = words.dtype.type(~(_QUIET_BIT[half] | _SIGN_BIT[half]) & ((1 << (8 * half)) - 1))
    pattern = words.dtype.type(OUTPUT_NAN[half])
    derived = ((words & keep) == (pattern & keep)) & (words != pattern)
    return np.any(derived, axis=-1)


def slack_derived(values: np.ndarray) -> np.ndarray:
    """Float elements holding the NaN of the slack around buffers (0xFF...): read from outside a buffer."""
    split = _halves(values)
    if split is None:
        return np.zeros(values.shape, bool)
    words, half = split
    return np.any(words == words.dtype.type((1 << (8 * half)) - 1), axis=-1)


def _integer_read_first(expected: np.ndarray, got: np.ndarray, wrong: np.ndarray) -> bool:
    """Whether every wrong integer element is the right value plus the fill pattern (accumulated into it)."""
    if got.dtype.kind not in "iu" or expected.dtype != got.dtype or not np.any(wrong):
        return False
    word = _WORDS[got.dtype.itemsize]
    fill = word(int.from_bytes(bytes([CANARY]) * got.dtype.itemsize, "little"))
    with np.errstate(over="ignore"):
        offset = np.ascontiguousarray(got).view(word) - np.ascontiguousarray(expected).view(word)
    return bool(np.all(offset.reshape(got.shape)[wrong] == fill))


def _changed(now: np.ndarray, before: np.ndarray) -> np.ndarray:
    """Elements whose bytes differ (NaN-safe, unlike ``!=`` on floats)."""
    a, b = _words(now), _words(before)
    return a != b if a.ndim == now.ndim else np.any(a != b, axis=-1)


def _scalar(value: Any) -> Any:
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, complex):
        return [value.real, value.imag]
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return value


def compare(conn: Connector, expected: np.ndarray, got: np.ndarray, rtol: float) -> Problem | None:
    """The first problem between ``expected`` and ``got`` of one output connector, or None.

    Kinds: ``unwritten`` (still the fill pattern), ``read_before_write`` (a NaN computed
    from the fill pattern, or integers offset by it, where the reference has a value),
    ``mismatch`` (beyond the relative tolerance, or NaN/infinite where the reference is finite).
    """
    if expected.dtype == got.dtype and np.array_equal(expected, got):  # the common case, without temporaries
        return None

    def elements(kind: str, where: np.ndarray) -> dict[str, Any]:
        """A problem of ``kind`` at the elements ``where`` (first index, count, the expected value there)."""
        index = np.argwhere(where)[0] if got.ndim else []
        return {"kind": kind, "connector": conn["name"], "index": [int(i) for i in index],
                "count": int(np.count_nonzero(where)), "elements": int(got.size),
                "expected": _scalar(expected[tuple(int(i) for i in index)])}

    expected_fill = is_fill(expected) if expected.dtype == got.dtype else np.zeros(expected.shape, bool)
    unwritten = is_fill(got) & ~expected_fill
    if np.any(unwritten):
        return elements("unwritten", unwritten)
    check = ~expected_fill
    kind = np.dtype(got.dtype).kind
    if kind in "fc":
        for name, derived in (("read_before_write", fill_derived), ("read_outside", slack_derived)):
            found = check & derived(got) & ~np.isnan(expected)
            if np.any(found):
                return elements(name, found)
        exp = expected.astype(np.complex128 if kind == "c" else np.float64)
        val = got.astype(exp.dtype)
        both_nan = np.isnan(exp) & np.isnan(val)
        same_inf = np.isinf(exp) & (exp == val)
        finite = np.isfinite(exp) & np.isfinite(val)
        scale = float(np.max(np.abs(exp[np.isfinite(exp)]), initial=0.0))
        with np.errstate(invalid="ignore", over="ignore"):
            error = np.where(finite, np.abs(val - exp), np.inf)
        error = np.where(both_nan | same_inf, 0.0, error)
        tolerance = rtol * (np.abs(np.where(np.isfinite(exp), exp, 0)) + scale) + np.finfo(np.float64).tiny
        wrong = check & (error > tolerance)
        max_error = float(np.max(np.where(check, error, 0.0), initial=0.0))
    else:
        wrong = check & (expected != got)
        if _integer_read_first(expected, got, wrong):
            return elements("read_before_write", wrong)
        max_error = float(np.max(np.abs(expected.astype(np.float64) - got.astype(np.float64)), initial=0.0)) \
            if kind != "b" else float(np.count_nonzero(wrong))
    if not np.any(wrong):
        return None
    index = np.argwhere(wrong)[0] if got.ndim else []
    key = tuple(int(i) for i in index)
    problem: Problem = {"kind": "mismatch", "connector": conn["name"], "index": list(key),
               "count": int(np.count_nonzero(wrong)), "elements": int(got.size), "expected": _scalar(expected[key]),
               "got": _scalar(got[key]), "max_error": max_error if np.isfinite(max_error) else str(max_error),
               "rtol": rtol}
    if kind in "fc":
        problem["not_finite"] = int(np.count_nonzero(check & np.isfinite(expected) & ~np.isfinite(got)))
        problem["scale"] = scale
    return problem


def _outside_problem(case: Case, buffers: dict[str, GuardedBuffer], initial: dict[str, np.ndarray],
                     who: str) -> Problem | None:
    """Writes to inputs, outside the output subsets, or into the slack around a buffer."""
    covered: dict[str, np.ndarray] = {}
    for conn in case["connectors"]:
        if conn["direction"] == "out":
            mask = covered.setdefault(conn["container"], np.zeros(len(initial[conn["container"]]), bool))
            if conn["shape"]:
                np.lib.stride_tricks.as_strided(mask[conn["offset"]:], shape=tuple(conn["shape"]),
                                                strides=tuple(conn["strides"]))[...] = True
            else:
                mask[conn["offset"]] = True
    for name, buf in buffers.items():
        side = buf.slack_intact()
        if side is not None:
            return {"kind": "outside_buffer", "who": who, "container": name, "side": side}
        changed = _changed(buf.array, initial[name])
        if name in covered:
            changed &= ~covered[name]
        if np.any(changed):
            return {"kind": "outside_subset", "who": who, "container": name,
                    "element": int(np.argwhere(changed)[0][0]), "count": int(np.count_nonzero(changed)),
                    "input": name not in covered}
    return None


# ----------------------------------------------------------------------------- driver
class Phase:
    """Appends one JSON line per step to the phase file (read by the parent if the child dies)."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def __call__(self, **record: Any) -> None:
        os.write(self.fd, (json.dumps(record) + "\n").encode())


def _apply_limits(limits: dict[str, Any]) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.get("cpu_seconds"):
        cpu = int(limits["cpu_seconds"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    if limits.get("memory_bytes"):
        memory = int(limits["memory_bytes"])
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def _allocate(case: dict[str, Any], data: dict[str, np.ndarray]) -> dict[str, GuardedBuffer]:
    buffers = {}
    for cont in case["containers"]:
        buf = GuardedBuffer(cont["name"], cont["dtype"], cont["elements"])
        buf.array[:] = data[cont["name"]]
        buffers[cont["name"]] = buf
    return buffers


def _free(buffers: dict[str, GuardedBuffer]) -> None:
    for buf in buffers.values():
        buf.free()


@contextlib.contextmanager
def _allocated(case: dict[str, Any], data: dict[str, np.ndarray]) -> Iterator[dict[str, GuardedBuffer]]:
    """Guarded buffers for one run that are freed when the block ends, however it ends. Runs whose
    buffers outlive the block (kept for timing, or freed only after the next run is allocated so it
    gets new addresses) pair :func:`_allocate` and :func:`_free` themselves."""
    buffers = _allocate(case, data)
    try:
        yield buffers
    finally:
        _free(buffers)


class Threads:
    """The OpenMP thread count of the calls that follow.

    The parent starts the child with ``OMP_NUM_THREADS`` set to the all-core count,
    so the OpenMP runtime reads it when a library first loads it. Other counts are
    set through that runtime's ``omp_set_num_threads`` (found among the loaded
    libraries after loading), which governs the parallel regions the calling thread
    starts next. Code without OpenMP has no runtime loaded and nothing to set.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.runtime: str | None = None
        self._set: Any = None

    def attach(self) -> None:
        if self._set is not None:
            return
        try:
            with open("/proc/self/maps", encoding="utf-8") as maps:
                paths = {line.split()[-1] for line in maps if "/" in line}
        except OSError:
            return
        for path in sorted(paths):
            name = os.path.basename(path)
            if name.startswith(("libgomp", "libomp", "libiomp")):
                try:
                    lib = ctypes.CDLL(path)
                    self._set = lib.omp_set_num_threads
                    self._set.argtypes = [ctypes.c_int]
                    self.runtime = name
                    return
                except (OSError, AttributeError):
                    continue

    def use(self, count: int | None) -> None:
        if self._set is not None:
            self._set(int(count or self.count))


def _time(program: Any, prepared: Any, job: dict[str, Any]) -> list[float]:
    """Seconds per run: warm-up, then ``repeats`` samples of enough calls to exceed the timer's resolution."""
    for _ in range(job.get("warmup", 1)):
        program.call(prepared)
    calls, floor = 1, job.get("min_sample_seconds", 1e-3)
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            program.call(prepared)
        spent = time.perf_counter() - start
        if spent >= floor or calls >= 1 << 20:
            break
        calls *= max(2, int(floor / max(spent, 1e-9)) + 1) if spent > 0 else 10
    samples = [spent / calls]
    for _ in range(max(0, job.get("repeats", 5) - 1)):
        start = time.perf_counter()
        for _ in range(calls):
            program.call(prepared)
        samples.append((time.perf_counter() - start) / calls)
    return samples


#: One timed sample of the bench lasts at least this long (batches of calls for fast kernels).
MIN_SAMPLE_SECONDS = 2e-3
#: Seconds the timed samples of the slower side may take in all (fewer samples for slow kernels, at least 3).
BUDGET_SECONDS = 3.0


def interleaved(calls: dict[str, Any], repeats: int, phase: Any, warm: dict[str, float] | None = None) -> dict[str, Any]:
    """Per-call seconds of each side: warm-up, a batch per side for the timer's resolution, interleaved samples.

    ``warm``: sides that just ran on these buffers with these threads, and the seconds
    of their last call (their warm-up and batch estimate are done already).
    """
    clock = time.perf_counter
    resolution = time.get_clock_info("perf_counter").resolution
    batch: dict[str, int] = {}
    once: dict[str, float] = {}
    # a fault while the native side or a baseline runs is theirs, not the candidate's
    who = {"native": "reference", **{label: "baseline" for label in calls if label.startswith("baseline:")}}
    for label, call in calls.items():
        phase(who=who.get(label, label), step="time", label=label)
        if warm and label in warm:
            once[label] = max(warm[label], resolution)
        else:
            call()  # warm-up
            t0 = clock()
            call()
            once[label] = max(clock() - t0, resolution)
        batch[label] = max(1, int(min(10_000, np.ceil(max(MIN_SAMPLE_SECONDS, 1000 * resolution) / once[label]))))
    slowest = max(once.values())
    repeats = max(min(3, repeats), min(repeats, int(BUDGET_SECONDS / max(slowest, 1e-9))))
    samples: dict[str, list[float]] = {label: [] for label in calls}
    for _ in range(repeats):
        for label, call in calls.items():
            phase(who=who.get(label, label), step="time", label=label)
            n = batch[label]
            t0 = clock()
            for _ in range(n):
                call()
            samples[label].append((clock() - t0) / n)
    return {"samples": samples, "batch": batch, "timer_resolution": resolution}


def measure_bandwidth(nbytes: int) -> float:
    """Bytes per second that NumPy streams (read + write) for a working set of ``nbytes``; best of several."""
    n = max(nbytes // 16, 1 << 16)
    src = np.ones(n, dtype=np.float64)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(max(3, min(50, int(2e8 // max(src.nbytes, 1))))):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best


def _bench_lock(path: str | None) -> Any:
    """The machine-wide lock around timed runs, so two benches never share the cores."""
    import contextlib

    if not path:
        return contextlib.nullcontext()
    from filelock import FileLock

    return FileLock(path)


def _inputs(case: dict[str, Any]) -> dict[str, np.ndarray]:
    """The case's initial container contents: given files (``case["inputs"]``) or drawn from its seed."""
    data = case_inputs(case)
    for name, path in (case.get("inputs") or {}).items():
        data[name] = np.load(path, allow_pickle=False).reshape(-1).astype(data[name].dtype, copy=False)
    return data


def _output_containers(case: dict[str, Any]) -> list[str]:
    return [c["name"] for c in case["containers"] if c["output"]]


def _save(path: str, value: np.ndarray) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as handle:
        np.save(handle, value, allow_pickle=False)
    os.replace(tmp, path)


def reference_outputs(reference: Any, case: dict[str, Any], phase: Phase, threads: Threads) -> dict[str, np.ndarray]:
    """The reference's output containers (flat) for one case: from its cache files, else run and cached.

    Runs before any candidate code is loaded into this process, so what is cached
    comes from the reference alone.
    """
    cache = case.get("reference_cache") or {}
    names = _output_containers(case)
    if cache and all(os.path.isfile(cache.get(n, "")) for n in names):
        try:
            return {n: np.load(cache[n], allow_pickle=False) for n in names}
        except (OSError, ValueError):
            pass
    threads.use(None)
    with _allocated(case, _inputs(case)) as buffers:
        phase(who="reference", step="run", seed=case["seed"], sizes=case["sizes"],
              buffers=[b.layout() for b in buffers.values()])
        prepared = reference.prepare(case, buffers)
        reference.call(prepared)
        reference.finish(prepared)
        phase(who="reference", step="done", seed=case["seed"], sizes=case["sizes"])
        outputs = {n: buffers[n].array.copy() for n in names}
    for name in names:
        if cache.get(name):
            try:
                _save(cache[name], outputs[name])
            except OSError:
                pass
    return outputs


def _expected(case: dict[str, Any], conn: dict[str, Any], native: dict[str, np.ndarray] | None) -> np.ndarray | None:
    if native is not None:
        return np.asarray(view(native[conn["container"]], conn))
    files = case.get("expected") or {}
    if conn["name"] in files:
        return np.load(files[conn["name"]], allow_pickle=False)
    return None


def _nan_reads(case: dict[str, Any], outs: dict[str, np.ndarray], native: dict[str, np.ndarray] | None) -> list[str]:
    """Output containers holding a NaN the reference's do not: poison read from outside a buffer."""
    found = []
    for conn in case["connectors"]:
        got = outs.get(conn["name"])
        if conn["direction"] != "out" or got is None or got.dtype.kind not in "fc" or not np.isnan(got).any():
            continue
        expected = _expected(case, conn, native)
        if expected is None or not np.isnan(expected).any():
            found.append(conn["container"])
    return found


def _outputs_now(case: dict[str, Any], buffers: dict[str, GuardedBuffer]) -> dict[str, np.ndarray]:
    """A copy of every output container, taken the moment the call returned: what is judged."""
    return {name: buffers[name].array.copy() for name in _output_containers(case)}


def _written_late(buffers: dict[str, GuardedBuffer], returned: dict[str, np.ndarray],
                  wait: float = 0.0) -> dict[str, Any] | None:
    """An output container that changed after the call had returned: work left running (a detached thread)."""
    if wait:
        time.sleep(wait)
    for name, before in returned.items():
        changed = _changed(buffers[name].array, before)
        if np.any(changed):
            return {"kind": "late_write", "container": name, "count": int(np.count_nonzero(changed)),
                    "element": int(np.argwhere(changed)[0][0])}
    return None


def _connector_views(case: dict[str, Any], containers: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {c["name"]: np.array(view(containers[c["container"]], c)) for c in case["connectors"]
            if c["direction"] == "out"}


def _against_reference(case: dict[str, Any], outs: dict[str, np.ndarray],
                       native: dict[str, np.ndarray] | None) -> dict[str, Any] | None:
    """The first output connector of ``case`` that differs from the reference, as a problem."""
    for conn in case["connectors"]:
        if conn["direction"] != "out":
            continue
        expected = _expected(case, conn, native)
        if expected is None:
            continue
        problem = compare(conn, np.asarray(expected), outs[conn["name"]], case["rtol"][conn["name"]])
        if problem is not None:
            return problem
    return None


def _call_again(case: dict[str, Any], candidate: Any, prepared: Any, buffers: dict[str, GuardedBuffer],
                native: dict[str, np.ndarray] | None, phase: Phase) -> dict[str, Any] | None:
    """A second call on the same buffers and state with other inputs (``case["again"]``), judged like the first.

    Results kept from an earlier call (a static cache keyed on the size or the
    addresses) come out as the first call's outputs and are refused here.
    """
    again = case["again"]
    data = _inputs(again)
    for name, buf in buffers.items():
        buf.array[:] = data[name]
    phase(who="candidate", step="run", seed=again["seed"], sizes=again["sizes"], again=True,
          buffers=[b.layout() for b in buffers.values()])
    candidate.call(prepared)
    returned = _outputs_now(again, buffers)
    problem = _outside_problem(again, buffers, data, "candidate")
    if problem is None:
        problem = _against_reference(again, _connector_views(again, returned), native)
    if problem is None:
        return None
    return {**problem, "again": True, "was": problem["kind"], "kind": "stale", "first_seed": case["seed"],
            "seed": again["seed"]}


def _save_outputs(job: Job, case: dict[str, Any], returned: dict[str, np.ndarray]) -> None:
    """The candidate's outputs as .npy files, when the parent asked (whole programs it judges itself)."""
    if job.get("save_outputs"):
        for name in _output_containers(case):
            _save(os.path.join(job["save_outputs"], f"{case.get('id', 0)}-candidate-{name}.npy"), returned[name])


def _first_run_problem(problem: Problem, case: dict[str, Any], candidate: Any, native: dict[str, np.ndarray] | None,
                       phase: Phase, threads: Threads, job: Job, data: dict[str, np.ndarray],
                       buffers: dict[str, GuardedBuffer], returned: dict[str, np.ndarray],
                       count: int | None) -> Problem:
    """What to report for a first run that differs from the reference: work still running after
    the call returned explains a wrong result best; a wrong result with several threads that is
    right with one is the threads' doing (not deterministic), which says where to look."""
    if job["mode"] != "time":  # an answer that returns before its work is done
        problem = _written_late(buffers, returned, wait=0.05) or problem
    if problem["kind"] == "late_write":
        return problem
    problem = {**problem, "threads": count or threads.count}
    if (count or threads.count) > 1 and threads.runtime is not None \
            and _right_with_one_thread(case, candidate, native, phase, threads, data):
        problem = {**problem, "kind": "nondeterministic", "was": problem["kind"],
                   "threads": [count or threads.count, 1], "runs": 2, "single_ok": True}
    return problem


def _differs_from_first(case: dict[str, Any], first: dict[str, np.ndarray], outs: dict[str, np.ndarray],
                        counts: list[int]) -> Problem | None:
    """A later thread run's outputs against the first run's: a difference beyond the tolerance
    means the result depends on the threads' timing. ``counts``: the thread counts run so far."""
    for conn in case["connectors"]:
        if conn["direction"] != "out":
            continue
        problem = compare(conn, first[conn["name"]], outs[conn["name"]], case["rtol"][conn["name"]])
        if problem is not None:
            return {**problem, "kind": "nondeterministic", "was": problem["kind"], "threads": counts,
                    "runs": len(counts)}
    return None


def run_case(case: Case, candidate: Any, native: dict[str, np.ndarray] | None, phase: Phase,
             threads: Threads, job: Job, keep: bool = False,
             again_native: dict[str, np.ndarray] | None = None) -> tuple[CaseRecord, Any]:
    """Run the candidate on one case (once per thread count of ``case["threads"]``) and judge it.

    What is judged is what the outputs held the moment the call returned; an output
    that changes afterwards is refused as work left running. The first run is
    compared with the reference, then (``case["again"]``) called a second time on the
    same buffers with other inputs; every further run is compared with the first (a
    difference beyond the tolerance: the result depends on the threads' timing).
    Returns the record and, with ``keep``, the first run's buffers and prepared call
    (for timing).
    """
    data = _inputs(case)
    record: CaseRecord = {"seed": case["seed"], "sizes": case["sizes"], "call_seconds": []}
    # no OpenMP runtime loaded: the thread count changes nothing, run once
    counts = (case.get("threads") or [None]) if threads.runtime is not None else [None]
    judge = case.get("judge", True)  # False: whole programs, whose outputs the parent judges
    first: dict[str, np.ndarray] = {}
    kept: Any = None
    previous: dict[str, GuardedBuffer] | None = None
    for run, count in enumerate(counts):
        threads.use(count)
        buffers = _allocate(case, data)
        if previous is not None:  # freed only now: each run sees buffers at new addresses
            _free(previous)
            previous = None
        phase(who="candidate", step="run", seed=case["seed"], sizes=case["sizes"], threads=count or threads.count,
              buffers=[b.layout() for b in buffers.values()])
        prepared = candidate.prepare(case, buffers)
        start = time.perf_counter()
        candidate.call(prepared)
        record["call_seconds"].append(time.perf_counter() - start)
        returned = _outputs_now(case, buffers)
        if job["mode"] == "time" and run == 0:
            record["candidate_seconds"] = _time(candidate, prepared, job)
        problem = _outside_problem(case, buffers, data, "candidate") if judge else None
        if problem is None and judge and job["mode"] != "time":
            problem = _written_late(buffers, returned)
        outs = _connector_views(case, returned)
        if problem is None and judge and run == 0:
            problem = _against_reference(case, outs, native)
            if problem is not None:
                problem = _first_run_problem(problem, case, candidate, native, phase, threads, job, data,
                                             buffers, returned, count)
            if problem is None and case.get("again") and not keep:
                problem = _call_again(case, candidate, prepared, buffers, again_native, phase)
        if not (keep and run == 0):
            candidate.finish(prepared)
        phase(who="candidate", step="done", seed=case["seed"], sizes=case["sizes"])
        if run == 0:
            _save_outputs(job, case, returned)
        if keep and run == 0 and problem is None:
            kept = (buffers, prepared)
        else:
            previous = buffers
        if run == 0:
            record["returned"] = outs
        if problem is not None:
            record["problem"] = problem
            break
        if not judge:
            record["reads_outside"] = []
            record["outputs"] = outs
        elif run == 0:
            record["reads_outside"] = _nan_reads(case, outs, native)
            record["outputs"] = outs
            first = outs
        else:
            problem = _differs_from_first(case, first, outs, [c or threads.count for c in counts[:run + 1]])
            if problem is not None:
                record["problem"] = problem
                break
    if previous is not None:
        _free(previous)
    if kept is not None and "problem" in record:
        candidate.finish(kept[1])
        _free(kept[0])
        kept = None
    return record, kept


#: A native reference slower than this per call is timed once per node and bench size, not per candidate.
REUSE_NATIVE_SECONDS = 0.02


def _known_native(bench: dict[str, Any], min_seconds: float = REUSE_NATIVE_SECONDS) -> dict[str, Any] | None:
    """The native reference's samples an earlier candidate measured, when it is slow enough to be worth reusing."""
    path = bench.get("native_timing")
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            known = json.load(handle)
        samples = [float(x) for x in known["samples"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not samples or sorted(samples)[len(samples) // 2] < min_seconds:
        return None
    return {"samples": samples, "batch": int(known.get("batch") or 1)}


def _save_json(path: str, value: Any) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(value, handle)
    os.replace(tmp, path)


def _right_with_one_thread(case: dict[str, Any], candidate: Any, native: dict[str, np.ndarray] | None, phase: Phase,
                           threads: Threads, data: dict[str, np.ndarray]) -> bool:
    """Whether the case, wrong with all cores, comes out right with one thread (then the threads are to blame)."""
    threads.use(1)
    with _allocated(case, data) as buffers:
        phase(who="candidate", step="run", seed=case["seed"], sizes=case["sizes"], threads=1,
              buffers=[b.layout() for b in buffers.values()])
        prepared = candidate.prepare(case, buffers)
        candidate.call(prepared)
        candidate.finish(prepared)
        phase(who="candidate", step="done", seed=case["seed"], sizes=case["sizes"])
        right = _outside_problem(case, buffers, data, "candidate") is None
        for conn in case["connectors"]:
            if not right or conn["direction"] != "out":
                continue
            expected = _expected(case, conn, native)
            got = np.array(view(buffers[conn["container"]].array, conn))
            right = expected is None or compare(conn, np.asarray(expected), got, case["rtol"][conn["name"]]) is None
    threads.use(None)
    return right


def _same_outputs(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=a[k].dtype.kind in "fc") for k in a)


def _input_independent(bench: dict[str, Any], natives: list[Any], outputs: list[dict[str, np.ndarray]]) -> bool:
    """Whether the candidate gave the same outputs for different inputs whose references differ
    (a result precomputed or kept, not computed from the inputs)."""
    refs_differ = True
    if natives[0] is not None and len(natives) > 1:
        refs_differ = not _same_outputs(natives[0], natives[1])
    elif bench["cases"][0].get("expected") and len(bench["cases"]) > 1:
        refs_differ = not _same_outputs(*({k: np.load(v, allow_pickle=False) for k, v in c["expected"].items()}
                                          for c in bench["cases"][:2]))
    has_inputs = any(c["direction"] == "in" for c in bench["cases"][0]["connectors"])
    return bool(has_inputs and len(outputs) > 1 and refs_differ
                and all(_same_outputs(outputs[0], o) for o in outputs[1:]))


def _native_samples(bench: dict[str, Any], known: dict[str, Any] | None, timed: dict[str, Any],
                    result: dict[str, Any]) -> list[float] | None:
    """The native reference's samples: reused from an earlier candidate (a slow reference), or
    timed now and saved for the node's next candidate."""
    native_samples = timed["samples"].get("native")
    if known is not None:
        native_samples = known["samples"]
        timed["batch"]["native"] = known["batch"]
        result["native_reused"] = True
    elif native_samples and bench.get("native_timing"):
        try:
            _save_json(bench["native_timing"], {"samples": native_samples, "batch": timed["batch"]["native"]})
        except OSError:
            pass
    return native_samples


def _baseline_samples(sides: list[dict[str, Any]], timed: dict[str, Any]) -> tuple[dict[str, list[float]], list[str]]:
    """Each baseline's samples (timed now, or known from an earlier candidate: ``reused``); frees the
    baselines timed now and saves their samples for the node's next candidate."""
    baselines: dict[str, list[float]] = {}
    reused: list[str] = []
    for side in sides:
        label = side["label"]
        if "known" in side:
            baselines[label] = side["known"]["samples"]
            timed["batch"][label] = side["known"]["batch"]
            reused.append(label)
            continue
        samples = timed["samples"].pop(f"baseline:{label}")
        baselines[label] = samples
        timed["batch"][label] = timed["batch"].pop(f"baseline:{label}")
        side["program"].finish(side["prepared"])
        _free(side["buffers"])
        if side.get("timing"):
            try:
                _save_json(side["timing"], {"samples": samples, "batch": timed["batch"][label]})
            except OSError:
                pass
    return baselines, reused


def _time_bench(job: dict[str, Any], candidate: Any, prepared: Any, reference: Any, records: list[dict[str, Any]],
                phase: Phase, threads: Threads) -> dict[str, Any]:
    """The bench section's timing under the lock: the candidate on its kept buffers, interleaved with
    the native reference and the baselines on the same inputs and threads, and the memory bandwidth."""
    bench = job["bench"]
    result: dict[str, Any] = {}
    calls = {"candidate": lambda: candidate.call(prepared)}
    ref_held: Any = None
    if reference is not None:
        case = bench["cases"][0]
        threads.use(None)
        ref_buffers = _allocate(case, _inputs(case))
        ref_prepared = reference.prepare(case, ref_buffers)
        ref_held = (ref_buffers, ref_prepared)
        calls = {"native": lambda: reference.call(ref_prepared), **calls}
    known = _known_native(bench)
    if known is not None:  # a slow native reference timed by an earlier candidate of the node
        calls.pop("native", None)
    sides = _baseline_sides(bench, phase, threads, job)
    for side in sides:  # the same inputs, interleaved with the candidate, the same threads
        if "program" in side:
            calls[f"baseline:{side['label']}"] = (lambda s=side: s["program"].call(s["prepared"]))
    threads.use(None)
    with _bench_lock(bench.get("lock")):
        # the thread runs just called the candidate on these buffers, the last one with all cores
        last = records[0]["call_seconds"][-1] if len(records[0]["call_seconds"]) > 1 else None
        timed = interleaved(calls, int(bench.get("repeats", 7)), phase,
                            warm={"candidate": last} if last is not None else None)
        phase(who="loader", step="bandwidth")
        result["bandwidth"] = measure_bandwidth(int(bench.get("bytes") or 0))
    native_samples = _native_samples(bench, known, timed, result)
    baselines, reused = _baseline_samples(sides, timed)
    result.update(candidate=timed["samples"]["candidate"], native=native_samples,
                  batch=timed["batch"], timer_resolution=timed["timer_resolution"],
                  baselines=baselines, baselines_reused=reused)
    if ref_held is not None:
        reference.finish(ref_held[1])
        _free(ref_held[0])
    return result


def run_bench(job: dict[str, Any], candidate: Any, reference: Any, natives: list[Any], phase: Phase,
              threads: Threads) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The bench section: its cases (seeds at the bench sizes), the run rules, then the timing under the lock."""
    bench = job["bench"]
    began = time.perf_counter()
    records: list[dict[str, Any]] = []
    kept: Any = None
    for index, case in enumerate(bench["cases"]):
        record, held = run_case(case, candidate, natives[index], phase, threads, job, keep=index == 0)
        record.pop("returned", None)
        records.append(record)
        if index == 0:
            kept = held
        if "problem" in record:
            if kept is not None:
                candidate.finish(kept[1])
                _free(kept[0])
            return {}, records
    outputs = [r.pop("outputs") for r in records]
    result: dict[str, Any] = {"bytes": bench.get("bytes"), "reads_outside": sorted({c for r in records
                                                                                    for c in r["reads_outside"]}),
                              "call_seconds": records[0]["call_seconds"][:1]}
    result["input_independent"] = _input_independent(bench, natives, outputs)
    if bench.get("time") and kept is not None:
        result.update(_time_bench(job, candidate, kept[1], reference, records, phase, threads))
    if kept is not None:
        candidate.finish(kept[1])
        _free(kept[0])
    result["seconds"] = time.perf_counter() - began
    return result, records


class PythonBaseline:
    """A trusted project function timed as a baseline: a task's NumPy reference, imported by module path.

    The parent names it (``"module:function"`` of the suite's own module), never model
    text. It is called on NumPy views of the case's buffers (``arrays``: name -> shape)
    plus the scalars and sizes the task's reference takes.
    """

    def __init__(self, spec: dict[str, Any]) -> None:
        import importlib

        module, _, attribute = spec["function"].partition(":")
        function: Any = importlib.import_module(module)
        for part in attribute.split("."):
            function = getattr(function, part)
        self.function = function
        self.spec = spec

    def prepare(self, case: dict[str, Any], buffers: dict[str, GuardedBuffer]) -> Any:
        arrays = {name: buffers[name].array.reshape(shape) for name, shape in self.spec["arrays"].items()}
        return {**arrays, **self.spec.get("scalars", {})}

    def call(self, prepared: Any) -> None:
        self.function(**prepared)

    def finish(self, prepared: Any) -> None:
        return None


def _known_timing(path: str | None) -> dict[str, Any] | None:
    """A baseline's samples an earlier candidate of the node measured at this case and thread count, else None.

    Reused whatever their speed: a library baseline (OpenBLAS) does not change between
    candidates, and loading it starts its thread pool, whose spinning threads would
    cost every later candidate time and disturb its own samples.
    """
    return _known_native({"native_timing": path}, min_seconds=0.0)


def _baseline_sides(bench: dict[str, Any], phase: Phase, threads: Threads,
                    job: dict[str, Any]) -> list[dict[str, Any]]:
    """Load and prepare the bench section's baselines (DaCe's library implementations, a NumPy reference).

    Each gets its own buffers holding the first bench case's inputs (the candidate's
    and the reference's very inputs), is called once there (its outputs saved for the
    parent with ``save_outputs``: a baseline that computes something else is left
    out there), and is then timed with the other sides. A baseline whose samples an
    earlier candidate measured and that is slow is not timed again (``known``).
    """
    case = bench["cases"][0]
    sides = []
    for index, spec in enumerate(bench.get("baselines") or []):
        label = spec["label"]
        known = _known_timing(spec.get("timing"))
        if known is not None:
            sides.append({"label": label, "known": known})
            continue
        phase(who="baseline", label=label, step="load")
        program = PythonBaseline(spec) if spec.get("kind") == "python" else Reference(spec["program"])
        threads.use(None)
        buffers = _allocate(case, _inputs(case))
        prepared = program.prepare(case, buffers)
        phase(who="baseline", label=label, step="run", seed=case["seed"], sizes=case["sizes"])
        program.call(prepared)
        if job.get("save_outputs") and spec.get("kind") != "python":
            for name in _output_containers(case):
                _save(os.path.join(job["save_outputs"], f"{case.get('id', 0)}-baseline{index}-{name}.npy"),
                      buffers[name].array)
        sides.append({"label": label, "program": program, "prepared": prepared, "buffers": buffers,
                      "timing": spec.get("timing")})
    return sides


def _name_stale(record: dict[str, Any], case: dict[str, Any],
                earlier: dict[str, tuple[int, dict[str, np.ndarray]]]) -> None:
    """A wrong result that is bit for bit the candidate's result of an earlier case of the same shape: stale.

    A static cache keyed on the sizes (or a result kept from the last call) returns
    the earlier inputs' outputs for new inputs; the record's problem then says so.
    """
    returned = record.pop("returned", None)
    if returned is None:
        return
    key = json.dumps([case["sizes"], case.get("point") or {}], sort_keys=True)
    problem = record.get("problem")
    before = earlier.get(key)
    if problem is not None and problem["kind"] == "mismatch" and before is not None \
            and _same_outputs(before[1], returned):
        record["problem"] = {**problem, "kind": "stale", "was": "mismatch", "first_seed": before[0]}
    earlier[key] = (case["seed"], returned)


def _reference_for(reference: Any, case: dict[str, Any], job: dict[str, Any], phase: Phase,
                   threads: Threads) -> dict[str, np.ndarray] | None:
    """The native reference's outputs of a case (None when a reference function's files give them)."""
    if reference is None or case.get("expected"):
        return None
    outputs = reference_outputs(reference, case, phase, threads)
    if job.get("save_outputs"):
        for name, value in outputs.items():
            _save(os.path.join(job["save_outputs"], f"{case.get('id', 0)}-reference-{name}.npy"), value)
    return outputs


def _skip_reason(case: dict[str, Any], native: dict[str, np.ndarray] | None, settled: set[str]) -> str | None:
    """Why a case of an input distribution other than ``unit`` is not run, or None to run it.

    Its reference must be defined there: a reference that failed on those inputs
    (``case["unfit"]``, said by the parent) or whose outputs are not all finite skips
    the case, never fails the candidate. Of a magnitude group (the same distribution
    at falling magnitudes) only the largest magnitude whose reference is finite runs.
    """
    if (case.get("distribution") or "unit") == "unit":
        return None
    if case.get("group") and case["group"] in settled:
        return "settled"
    if case.get("unfit"):
        return str(case["unfit"])
    for conn in case["connectors"]:
        if conn["direction"] != "out":
            continue
        expected = _expected(case, conn, native)
        if expected is not None and np.asarray(expected).dtype.kind in "fc" and not np.all(np.isfinite(expected)):
            return "the reference is not finite there"
    return None


def _program(spec: dict[str, Any], fault_fd: int) -> Any:
    """The candidate side: the entry-point library of the one compile, or a program DaCe built."""
    return Reference(spec) if spec.get("kind") == "program" else Candidate(spec, fault_fd)


def run_job(job: Job) -> ChildResult:
    """Reference outputs first (before any candidate code is loaded), then the cases, then the bench section.

    ``job``: ``mode`` (``verify``: compare; ``time``: also time each side per case),
    ``candidate`` and ``reference`` (library specs), ``cases`` (each may carry
    ``threads``: thread counts of its runs, ``reference_cache``: files of the
    reference's outputs, ``expected``: files of a reference function's outputs,
    ``inputs``: files of its initial data, ``distribution`` and ``magnitude``: how its
    inputs are drawn, ``group``: its magnitude group, ``unfit``: why its reference is not
    defined there, ``again``: a case of other inputs for a second call on the same
    buffers), ``threads`` (the all-core count), ``bench`` (cases at the bench sizes,
    whether to time, repeats, lock file, bytes per call). Every case gets a record, in
    order: a skipped one says why (``skipped``).
    """
    phase = Phase(job["phase_file"])
    fault_fd = os.open(job["fault_file"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    threads = Threads(int(job.get("threads") or os.cpu_count() or 1))
    reference = None
    if job.get("reference"):
        phase(who="loader", step="reference")
        reference = Reference(job["reference"])
        threads.attach()
    bench_cases = (job.get("bench") or {}).get("cases", [])
    natives: list[Any] = []
    for case in [*job["cases"], *bench_cases]:
        natives.append(_reference_for(reference, case, job, phase, threads))
    again_natives = {index: _reference_for(reference, case["again"], job, phase, threads)
                     for index, case in enumerate(job["cases"]) if case.get("again")}
    phase(who="loader", step="candidate")
    candidate = _program(job["candidate"], fault_fd)
    threads.attach()
    results: list[CaseRecord] = []
    out: ChildResult = {"mode": job["mode"], "cases": results, "bench": None,
                           "threads": {"count": threads.count, "runtime": threads.runtime}}
    settled: set[str] = set()  # magnitude groups whose largest finite magnitude has run
    earlier: dict[str, tuple[int, dict[str, np.ndarray]]] = {}  # the candidate's last outputs per sizes, point
    for index, case in enumerate(job["cases"]):
        skip = _skip_reason(case, natives[index], settled)
        if skip is not None:
            results.append({"seed": case["seed"], "sizes": case["sizes"], "skipped": skip})
            continue
        if case.get("group"):
            settled.add(case["group"])
        record, _ = run_case(case, candidate, natives[index], phase, threads, job,
                             again_native=again_natives.get(index))
        record.pop("outputs", None)
        _name_stale(record, case, earlier)
        if job["mode"] == "time" and reference is not None and "problem" not in record:
            threads.use(None)
            with _allocated(case, _inputs(case)) as buffers:
                phase(who="reference", step="time", seed=case["seed"], sizes=case["sizes"],
                      buffers=[b.layout() for b in buffers.values()])
                prepared = reference.prepare(case, buffers)
                record["reference_seconds"] = _time(reference, prepared, job)
                reference.finish(prepared)
        results.append(record)
        if "problem" in record:
            return out
    if bench_cases:
        bench, records = run_bench(job, candidate, reference, natives[len(job["cases"]):], phase, threads)
        for record in records:
            record.pop("outputs", None)
            record["bench"] = True
        results.extend(records)
        if not any("problem" in r for r in records):
            out["bench"] = bench
    return out


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as handle:
        job = json.load(handle)
    _apply_limits(job.get("limits", {}))
    try:
        result = run_job(job)
    except MemoryError as exc:
        result = {"error": "memory", "message": str(exc)}
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        result = {"error": "harness", "message": f"{type(exc).__name__}: {exc}"}
    tmp = job["result_file"] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    os.replace(tmp, job["result_file"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
