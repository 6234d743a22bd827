"""The child process of a bench: ``python -I .../timing_child.py SPEC RESULT``.

Runs under CPU, wall-time and memory limits set by the parent
(:mod:`dace_ai.checking.timing`) and loads the candidate's and the native
program's libraries with ``ctypes``. It is started as a script, not as a module
of the package, and imports only numpy and filelock (never DaCe or dace_ai), so
it starts in a fraction of a second. It writes its findings to RESULT as JSON, and before each
call of generated code it writes which side is running to ``RESULT.phase`` so a
crash can be attributed.

Every container lives inside a larger buffer whose margins hold a poison
pattern (NaN for floating point): changed margins are writes outside the
buffers, poison in the outputs means reads outside them. Outputs are pre-filled
with the same canary for both sides, inputs are compared after each run.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np

#: Elements of margin on each side of every buffer.
MARGIN = 64
#: One timing sample lasts at least this long (batches of calls for fast kernels).
MIN_SAMPLE_SECONDS = 2e-3
#: Seconds the timed samples of the slower side may take in all (fewer samples for slow kernels).
BUDGET_SECONDS = 3.0


def _poison(dtype: np.dtype) -> Any:
    if np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.complexfloating):
        return np.nan
    return np.iinfo(dtype).max if np.issubdtype(dtype, np.integer) else 0


def _canary(dtype: np.dtype) -> Any:
    if np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.complexfloating):
        return -7.25e30
    return np.iinfo(dtype).min if np.issubdtype(dtype, np.integer) else 0


class Buffer:
    """A container inside a poisoned margin."""

    def __init__(self, arg: dict[str, Any]) -> None:
        self.dtype = np.dtype(arg["dtype"])
        shape, strides = arg["shape"], arg["strides"]
        total = max(int(arg["total"]), 1 + sum((d - 1) * s for d, s in zip(shape, strides)) if shape else 1)
        self.raw = np.empty(total + 2 * MARGIN, dtype=self.dtype)
        self.raw[:] = _poison(self.dtype)
        self.total = total
        self.view = np.ndarray(shape, self.dtype, self.raw.data, MARGIN * self.dtype.itemsize,
                               [s * self.dtype.itemsize for s in strides])

    @property
    def body(self) -> np.ndarray:
        return self.raw[MARGIN:MARGIN + self.total]

    @property
    def address(self) -> int:
        return self.raw.ctypes.data + MARGIN * self.dtype.itemsize

    def margins_intact(self) -> bool:
        head, tail = self.raw[:MARGIN], self.raw[MARGIN + self.total:]
        pattern = np.full(MARGIN, _poison(self.dtype), dtype=self.dtype)
        nan = np.issubdtype(self.dtype, np.inexact)
        return np.array_equal(head, pattern, equal_nan=nan) and np.array_equal(tail, pattern, equal_nan=nan)

    @property
    def nbytes(self) -> int:
        return self.total * self.dtype.itemsize


class Program:
    """A built program called through ctypes from its layout (see ``compat.program_layout``)."""

    def __init__(self, layout: dict[str, Any]) -> None:
        import ctypes

        self.layout = layout
        self.lib = ctypes.CDLL(layout["library"])
        name = layout["name"]
        self.init = getattr(self.lib, f"__dace_init_{name}")
        self.init.restype = ctypes.c_void_p
        self.program = getattr(self.lib, f"__program_{name}")
        self.exit = getattr(self.lib, f"__dace_exit_{name}")
        self.handle: Any = None

    def buffers(self) -> dict[str, Buffer]:
        return {a["name"]: Buffer(a) for a in self.layout["args"] if a["array"]}

    def bind(self, buffers: dict[str, Buffer]) -> Any:
        """Initialise once; a no-argument function calling the program on ``buffers``."""
        import ctypes

        values = []
        for arg in self.layout["args"]:
            if arg["array"]:
                values.append(ctypes.c_void_p(buffers[arg["name"]].address))
            else:
                values.append(getattr(ctypes, arg["ctype"])(arg["value"]))
        if self.handle is None:
            by_name = dict(zip((a["name"] for a in self.layout["args"]), values))
            self.handle = ctypes.c_void_p(self.init(*[by_name[n] for n in self.layout["init"]]))
            if not self.handle.value:
                raise RuntimeError(f"program {self.layout['name']} failed to initialise")
        program, handle = self.program, self.handle

        def call() -> None:
            program(handle, *values)

        return call


def _fill(buffers: dict[str, Buffer], inputs: list[str], seed: int) -> None:
    rng = np.random.default_rng(seed)
    for name, buf in buffers.items():
        if name in inputs:
            if np.issubdtype(buf.dtype, np.floating):
                buf.body[:] = rng.uniform(-1.0, 1.0, buf.total)
            elif np.issubdtype(buf.dtype, np.integer):
                buf.body[:] = rng.integers(-50 if np.issubdtype(buf.dtype, np.signedinteger) else 0, 50, buf.total)
            else:
                buf.body[:] = rng.integers(0, 2, buf.total)
        else:
            buf.body[:] = _canary(buf.dtype)


class Child:
    def __init__(self, spec: dict[str, Any], result_path: str) -> None:
        self.spec, self.result_path = spec, result_path
        self.programs: dict[str, Any] = {}

    def phase(self, text: str) -> None:
        with open(self.result_path + ".phase", "w", encoding="utf-8") as f:
            f.write(text)

    def side(self, layout: dict[str, Any], seed: int, label: str) -> tuple[dict[str, Buffer], Any]:
        if label not in self.programs:
            self.programs[label] = Program(layout)
        program = self.programs[label]
        buffers = program.buffers()
        _fill(buffers, self.spec["inputs"], seed)
        self.phase(label)
        call = program.bind(buffers)
        call()
        return buffers, call

    def run(self) -> dict[str, Any]:
        inputs, outputs = self.spec["inputs"], self.spec["outputs"]
        result: dict[str, Any] = {"status": "ok", "mismatch": None, "inputs_modified": [],
                                  "writes_outside": [], "reads_outside": [], "unwritten": []}
        seen: dict[str, list[np.ndarray]] = {"candidate": [], "native": []}
        keep: dict[str, Any] = {}
        for seed in self.spec["seeds"]:
            sides = [("native", self.spec["native"]), ("candidate", self.spec["candidate"])]
            got: dict[str, dict[str, np.ndarray]] = {}
            for label, folder in sides:
                if folder is None:
                    continue
                buffers, call = self.side(folder, seed, label)
                fresh = self.programs[label].buffers()
                _fill(fresh, inputs, seed)
                got[label] = {name: buffers[name].view.copy() for name in outputs if name in buffers}
                seen[label].append(np.concatenate([got[label][n].ravel().astype(np.float64, copy=False)
                                                   for n in sorted(got[label])]) if got[label] else np.zeros(0))
                if label == "candidate":
                    for name, buf in buffers.items():
                        if not buf.margins_intact():
                            result["writes_outside"].append(name)
                        if name in inputs and not np.array_equal(buf.body, fresh[name].body, equal_nan=True):
                            result["inputs_modified"].append(name)
                        if name in outputs and np.issubdtype(buf.dtype, np.floating):
                            if np.isnan(buf.view).any() and ("native" not in got or
                                                             not np.isnan(got["native"][name]).any()):
                                result["reads_outside"].append(name)
                        if name in outputs and np.all(buf.view == _canary(buf.dtype)) and buf.view.size:
                            result["unwritten"].append(name)
                if seed == self.spec["seeds"][0]:
                    keep[label] = (buffers, call)
            if "native" in got and result["mismatch"] is None:
                result["mismatch"] = _compare(got["native"], got["candidate"], seed)
        for label, layout in (self.spec.get("baselines") or {}).items():  # timed only (DaCe's own code)
            keep[label] = self.side(layout, self.spec["seeds"][0], label)
        result["input_independent"] = bool(inputs) and (
            len(seen["candidate"]) > 1 and all(np.array_equal(seen["candidate"][0], c, equal_nan=True)
                                               for c in seen["candidate"][1:])
            and not (len(seen["native"]) > 1 and all(np.array_equal(seen["native"][0], c, equal_nan=True)
                                                     for c in seen["native"][1:])))
        for key in ("writes_outside", "inputs_modified", "reads_outside", "unwritten"):
            result[key] = sorted(set(result[key]))
        data_bytes = self.spec.get("bytes")  # what one call streams through its connectors
        result["bytes"] = data_bytes
        with _bench_lock(self.spec.get("lock")):  # one bench on the cores at a time, machine-wide
            result.update(_time({label: item[1] for label, item in keep.items()}, self.spec["repeats"], self.phase))
            self.phase("bandwidth")
            result["bandwidth"] = measure_bandwidth(data_bytes or 0)
        return result


def _bench_lock(path: str | None) -> Any:
    import contextlib

    if not path:
        return contextlib.nullcontext()
    from filelock import FileLock

    return FileLock(path)


def _compare(expected: dict[str, np.ndarray], got: dict[str, np.ndarray], seed: int) -> dict[str, Any] | None:
    for name, want in expected.items():
        have = got.get(name)
        if have is None:
            continue
        if np.issubdtype(want.dtype, np.inexact):  # complex too (FFT outputs)
            tol = 1e-5 if want.dtype in (np.float64, np.complex128) else 1e-3
            close = np.isclose(have, want, rtol=tol, atol=tol * max(1.0, float(np.nanmax(np.abs(want))) if want.size
                                                                     else 1.0), equal_nan=True)
        else:
            close = have == want
        if not np.all(close):
            index = tuple(int(i) for i in np.argwhere(~close)[0])
            error = float(np.nanmax(np.abs(have.astype(np.float64) - want.astype(np.float64))))
            return {"container": name, "seed": seed, "index": list(index), "expected": float(want[index]),
                    "got": float(have[index]), "max_error": error, "wrong": int((~close).sum()),
                    "of": int(close.size)}
    return None


def _time(calls: dict[str, Any], repeats: int, phase: Any) -> dict[str, Any]:
    """Per-run seconds of each side: warm-up, batch size from the slower side, interleaved samples."""
    clock = time.perf_counter
    resolution = time.get_clock_info("perf_counter").resolution
    batch: dict[str, int] = {}
    once_by_label: dict[str, float] = {}
    for label, call in calls.items():
        phase(label)
        call()  # warm-up
        t0 = clock()
        call()
        once = once_by_label[label] = max(clock() - t0, resolution)
        batch[label] = max(1, int(min(10_000, np.ceil(max(MIN_SAMPLE_SECONDS, 1000 * resolution) / once))))
    # Slow kernels get fewer samples (at least 3) so one bench stays within a few seconds.
    slowest = max(once_by_label.values())
    repeats = max(min(3, repeats), min(repeats, int(BUDGET_SECONDS / max(slowest, 1e-9))))
    samples: dict[str, list[float]] = {label: [] for label in calls}
    for _ in range(repeats):
        for label, call in calls.items():
            phase(label)
            n = batch[label]
            t0 = clock()
            for _ in range(n):
                call()
            samples[label].append((clock() - t0) / n)
    baselines = {label: samples.pop(label) for label in list(samples) if label not in ("native", "candidate")}
    return {**samples, "baselines": baselines, "batch": batch, "timer_resolution": resolution}


def measure_bandwidth(nbytes: int) -> float:
    """Bytes per second that ``numpy`` streams (read + write) for a working set of ``nbytes``; best of several."""
    n = max(nbytes // 16, 1 << 16)
    src = np.ones(n, dtype=np.float64)
    dst = np.empty_like(src)
    best = float("inf")
    reps = max(3, min(50, int(2e8 // max(src.nbytes, 1))))
    for _ in range(reps):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best


def main(argv: list[str]) -> int:
    spec_path, result_path = argv[1], argv[2]
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    child = Child(spec, result_path)
    try:
        result = child.run()
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        import traceback

        phase = ""
        try:
            with open(result_path + ".phase", encoding="utf-8") as f:
                phase = f.read()
        except OSError:
            pass
        result = {"status": "error", "phase": phase, "detail": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc()[-3000:]}
    with open(result_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(result, f)
    import os

    os.replace(result_path + ".tmp", result_path)
    sys.stdout.flush()
    os._exit(0)  # skip library finalisers of generated code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
