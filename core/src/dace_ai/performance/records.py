"""The bench stage's results as typed records: its figures and their speed of light.

A bench report carries :class:`BenchFigures` (``CheckReport.bench``) and, when this machine's
roofline was had, :class:`SpeedOfLight` (``CheckReport.speed_of_light``); consumers read their
fields. Each has one ``record()`` (JSON data) and one ``from_record()``: the keys are those a
report's ``details`` held before these records, so sessions' ``checks.json`` and the answer
cache keep their shape and older records load.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dace_ai.performance.speed_of_light import KEYS as FIGURE_KEYS


def _number(value: Any) -> float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _numbers(values: Any) -> tuple[float, ...]:
    return tuple(v for v in values or () if _number(v) is not None)


@dataclass(frozen=True)
class SpeedOfLight:
    """One timing against this machine's roofline (:func:`dace_ai.performance.speed_of_light.figure`):
    achieved GFLOP/s and GB/s, the bound, the fraction of speed of light, per call."""

    gflops: float | None
    gbs: float | None
    bound: Literal["compute", "memory"]
    fraction: float  #: ideal time / measured time (1.0: the hardware's limit)
    peak_gflops: float | None
    bandwidth_gbs: float
    flops: float | None  #: per call; None when the node's flops are not known
    bytes: float  #: per call
    dtype: str
    threads: int

    def record(self) -> dict[str, Any]:
        """The figure as JSON data, keys in :data:`~dace_ai.performance.speed_of_light.KEYS` order."""
        return {key: getattr(self, key) for key in FIGURE_KEYS}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> SpeedOfLight:
        """The figure of :meth:`record`'s data (``ValueError`` without a numeric ``fraction``)."""
        fraction = _number(record.get("fraction"))
        if fraction is None:
            raise ValueError(f"a speed-of-light figure needs a numeric 'fraction', got {record.get('fraction')!r}")
        return cls(
            gflops=_number(record.get("gflops")),
            gbs=_number(record.get("gbs")),
            bound="compute" if record.get("bound") == "compute" else "memory",
            fraction=fraction,
            peak_gflops=_number(record.get("peak_gflops")),
            bandwidth_gbs=_number(record.get("bandwidth_gbs")) or 0.0,
            flops=_number(record.get("flops")),
            bytes=_number(record.get("bytes")) or 0.0,
            dtype=str(record.get("dtype") or ""),
            threads=int(record.get("threads") or 0),
        )


@dataclass(frozen=True)
class BenchFigures:
    """What the bench stage measured: per-run seconds of both sides, medians, the speedup with its
    range, the baselines timed, the sizes, and how the speed of light was had (or why not)."""

    sizes: dict[str, int] | None = None
    repeats: int = 0  #: timed runs of the candidate
    batch: dict[str, int] | None = None  #: calls per timed sample, by side
    native_reused: bool = False  #: the native samples come from an earlier candidate of the node
    candidate_seconds: tuple[float, ...] = ()  #: per call, one per timed run
    native_seconds: tuple[float, ...] = ()
    bytes: int | None = None  #: the inputs and outputs the candidate streams per call
    bandwidth: float | None = None  #: bytes per second NumPy streams here
    candidate_median: float | None = None
    native_median: float | None = None
    speedup: float | None = None  #: over the native expansion
    speedup_range: tuple[float, float] | None = None  #: from the interleaved pairs
    timed: bool = False  #: timed runs (False: the per-call time of the checks' own run)
    library: str | None = None
    threads: int | None = None
    #: Median seconds per call by baseline label (None when nothing was compared), the strongest (fastest)
    #: baseline with the speedup over it, the native expansion's label and the speedup over it.
    baselines: dict[str, float] | None = None
    strongest: str | None = None
    speedup_strongest: float | None = None
    native: str | None = None
    speedup_native: float | None = None
    baselines_left_out: dict[str, str] = field(default_factory=dict)  #: not timed, with the reason
    baselines_reused: tuple[str, ...] = ()  #: timed by an earlier candidate of the node
    speed_of_light_level: str = ""  #: the memory level whose bandwidth the speed of light used
    #: The node's work behind the speed of light: ``flops`` and ``bytes`` expressions, ``source``, ``note``.
    work: dict[str, str | None] | None = None
    speed_of_light_missing: str = ""  #: why there is no speed of light

    #: The keys :meth:`record` may write (and :meth:`from_record` reads).
    KEYS = (
        "sizes",
        "repeats",
        "batch",
        "native_reused",
        "candidate_seconds",
        "native_seconds",
        "bytes",
        "bandwidth",
        "candidate_median",
        "native_median",
        "speedup",
        "speedup_range",
        "timed",
        "library",
        "threads",
        "baselines",
        "strongest",
        "speedup_strongest",
        "native",
        "speedup_native",
        "baselines_left_out",
        "baselines_reused",
        "speed_of_light_level",
        "work",
        "speed_of_light_missing",
    )

    def record(self) -> dict[str, Any]:
        """The figures as JSON data: the keys present are those the figures have."""
        out: dict[str, Any] = {
            "sizes": dict(self.sizes) if self.sizes is not None else None,
            "repeats": self.repeats,
            "batch": dict(self.batch) if self.batch is not None else None,
            "native_reused": self.native_reused,
            "candidate_seconds": list(self.candidate_seconds),
            "native_seconds": list(self.native_seconds),
            "bytes": self.bytes,
            "bandwidth": self.bandwidth,
        }
        if self.candidate_median is not None:
            out["candidate_median"] = self.candidate_median
        if self.speedup is not None:
            out["native_median"] = self.native_median
            out["speedup"] = self.speedup
            out["speedup_range"] = list(self.speedup_range) if self.speedup_range is not None else None
        out.update(timed=self.timed, library=self.library, threads=self.threads)
        if self.baselines is not None:
            out.update(
                baselines=dict(self.baselines),
                strongest=self.strongest,
                speedup_strongest=self.speedup_strongest,
                native=self.native,
                speedup_native=self.speedup_native,
            )
        out["baselines_left_out"] = dict(self.baselines_left_out)
        if self.baselines_reused:
            out["baselines_reused"] = list(self.baselines_reused)
        if self.speed_of_light_missing:
            out["speed_of_light_missing"] = self.speed_of_light_missing
        elif self.work is not None:
            out.update(speed_of_light_level=self.speed_of_light_level, work=dict(self.work))
        return out

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> BenchFigures:
        """The figures of :meth:`record`'s data (or of a bench report's ``details`` written before this record)."""

        def text(key: str) -> str | None:
            value = record.get(key)
            return str(value) if value is not None else None

        sizes, batch, baselines = record.get("sizes"), record.get("batch"), record.get("baselines")
        spread = record.get("speedup_range")
        work = record.get("work")
        threads = _number(record.get("threads"))
        return cls(
            sizes={str(k): int(v) for k, v in sizes.items()} if isinstance(sizes, Mapping) else None,
            repeats=int(record.get("repeats") or 0),
            batch={str(k): int(v) for k, v in batch.items()} if isinstance(batch, Mapping) else None,
            native_reused=bool(record.get("native_reused")),
            candidate_seconds=_numbers(record.get("candidate_seconds")),
            native_seconds=_numbers(record.get("native_seconds")),
            bytes=int(record["bytes"]) if _number(record.get("bytes")) is not None else None,
            bandwidth=_number(record.get("bandwidth")),
            candidate_median=_number(record.get("candidate_median")),
            native_median=_number(record.get("native_median")),
            speedup=_number(record.get("speedup")),
            speedup_range=(float(spread[0]), float(spread[-1]))
            if isinstance(spread, list | tuple) and spread
            else None,
            timed=bool(record.get("timed")),
            library=text("library"),
            threads=int(threads) if threads is not None else None,
            baselines={str(k): float(v) for k, v in baselines.items()} if isinstance(baselines, Mapping) else None,
            strongest=text("strongest"),
            speedup_strongest=_number(record.get("speedup_strongest")),
            native=text("native"),
            speedup_native=_number(record.get("speedup_native")),
            baselines_left_out={str(k): str(v) for k, v in (record.get("baselines_left_out") or {}).items()},
            baselines_reused=tuple(str(label) for label in record.get("baselines_reused") or ()),
            speed_of_light_level=str(record.get("speed_of_light_level") or ""),
            work={str(k): None if v is None else str(v) for k, v in work.items()}
            if isinstance(work, Mapping)
            else None,
            speed_of_light_missing=str(record.get("speed_of_light_missing") or ""),
        )

    @classmethod
    def in_details(cls, details: Mapping[str, Any]) -> bool:
        """Whether a bench report's ``details`` (written before this record) hold its figures."""
        return any(key in details for key in ("repeats", "candidate_seconds", "candidate_median", "speedup"))
