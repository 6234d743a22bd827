"""What a check job brings back from a worker, and how the user's process decides whether to believe it.

A worker returns a :class:`CheckOutcome` as plain data. :func:`read_outcome` validates it
the way a local check's reports would hold up (the fields of
:meth:`~dace_ai.checking.api.CheckReport.record`, no others): every report has a known
status, a stage and its timing; a ``passed`` verify report of the built-in ``verify``
checker carries its seeds and sizes, a passed bench's timings are positive numbers; a
result with no report while checks are on, or one where a checker not installed here
claims a verdict, is refused. A refused result never counts as passed (the dispatcher raises
:class:`~dace_ai.solving.dispatch.CheckJobFailed`).
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dace_ai.state import STATE

#: Checker names a job may report besides installed checkers (refused environments, routing).
SYNTHETIC_CHECKERS = frozenset({"environments", "routing", "executor"})


class ReportModel(BaseModel):
    """One check report as it travels back; a ``passed`` report must carry what a local one carries."""

    model_config = ConfigDict(extra="forbid")

    checker: str = Field(min_length=1)
    status: Literal["passed", "failed", "inconclusive"]
    diagnostics: str = ""
    seconds: float = Field(ge=0)
    stage: str
    reason: str = ""
    rule: str = ""
    told_user: bool = False
    seeds: int = Field(default=0, ge=0)
    sizes: list[dict[str, int]] = Field(default_factory=list)
    static: bool = False
    supplements_verify: bool = False
    compile_only: bool = False
    coverage: dict[str, Any] | None = None  #: a :class:`~dace_ai.checking.api.Coverage` record
    details: dict[str, Any]

    @field_validator("stage")
    @classmethod
    def _stage(cls, stage: str) -> str:
        from dace_ai.plugins.registrations import STAGES

        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        return stage

    @model_validator(mode="after")
    def _passed_has_evidence(self) -> ReportModel:
        stage = self.stage
        if self.status == "passed" and stage == "verify" and self.checker == "verify":
            if self.seeds < 1 or not self.sizes:
                raise ValueError(f"a passed verify report of {self.checker!r} without its seeds and sizes")
        if self.status == "passed" and stage == "bench" and self.details.get("candidate_seconds") is not None:
            times = self.details["candidate_seconds"]
            if not isinstance(times, list) or not all(isinstance(t, (int, float)) and t > 0 for t in times):
                raise ValueError(f"a passed bench report of {self.checker!r} with malformed timings")
        return self


class WarningModel(BaseModel):
    category: str
    message: str


class CheckOutcome(BaseModel):
    """What a worker returns for one candidate."""

    model_config = ConfigDict(extra="forbid")

    reports: list[ReportModel]
    warnings: list[WarningModel] = Field(default_factory=list)
    seconds: float = Field(ge=0)  #: the whole job on the worker (rebuilding the node included)
    check_seconds: float = Field(ge=0)  #: the checkers' own time
    in_process: bool = False


def read_outcome(value: Any, *, checks_on: bool, known_checkers: set[str]) -> tuple[CheckOutcome | None, str]:
    """Validate a returned outcome as a local check's: (outcome, "") or (None, what is wrong)."""
    try:
        outcome = CheckOutcome.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        return None, f"malformed result ({'.'.join(map(str, first['loc']))}: {first['msg']})"
    if checks_on and not outcome.reports:
        return None, "the result holds no check report although checks are on"
    claims = {r.checker for r in outcome.reports if r.status != "inconclusive"}  # "not installed" reports may pass
    unknown = sorted(claims - known_checkers - SYNTHETIC_CHECKERS)
    if unknown:
        return None, f"the result names checker(s) not installed here: {', '.join(unknown)}"
    return outcome, ""


def to_reports(outcome: CheckOutcome) -> list[Any]:
    from dace_ai.checking.api import CheckReport

    return [CheckReport.from_record(r.model_dump()) for r in outcome.reports]


_said: set[tuple[str, str]] = STATE.register("solving.check_results.said", set())


def reemit_warnings(outcome: CheckOutcome) -> None:
    """Say here what the checks said on the worker (dace-ai warnings, each text once per process)."""
    from dace_ai import errors

    for item in outcome.warnings:
        category = getattr(errors, item.category, None)
        if not (isinstance(category, type) and issubclass(category, Warning)):
            continue
        key = (item.category, item.message)
        if key in _said:
            continue
        _said.add(key)
        warnings.warn(item.message, category, stacklevel=4)
