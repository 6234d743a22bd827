"""The verify-stage report of a sandboxed run: what a checker that ran the candidate in the sandbox
(``verify``, ``gpu-verify``) says about it (:func:`sandbox_report`), and the user told once per program
when a node could not be verified (:func:`tell_unverified`)."""

from __future__ import annotations

import threading
import warnings
from typing import Any

from dace_ai.checking.api import CheckReport, CheckRequest, Coverage
from dace_ai.errors import UnverifiedWarning
from dace_ai.sandbox.sandbox_run import SandboxRun
from dace_ai.state import STATE

_told: set[str] = STATE.register("sandbox.run_report.told", set())
_told_lock = threading.Lock()


def tell_unverified(request: CheckRequest, reason: str) -> bool:
    """Warn once per program that a node could not be verified; True when this call warned."""
    program = request.node.sdfg_name or "?"
    with _told_lock:
        if program in _told:
            return False
        _told.add(program)
    hint = (
        " Give AINode(..., reference=fn) or dace_ai.ai(..., reference=fn), a NumPy function of the inputs."
        if request.node.node_type == "AINode"
        else ""
    )
    warnings.warn(
        f"dace-ai: node {request.node.name!r} of program {program!r} is not verified ({reason}); "
        f"only its compile checks ran.{hint} (Said once per program.)",
        UnverifiedWarning,
        stacklevel=2,
    )
    return True


def sandbox_report(
    checker: str, request: CheckRequest, result: SandboxRun, message: str, seconds: float, details: dict[str, Any]
) -> CheckReport:
    """The verify-stage report of a sandboxed comparison ``result``: what it ran (reference, timings, ladder,
    skipped sizes, distributions, with ``details`` added), and, when it could not decide, the user told once
    per program."""
    details = {
        "reference": dict(result.reference),
        "timings": dict(result.seconds),
        "ladder": list(result.ladder),
        "skipped": [s.as_dict() for s in result.skipped],
        "distributions": dict(result.distributions),
        **details,
    }
    runs = result.threads.get("runs") or []
    coverage = Coverage(
        threads=tuple(sorted({int(n) for run in runs for n in run.get("threads") or []})),
        distributions=tuple(str(d) for d in (result.distributions.get("ran") or ())),
        device=str(details.get("device") or ""),
        bench_sizes=dict(details["bench_sizes"]) if details.get("bench_sizes") else None,
        twin=details.get("twin") is True,
    )
    reason = str(result.reason or "") if result.status != "passed" else ""
    told = result.status == "inconclusive"
    if told:  # once per program: this node's user has been told now or by an earlier node of the program
        tell_unverified(request, reason or "unknown")
    return CheckReport(
        checker,
        result.status,
        message,
        seconds,
        details,
        stage="verify",
        reason=reason,
        told_user=told,
        seeds=len(result.seeds),
        sizes=[dict(s) for s in result.sizes],
        coverage=coverage,
    )
