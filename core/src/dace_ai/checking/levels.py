"""How far an accepted answer was checked, in one short phrase that travels with the tasklet.

``verified (3 seeds)``: a ``verify`` stage checker compared it with the node's
reference on random inputs; ``compile-only``: it compiled as the real build
compiles, nothing compared its results; ``unverified: <reason>``: not even that
could be decided (no reference, a checker crashed, a tool is missing, checks are
off). The level is written into the tasklet's provenance comment, its session
and the summaries of ``dace_ai.generate``, ``read_prompt_responses`` and ``build``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dace_ai.checking.api import CheckReport

#: The prefix of every level that is neither verified nor compile-only.
UNVERIFIED = "unverified"
#: The level inside a provenance comment, where it is the last field (``... verification=compile-only``).
LEVEL_IN_PROVENANCE = re.compile(r"\bverification=(?P<level>[^\n]+)$")


def _stage(report: CheckReport) -> str:
    return str(report.details.get("stage", "compile"))


def _reason(report: CheckReport) -> str:
    """One line: the report's ``reason`` detail, else its checker and first line of diagnostics."""
    if report.details.get("reason"):
        reason = str(report.details["reason"])
    else:
        first = next(iter(report.diagnostics.strip().splitlines()), "") or "could not decide"
        reason = f"{report.checker}: {first}"
    return " ".join(reason.split())[:200]


def verification_level(reports: Sequence[CheckReport]) -> str:
    """The level of an answer checked by ``reports`` (see the module docstring).

    A passed ``verify`` report with ``details["seeds"]`` -> ``verified (N seeds)``;
    an inconclusive ``verify`` report -> ``unverified: <details["reason"]>``; compile
    reports only, all passed -> ``compile-only``; no reports -> ``unverified: checks are off``.
    """
    if not reports:
        return f"{UNVERIFIED}: checks are off"
    failed = [r for r in reports if r.status == "failed"]
    if failed:
        return f"{UNVERIFIED}: failed {', '.join(r.checker for r in failed)}"
    verify = [r for r in reports if _stage(r) == "verify"]
    inconclusive_verify = [r for r in verify if r.status == "inconclusive"]
    routed = [r for r in inconclusive_verify if r.details.get("compile_only")]
    if routed and any(r.status == "passed" for r in reports if _stage(r) == "compile"):
        return _reason(routed[0])  # "compile-only: no worker with resource 'cuda'" (an executor's routing)
    if inconclusive_verify:
        return f"{UNVERIFIED}: {_reason(inconclusive_verify[0])}"
    seeds = [int(r.details["seeds"]) for r in verify if r.status == "passed" and r.details.get("seeds")]
    if seeds:
        n = min(seeds)
        return f"verified ({n} seed{'s' if n != 1 else ''})"
    compile_reports = [r for r in reports if _stage(r) == "compile"]
    if any(r.status == "passed" for r in compile_reports):
        return "compile-only"
    inconclusive = [r for r in reports if r.status == "inconclusive"]
    if inconclusive:
        return f"{UNVERIFIED}: {_reason(inconclusive[0])}"
    return f"{UNVERIFIED}: no check applied"


def level_from_code(code: str) -> str | None:
    """The verification level recorded in a generated tasklet's provenance comment, or None."""
    m = LEVEL_IN_PROVENANCE.search(code.split("\n", 1)[0] if code.startswith("// dace-ai:") else "")
    return m.group("level") if m else None
