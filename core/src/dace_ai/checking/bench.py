"""Built-in plugin: the ``bench`` checker, candidate against the node's native expansion.

Setting ``bench``: ``off`` (no timing), ``report`` (default: time and record),
``gate`` (refuse a candidate whose speedup over native is below
``min_speedup``, 1.03 by default; the native expansion is then kept). Sizes
come from ``bench_sizes`` (``N=4096,M=512``; ``dace_ai.optimize(sizes=...)``
sets it) or are picked so each container holds about 2**16 elements.

A bench also refuses what it catches while running: a crash, an endless loop,
outputs that differ from the native expansion's, and the anti-deception rules
of :mod:`dace_ai.checking.deception`. Its figures (per-run seconds of both
sides, medians, speedup with its range) go into the report's ``details``, from
there into the session and the tasklet's provenance.
"""

from __future__ import annotations

import statistics
from typing import Any

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.checking.deception import format_seconds
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker

NAME = "bench"


def bench_applies(request: CheckRequest) -> bool:
    from dace_ai.checking.host import uses_host_compiler

    return request.settings.bench != "off" and uses_host_compiler(request) and bool(request.node.live)


def figures(result: dict[str, Any]) -> dict[str, Any]:
    """Medians, speedup and its range (from the interleaved pairs) of a bench run."""
    native, candidate = result.get("native") or [], result.get("candidate") or []
    out: dict[str, Any] = {"sizes": result.get("sizes"), "repeats": len(candidate), "batch": result.get("batch"),
                           "candidate_seconds": candidate, "native_seconds": native,
                           "bytes": result.get("bytes"), "bandwidth": result.get("bandwidth")}
    if candidate:
        out["candidate_median"] = statistics.median(candidate)
    if native and candidate:
        ratios = sorted(n / c for n, c in zip(native, candidate) if c > 0)
        out["native_median"] = statistics.median(native)
        out["speedup"] = out["native_median"] / out["candidate_median"]
        out["speedup_range"] = [ratios[0], ratios[-1]] if ratios else None
    return out


def describe(fig: dict[str, Any]) -> str:
    """One line: ``0.65x vs OpenBLAS (DaCe 'OpenBLAS') (strongest); speedup 61.2x (58.1-63.0) over DaCe pure: ...``."""
    if "speedup" not in fig:
        if "candidate_median" in fig:
            return f"{format_seconds(fig['candidate_median'])} per call (no native expansion to compare)"
        return "not timed"
    low, high = fig.get("speedup_range") or (fig["speedup"], fig["speedup"])
    candidate, native = fig["candidate_median"], fig.get("native")
    named = "".join(f"{seconds / candidate:.2f}x vs {label}{' (strongest)' if label == fig.get('strongest') else ''}; "
                    for label, seconds in sorted((fig.get("baselines") or {}).items(), key=lambda item: item[1])
                    if label != native and candidate > 0)  # each figure names its baseline, fastest first
    return (f"{named}speedup {fig['speedup']:.2f}x ({low:.2f}-{high:.2f}) over {native or 'the native expansion'}: "
            f"{format_seconds(fig['candidate_median'])} vs {format_seconds(fig['native_median'])} per call, "
            f"median of {fig['repeats']} at sizes {_sizes(fig.get('sizes'))}")


def _sizes(sizes: Any) -> str:
    return ", ".join(f"{k}={v}" for k, v in (sizes or {}).items()) or "(none)"


def bench_check(request: CheckRequest) -> CheckReport:
    from dace_ai.checking import deception
    from dace_ai.checking.timing import TimingUnavailable, parse_sizes, run_side_by_side

    settings = request.settings
    forbidden = deception.forbidden_library_reason(
        request.answer, "\n".join([request.node.description, settings.extra_instructions or ""]))
    if forbidden:
        return CheckReport(NAME, "failed", f"Refused: {forbidden}.", details={"rule": "native-library"})
    try:
        sizes = parse_sizes(settings.bench_sizes)
    except ValueError as exc:
        return CheckReport(NAME, "inconclusive", f"setting 'bench_sizes' from {settings.source('bench_sizes')}: "
                                                 f"{exc}")
    gate_on = settings.gate_baseline
    from dace_ai.checking.baselines import bench_comparison, bench_programs

    native_label, baseline_folders, left_out = bench_programs(request, build=settings.bench_baselines)
    try:
        result = run_side_by_side(request, sizes=sizes, repeats=settings.bench_repeats, baselines=baseline_folders)
    except TimingUnavailable as exc:
        return CheckReport(NAME, "inconclusive", str(exc))
    except Exception as exc:  # noqa: BLE001 - the candidate's program did not build: the compile stage's job
        text = str(exc).strip().splitlines()
        return CheckReport(NAME, "inconclusive", f"could not build the timing programs: {type(exc).__name__}: "
                                                 f"{text[-1] if text else ''}")
    status = result.get("status")
    if status != "ok":
        if status == "error" and result.get("phase") not in ("candidate",):
            return CheckReport(NAME, "inconclusive", f"the timing run failed: {result.get('detail')}",
                               details={"result": result})
        return CheckReport(NAME, "failed", f"Running your code failed: {result.get('detail')}.",
                           details={"rule": status, "result": _small(result)})
    fig = figures(result)
    fig.update(bench_comparison(fig, result.get("baselines") or {}, native_label))
    fig["baselines_left_out"] = {u.name: u.reason for u in left_out}
    mismatch = result.get("mismatch")
    if mismatch:
        return CheckReport(NAME, "failed", _mismatch_text(mismatch), details={"rule": "mismatch", **fig})
    reasons = deception.run_reasons(result)
    if reasons:
        return CheckReport(NAME, "failed", "Refused: " + "; ".join(reasons) + ".",
                           details={"rule": "deception", "reasons": reasons, **fig})
    gated = fig.get("speedup_strongest") if gate_on == "strongest" else fig.get("speedup")
    if settings.bench == "gate" and gated is not None and gated < settings.min_speedup:
        against = (f"the strongest baseline ({fig.get('strongest')})" if gate_on == "strongest"
                   else f"native ({fig.get('native') or 'the native expansion'})")
        return CheckReport(NAME, "failed",
                           f"Too slow: {describe(fig)}; a speedup of at least {settings.min_speedup:.2f}x over "
                           f"{against} is required (settings min_speedup, gate_baseline). Make the code faster.",
                           details={"rule": "gate", **fig})
    return CheckReport(NAME, "passed", describe(fig), details=fig)


def _mismatch_text(m: dict[str, Any]) -> str:
    return (f"Your results differ from the native expansion's: output {m['container']!r}, seed {m['seed']}, "
            f"first wrong element at index {m['index']}: expected {m['expected']!r}, got {m['got']!r} "
            f"({m['wrong']} of {m['of']} elements wrong, max error {m['max_error']:.3g}).")


def _small(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in ("traceback",)}


@hookimpl
def dace_ai_checkers():
    yield Checker(name=NAME, stage="bench", check=bench_check, applies=bench_applies, default=True,
                  description="times the candidate against the node's native expansion and DaCe's installed "
                              "library implementations (OpenBLAS, ...) in a child process; "
                              "setting bench = off | report | gate (min_speedup, gate_baseline)")
