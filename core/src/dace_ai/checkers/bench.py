"""Built-in plugin: the ``bench`` checker, candidate against the node's native expansion.

Setting ``bench``: ``off`` (no timing), ``report`` (default: time and record),
``gate`` (refuse a candidate whose speedup over native is below
``min_speedup``, 1.03 by default; the native expansion is then kept). Sizes
come from ``bench_sizes`` (``N=4096,M=512``; ``dace_ai.optimize(sizes=...)``
sets it) or are picked so each container holds about 2**16 elements.

No second build: the bench section runs in the same sandboxed child run as the
verify stage (:func:`dace_ai.sandbox.harness.run_against_reference` with a
:class:`~dace_ai.sandbox.run_plan.BenchPlan`), on the very library the verify
stage linked; when the verify stage did not run, this stage runs the same child
on that library itself. The section compares the candidate with the reference at
the bench sizes (two seeds, one thread then all cores twice), then times it
interleaved with the native reference (warm-up, batches for the timer's
resolution, under a machine-wide lock). A node with nothing to compare against
(no native expansion) is not timed unless asked (``bench_sizes`` given or
``bench=gate``); its report gives the per-call time of the run it had anyway.

A bench also refuses what it catches while running: a crash, an endless loop,
outputs that differ from the reference's, results that change with the threads,
and the anti-deception rules of :mod:`dace_ai.sandbox.deception`. Its figures
(per-run seconds of both sides, medians, speedup with its range) go into the
report's typed ``bench`` field, from there into the session and the tasklet's provenance;
so does the same timing against this machine's measured roofline (its
``speed_of_light`` field: achieved GFLOP/s and GB/s, the bound, the fraction of
speed of light; :mod:`dace_ai.performance`), which never changes the verdict.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.compilation.compile import COMPILED
from dace_ai.compilation.host_target import runs_on_host
from dace_ai.performance import describe_speed_of_light
from dace_ai.performance.bench_figure import BenchSpeedOfLight, bench_speed_of_light
from dace_ai.performance.records import BenchFigures
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker
from dace_ai.sandbox import deception
from dace_ai.sandbox.baselines import bench_comparison
from dace_ai.sandbox.bench_sizes import parse_sizes
from dace_ai.sandbox.constraints import first_point
from dace_ai.sandbox.deception import format_seconds
from dace_ai.sandbox.harness import run_against_reference
from dace_ai.sandbox.reference import reference_kind
from dace_ai.sandbox.run_plan import bench_plan_with_baselines
from dace_ai.sandbox.sandbox_run import BENCH_RUN, SandboxRun

NAME = "bench"


def bench_applies(request: CheckRequest) -> bool:
    """Host C++ with something to compare against (a native expansion or ``reference=``), or timing asked for.

    A node with neither is not timed unless ``bench_sizes`` is set or ``bench=gate``: a
    figure with no baseline says nothing, and the verify stage has already told the user
    that the node is not verified. Code for a target this machine cannot run is not timed.
    """
    settings = request.settings
    if settings.bench == "off" or not runs_on_host(request) or not request.node.live:
        return False
    if settings.bench == "gate":
        return True
    try:
        if parse_sizes(settings.bench_sizes):
            return True
    except ValueError:
        return True  # the stage reports the bad setting
    return reference_kind(request)[0] is not None


def figures(result: Mapping[str, Any]) -> BenchFigures:
    """Medians, speedup and its range (from the interleaved pairs) of a bench run (the child's bench section)."""
    native, candidate = result.get("native") or [], result.get("candidate") or []
    sizes, batch = result.get("sizes"), result.get("batch")
    fig = BenchFigures(
        sizes={str(k): int(v) for k, v in sizes.items()} if isinstance(sizes, Mapping) else None,
        repeats=len(candidate),
        batch={str(k): int(v) for k, v in batch.items()} if isinstance(batch, Mapping) else None,
        native_reused=bool(result.get("native_reused")),
        candidate_seconds=tuple(candidate),
        native_seconds=tuple(native),
        bytes=result.get("bytes"),
        bandwidth=result.get("bandwidth"),
        candidate_median=statistics.median(candidate) if candidate else None,
    )
    if not (native and candidate):
        return fig
    pairs = (
        zip(native, candidate)
        if not result.get("native_reused")
        else ((statistics.median(native), c) for c in candidate)
    )  # not interleaved: against the median
    ratios = sorted(n / c for n, c in pairs if c > 0)
    native_median = statistics.median(native)
    return replace(
        fig,
        native_median=native_median,
        speedup=native_median / statistics.median(candidate),
        speedup_range=(ratios[0], ratios[-1]) if ratios else None,
    )


def describe(fig: BenchFigures, sol: BenchSpeedOfLight | None = None) -> str:
    """One line: ``0.65x vs OpenBLAS (DaCe 'OpenBLAS') (strongest); speedup 61.2x (58.1-63.0) over DaCe pure: ...;
    52.1 GFLOP/s, 0.9 GB/s: compute-bound, 27% of speed of light (peak 190 GFLOP/s float32, 2 threads)``."""
    return _speeds(fig) + _speed_of_light(sol)


def _speed_of_light(found: BenchSpeedOfLight | None) -> str:
    """``; <figure against the roofline>`` (with the memory level of a memory-bound one), or ""."""
    if found is None or found.figure is None:
        return ""
    sol, level = found.figure, found.level
    where = f", data in {level}" if sol.bound == "memory" and level and level != "memory" else ""
    return f"; {describe_speed_of_light(sol.record())}{where}"


def _speeds(fig: BenchFigures) -> str:
    candidate = fig.candidate_median
    if fig.speedup is None or candidate is None or fig.native_median is None:
        if candidate is not None:
            return f"{format_seconds(candidate)} per call (no native expansion to compare)"
        return "not timed"
    low, high = fig.speedup_range or (fig.speedup, fig.speedup)
    native = fig.native
    named = "".join(
        f"{seconds / candidate:.2f}x vs {label}{' (strongest)' if label == fig.strongest else ''}; "
        for label, seconds in sorted((fig.baselines or {}).items(), key=lambda item: item[1])
        if label != native and candidate > 0
    )  # each figure names its baseline, fastest first
    earlier = [w for w, on in (("native", fig.native_reused), ("baselines", fig.baselines_reused)) if on]
    reused = f" ({' and '.join(earlier)} timed by an earlier candidate of the node)" if earlier else ""
    return (
        f"{named}speedup {fig.speedup:.2f}x ({low:.2f}-{high:.2f}) over {native or 'the native expansion'}: "
        f"{format_seconds(candidate)} vs {format_seconds(fig.native_median)} per call, "
        f"median of {fig.repeats} at sizes {_sizes(fig.sizes)}{reused}"
    )


def _sizes(sizes: Mapping[str, int] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (sizes or {}).items()) or "(none)"


def _refusal(result: SandboxRun) -> CheckReport:
    """The report for a sandboxed bench run that did not pass (its ``problem``, never its wording, decides)."""
    if result.status == "inconclusive":
        return CheckReport(NAME, "inconclusive", result.message, reason=str(result.reason or ""))
    problem = result.problem or {}
    reason = result.reason or ""
    container = problem.get("container") or "?"
    findings: dict[str, Any] = {}
    if reason == "outside_buffer":
        findings["reads_outside" if problem.get("access") == "read" else "writes_outside"] = [container]
    elif reason == "outside_subset":
        findings["inputs_modified" if problem.get("input") else "writes_outside"] = [container]
    reasons = deception.run_reasons(findings) if findings else []
    if reasons:
        return CheckReport(
            NAME,
            "failed",
            "Refused: " + "; ".join(reasons) + f". ({result.message})",
            rule="deception",
            reason=reason,
            details={"reasons": reasons},
        )
    if reason in ("mismatch", "unwritten", "nondeterministic"):
        return CheckReport(NAME, "failed", result.message, rule=reason, reason=reason)
    return CheckReport(NAME, "failed", f"Running your code failed: {result.message}", rule=reason, reason=reason)


def _sandbox_bench(request: CheckRequest) -> tuple[SandboxRun, dict[str, Any], float] | CheckReport:
    """The sandboxed run to judge, its bench section and the seconds it cost: the verify stage's
    when it timed the bench, else a run of its own (a report when that one cannot be judged)."""
    verified = request.artefacts.get(BENCH_RUN)
    if verified is not None and verified.bench is not None:  # its share of the verify stage's run
        return verified, dict(verified.bench), float(verified.bench.get("seconds") or 0.0)
    try:
        bench = bench_plan_with_baselines(request)
    except ValueError as exc:
        settings = request.settings
        return CheckReport(NAME, "inconclusive", f"setting 'bench_sizes' from {settings.source('bench_sizes')}: {exc}")
    result = run_against_reference(request, mode="bench", bench=bench)
    if result.status != "passed":
        return _refusal(result)
    if result.bench is None:  # a passed run with a bench plan always has its bench section
        raise RuntimeError("the sandboxed bench run passed without a bench section")
    return result, dict(result.bench), result.seconds["total"]


def bench_check(request: CheckRequest) -> CheckReport:
    """Judge the bench section of the candidate's sandboxed run (the verify stage's, else one of its own).

    No DaCe build of the candidate: the figures come from the library the verify
    stage linked, timed in the same child runner.
    """
    settings = request.settings
    forbidden = deception.forbidden_library_reason(
        request.answer, "\n".join([request.node.description, settings.extra_instructions or ""])
    )
    if forbidden:
        return CheckReport(NAME, "failed", f"Refused: {forbidden}.", rule="native-library")
    found = _sandbox_bench(request)
    if isinstance(found, CheckReport):
        return found
    result, run, seconds = found
    run.setdefault("candidate", None)
    if not run.get("timed") and run.get("call_seconds"):
        run = {**run, "candidate": run["call_seconds"]}
    fig = figures(run)
    sol = _bench_speed_of_light(request, fig, result.threads.get("count"))
    fig = replace(
        fig,
        timed=bool(run.get("timed")),
        library=run.get("library"),
        threads=result.threads.get("count"),
        **bench_comparison(
            fig.candidate_median, fig.native_median, run.get("baselines") or {}, run.get("native_label")
        ),
        baselines_left_out=dict(run.get("baselines_left_out") or {}),
        baselines_reused=tuple(run.get("baselines_reused") or ()),
        speed_of_light_level=sol.level,
        work=sol.work,
        speed_of_light_missing=sol.reason if sol.figure is None else "",
    )
    reasons = deception.run_reasons(run)
    sizes = [dict(fig.sizes)] if fig.sizes is not None else []
    gate_on = settings.gate_baseline
    if reasons:
        return CheckReport(
            NAME,
            "failed",
            "Refused: " + "; ".join(reasons) + ".",
            seconds,
            rule="deception",
            sizes=sizes,
            details={"reasons": reasons},
            bench=fig,
            speed_of_light=sol.figure,
        )
    gated = fig.speedup_strongest if gate_on == "strongest" else fig.speedup
    if settings.bench == "gate" and gated is not None and gated < settings.min_speedup:
        against = (
            f"the strongest baseline ({fig.strongest})"
            if gate_on == "strongest"
            else f"native ({fig.native or 'the native expansion'})"
        )
        return CheckReport(
            NAME,
            "failed",
            f"Too slow: {describe(fig, sol)}; a speedup of at least {settings.min_speedup:.2f}x over "
            f"{against} is required (settings min_speedup, gate_baseline). Make the code faster.",
            seconds,
            rule="gate",
            sizes=sizes,
            bench=fig,
            speed_of_light=sol.figure,
        )
    return CheckReport(NAME, "passed", describe(fig, sol), seconds, sizes=sizes, bench=fig, speed_of_light=sol.figure)


def _bench_speed_of_light(request: CheckRequest, fig: BenchFigures, threads: int | None) -> BenchSpeedOfLight:
    """The bench's figure against this machine's roofline (see :mod:`dace_ai.performance.bench_figure`)."""

    values: Any = dict(fig.sizes or {})
    try:
        values.update(first_point(request, values))  # a node inside a map: its view at the map's first point
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        values = exc
    return bench_speed_of_light(request.node, request.settings.speed_of_light, fig.candidate_median, values, threads)


@hookimpl
def dace_ai_checkers():
    yield Checker(
        name=NAME,
        stage="bench",
        check=bench_check,
        applies=bench_applies,
        default=True,
        needs=(BENCH_RUN, COMPILED),
        description="times the verified library against the node's native expansion and DaCe's "
        "installed library implementations (OpenBLAS, ...) in the sandbox child, and "
        "against this machine's roofline (fraction of speed of light); "
        "setting bench = off | report | gate (min_speedup, gate_baseline)",
    )
