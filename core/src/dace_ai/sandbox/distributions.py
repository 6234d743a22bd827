"""Input distributions beyond uniform [-1, 1): which cases draw them, at which magnitudes, in what words.

Uniform inputs in [-1, 1) hide whole classes of wrong kernels: a softmax that forgets
to subtract the maximum overflows only at magnitudes of a few hundred, a kernel
exact only for distinct values breaks on ties, an answer that returns zeros passes
when every output is tiny under a loose tolerance. So besides the ``unit`` cases of
every rung, the cheap rungs run one case per distribution (the child draws the values,
:func:`dace_ai.sandbox.child.inputs.random_values`); the sizes of ``verify_sizes`` (rung
``given``) and a node's own sizes (rung ``own``) count as small:

=========  ===================================================================  ==============
name       values                                                               rungs
=========  ===================================================================  ==============
small      unit values times 1e-3 (tiny outputs)                                small
large      unit values times the largest magnitude the reference keeps finite   small, odd
zeros      half the elements exactly zero (some -0.0), the rest unit values     small
ties       every element one of four values (equal keys, equal maxima)          small
heavy      Cauchy values (heavy tails) bounded by that magnitude                small, odd
edge       integer inputs at their type's extremes and next to zero             small
=========  ===================================================================  ==============

``large`` and ``heavy`` try :data:`MAGNITUDES` from the top; the child runs the
first whose reference outputs are all finite and reports the ones above it as
skipped (the reference overflows there), never failed. A distribution whose
reference fails or is not finite at every magnitude is skipped with its reason.
``small``, ``large`` and ``heavy`` change only floating-point inputs (integers keep
unit values), ``edge`` only integers; a distribution that would change no input of
the node is not run. ``edge`` runs only against a reference function, which raises
where a native program built by DaCe could crash on out-of-range values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dace_ai.sandbox.run_records import DistributionSkip, DistributionsRun

#: Magnitudes ``large`` scales by and ``heavy`` is bounded by, tried from the first.
MAGNITUDES = (1e4, 1e3, 1e2, 10.0)
#: The distributions each rung adds to its ``unit`` cases.
RUNG_DISTRIBUTIONS = {
    "small": ("small", "large", "zeros", "ties", "heavy", "edge"),
    "given": ("small", "large", "zeros", "ties", "heavy", "edge"),
    "own": ("small", "large", "zeros", "ties", "heavy", "edge"),
    "odd": ("large", "heavy"),
}
_FLOAT_ONLY = ("small", "large", "heavy")
_SCALED = ("large", "heavy")
_WORDS = {
    "unit": "unit inputs in [-1, 1)",
    "small": "tiny inputs (|x| < 1e-3)",
    "zeros": "inputs half zeros",
    "ties": "inputs of repeated values (ties)",
    "edge": "integer inputs at their type's extreme values",
}


def words(case: Mapping[str, Any]) -> str:
    """``large inputs (|x| < 1e+04)``: the inputs of a case, for messages ("" for unit inputs)."""
    name = case.get("distribution") or "unit"
    if name == "unit":
        return ""
    if name == "large":
        return f"large inputs (|x| < {case.get('magnitude', 1):g})"
    if name == "heavy":
        return f"heavy-tailed inputs (Cauchy, |x| <= {case.get('magnitude', 1):g})"
    return _WORDS.get(name, f"{name} inputs")


def _applies(name: str, input_kinds: set[str], reference: str | None) -> bool:
    if name in _FLOAT_ONLY:
        return bool(input_kinds & {"f", "c"})
    if name == "edge":
        return bool(input_kinds & {"i", "u"}) and reference == "function"
    return bool(input_kinds)


def planned(rung: str, input_kinds: set[str], reference: str | None) -> list[tuple[str, float | None]]:
    """(distribution, magnitude) of the extra cases a rung runs, magnitude groups from the top."""
    out: list[tuple[str, float | None]] = []
    for name in RUNG_DISTRIBUTIONS.get(rung, ()):
        if not _applies(name, input_kinds, reference):
            continue
        out.extend((name, m) for m in MAGNITUDES) if name in _SCALED else out.append((name, None))
    return out


def summary(cases: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any]]) -> DistributionsRun:
    """Which distributions ran (and at which magnitudes), and which cases were skipped and why."""
    ran: dict[str, list[float]] = {}
    skipped: list[DistributionSkip] = []
    for case, record in zip(cases, records):
        name = case.get("distribution") or "unit"
        reason = record.get("skipped")
        if reason is None:
            magnitudes = ran.setdefault(name, [])
            if case.get("magnitude") and case["magnitude"] not in magnitudes:
                magnitudes.append(case["magnitude"])
        elif reason != "settled":
            skipped.append(
                {
                    "distribution": name,
                    "rung": case.get("rung", ""),
                    "magnitude": case.get("magnitude"),
                    "reason": reason,
                }
            )
    never = sorted({s["distribution"] for s in skipped} - set(ran))
    return {"ran": ran, "skipped": skipped, "never": never}


def summary_words(found: DistributionsRun) -> str:
    """``distributions unit, small, large (|x| < 1e+03), ...; not run: edge (the reference raised ...)``."""
    parts = []
    for name, magnitudes in found["ran"].items():
        bound = f" (|x| {'<' if name == 'large' else '<='} {max(magnitudes):g})" if magnitudes else ""
        parts.append(name + bound)
    text = "distributions " + ", ".join(parts)
    above = [s for s in found["skipped"] if s["distribution"] in found["ran"] and s.get("magnitude")]
    if above:
        text += "; the reference is not finite at " + ", ".join(
            sorted({f"{s['distribution']} {s['magnitude']:g}" for s in above})
        )
    never = [s for s in found["skipped"] if s["distribution"] in found["never"]]
    if never:
        reasons = {s["distribution"]: s["reason"] for s in never}
        text += "; not run: " + ", ".join(f"{k} ({v})" for k, v in reasons.items())
    return text
