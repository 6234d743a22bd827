"""The one acceptance rule: is a candidate answer accepted, given its check reports and the settings?

Every caller that turns check reports into a decision asks :func:`judge`: the
expansion (:func:`dace_ai.expansion.pipeline.solve`), ``dace_ai.generate``,
``dace_ai.optimize``, ``refine`` and ``dace-ai bench``. One function, so that an
answer accepted by one of them is accepted by all, and a refused one refused by all.

The rule:

* a ``failed`` report refuses the answer; a repair round may fix it (``repairable``);
* otherwise an ``inconclusive`` report (a checker that could not decide: a missing
  tool, no reference, a crashed checker) refuses it under ``on_inconclusive=reject``
  (no repair round can fix a missing tool: not repairable), and under ``warn`` accepts
  it with a warning about each such report, except reports marked ``told_user``
  (their checker told the user itself, e.g. once per program);
* otherwise it is accepted, with the verification level its reports reached.

When every answer was refused, ``on_failure`` decides what happens to the node
(:meth:`Verdict.keeps_native`): the native expansion with a warning, or an error. A
refusal by the bench gate alone (``bench=gate``: the code works, it is only slower)
always keeps the native expansion.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from dace_ai.checking.api import CheckReport
from dace_ai.checking.levels import verification_level
from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.errors import InconclusiveCheckWarning


@dataclass(frozen=True)
class Verdict:
    """What :func:`judge` decided about one candidate's reports."""

    accepted: bool
    #: The verification level of an accepted answer (``verified (3 seeds, ...)``, ``compile-only``, ...); "" when refused.
    level: str = ""
    #: Why it was refused, in one line ("" when accepted).
    reason: str = ""
    #: The reports that failed (a repair round sends their diagnostics back).
    failed: tuple[CheckReport, ...] = ()
    #: The reports that could not decide.
    inconclusive: tuple[CheckReport, ...] = ()
    #: The inconclusive reports the user must be warned about (accepted under ``on_inconclusive=warn``).
    warnings: tuple[CheckReport, ...] = ()
    #: ``on_failure`` as set ("native", "error" or "" for: native where the node has a native expansion).
    on_failure: str = ""
    #: The level the reports reached, accepted or not (``unverified: failed verify`` for a refused one):
    #: what a session records for every round.
    reached: str = ""

    @property
    def repairable(self) -> bool:
        """Refused by a failed check: a repair round with its diagnostics may fix it (a missing tool it cannot)."""
        return not self.accepted and bool(self.failed)

    @property
    def too_slow(self) -> bool:
        """Refused only by the bench gate: the code works, it is just not faster than required."""
        return bool(self.failed) and all(r.rule == "gate" for r in self.failed)

    def keeps_native(self, has_native: bool) -> bool:
        """When no answer was accepted: expand natively (True) or stop with an error (False)?"""
        return falls_back_natively(self.on_failure, has_native, too_slow=self.too_slow)

    def warn(self, node: NodeContext, session: str | os.PathLike | None = None, stacklevel: int = 2) -> None:
        """Warn about :attr:`warnings` (an answer is never accepted silently while a check could not decide)."""
        if self.warnings:
            warnings.warn(
                inconclusive_warning_text(node, self.warnings, session),
                InconclusiveCheckWarning,
                stacklevel=stacklevel + 1,
            )


def judge(reports: Sequence[CheckReport], settings: AISettings) -> Verdict:
    """The verdict on one candidate from its check reports and the settings (see the module docstring)."""
    reports = list(reports)
    failed = tuple(r for r in reports if r.status == "failed")
    undecided = tuple(r for r in reports if r.status == "inconclusive")
    on_failure = settings.on_failure or ""
    reached = verification_level(reports)
    if failed:
        names = ", ".join(dict.fromkeys(r.checker for r in failed))
        return Verdict(
            False,
            reason=f"refused by check(s) {names}: {_first_line(failed[0])}",
            failed=failed,
            inconclusive=undecided,
            on_failure=on_failure,
            reached=reached,
        )
    if undecided and settings.on_inconclusive == "reject":
        names = ", ".join(dict.fromkeys(r.checker for r in undecided))
        return Verdict(
            False,
            reason=f"check(s) {names} could not decide and on_inconclusive=reject",
            inconclusive=undecided,
            on_failure=on_failure,
            reached=reached,
        )
    untold = tuple(r for r in undecided if not r.told_user)
    return Verdict(True, level=reached, inconclusive=undecided, warnings=untold, on_failure=on_failure, reached=reached)


def falls_back_natively(on_failure: str | None, has_native: bool, *, too_slow: bool = False) -> bool:
    """When no answer passed: expand the node natively (True) or stop (False)?

    Natively where the node has a native expansion, unless ``on_failure=error``; always
    natively when the only refusal was the bench gate's (``too_slow``): the code works.
    """
    return has_native and (too_slow or on_failure != "error")


def _first_line(report: CheckReport) -> str:
    text = report.reason or report.diagnostics.strip() or "no reason given"
    return str(text).splitlines()[0] if str(text).strip() else "no reason given"


def inconclusive_warning_text(
    node: NodeContext, reports: Sequence[CheckReport], session: str | os.PathLike | None = None
) -> str:
    """The words of the warning: which node, which checks could not decide and why, where the session is."""
    what = "; ".join(f"{r.checker}: {_first_line(r)}" for r in reports)
    where = f"; session: {session}" if session else ""
    return (
        f"dace-ai: node {node.name!r} ({node.node_type}) in SDFG {node.sdfg_name!r} was accepted although "
        f"{len(reports)} check(s) could not decide ({what}){where}. "
        "Set on_inconclusive=reject to refuse such answers."
    )
