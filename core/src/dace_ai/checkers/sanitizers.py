"""Built-in checker ``sanitizers`` (stage ``verify``, on by default): the candidate once more, under clang's sanitizers.

The verify stage runs the candidate on guarded buffers: an access past a buffer's
guard page faults, but one that stays inside the slack before it (a vector load of
the last partial chunk, ``_a[i + 1]`` at ``i = N - 1``) goes unseen when its value
is not used, and a data race is only found when threads happen to collide. This
checker builds the very unit of the candidate's one compile
(:func:`dace_ai.compilation.compile.compile_candidate`) a second time with ``clang++``
and runs it once at a small size, in a process of its own:

* **AddressSanitizer + UndefinedBehaviorSanitizer** (``-fsanitize=address,undefined
  -fno-sanitize-recover=all -O1 -g``): every container is allocated with exactly its
  byte count, so ASan's redzone starts right after it; out-of-bounds accesses,
  misaligned typed loads, signed overflow, over-wide shifts, ... end the run with a
  report. Sizes: the ladder's first ``small`` case.
* **ThreadSanitizer** with LLVM's OpenMP runtime and Archer (``-fsanitize=thread
  -fopenmp``), for code that uses OpenMP or a node whose calls can run at the same time
  (:func:`dace_ai.context.concurrency.runs_concurrently`, the verify child's test): 4
  threads even on 2 cores, at the ``odd`` rung's size (else ``small``). TSan sees two
  unsynchronised accesses whether or not they overlap in time, so a shared accumulator
  without a reduction fails every time; Archer tells TSan about OpenMP's own
  synchronisation, so a correct reduction or a parallel loop writing disjoint elements
  passes. For a node whose calls can run at the same time the driver then makes
  :data:`~dace_ai.sandbox.sanitizers.tools.AT_ONCE_ROUNDS` rounds of calls at once: an
  OpenMP team of 4 calling ``dace_ai_entry_run`` on one state, each thread on copies of
  its own of every container. A race during them is refused with reason ``shared
  state`` in the verify child's words (the variable TSan names, else the answer's line).

Both builds are started beside the main compile (:func:`start_sanitizer_builds`, the maker of
the artefact ``SANITIZER_BUILDS`` this checker needs: the stage runner starts it before the
compile stage and kills its compiler processes when a stage fails or the checks end), so a
2-core machine overlaps them.
``dace/dace.h`` is precompiled for clang once per flag set
(:func:`dace_ai.compilation.compile.ensure_pch`) and the fixed C++ driver
(``driver.cpp``, our code, never the model's) is compiled once per flag set, so a
warm sanitizer build is one short compile and link.

The driver reads a plain job file (symbol values, enclosing-map parameters, per
container its byte size and a raw data file, per connector its container and byte
offset, in the entry points' order; see :func:`write_job`), allocates each container
with exactly its byte count (64-byte aligned, as the verify child aligns its buffers),
calls ``dace_ai_entry_init/run/exit`` and prints each buffer's address range first,
so a report's address is mapped to the container. The first report becomes one short
message naming the class, the container and the answer's line::

    AddressSanitizer: heap-buffer-overflow: READ of 8 bytes right after the end of container A
    (connector _a) at tasklet.cpp:27: `double next = _a[i + 1];` (line 2 of your code) (seed 0,
    sizes N=13 (the small odd size)): every access must stay inside the data its connector covers, ...

Reports: ``CheckReport("sanitizers", "passed" | "failed" | "inconclusive", diagnostics,
stage="verify", reason=..., sizes=[address run's, thread run's], details={"sanitizers":
["address", "undefined"(, "thread")], "sanitizer_sizes": {"address": {...}, "thread": {...}},
"threads": 4 | None, "at_once": {"threads": 4, "rounds": 3} | None, "seconds": {...}, "pch": {...}})``
(``"passed": [...]``: the runs that passed when
another was inconclusive). Inconclusive (never failed) when clang++ is missing (Debian
package ``clang``), when LLVM's OpenMP runtime or Archer is missing for the thread
run (``libomp-dev``; the address run still counts), when clang has no sanitizer
runtime (``libclang-rt-dev``) - these three are the machine's, said once per process
and marked ``told`` -, when clang cannot compile what the real build's compiler
compiled (a GCC extension: clang's first error is quoted), and when a report is not
in the candidate's code (the driver, our entry points). The checker applies only to
candidates the ``verify`` checker passed (inputs it could not judge may lie outside
what the node is defined for), and it runs after ``verify`` in its stage (it needs ``SANDBOX_RUN``).
``checkers = "-sanitizers"`` turns it off; the setting ``sanitizers_compiler`` names the clang++ to use.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dace_ai.checking.api import CheckReport, CheckRequest, Status, stable_paths
from dace_ai.compilation.compile import COMPILED, compile_candidate
from dace_ai.compilation.entry_code import entry_points
from dace_ai.compilation.host_target import runs_on_host
from dace_ai.compilation.units import ToolResult, unit_place
from dace_ai.context.concurrency import runs_concurrently
from dace_ai.errors import InconclusiveCheckWarning
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker
from dace_ai.sandbox.ladder import case_place
from dace_ai.sandbox.run_plan import uses_openmp
from dace_ai.sandbox.sandbox_run import SANDBOX_RUN
from dace_ai.sandbox.sanitizers.builds import SANITIZER_BUILDS, SanitizerBuild, SanitizerBuilds, start_build
from dace_ai.sandbox.sanitizers.reports import in_calls_at_once, no_addresses, read_report
from dace_ai.sandbox.sanitizers.runs import SanitizerRun, run_sanitized, sanitizer_cases
from dace_ai.sandbox.sanitizers.tools import (
    ADDRESS_THREADS,
    ARCHER_ACTIVE,
    AT_ONCE_ROUNDS,
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
from dace_ai.sandbox.wording import SHARED_STATE_FIX, shared_state_lead
from dace_ai.state import STATE

if TYPE_CHECKING:
    from dace_ai.sandbox.child.records import Case


# ----------------------------------------------------------------------------- the check
#: Reasons that are the machine's, not the candidate's: said once per process, then ``told``.
MACHINE_REASONS = ("clang missing", "libomp missing", "sanitizer runtime missing")
_told: set[str] = STATE.register("checkers.sanitizers.told", set())
_told_lock = threading.Lock()


def tell_once(reason: str, message: str) -> None:
    """Warn once per process that a tool is missing (every candidate's report says it too, marked ``told``)."""
    import warnings

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
    blame correct code. When ``verify`` is not selected the sanitizers run alone. Code for a target
    this machine cannot run is not run.
    """
    if not runs_on_host(request):
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
    build: SanitizerBuild,
    run: SanitizerRun,
    case: Case,
    unit: str,
    answer_lines: int,
    threads: int | None,
    at_once: bool = False,
) -> _Part:
    """Passed, failed (a report in the answer's lines) or inconclusive (anything else) for one run; ``at_once``:
    the thread run also made its calls at once (a race during them is state the calls share)."""

    where = case_place(case)
    together = at_once and build.kind == "thread" and in_calls_at_once(run.output)
    if together:
        where = f"{threads} threads calling one state at once, {AT_ONCE_ROUNDS} rounds, {where}"
    elif build.kind == "thread":
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
    if together:
        # The variable TSan names (a global or static), else the answer's line of the access.
        shared, at = (f"`{finding.variable}`", f" at {place}") if finding.variable else (f"what {place} accesses", "")
        return _Part(
            "failed",
            "shared state",
            f"{shared_state_lead(shared)} {finding.text}{at} ({where}), each thread on buffers of its own. "
            + SHARED_STATE_FIX,
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
    together = details.get("at_once")
    across = f", also across {together['threads']} calls at once on one state" if together and thread_run else ""
    return "passed", "", f"no report from {ran}{across}"


def sanitizers_check(request: CheckRequest) -> CheckReport:
    """Run the candidate once under ASan+UBSan (and TSan with Archer for OpenMP code) at a small size."""
    start = time.perf_counter()
    seconds: dict[str, float] = {}
    sizes: dict[str, dict[str, int]] = {}
    details: dict[str, Any] = {
        "sanitizers": ["address", "undefined"],
        "sanitizer_sizes": sizes,
        "threads": None,
        "at_once": None,
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
    at_once = runs_concurrently(request.node, request.answer.state_fields)
    omp_problem = libomp_problem(compiler) if openmp or at_once else None
    # The builds the stage runner started beside the compile, corrected from the object's symbols.
    builds = request.artefacts.get(SANITIZER_BUILDS) or SanitizerBuilds()
    address = start_build(request, builds, "address", unit, build.flags, openmp and omp_problem is None, compiler)
    thread = (
        start_build(request, builds, "thread", unit, build.flags, True, compiler)
        if (openmp or at_once) and not omp_problem
        else None
    )
    parts: list[_Part] = []
    sizes["address"] = dict(small["sizes"])
    parts.append(_run_part(request, address, small, unit, answer_lines, ADDRESS_THREADS if openmp else 1, seconds))
    if (openmp or at_once) and omp_problem:
        across = " across calls at once" if at_once else ""
        parts.append(_Part("inconclusive", "libomp missing", f"no thread sanitizer run{across}: {omp_problem}"))
    elif thread is not None:
        details["sanitizers"].append("thread")
        details["threads"] = THREAD_COUNT
        details["at_once"] = {"threads": THREAD_COUNT, "rounds": AT_ONCE_ROUNDS} if at_once else None
        sizes["thread"] = dict(odd["sizes"])
        if parts[0].status == "failed":
            thread.stop()
        else:
            parts.append(_run_part(request, thread, odd, unit, answer_lines, THREAD_COUNT, seconds, at_once))
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
    at_once: bool = False,
) -> _Part:
    """Wait for one build, run it, judge the run (``at_once``: the thread run also calls at once); timings go
    into ``seconds``."""
    waited = time.perf_counter()
    result = build.wait()
    seconds[f"{build.kind}_wait"] = time.perf_counter() - waited
    for step in ("pch", "driver", "compile"):  # the build's steps (pch and driver: reused when warm)
        seconds[f"{build.kind}_{step}"] = build.seconds.get(step, 0.0)
    seconds[f"{build.kind}_build"] = build.seconds.get("total", 0.0)
    if not result.ok or not build.executable.is_file():
        reason, words = _build_problem(build, result)
        return _Part("inconclusive", reason, stable_paths(words, {str(build.folder) + os.sep: ""}))
    together = at_once and build.kind == "thread"
    run = run_sanitized(build, case, request, threads, (THREAD_COUNT, AT_ONCE_ROUNDS) if together else (0, 0))
    seconds[f"{build.kind}_run"] = run.seconds
    return _judge_run(build, run, case, unit, answer_lines, threads if build.kind == "thread" else None, together)


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
        "OpenMP code and across calls at once of a node whose calls can overlap (races found without a collision)",
    )


@hookimpl
def dace_ai_checkers():
    """The ``sanitizers`` checker, a plugin of its own (entry point ``sanitizers-checker``)."""
    yield checker()
