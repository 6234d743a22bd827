"""Built-in plugin: the ``verify`` checker (stage ``verify``, on by default).

It runs the candidate against the node's reference in the sandbox
(:func:`dace_ai.sandbox.harness.run_against_reference`): the node's native expansion
for library nodes that have one, the ``reference=`` function for an ``AINode``. The
report says what was checked::

    CheckReport("verify", "passed", seeds=3, sizes=[{"N": 13}, {"N": 67}, {"N": 64}, ...], details={
                                             "ladder": [...], "skipped": [...]})
    CheckReport("verify", "failed", "Wrong result (seed 0, sizes N=64 (the vector-multiple size)): output _out ...")
    CheckReport("verify", "inconclusive", "Not verified: no reference.", reason="no reference", told_user=True)
    CheckReport("verify", "inconclusive", "Not run: compiled for x86-avx512; this host cannot run it (...)",
                reason="compile-only: compiled for x86-avx512; this host cannot run it", compile_only=True)

A failed report's diagnostics go back to the model in the next repair round. A node
without a reference is reported as inconclusive and the user is told once per
program (an :class:`~dace_ai.errors.UnverifiedWarning`), since a silent "checked"
would be a lie. Code for a target this machine cannot run (an AVX-512 target on an
AVX2 host) is not run: the report is inconclusive with ``compile_only``, so the level
says ``compile-only: compiled for x86-avx512; this host cannot run it``.
"""

from __future__ import annotations

from typing import Any

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.compilation.compile import COMPILED
from dace_ai.compilation.host_target import not_runnable_here, uses_host_compiler
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker
from dace_ai.sandbox.cases import parse_sizes_setting
from dace_ai.sandbox.harness import run_against_reference
from dace_ai.sandbox.run_plan import bench_plan_with_baselines
from dace_ai.sandbox.run_report import sandbox_report
from dace_ai.sandbox.sandbox_run import BENCH_RUN, SANDBOX_RUN


def applies(request: CheckRequest) -> bool:
    """Host C++ for this machine: the child can run it."""
    return uses_host_compiler(request)


def verify_check(request: CheckRequest) -> CheckReport:
    """Compare the candidate with the node's reference on ``verify_seeds`` seeds along the size ladder."""
    why = not_runnable_here(request)
    if why:
        return CheckReport(
            "verify",
            "inconclusive",
            f"Not run: {why}. Only the compile stage checked it.",
            reason="compile-only: " + why.split(" (", 1)[0],
            compile_only=True,
        )
    settings = request.settings
    seeds = settings.verify_seeds
    sizes = parse_sizes_setting(settings.verify_sizes)
    plan = None
    if request.artefacts.wanted(BENCH_RUN):  # the bench stage judges the timing of this very run
        try:
            plan = bench_plan_with_baselines(request)
        except ValueError:
            plan = None  # a bad bench_sizes is the bench stage's to report
    result = run_against_reference(request, mode="verify", seeds=seeds, sizes=sizes, bench=plan)
    details: dict[str, Any] = {"threads": dict(result.threads)}
    if plan is not None:
        details["bench_sizes"] = plan.sizes
    seconds = result.seconds["total"] - float((result.bench or {}).get("seconds") or 0.0)
    report = sandbox_report("verify", request, result, result.message, seconds, details).give(SANDBOX_RUN, result)
    return report.give(BENCH_RUN, result) if result.bench is not None else report


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
