"""What a check job brings back from a worker, and how the user's process decides whether to believe it.

A worker returns a :class:`CheckOutcome` as plain data. :func:`read_outcome` validates it
the way a local check's reports would hold up (each a
:class:`~dace_ai.solving.check_records.ReportModel`: the fields of
:meth:`~dace_ai.checking.api.CheckReport.record`, no others): every report has a known
status, a stage and its timing; a ``passed`` verify report of the built-in ``verify``
checker carries its seeds and sizes, a passed bench's timings are positive numbers; a
result with no report while checks are on, or one where a checker not installed here
claims a verdict, is refused. A refused result never counts as passed (the dispatcher raises
:class:`~dace_ai.dispatch.dispatcher.CheckJobFailed`).
"""

from __future__ import annotations

import warnings
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dace_ai import errors
from dace_ai.checking.api import CheckReport
from dace_ai.solving.check_records import ReportModel
from dace_ai.state import STATE

#: Checker names a job may report besides installed checkers (refused environments, routing).
SYNTHETIC_CHECKERS = frozenset({"environments", "routing", "executor"})


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


def to_reports(outcome: CheckOutcome) -> list[CheckReport]:
    return [CheckReport.from_record(r.model_dump()) for r in outcome.reports]


_said: set[tuple[str, str]] = STATE.register("dispatch.check_results.said", set())


def reemit_warnings(outcome: CheckOutcome) -> None:
    """Say here what the checks said on the worker (dace-ai warnings, each text once per process)."""
    for item in outcome.warnings:
        category = getattr(errors, item.category, None)
        if not (isinstance(category, type) and issubclass(category, Warning)):
            continue
        key = (item.category, item.message)
        if key in _said:
            continue
        _said.add(key)
        warnings.warn(item.message, category, stacklevel=4)
