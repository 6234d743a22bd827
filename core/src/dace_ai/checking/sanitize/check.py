"""The ``sanitizers`` checker: builds, runs and reports judged into one check report."""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dace_ai.checking.api import CheckReport, CheckRequest, Status, stable_paths
from dace_ai.checking.compile import COMPILED, compile_candidate
from dace_ai.checking.entry_code import entry_points
from dace_ai.checking.host_target import uses_host_compiler
from dace_ai.checking.ladder import case_place
from dace_ai.checking.runner import uses_openmp
from dace_ai.checking.sandbox_run import SANDBOX_RUN
from dace_ai.checking.sanitize.builds import SANITIZER_BUILDS, SanitizerBuild, SanitizerBuilds, start_build
from dace_ai.checking.sanitize.reports import no_addresses, read_report
from dace_ai.checking.sanitize.runs import SanitizerRun, run_sanitized, sanitizer_cases
from dace_ai.checking.sanitize.tools import (
    ADDRESS_THREADS,
    ARCHER_ACTIVE,
    BUILD_TIMEOUT,
    CLANG_PACKAGE,
    COMPILER_SETTING,
    LIBOMP_PACKAGE,
    NAME,
    RUNTIME_PACKAGE,
    THREAD_COUNT,
    libomp_problem,
    sanitizer_compiler,
)
from dace_ai.checking.units import ToolResult, unit_place
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker
from dace_ai.state import STATE

if TYPE_CHECKING:
    from dace_ai.checking.child.records import Case


# ----------------------------------------------------------------------------- the check
#: Reasons that are the machine's, not the candidate's: said once per process, then ``told``.
MACHINE_REASONS = ("clang missing", "libomp missing", "sanitizer runtime missing")
_told: set[str] = STATE.register("checking.sanitize.told", set())
_told_lock = threading.Lock()


def tell_once(reason: str, message: str) -> None:
    """Warn once per process that a tool is missing (every candidate's report says it too, marked ``told``)."""
    import warnings

    from dace_ai.errors import InconclusiveCheckWarning

    with _told_lock:
        if reason in _told:
            return
        _told.add(reason)
    warnings.warn(
        f"dace-ai: {message} (The sanitizers checker says this once; answers are accepted without "
        "those runs, or refused with on_inconclusive=reject.)",
        InconclusiveCheckWarning,
        stacklevel=3,
    )


def applies(request: CheckRequest) -> bool:
    """Host C++ that DaCe builds, which the ``verify`` checker passed (its run is the artefact ``SANDBOX_RUN``).

    A candidate verify refused needs no second opinion; one it could not decide (no
    reference, a reference that fails on the generated inputs) may only be defined for
    inputs it never saw (a histogram's bins), and a sanitizer report on those would
    blame correct code. When ``verify`` is not selected the sanitizers run alone.
    """
    if not uses_host_compiler(request):
        return False
    run = request.artefacts.get(SANDBOX_RUN)
    return run is None or run.status == "passed"


def _first_error(output: str) -> str:
    """The first error line of a compiler's output (or its first line)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return next((line for line in lines if "error" in line), lines[0] if lines else "(no output)")


def _build_problem(build: SanitizerBuild, result: ToolResult) -> tuple[str, str]:
    """(reason, words) for a sanitized build that failed: libomp missing, or clang cannot compile the code."""
    out = result.output
    if re.search(r"omp\.h' file not found|cannot find -lomp|libomp|libarcher|undefined reference to .omp_", out):
        return "libomp missing", (
            f"the {build.kind} sanitizer build could not find LLVM's OpenMP runtime: "
            f"{_first_error(out)}; install the Debian package `{LIBOMP_PACKAGE}`"
        )
    if re.search(r"libclang_rt\.\w+", out):
        return "sanitizer runtime missing", (
            f"clang++ has no {build.kind} sanitizer runtime: {_first_error(out)}; "
            f"install the Debian package `{RUNTIME_PACKAGE}`"
        )
    if result.timed_out:
        return "build timeout", f"the {build.kind} sanitizer build did not finish within {BUILD_TIMEOUT:g} s"
    return "clang could not compile the code", (
        f"clang++ could not compile for the {build.kind} sanitizer run what the real build's compiler compiled "
        f"(a GCC extension?): {_first_error(out)}"
    )


@dataclass
class _Part:
    """The outcome of one sanitized run (address or thread)."""

    status: str  #: passed, failed, inconclusive
    reason: str = ""
    message: str = ""


def _judge_run(
    build: SanitizerBuild, run: SanitizerRun, case: Case, unit: str, answer_lines: int, threads: int | None
) -> _Part:
    """Passed, failed (a report in the answer's lines) or inconclusive (anything else) for one run."""

    where = case_place(case)
    if build.kind == "thread":
        where = f"OpenMP, {threads} threads, {where}"
    if run.timed_out:
        return _Part("inconclusive", "timeout", f"the {build.kind} sanitizer run did not finish in time ({where})")
    finding = read_report(run, case)
    if finding is None:
        if run.returncode == 0:
            return _Part("passed")  # (without Archer TSan would only see more races, never fewer)
        tail = no_addresses(stable_paths(run.output.strip().splitlines()[-1] if run.output.strip() else "", {}))
        return _Part(
            "inconclusive",
            "run",
            f"the {build.kind} sanitizer run ended with status {run.returncode} "
            f"without a sanitizer report ({where}): {tail[:300]}",
        )
    if build.kind == "thread" and ARCHER_ACTIVE not in run.output:
        # Without Archer TSan does not see OpenMP's own synchronisation: its races would not be trusted.
        return _Part(
            "inconclusive",
            "libomp missing",
            f"{finding.text} ({where}), but the run had no Archer (LLVM's OpenMP support for "
            f"ThreadSanitizer), so it is not trusted; install the Debian package `{LIBOMP_PACKAGE}`",
        )
    if not finding.judged:
        return _Part("inconclusive", "sanitizer warning", f"{finding.text} ({where}); not counted against the code")
    if finding.line is None:
        return _Part(
            "inconclusive",
            "outside the code",
            f"{finding.text} outside the candidate's code (in the check's driver or a library; {where}); "
            "not counted against the code",
        )
    place, in_answer = unit_place(unit, finding.line, answer_lines)
    if not in_answer:
        return _Part(
            "inconclusive",
            "outside the code",
            f"{finding.text} at {place}, in the check's own entry points, not in the candidate's code "
            f"({where}); not counted against the code",
        )
    message = f"{finding.text} at {place} ({where})" + (f": {finding.hint}" if finding.hint else ".")
    return _Part("failed", finding.sanitizer if finding.sanitizer != "thread" else "race", message)


def _answer_lines(request: CheckRequest, unit: str) -> int:
    """Lines of the unit that hold the answer (everything before our entry points)."""

    return len(unit.splitlines()) - len(entry_points(request.node).splitlines())


def _overall(parts: list[_Part], details: dict[str, Any], thread_run: bool) -> tuple[Status, str, str]:
    """(status, reason, message) of the whole check from its runs; when one was inconclusive, ``details["passed"]``."""
    failed = [p for p in parts if p.status == "failed"]
    if failed:
        return "failed", failed[0].reason, failed[0].message
    unsure = [p for p in parts if p.status == "inconclusive"]
    if unsure:
        passed = details["passed"] = [b for b, p in zip(("address", "thread"), parts) if p.status == "passed"]
        lead = (
            f"Checked in part under the sanitizers (the {' and '.join(passed)} run passed): "
            if passed
            else "Not checked under the sanitizers: "
        )
        return "inconclusive", unsure[0].reason, lead + "; ".join(p.message for p in unsure) + "."
    ran = " + ".join(["AddressSanitizer", "UndefinedBehaviorSanitizer"] + (["ThreadSanitizer"] if thread_run else []))
    return "passed", "", f"no report from {ran}"


def sanitizers_check(request: CheckRequest) -> CheckReport:
    """Run the candidate once under ASan+UBSan (and TSan with Archer for OpenMP code) at a small size."""
    start = time.perf_counter()
    seconds: dict[str, float] = {}
    sizes: dict[str, dict[str, int]] = {}
    details: dict[str, Any] = {
        "sanitizers": ["address", "undefined"],
        "sanitizer_sizes": sizes,
        "threads": None,
        "seconds": seconds,
    }

    def report(status: Status, reason: str, message: str) -> CheckReport:
        told = status == "inconclusive" and reason in MACHINE_REASONS
        if told:
            tell_once(reason, message)
        seconds["check"] = time.perf_counter() - start
        return CheckReport(
            NAME,
            status,
            message,
            seconds["check"],
            details,
            stage="verify",
            reason=reason,
            told_user=told,
            sizes=list(sizes.values()),
            supplements_verify=True,
        )

    compiler = sanitizer_compiler(request.settings)
    if compiler is None:
        name = request.settings.sanitizers_compiler or COMPILER_SETTING.default
        return report(
            "inconclusive",
            "clang missing",
            f"Not run under the sanitizers: {name!r} is not installed; install the Debian package "
            f"`{CLANG_PACKAGE}` (or name another clang++ with the setting {COMPILER_SETTING.name}).",
        )
    build = compile_candidate(request)
    if not build.ok or build.object is None:
        return report("inconclusive", "not compiled", "Not run under the sanitizers: the code did not compile.")
    try:
        small, odd = sanitizer_cases(request)
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        return report("inconclusive", "sizes", f"Not run under the sanitizers: no size to run ({exc}).")
    unit = build.unit.read_text(encoding="utf-8")
    answer_lines = _answer_lines(request, unit)
    openmp = uses_openmp(build.object)
    omp_problem = libomp_problem(compiler) if openmp else None
    # The builds the stage runner started beside the compile, corrected from the object's symbols.
    builds = request.artefacts.get(SANITIZER_BUILDS) or SanitizerBuilds()
    address = start_build(request, builds, "address", unit, build.flags, openmp and omp_problem is None, compiler)
    thread = (
        start_build(request, builds, "thread", unit, build.flags, True, compiler)
        if openmp and not omp_problem
        else None
    )
    parts: list[_Part] = []
    sizes["address"] = dict(small["sizes"])
    parts.append(_run_part(request, address, small, unit, answer_lines, ADDRESS_THREADS if openmp else 1, seconds))
    if openmp and omp_problem:
        parts.append(_Part("inconclusive", "libomp missing", f"no thread sanitizer run: {omp_problem}"))
    elif thread is not None:
        details["sanitizers"].append("thread")
        details["threads"] = THREAD_COUNT
        sizes["thread"] = dict(odd["sizes"])
        if parts[0].status == "failed":
            thread.stop()
        else:
            parts.append(_run_part(request, thread, odd, unit, answer_lines, THREAD_COUNT, seconds))
    for kind, b in builds.builds.items():
        details.setdefault("pch", {})[kind] = b.pch
    return report(*_overall(parts, details, thread is not None))


def _run_part(
    request: CheckRequest,
    build: SanitizerBuild,
    case: Case,
    unit: str,
    answer_lines: int,
    threads: int,
    seconds: dict[str, float],
) -> _Part:
    """Wait for one build, run it, judge the run; timings go into ``seconds``."""
    waited = time.perf_counter()
    result = build.wait()
    seconds[f"{build.kind}_wait"] = time.perf_counter() - waited
    for step in ("pch", "driver", "compile"):  # the build's steps (pch and driver: reused when warm)
        seconds[f"{build.kind}_{step}"] = build.seconds.get(step, 0.0)
    seconds[f"{build.kind}_build"] = build.seconds.get("total", 0.0)
    if not result.ok or not build.executable.is_file():
        reason, words = _build_problem(build, result)
        return _Part("inconclusive", reason, stable_paths(words, {str(build.folder) + os.sep: ""}))
    run = run_sanitized(build, case, request, threads)
    seconds[f"{build.kind}_run"] = run.seconds
    return _judge_run(build, run, case, unit, answer_lines, threads if build.kind == "thread" else None)


def checker() -> Checker:
    """The registration (yielded by :func:`dace_ai_checkers` below): it needs verify's run (it runs after
    it and only on a passed one), the candidate's compile and the sanitizer builds the runner starts for it."""
    return Checker(
        name=NAME,
        stage="verify",
        check=sanitizers_check,
        applies=applies,
        default=True,
        needs=(SANDBOX_RUN, COMPILED, SANITIZER_BUILDS),
        settings=(COMPILER_SETTING,),
        description="Runs the code once more at a small size built by clang++ with AddressSanitizer + "
        "UndefinedBehaviorSanitizer, and ThreadSanitizer with LLVM's OpenMP/Archer for "
        "OpenMP code (races found without a collision)",
    )


@hookimpl
def dace_ai_checkers():
    """The ``sanitizers`` checker, a plugin of its own (entry point ``sanitizers-checker``)."""
    yield checker()
