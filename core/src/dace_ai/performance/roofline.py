"""The machine's roofline: peak FLOP/s per element type and thread count, bandwidth per memory level.

A speedup says how a candidate compares with other code; the roofline says how far it
is from what the hardware can do. It is measured once per machine, compiler and flags
(:mod:`dace_ai.performance.measure`) and kept as JSON under the build root
(``ai-roofline/<key>.json``), so every later bench reads it in microseconds.

The record answers two questions for a figure: the peak floating-point rate for an
element type at a thread count (:meth:`Roofline.peak`), and the bandwidth of the memory
levels a working set lives in at a thread count (:meth:`Roofline.bandwidth`): a bench at
2**16 elements per container runs from the L2 cache, and holding it to DRAM bandwidth
would credit it with more than the speed of light. Thread counts that were not measured
are interpolated between one thread and all cores (never beyond what all cores reached).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: Bumped when the measurement changes meaning: older records are then measured again.
FORMAT = 1
#: Memory levels, fastest first (``memory`` is always last: past every cache).
LEVELS = ("L1", "L2", "L3", "memory")
#: Element types with a measured peak (others, e.g. integers, are judged by bandwidth alone).
FLOAT_TYPES = ("float32", "float64")


@dataclass(frozen=True)
class Level:
    """One memory level as measured: how much data it holds and the working set it was measured with."""

    name: str  #: "L1", "L2", "L3" or "memory"
    size_bytes: int  #: one instance of the cache (0 for memory)
    sharing: int  #: CPUs that share one instance (1: private to a core; 0 for memory)
    measured_bytes: int  #: the working set measured: per thread for caches, in total for memory

    def holds(self, threads: int) -> int:
        """Bytes this level holds for ``threads`` threads on distinct cores (each instance serves ``sharing``)."""
        if not self.sharing:
            return 0
        return self.size_bytes * -(-threads // self.sharing)


@dataclass(frozen=True)
class Roofline:
    """Measured peaks of this machine (see the module docstring). Thread counts are keys as ``int``."""

    threads: int  #: the all-core thread count measured (the bench's default)
    peak_gflops: dict[int, dict[str, float]]  #: threads -> element type -> GFLOP/s
    bandwidth_gbs: dict[int, dict[str, float]]  #: threads -> level -> GB/s (best of triad, read, copy)
    levels: tuple[Level, ...]
    measured_at: str  #: UTC, ISO 8601
    seconds: float  #: how long measuring took
    compiler: str
    flags: tuple[str, ...]
    cpu: str
    key: str
    vector_bytes: int = 0
    kernels: dict[str, Any] = field(default_factory=dict)  #: the child's raw figures (triad/read/copy per size)
    format: int = FORMAT

    # ------------------------------------------------------------------ questions
    def peak(self, dtype: str, threads: int | None = None) -> float | None:
        """Peak GFLOP/s for ``dtype`` ("float32", "float64") at ``threads`` (default: all cores); None for others."""
        if dtype not in FLOAT_TYPES:
            return None
        return _at({t: v[dtype] for t, v in self.peak_gflops.items() if dtype in v}, threads or self.threads)

    def level_for(self, working_set_bytes: float | None, threads: int | None = None) -> str:
        """The fastest level that holds ``working_set_bytes`` with ``threads`` threads (``memory`` when none does)."""
        threads = threads or self.threads
        if working_set_bytes is None:
            return "memory"
        for level in self.levels:
            if level.name == "memory":
                break
            if working_set_bytes <= level.holds(threads):
                return level.name
        return "memory"

    def bandwidth(self, threads: int | None = None, working_set_bytes: float | None = None) -> tuple[float, str]:
        """(GB/s, level) for a working set of ``working_set_bytes`` at ``threads``: memory's when not given.

        The best case, as a speed of light must be: the bytes that fit in L1 come at L1's
        bandwidth, the next ones that fit in L2 at L2's, and so on; the figure is the
        working set over that time, and the level the slowest one it reaches (a working
        set a little over L2 still runs mostly from L2). A faster level never counts as
        slower than a slower one (noise must not make L2 look slower than memory).
        """
        threads = threads or self.threads
        rates = self._level_rates(threads)
        if not working_set_bytes or working_set_bytes <= 0:
            return rates["memory"], "memory"
        remaining, seconds, held = float(working_set_bytes), 0.0, 0.0
        for level in self.levels:
            capacity = float("inf") if level.name == "memory" else float(level.holds(threads))
            part = min(remaining, max(0.0, capacity - held))
            seconds += part / (rates[level.name] * 1e9)
            remaining -= part
            held = max(held, capacity)
            if remaining <= 0:
                return working_set_bytes / seconds / 1e9, level.name
        return rates["memory"], "memory"

    def _level_rates(self, threads: int) -> dict[str, float]:
        """GB/s of each level at ``threads``, each at least that of every slower level."""
        names = [lv.name for lv in self.levels]
        raw = {
            name: _at({t: v[name] for t, v in self.bandwidth_gbs.items() if name in v}, threads) or 0.0
            for name in names
        }
        rates, best = {}, 0.0
        for name in reversed(names):
            best = max(best, raw[name])
            rates[name] = best
        return rates

    @property
    def memory_bandwidth(self) -> float:
        """GB/s from memory with all cores: the ``bandwidth_gbs`` of ``dace-ai targets --roofline --json``."""
        return self._level_rates(self.threads)["memory"]

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        """The stored form, also what ``--json`` prints: the headline keys first, then the details."""
        data = asdict(self)
        data["peak_gflops_by_threads"] = {str(t): v for t, v in sorted(self.peak_gflops.items())}
        data["bandwidth_gbs_by_threads"] = {str(t): v for t, v in sorted(self.bandwidth_gbs.items())}
        data["peak_gflops"] = {d: self.peak(d) for d in FLOAT_TYPES}
        data["bandwidth_gbs"] = self.memory_bandwidth
        data["flags"] = list(self.flags)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Roofline:
        """Read a stored record (``ValueError`` naming what is wrong with it)."""
        try:
            if int(data.get("format", 0)) != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
            return cls(
                threads=int(data["threads"]),
                peak_gflops={
                    int(t): {k: float(x) for k, x in v.items()} for t, v in data["peak_gflops_by_threads"].items()
                },
                bandwidth_gbs={
                    int(t): {k: float(x) for k, x in v.items()} for t, v in data["bandwidth_gbs_by_threads"].items()
                },
                levels=tuple(Level(**lv) for lv in data["levels"]),
                measured_at=str(data["measured_at"]),
                seconds=float(data["seconds"]),
                compiler=str(data["compiler"]),
                flags=tuple(data["flags"]),
                cpu=str(data["cpu"]),
                key=str(data["key"]),
                vector_bytes=int(data.get("vector_bytes", 0)),
                kernels=dict(data.get("kernels") or {}),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a roofline record ({type(exc).__name__}: {exc})") from None


def _at(values: dict[int, float], threads: int) -> float | None:
    """The figure at ``threads``: measured, else linear from one thread, capped at the most threads measured."""
    if not values:
        return None
    if threads in values:
        return values[threads]
    most = max(values)
    if threads > most:
        return values[most]
    fewest = min(values)
    per_thread = values[fewest] / fewest
    return min(values[most], per_thread * threads)
