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

import ctypes
import json
import mmap
import os
import sys
import time
from typing import Any

import numpy as np

CANARY = 0xA5  #: byte that fills output buffers and the slack around every buffer
ALIGN = 64  #: buffers start on this boundary, as vector code may expect
PAGE = mmap.PAGESIZE
GUARD = max(PAGE, 1 << 20)  #: inaccessible bytes after each buffer: overruns up to this far fault at once
_PROT_NONE, _PROT_RW = 0, 3
_MAP_PRIVATE, _MAP_ANONYMOUS = 0x02, 0x20


# ----------------------------------------------------------------------------- inputs (shared with the parent)
def random_values(rng: np.random.Generator, dtype: np.dtype, count: int) -> np.ndarray:
    """Values that exercise arithmetic without overflow: [-1, 1) for floats, small integers otherwise."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, count).astype(dtype)
    if dtype.kind == "c":
        return (rng.uniform(-1.0, 1.0, count) + 1j * rng.uniform(-1.0, 1.0, count)).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, count).astype(dtype)
    if dtype.kind == "u":
        return rng.integers(0, 10, count).astype(dtype)
    return rng.integers(-10, 11, count).astype(dtype)


def case_inputs(case: dict[str, Any]) -> dict[str, np.ndarray]:
    """The initial contents of every container of a case, flat, from its seed (inputs random)."""
    rng = np.random.default_rng(case["seed"])
    data = {}
    for cont in case["containers"]:
        if cont["input"]:
            data[cont["name"]] = random_values(rng, cont["dtype"], cont["elements"])
        else:
            data[cont["name"]] = np.frombuffer(bytes([CANARY]) * (np.dtype(cont["dtype"]).itemsize * cont["elements"]),
                                               dtype=cont["dtype"]).copy()
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
        self.raw[:] = CANARY
        lead = self.start - addr
        self.array = self.raw[lead:lead + self.nbytes].view(self.dtype)[:elements]

    def layout(self) -> dict[str, Any]:
        return {"name": self.name, "start": self.start, "end": self.start + self.nbytes,
                "guard": [self.addr + self.body, self.addr + self.total], "lead": self.addr}

    def slack_intact(self) -> str | None:
        """'before' or 'after' when canary bytes around the buffer changed, else None."""
        lead = self.start - self.addr
        if np.any(self.raw[:lead] != CANARY):
            return "before"
        if np.any(self.raw[lead + self.nbytes:] != CANARY):
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
        raise ValueError(f"unknown argument type {name!r}")
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
def _is_canary(values: np.ndarray) -> np.ndarray:
    raw = np.ascontiguousarray(values).view(np.uint8).reshape(values.shape + (values.dtype.itemsize,))
    return np.all(raw == CANARY, axis=-1)


def _scalar(value: Any) -> Any:
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, complex):
        return [value.real, value.imag]
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return value


def compare(conn: dict[str, Any], expected: np.ndarray, got: np.ndarray, rtol: float) -> dict[str, Any] | None:
    """The first problem between ``expected`` and ``got`` of one output connector, or None."""
    expected_canary = _is_canary(expected) if expected.dtype == got.dtype else np.zeros(expected.shape, bool)
    got_canary = _is_canary(got)
    unwritten = got_canary & ~expected_canary
    if np.any(unwritten):
        index = np.argwhere(unwritten)[0] if got.ndim else []
        return {"kind": "unwritten", "connector": conn["name"], "index": [int(i) for i in index],
                "count": int(np.count_nonzero(unwritten)), "elements": int(got.size),
                "expected": _scalar(expected[tuple(index)])}
    check = ~expected_canary
    kind = np.dtype(got.dtype).kind
    if kind in "fc":
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
        max_error = float(np.max(np.abs(expected.astype(np.float64) - got.astype(np.float64)), initial=0.0)) \
            if kind != "b" else float(np.count_nonzero(wrong))
    if not np.any(wrong):
        return None
    index = np.argwhere(wrong)[0] if got.ndim else []
    key = tuple(int(i) for i in index)
    return {"kind": "mismatch", "connector": conn["name"], "index": list(key), "count": int(np.count_nonzero(wrong)),
            "elements": int(got.size), "expected": _scalar(expected[key]), "got": _scalar(got[key]),
            "max_error": max_error if np.isfinite(max_error) else str(max_error), "rtol": rtol}


def _outside_problem(case: dict[str, Any], buffers: dict[str, GuardedBuffer], initial: dict[str, np.ndarray],
                     who: str) -> dict[str, Any] | None:
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
        changed = buf.array.view(np.uint8).reshape(-1, buf.dtype.itemsize) != \
            initial[name].view(np.uint8).reshape(-1, buf.dtype.itemsize)
        changed = np.any(changed, axis=1) & ~covered.get(name, np.zeros(len(changed), bool))
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


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    phase = Phase(job["phase_file"])
    fault_fd = os.open(job["fault_file"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    phase(who="loader", step="candidate")
    candidate = Candidate(job["candidate"], fault_fd)
    reference = None
    if job.get("reference"):
        phase(who="loader", step="reference")
        reference = Reference(job["reference"])
    results: list[dict[str, Any]] = []
    for case in job["cases"]:
        data = case_inputs(case)
        record: dict[str, Any] = {"seed": case["seed"], "sizes": case["sizes"]}
        sides: dict[str, dict[str, GuardedBuffer]] = {}
        for who, program in (("reference", reference), ("candidate", candidate)):
            if program is None:
                continue
            buffers = _allocate(case, data)
            sides[who] = buffers
            phase(who=who, step="run", seed=case["seed"], sizes=case["sizes"],
                  buffers=[b.layout() for b in buffers.values()])
            prepared = program.prepare(case, buffers)
            program.call(prepared)
            if job["mode"] == "time":
                record[f"{who}_seconds"] = _time(program, prepared, job)
            program.finish(prepared)
            phase(who=who, step="done", seed=case["seed"], sizes=case["sizes"])
            if job["mode"] == "verify":
                problem = _outside_problem(case, buffers, data, who)
                if problem is not None:
                    record["problem"] = problem
                    break
        if job["mode"] == "verify" and "problem" not in record:
            got_side = sides["candidate"]
            for conn in case["connectors"]:
                if conn["direction"] != "out":
                    continue
                got = view(got_side[conn["container"]].array, conn)
                if reference is not None:
                    expected = view(sides["reference"][conn["container"]].array, conn)
                else:
                    expected = np.load(case["expected"][conn["name"]], allow_pickle=False)
                problem = compare(conn, np.asarray(expected), np.asarray(got), case["rtol"][conn["name"]])
                if problem is not None:
                    record["problem"] = problem
                    break
        for buffers in sides.values():
            for buf in buffers.values():
                buf.free()
        results.append(record)
        if "problem" in record:
            break
    return {"mode": job["mode"], "cases": results}


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
