"""How far an accepted answer was checked, in one short phrase that travels with the tasklet.

``verified (3 seeds, 5 sizes, 2 thread counts, 6 distributions, sanitizers)``: a ``verify`` stage checker
compared it with the node's reference on random inputs, and the phrase says what was varied (seeds, sizes of
the ladder, thread counts, input distributions) and whether the sanitizer runs passed; device code run on its
CPU twin says so: ``verified on the CPU twin (3 seeds, 5 sizes, 6 distributions; not run on a GPU; a standalone
nvcc unit, not DaCe's build)``; ``compile-only``: it
compiled as the real build compiles, nothing compared its results (for GPU code it says which build:
``compile-only: built by DaCe's own GPU build``, or ``compile-only: a standalone nvcc unit, not DaCe's build
(<why DaCe cannot build it here>)``); ``unverified: <reason>``: not even that could be decided (no reference,
a checker crashed, a tool is missing, checks are off). The level is written into the tasklet's provenance
comment, its session and the summaries of ``dace_ai.generate``, ``read_prompt_responses`` and ``build``.
"""

from __future__ import annotations

from collections.abc import Sequence

from dace_ai.checking.api import CheckReport, Coverage

#: The prefix of every level that is neither verified nor compile-only.
UNVERIFIED = "unverified"


def _stage(report: CheckReport) -> str:
    return report.stage or "compile"


def _reason(report: CheckReport) -> str:
    """One line: the report's ``reason`` detail, else its checker and first line of diagnostics."""
    if report.reason:
        reason = report.reason
    else:
        first = next(iter(report.diagnostics.strip().splitlines()), "") or "could not decide"
        reason = f"{report.checker}: {first}"
    return " ".join(reason.split())[:200]


def _supplements(report: CheckReport) -> bool:
    """A verify-stage report that adds to the verify checker's comparison (the sanitizer runs)."""
    return report.supplements_verify


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def _varied(report: CheckReport, supplements: Sequence[CheckReport]) -> list[str]:
    """What a passed verify report varied: seeds, sizes, thread counts, input distributions, sanitizers."""
    coverage = report.coverage or Coverage()
    parts = [_plural(report.seeds, "seed")]
    sizes = [dict(s) for s in report.sizes]
    bench = coverage.bench_sizes
    if bench and dict(bench) not in sizes:
        sizes.append(dict(bench))
    if sizes:
        parts.append(_plural(len(sizes), "size"))
    if len(set(coverage.threads)) > 1:
        parts.append(f"{len(set(coverage.threads))} thread counts")
    if coverage.distributions:
        parts.append(_plural(len(coverage.distributions), "distribution"))
    if coverage.device:
        parts.append(f"on {coverage.device}")
    for extra in supplements:
        if extra.status == "passed":
            parts.append("sanitizers")
        elif extra.status == "inconclusive":
            parts.append(f"no sanitizers: {_reason(extra)}")
    return parts


def _which_build(passed: Sequence[CheckReport]) -> str:
    """For GPU code, which build compiled it: DaCe's own GPU build, or a standalone unit and why."""
    for report in passed:
        built_by = report.details.get("built_by")
        if built_by == "DaCe":
            backend = str(report.details.get("backend") or "cuda")
            return ": built by DaCe's own GPU build" + (
                f" with its {backend.upper()} backend" if backend != "cuda" else ""
            )
        if built_by == "standalone unit":
            compiler = report.details.get("compiler") or "compiler"
            why = " ".join(str(report.details.get("program_builds") or "").split())[:200]
            return f": a standalone {compiler} unit, not DaCe's build" + (f" ({why})" if why else "")
    return ""


def _twin_cannot_run(report: CheckReport) -> bool:
    """The CPU twin's report that it did not run device code (``compile-only: uses __syncthreads ...``)."""
    return report.compile_only and report.details.get("twin") is True


def _gpu_build(reports: Sequence[CheckReport]) -> str:
    """For device code verified on its CPU twin, how it was compiled for the GPU: ``; built by DaCe's own GPU
    build``, ``; a standalone nvcc unit, not DaCe's build``, or ``; not compiled for a GPU here``."""
    compiled = [r for r in reports if _stage(r) == "compile" and not r.static]
    built_by = {r.details.get("built_by") for r in compiled if r.status == "passed"}
    if "DaCe" in built_by:
        return "; built by DaCe's own GPU build"
    unit = next((r for r in compiled if r.status == "passed" and r.details.get("built_by") == "standalone unit"), None)
    if unit is not None:
        return f"; a standalone {unit.details.get('compiler') or 'compiler'} unit, not DaCe's build"
    if compiled and not any(r.status == "passed" for r in compiled):
        return "; not compiled for a GPU here"
    return ""


def verification_level(reports: Sequence[CheckReport]) -> str:
    """The level of an answer checked by ``reports`` (see the module docstring).

    A passed ``verify`` report with ``seeds`` -> ``verified (N seeds, ...)`` (see :func:`_varied`), or for
    device code run on its CPU twin ``verified on the CPU twin (N seeds, ...; not run on a GPU; <which GPU
    build compiled it>)`` (:func:`_gpu_build`);
    an inconclusive ``verify`` report -> ``unverified: <its reason>``; compile
    reports only, all passed -> ``compile-only``; no reports (or only passed rules read off the text,
    ``static``) -> ``unverified: checks are off``.
    """
    if not [r for r in reports if not (r.static and r.status == "passed")]:
        return f"{UNVERIFIED}: checks are off"
    failed = [r for r in reports if r.status == "failed"]
    if failed:
        return f"{UNVERIFIED}: failed {', '.join(r.checker for r in failed)}"
    supplements = [r for r in reports if _stage(r) == "verify" and _supplements(r)]
    verify = [r for r in reports if _stage(r) == "verify" and not _supplements(r)]
    inconclusive_verify = [r for r in verify if r.status == "inconclusive"]
    routed = [r for r in inconclusive_verify if r.compile_only]
    if routed and any(r.status == "passed" for r in reports if _stage(r) == "compile"):
        # "compile-only: no worker with resource 'cuda'" (an executor's routing), or
        # "compile-only: compiled for x86-avx512; this host cannot run it" (verify on a smaller machine)
        if _twin_cannot_run(routed[0]):  # device code the CPU twin cannot run: which GPU build compiled it
            build = _which_build([r for r in reports if _stage(r) == "compile" and r.status == "passed"])
            return _reason(routed[0]) + (f"; {build[2:]}" if build else "")
        return _reason(routed[0])
    if inconclusive_verify:
        first = next((r for r in inconclusive_verify if not _twin_cannot_run(r)), None)
        if first is None:  # only the CPU twin's "cannot run it", and nothing compiled it: say why that is
            compiled = [r for r in reports if _stage(r) == "compile" and r.status == "inconclusive"]
            first = compiled[0] if compiled else inconclusive_verify[0]
        return f"{UNVERIFIED}: {_reason(first)}"
    passed = [r for r in verify if r.status == "passed" and r.seeds]
    if passed:
        least = min(passed, key=lambda r: r.seeds)
        varied = ", ".join(_varied(least, supplements))
        if least.coverage is not None and least.coverage.twin:
            return f"verified on the CPU twin ({varied}; not run on a GPU{_gpu_build(reports)})"
        return f"verified ({varied})"
    # a rule read off the code's text (``static``) compiles nothing: it makes no level of its own
    compile_reports = [r for r in reports if _stage(r) == "compile" and not r.static]
    if any(r.status == "passed" for r in compile_reports):
        return "compile-only" + _which_build([r for r in compile_reports if r.status == "passed"])
    inconclusive = [r for r in reports if r.status == "inconclusive"]
    if inconclusive:
        return f"{UNVERIFIED}: {_reason(inconclusive[0])}"
    return f"{UNVERIFIED}: no check applied"
