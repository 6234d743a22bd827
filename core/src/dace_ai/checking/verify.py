"""Built-in plugin: the ``verify`` checker (stage ``verify``, on by default).

It runs the candidate against the node's reference in the sandbox
(:func:`dace_ai.checking.harness.run_against_reference`): the node's native expansion
for library nodes that have one, the ``reference=`` function for an ``AINode``. The
report says what was checked::

    CheckReport("verify", "passed", seeds=3, sizes=[{"N": 13}, {"N": 67}, {"N": 64}, ...], details={
                                             "ladder": [...], "skipped": [...]})
    CheckReport("verify", "failed", "Wrong result (seed 0, sizes N=64 (the vector-multiple size)): output _out ...")
    CheckReport("verify", "inconclusive", "Not verified: no reference.", reason="no reference", told_user=True)

A failed report's diagnostics go back to the model in the next repair round. A node
without a reference is reported as inconclusive and the user is told once per
program (an :class:`~dace_ai.errors.UnverifiedWarning`), since a silent "checked"
would be a lie.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

from dace_ai.checking import bench
from dace_ai.checking.api import CheckReport, CheckRequest, Coverage
from dace_ai.checking.compile import COMPILED
from dace_ai.checking.harness import parse_sizes_setting, run_against_reference
from dace_ai.checking.host_target import uses_host_compiler
from dace_ai.checking.sandbox_run import BENCH_RUN, SANDBOX_RUN, SandboxRun
from dace_ai.errors import UnverifiedWarning
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker
from dace_ai.state import STATE

_told: set[str] = STATE.register("checking.verify.told", set())
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


def applies(request: CheckRequest) -> bool:
    """Host C++ for this machine: the child can run it."""
    return uses_host_compiler(request)


def verify_check(request: CheckRequest) -> CheckReport:
    """Compare the candidate with the node's reference on ``verify_seeds`` seeds along the size ladder."""
    settings = request.settings
    seeds = settings.verify_seeds
    sizes = parse_sizes_setting(settings.verify_sizes)
    plan = None
    if request.artefacts.wanted(BENCH_RUN):  # the bench stage judges the timing of this very run
        try:
            plan = bench.plan(request)
        except ValueError:
            plan = None  # a bad bench_sizes is the bench stage's to report
    result = run_against_reference(request, mode="verify", seeds=seeds, sizes=sizes, bench=plan)
    details: dict[str, Any] = {"threads": dict(result.threads)}
    if plan is not None:
        details["bench_sizes"] = plan.sizes
    seconds = result.seconds["total"] - float((result.bench or {}).get("seconds") or 0.0)
    report = sandbox_report("verify", request, result, result.message, seconds, details).give(SANDBOX_RUN, result)
    return report.give(BENCH_RUN, result) if result.bench is not None else report


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


@hookimpl
def dace_ai_checkers():
    yield Checker(
        name="verify",
        stage="verify",
        check=verify_check,
        applies=applies,
        default=True,
        needs=(COMPILED,),
        gives=(SANDBOX_RUN, BENCH_RUN),
        description="Runs the code against the node's reference (native expansion or reference=) "
        "on random inputs in a sandboxed child process",
    )
