"""The parts of a sandboxed run's record (:class:`~dace_ai.sandbox.sandbox_run.SandboxRun`) as typed
records: what it compared with, its threads, its time, its input distributions and its size ladder.
Imports nothing of dace_ai, so the modules that fill them (the ladder, the distributions) can use them."""

from __future__ import annotations

from typing import TypedDict


class ReferenceInfo(TypedDict):
    """What the run compared with: ``kind`` (``native``, ``function``, None before it is known) and the native
    reference's ``implementation``."""

    kind: str | None
    implementation: str | None


class ThreadRun(TypedDict):
    """One case run at several OpenMP thread counts."""

    sizes: dict[str, int]
    seed: int
    threads: list[int]


class RunThreads(TypedDict):
    """The OpenMP threads of the run: the all-core ``count``, the cases run at several counts, the runtime loaded."""

    count: int
    runs: list[ThreadRun]
    runtime: str | None


class RunSeconds(TypedDict):
    """Where the run's time went."""

    compile: float
    reference: float
    run: float
    total: float


class DistributionSkip(TypedDict):
    """A case of an input distribution that was not judged, and why."""

    distribution: str
    rung: str
    magnitude: float | None
    reason: str


class DistributionsRun(TypedDict, total=False):
    """Which input distributions ran (with the magnitudes of those that have one), which cases were skipped,
    and the distributions that never ran (empty for a run that judged none)."""

    ran: dict[str, list[float]]
    skipped: list[DistributionSkip]
    never: list[str]


class RungRecord(TypedDict):
    """One rung of the size ladder as the run records it (:meth:`dace_ai.sandbox.ladder.Rung.as_dict`)."""

    rung: str
    sizes: dict[str, int]
    seeds: list[int]
    points: list[dict[str, int]]
    note: str
