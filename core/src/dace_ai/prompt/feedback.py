""" "Where the time goes": what was measured about a candidate, told to the model in the feedback.

Agents that tune kernels with a model feed profiler counters back in the loop. On a CPU
without counters to read, the equivalents are the bench stage's measured figures (time
per call, speedups with the baseline each is measured against), the machine's roofline
(the bound and the fraction of speed of light reached) and the compiler's own vectoriser
remarks on the candidate's loops (:mod:`dace_ai.compilation.remarks`). Repair rounds of a
candidate the bench gate refused as too slow (:func:`dace_ai.checking.stages.repair_message`),
``dace_ai.refine`` and the refinement rounds of ``dace_ai.optimize`` append this section,
so the model reads where to look, not only that it is slow.

The evidence is read from check reports: live :class:`~dace_ai.checking.api.CheckReport`
objects (their typed ``bench`` and ``speed_of_light`` fields) or the rows of a session
round's ``checks.json`` (``{"checker", "status", "stage", "details"}``, read into the same
records: :mod:`dace_ai.performance.records`). The speed of light is a
:class:`~dace_ai.performance.records.SpeedOfLight` (``gflops``, ``gbs``, ``bound``, ``fraction``,
``peak_gflops``, ``bandwidth_gbs``, ``flops``, ``bytes``, ``dtype``, ``threads``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dace_ai.performance.records import BenchFigures, SpeedOfLight

#: Heading of the section in the feedback.
TITLE = "## Where the time goes"


@dataclass(frozen=True)
class TimeEvidence:
    """What the checks of one candidate measured and what its compiler said about its loops."""

    #: The bench stage's figures (its report's ``bench``), None when nothing was timed.
    figures: BenchFigures | None = None
    #: The machine's roofline for the candidate (the bench report's ``speed_of_light``).
    speed_of_light: SpeedOfLight | None = None
    #: The compiler's remarks on the answer's own loops, one line each (the probe's ``details["remarks"]``).
    remarks: tuple[str, ...] = field(default_factory=tuple)
    #: How the remarks were produced: ``c++ at -O2``.
    compiled_with: str = ""
    #: What the remarks mean for this build (the probe's ``details["remarks_note"]``).
    remarks_note: str = ""

    @classmethod
    def from_reports(cls, reports: Iterable[Any]) -> TimeEvidence:
        """The evidence in ``reports`` (CheckReport objects or ``checks.json`` rows)."""
        figures: BenchFigures | None = None
        sol: SpeedOfLight | None = None
        remarks: tuple[str, ...] = ()
        compiled_with = note = ""
        for report in reports:
            checker, stage, details = _fields(report)
            bench, found = _results(report, stage)
            if figures is None and bench is not None and (bench.speedup, bench.candidate_median) != (None, None):
                figures = bench
            if found is not None and (sol is None or checker == "bench"):
                sol = found
            if not isinstance(details, Mapping):
                continue
            if not remarks and isinstance(details.get("remarks"), list):
                remarks = tuple(str(line) for line in details["remarks"])
                compiled_with = _compiled_with(details)
                note = str(details.get("remarks_note") or "")
        return cls(figures, sol, remarks, compiled_with, note)

    @property
    def fraction(self) -> float | None:
        """The fraction of speed of light reached, when the roofline was measured."""
        return self.speed_of_light.fraction if self.speed_of_light is not None else None

    def __bool__(self) -> bool:
        return bool(self.figures or self.speed_of_light or self.remarks)


def _fields(report: Any) -> tuple[str, str, Any]:
    """(checker, stage, details) of a report or of its ``checks.json`` row (older rows kept the stage in details)."""
    if isinstance(report, Mapping):
        details = report.get("details") or {}
        stage = report.get("stage") or (details.get("stage") if isinstance(details, Mapping) else "")
        return str(report.get("checker", "")), str(stage or ""), details
    return str(getattr(report, "checker", "")), str(getattr(report, "stage", "")), getattr(report, "details", None)


def _results(report: Any, stage: str) -> tuple[BenchFigures | None, SpeedOfLight | None]:
    """(bench figures, speed of light) of a report, or read from its ``checks.json`` row's details."""
    if not isinstance(report, Mapping):
        return getattr(report, "bench", None), getattr(report, "speed_of_light", None)
    details = report.get("details")
    if not isinstance(details, Mapping):
        return None, None
    sol = details.get("speed_of_light")
    return (
        BenchFigures.from_record(details) if stage == "bench" and BenchFigures.in_details(details) else None,
        SpeedOfLight.from_record(sol) if isinstance(sol, Mapping) else None,
    )


def _compiled_with(details: Mapping[str, Any]) -> str:
    compiler = " ".join(details.get("compiler") or [])
    levels = [f for f in details.get("flags") or [] if re.fullmatch(r"-O\w*", str(f))]
    if not compiler:
        return ""
    return f"`{compiler}` at {levels[-1]}" if levels else f"`{compiler}`"


def format_seconds(seconds: float) -> str:
    """``37.7 µs``, ``9.42 ms``: as the checks word times (the checking package imports this one, not back)."""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def render_figures(fig: BenchFigures) -> list[str]:
    """The measured times, each speedup with the baseline it is measured against."""
    candidate = fig.candidate_median
    if not candidate:
        return []
    sizes = ", ".join(f"{k}={v}" for k, v in (fig.sizes or {}).items()) or "the default sizes"
    repeats = fig.repeats
    runs = (
        f"median of {repeats} timed run{'s' if repeats != 1 else ''}"
        if fig.timed and repeats
        else "the checks' own run"
    )
    threads = f", {fig.threads} threads" if fig.threads else ""
    lines = [f"Measured at {sizes} ({runs}{threads}):", f"- your code: {format_seconds(candidate)} per call"]
    native = fig.native
    baselines = dict(fig.baselines or {})
    if fig.native_median and not baselines:
        baselines = {native or "the native expansion": fig.native_median}
    if not baselines:
        lines[-1] += " (no native expansion to compare with)"
    for label, seconds in sorted(baselines.items(), key=lambda item: item[1]):
        if not seconds:
            continue
        roles = [
            role
            for role, on in (
                ("the native expansion", label == native or not native and len(baselines) == 1),
                ("the strongest baseline", label == fig.strongest),
            )
            if on
        ]
        role = f" ({', '.join(roles)})" if roles else ""
        ratio = f"your speedup {seconds / candidate:.2f}x"
        if label == native and fig.speedup_range and fig.speedup is not None:
            low, high = fig.speedup_range
            ratio = f"your speedup {fig.speedup:.2f}x (range {low:.2f}-{high:.2f})"
        lines.append(f"- {label}{role}: {format_seconds(seconds)} per call; {ratio}")
    return lines


def render_speed_of_light(sol: SpeedOfLight) -> str:
    """One paragraph: the bound, what the code reaches of the machine's peak, and the fraction of speed of light."""
    work = [
        f"{_amount(sol.bytes)} bytes moved" if sol.bytes else "",
        f"{_amount(sol.flops)} flops" if sol.flops else "",
    ]
    setting = ", ".join(x for x in (sol.dtype, f"{sol.threads} threads" if sol.threads else "") if x)
    head = f"Speed of light (this machine's measured roofline{', ' + setting if setting else ''}): "
    head += f"the node is {sol.bound}-bound" + (f" ({', '.join(w for w in work if w)})" if any(work) else "")
    if sol.bound == "compute" and sol.gflops is not None and sol.peak_gflops:
        reach = f"your code reaches {sol.gflops:.3g} GFLOP/s of {sol.peak_gflops:.3g} GFLOP/s peak"
    elif sol.gbs is not None and sol.bandwidth_gbs:
        reach = f"your code reaches {sol.gbs:.3g} GB/s of {sol.bandwidth_gbs:.3g} GB/s measured bandwidth"
    else:
        reach = "your code reaches"
    return f"{head}; {reach}: {100 * sol.fraction:.0f}% of speed of light."


def _amount(value: Any) -> str:
    return f"{float(value):.3g}" if isinstance(value, int | float) else str(value)


def where_the_time_goes(evidence: TimeEvidence | Iterable[Any]) -> str:
    """The "Where the time goes" section for the evidence (or check reports); "" when there is none."""
    if not isinstance(evidence, TimeEvidence):
        evidence = TimeEvidence.from_reports(evidence)
    if not evidence:
        return ""
    parts = [TITLE]
    if evidence.figures:
        lines = render_figures(evidence.figures)
        if lines:
            parts.append("\n".join(lines))
    if evidence.speed_of_light:
        sol = render_speed_of_light(evidence.speed_of_light)
        if sol:
            parts.append(sol)
    if evidence.remarks:
        how = f" ({evidence.compiled_with}, the real build's flags)" if evidence.compiled_with else ""
        parts.append(
            f"The compiler's vectoriser remarks on your loops{how}:\n"
            + "\n".join(f"- {line}" for line in evidence.remarks)
            + (f"\n\n{evidence.remarks_note}" if evidence.remarks_note else "")
        )
    if len(parts) == 1:
        return ""
    return "\n\n".join(parts) + "\n"
