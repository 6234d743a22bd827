"""The record of one sandboxed run of a candidate against its reference, and the artefact that hands it on.

:func:`dace_ai.sandbox.harness.run_against_reference` returns a :class:`SandboxRun`: a frozen
record with typed fields (the harness fills a plain draft while it runs; JSON appears only at
the child process's boundary, :mod:`dace_ai.sandbox.child`). The ``verify`` checker gives its
run as :data:`SANDBOX_RUN` (the ``sanitizers`` run only after a passed one) and, when a selected
checker needs it (``bench``), as :data:`BENCH_RUN`, timed in the same child run; ``gpu-verify`` gives
its run on the GPU as :data:`GPU_RUN` (``gpu-sanitizers`` needs it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, cast

from dace_ai.plugins.artefacts import Artefact
from dace_ai.sandbox.run_records import (
    DistributionsRun,
    ReferenceInfo,
    RungRecord,
    RunSeconds,
    RunThreads,
)

if TYPE_CHECKING:
    from dace_ai.checking.api import Status
    from dace_ai.sandbox.child.records import CaseRecord
    from dace_ai.sandbox.ladder import SkippedSize


class RunProblem(TypedDict, total=False):
    """The failure of a sandboxed run as data, for callers that act on it (the bench stage's run rules)."""

    kind: str  #: the run's ``reason`` (``mismatch``, ``outside_buffer``, ``crash``, ...)
    container: str | None  #: the container it concerns (None: outside every buffer)
    connector: str
    index: list[int]
    expected: Any
    got: Any
    access: str  #: ``read`` or ``write`` where known (a fault, a write outside), else ""
    input: bool  #: the container is an input (an input modified in place)


@dataclass(frozen=True)
class SandboxRun:
    """What :func:`~dace_ai.sandbox.harness.run_against_reference` returns (its module docstring shows the
    values). Frozen: checkers that read it (``request.artefacts[SANDBOX_RUN]``) cannot change it for the next."""

    mode: str  #: "verify", "time" or "bench"
    status: Status  #: "passed", "failed" or "inconclusive"
    reason: str | None = None  #: why it did not pass (``mismatch``, ``outside_buffer``, ``crash``, ``compile``, ...)
    message: str = ""  #: worded for the model; callers that act on a failure read ``problem``
    problem: RunProblem | None = None  #: the failure as data
    seeds: tuple[int, ...] = ()
    sizes: tuple[dict[str, int], ...] = ()
    skipped: tuple[SkippedSize, ...] = ()
    ladder: tuple[RungRecord, ...] = ()
    cases: tuple[CaseRecord, ...] = ()  #: the child's records, in the order of the cases
    distributions: DistributionsRun = field(default_factory=lambda: DistributionsRun())
    reference: ReferenceInfo = field(default_factory=lambda: ReferenceInfo(kind=None, implementation=None))
    threads: RunThreads = field(default_factory=lambda: RunThreads(count=0, runs=[], runtime=None))
    bench: Mapping[str, Any] | None = None  #: the bench section's figures
    library: str = ""
    seconds: RunSeconds = field(default_factory=lambda: RunSeconds(compile=0.0, reference=0.0, run=0.0, total=0.0))

    @classmethod
    def from_draft(cls, draft: Mapping[str, Any]) -> SandboxRun:
        """The record of the harness's draft (a plain mapping with these keys)."""
        return cls(
            mode=str(draft["mode"]),
            status=draft["status"],
            reason=draft.get("reason"),
            message=str(draft.get("message") or ""),
            problem=draft.get("problem"),
            seeds=tuple(draft.get("seeds") or ()),
            sizes=tuple(dict(s) for s in draft.get("sizes") or ()),
            skipped=tuple(draft.get("skipped") or ()),
            ladder=tuple(draft.get("ladder") or ()),
            cases=tuple(draft.get("cases") or ()),
            distributions=cast(DistributionsRun, dict(draft.get("distributions") or {})),
            reference=cast(ReferenceInfo, dict(draft.get("reference") or {})),
            threads=cast(RunThreads, dict(draft.get("threads") or {})),
            bench=dict(draft["bench"]) if draft.get("bench") is not None else None,
            library=str(draft.get("library") or ""),
            seconds=cast(RunSeconds, dict(draft.get("seconds") or {})),
        )


#: The ``verify`` checker's sandboxed run.
SANDBOX_RUN: Artefact[SandboxRun] = Artefact("sandbox_run")
#: The same run with its bench section, given by ``verify`` when a selected checker needs it (``bench``):
#: the candidate is then timed in the run that verified it, side by side with the native reference.
BENCH_RUN: Artefact[SandboxRun] = Artefact("bench_run")
#: The run ``gpu-verify`` gives (``gpu-sanitizers`` needs it: it runs after it, and only after a passed one).
GPU_RUN: Artefact[SandboxRun] = Artefact("gpu_run")
