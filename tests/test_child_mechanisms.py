"""The sandbox child's own mechanisms, in this process: buffer lifetimes, the one timing function, the entry file.

The child's modules need nothing but NumPy, so they are driven here with stand-in
programs (plain Python objects with ``prepare``/``call``/``finish``) instead of a
compiled candidate.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest
from dace_ai.sandbox.child import buffers, timing
from dace_ai.sandbox.child.process import Phase, Threads
from dace_ai.sandbox.child.records import Case, SandboxJob
from dace_ai.sandbox.child.runs import run_case
from dace_ai.sandbox.child_process import CHILD


def _case(threads: list[int] | None = None) -> Case:
    containers = [
        {"name": "a", "dtype": "float64", "input": True, "output": False, "elements": 8},
        {"name": "b", "dtype": "float64", "input": False, "output": True, "elements": 8},
    ]
    connectors = [
        {"name": "_a", "container": "a", "direction": "in", "offset": 0, "shape": [8], "strides": [1], "wcr": None},
        {"name": "_b", "container": "b", "direction": "out", "offset": 0, "shape": [8], "strides": [1], "wcr": None},
    ]
    case: Case = {
        "seed": 0,
        "sizes": {"N": 8},
        "values": {"N": 8},
        "containers": containers,
        "connectors": connectors,
        "rtol": {"_b": 1e-12},
    }
    if threads:
        case["threads"] = threads
    return case


class _Program:
    """A stand-in candidate: copies ``_a`` into ``_b`` (nothing to compare it with: no reference given),
    remembers the addresses and live buffers it was prepared with, and raises when told to."""

    def __init__(self, raise_on_call: bool = False) -> None:
        self.raise_on_call = raise_on_call
        self.prepared: list[tuple[int, int]] = []
        self.finished = 0
        self.calls = 0

    def prepare(self, case, bufs):
        self.prepared.append((bufs["b"].start, buffers.live()))
        return bufs

    def call(self, bufs) -> None:
        self.calls += 1
        if self.raise_on_call:
            raise RuntimeError("the call failed")

    def finish(self, bufs) -> None:
        self.finished += 1


def _threads(runtime: bool = False) -> Threads:
    threads = Threads(2)
    if runtime:  # as if an OpenMP runtime were loaded (its count setter is not: use() does nothing)
        threads.runtime = "libgomp.so.1"
    return threads


JOB: SandboxJob = {"mode": "verify"}


def test_buffers_of_a_run_that_raises_are_freed(tmp_path):
    before = buffers.live()
    with pytest.raises(RuntimeError, match="the call failed"):
        run_case(_case(), _Program(raise_on_call=True), None, Phase(str(tmp_path / "phase")), _threads(), JOB)
    assert buffers.live() == before


def test_buffers_kept_for_the_timing_belong_to_the_callers_stack(tmp_path):
    before = buffers.live()
    program = _Program()
    with contextlib.ExitStack() as keep:
        record, prepared = run_case(
            _case([1, 2, 2]), program, None, Phase(str(tmp_path / "phase")), _threads(runtime=True), JOB, keep=keep
        )
        assert "problem" not in record and prepared is not None
        assert buffers.live() == before + 2  # the first run's, kept; the other runs' freed
        assert program.finished == 2  # the kept run is finished only when the stack ends
    assert buffers.live() == before and program.finished == 3


def test_each_thread_run_gets_new_addresses_and_frees_the_last_once_the_next_is_mapped(tmp_path):
    before = buffers.live()
    program = _Program()
    run_case(_case([1, 2, 2]), program, None, Phase(str(tmp_path / "phase")), _threads(runtime=True), JOB)
    starts = [start for start, _ in program.prepared]
    assert all(a != b for a, b in zip(starts, starts[1:]))  # no run reuses the addresses of the one before
    assert [live - before for _, live in program.prepared] == [2, 2, 2]  # the last run's freed before prepare
    assert buffers.live() == before


def test_kept_buffers_are_freed_when_the_block_that_keeps_them_raises(tmp_path):
    before = buffers.live()
    program = _Program()
    with pytest.raises(KeyError), contextlib.ExitStack() as keep:
        run_case(_case(), program, None, Phase(str(tmp_path / "phase")), _threads(), JOB, keep=keep)
        assert buffers.live() == before + 2
        raise KeyError("the timing failed")
    assert buffers.live() == before and program.finished == 1


def test_allocated_frees_the_buffers_mapped_before_one_that_failed():
    before = buffers.live()
    case = _case()
    with pytest.raises(KeyError), buffers.allocated(case, {"a": [0.0] * 8}):  # no data for "b"
        pass
    assert buffers.live() == before


def test_a_buffer_is_unmapped_once():
    before = buffers.live()
    with buffers.GuardedBuffer("x", "float32", 4) as buf:
        assert buffers.live() == before + 1
        buf.free()
    assert buffers.live() == before  # the block's end frees nothing twice


class _Side:
    def __init__(self, seconds: float, order: list[str], label: str) -> None:
        self.seconds, self.order, self.label, self.calls = seconds, order, label, 0

    def __call__(self) -> None:
        self.calls += 1
        self.order.append(self.label)
        if self.seconds:
            import time

            end = time.perf_counter() + self.seconds
            while time.perf_counter() < end:
                pass


def test_time_calls_interleaves_the_sides_and_sizes_each_sample():
    order: list[str] = []
    phases: list[dict] = []
    sides = {label: _Side(0.0, order, label) for label in ("native", "candidate", "baseline:OpenBLAS")}
    timed = timing.time_calls(dict(sides), 4, lambda **step: phases.append(step))
    assert set(timed["samples"]) == set(sides) and all(len(s) == 4 for s in timed["samples"].values())
    assert all(timed["batch"][label] >= 1 for label in sides) and timed["timer_resolution"] > 0
    # the samples: one per side in turn, each a batch of calls
    samples = order[sum(2 for _ in sides) :]
    runs = [label for i, label in enumerate(samples) if i == 0 or samples[i - 1] != label]
    assert runs == ["native", "candidate", "baseline:OpenBLAS"] * 4
    assert {step["who"] for step in phases} == {"reference", "candidate", "baseline"}


def test_time_calls_samples_last_the_minimum_sample_time(monkeypatch):
    """On a clock that each call advances by 0.1 ms, a sample is the batch that fills the minimum sample time."""
    import types

    now = [0.0]
    clock = types.SimpleNamespace(
        perf_counter=lambda: now[0], get_clock_info=lambda name: types.SimpleNamespace(resolution=1e-9)
    )
    monkeypatch.setattr(timing, "time", clock)

    def call() -> None:
        now[0] += 1e-4

    timed = timing.time_calls({"candidate": call}, 3, lambda **step: None)
    assert timed["batch"]["candidate"] == round(timing.MIN_SAMPLE_SECONDS / 1e-4)
    assert timed["samples"]["candidate"] == pytest.approx([1e-4] * 3)


def test_time_calls_skips_the_warm_up_of_a_warm_side_and_honours_the_budget(monkeypatch):
    monkeypatch.setattr(timing, "BUDGET_SECONDS", 0.01)
    slow = _Side(5e-3, [], "candidate")
    timed = timing.time_calls({"candidate": slow}, 7, lambda **step: None, warm={"candidate": 5e-3})
    assert len(timed["samples"]["candidate"]) == 3  # the budget allows 2: at least 3
    assert slow.calls == 3 * timed["batch"]["candidate"]  # no warm-up, no sizing call
    fresh = _Side(0.0, [], "candidate")
    timed = timing.time_calls({"candidate": fresh}, 2, lambda **step: None, warmup=3)
    assert len(timed["samples"]["candidate"]) == 2  # fewer asked than the floor of 3: as asked
    assert fresh.calls == 3 + 1 + 2 * timed["batch"]["candidate"]  # warm-up, the sizing call, the samples
    assert timed["batch"]["candidate"] <= timing.MAX_BATCH


def test_the_entry_file_loads_its_package_without_dace_ai():
    """``python -I`` leaves the script's folder off sys.path: the entry file loads its siblings itself."""
    probe = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('entry', {str(CHILD)!r})\n"
        "entry = importlib.util.module_from_spec(spec); spec.loader.exec_module(entry)\n"
        "job = entry.load()\n"
        "print(json.dumps([callable(job.main), sorted(m for m in sys.modules if m.startswith('dace'))]))"
    )
    done = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True)
    has_main, modules = json.loads(done.stdout)
    assert has_main and "dace_ai_child.job" in modules
    assert not [m for m in modules if m == "dace_ai" or m.startswith(("dace_ai.", "dace."))], modules


def test_the_child_package_ships_with_the_wheel():
    """The packages setuptools finds under core/src (what the wheel holds) include the child's."""
    from pathlib import Path

    from setuptools import find_packages

    src = Path(__file__).resolve().parents[1] / "core" / "src"
    assert "dace_ai.sandbox.child" in find_packages(str(src))
    assert CHILD.is_file() and CHILD.parent.name == "child"


def test_the_bench_lock_excludes_another_process_holding_it_as_filelock_does(tmp_path):
    """Timed runs of two benches never overlap: the child's lock is the one ``filelock`` takes (``flock``)."""
    import threading
    import time

    from filelock import FileLock

    path = str(tmp_path / "bench.lock")
    entered = threading.Event()

    def child_side() -> None:
        with timing.bench_lock(path):
            entered.set()

    with FileLock(path):
        waiter = threading.Thread(target=child_side)
        waiter.start()
        time.sleep(0.3)
        assert not entered.is_set()  # blocked while the other holder has it
    waiter.join(timeout=10)
    assert entered.is_set()
    with timing.bench_lock(path), pytest.raises(TimeoutError):
        FileLock(path, timeout=0.1).acquire()  # and the other way round
    with timing.bench_lock(None):  # no lock asked: nothing taken
        pass
