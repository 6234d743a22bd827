"""The one timing algorithm of the child, for the ``time`` mode's cases and the bench section alike.

:func:`time_calls` times one or more sides side by side: a warm-up, one call to size
a batch (enough calls per sample to last :data:`MIN_SAMPLE_SECONDS`, well above the
timer's resolution), then ``repeats`` rounds in which every side takes one sample in
turn. Interleaving is what benches are built on: the machine is noisy, and
alternating the candidate with its baselines in one run exposes them to the same
noise. The per-case timing of the ``time`` mode is the same function with one side.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .records import Timed

#: One timed sample lasts at least this long (batches of calls for fast kernels).
MIN_SAMPLE_SECONDS = 2e-3
#: At most this many calls per sample.
MAX_BATCH = 10_000
#: Seconds the timed samples of the slowest side may take in all (fewer samples for slow kernels, at least 3).
BUDGET_SECONDS = 3.0


def _who(label: str) -> str:
    """Who runs when ``label`` is timed, for the phase file: a fault of the native side or a baseline is theirs."""
    if label == "native":
        return "reference"
    return "baseline" if label.startswith("baseline:") else label


def time_calls(
    calls: dict[str, Callable[[], Any]],
    repeats: int,
    phase: Callable[..., None],
    *,
    warm: dict[str, float] | None = None,
    warmup: int = 1,
    after_sample: tuple[str, int, Callable[[], Any]] | None = None,
) -> Timed:
    """Per-call seconds of each side of ``calls``: warm-up, a batch per side, interleaved samples.

    ``warm``: sides that just ran on these buffers with these threads, and the seconds
    of their last call (their warm-up and batch estimate are done already).
    ``warmup``: calls of each other side before it is sized. Every side gets
    ``repeats`` samples, fewer (at least 3, or ``repeats`` if smaller) when those of the
    slowest side would pass :data:`BUDGET_SECONDS`; a sample is ``batch[label]`` calls.
    ``after_sample``: (side, index, function) called, untimed, right after that side's sample
    ``index`` (clamped to the samples taken), e.g. to judge the outputs a timed call left.
    """
    clock = time.perf_counter
    resolution = time.get_clock_info("perf_counter").resolution
    batch: dict[str, int] = {}
    once: dict[str, float] = {}
    for label, call in calls.items():
        phase(who=_who(label), step="time", label=label)
        if warm and label in warm:
            once[label] = max(warm[label], resolution)
        else:
            for _ in range(max(1, warmup)):
                call()
            t0 = clock()
            call()
            once[label] = max(clock() - t0, resolution)
        floor = max(MIN_SAMPLE_SECONDS, 1000 * resolution)
        batch[label] = max(1, int(min(MAX_BATCH, np.ceil(floor / once[label]))))
    slowest = max(once.values(), default=0.0)
    repeats = max(min(3, repeats), min(repeats, int(BUDGET_SECONDS / max(slowest, 1e-9))))
    samples: dict[str, list[float]] = {label: [] for label in calls}
    for index in range(repeats):
        for label, call in calls.items():
            phase(who=_who(label), step="time", label=label)
            n = batch[label]
            t0 = clock()
            for _ in range(n):
                call()
            samples[label].append((clock() - t0) / n)
            if after_sample is not None and after_sample[0] == label and index == min(after_sample[1], repeats - 1):
                after_sample[2]()
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


@contextlib.contextmanager
def bench_lock(path: str | None) -> Iterator[None]:
    """The machine-wide lock around timed runs, so two benches never share the cores (``flock`` on ``path``,
    as ``filelock`` takes it; the lock goes with the descriptor)."""
    if not path:
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
