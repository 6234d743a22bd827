"""Anti-deception rules: candidates that game the checks instead of doing the work.

Models asked for speed are known to game the reward: return constants, cache
results between calls, call the very library they were asked to replace, or
scribble outside their buffers. Each rule here turns one such finding of a
bench section of the sandboxed run (:mod:`dace_ai.sandbox.child`) or of the answer's text into a
refusal reason worded for the model; ``None`` when the rule is satisfied.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from dace_ai.prompt.answer import Answer
from dace_ai.prompt.feedback import format_seconds

#: Below this many bytes of data the bandwidth rule is not applied (caches and call overhead dominate).
MIN_BYTES_FOR_BANDWIDTH_RULE = 1 << 20
#: A candidate faster than the bandwidth bound divided by this factor is implausible.
BANDWIDTH_SLACK = 4.0

_FORBIDS = re.compile(
    r"\b(?:do not|don't|never|must not|may not|without|no)\b[^.;\n]{0,60}?"
    r"\b(?:BLAS|cblas|LAPACK|MKL|OpenBLAS|cuBLAS|FFTW|librar(?:y|ies)|vendor|native implementation)\b",
    re.IGNORECASE,
)
_LIBRARY_CALL = re.compile(
    r"\b(?:cblas_\w+|LAPACKE_\w+|mkl_\w+|openblas_\w+|cublas\w+|fftw\w*_\w+|"
    r"[sdcz](?:gemm|gemv|dot[uc]?|axpy|scal|syrk|trsm|ger|nrm2|asum)_?)\s*\("
)
_LIBRARY_ENVIRONMENT = re.compile(r"blas|lapack|mkl|fftw", re.IGNORECASE)


def forbids_library(description: str) -> bool:
    """True when the node's description (or the user's instructions) forbids calling a library."""
    return bool(_FORBIDS.search(description or ""))


def library_calls(answer: Answer) -> list[str]:
    """Library functions the answer's code calls, and library environments it asks for."""
    text = f"{answer.code}\n{answer.code_global}\n{answer.code_init}\n{answer.code_exit}"
    found = sorted({m.group(0).rstrip("( \t") for m in _LIBRARY_CALL.finditer(text)})
    envs = [name for name in answer.use_environments if _LIBRARY_ENVIRONMENT.search(name)]
    envs += [req.name for req in answer.environments if _LIBRARY_ENVIRONMENT.search(req.name)]
    return found + [f"environment {name}" for name in envs]


def forbidden_library_reason(answer: Answer, description: str) -> str | None:
    """Rule: no call of the native library when the description forbids it."""
    if not forbids_library(description):
        return None
    calls = library_calls(answer)
    if not calls:
        return None
    return (
        f"it calls the library the node's description forbids ({', '.join(calls)}); implement the computation yourself"
    )


def run_reasons(result: dict[str, Any]) -> list[str]:
    """Rules judged from a bench run: dependence on inputs, stray writes and reads, a too fast timing."""
    reasons = []
    if result.get("input_independent"):
        reasons.append(
            "its outputs do not depend on its inputs (identical results for two different random "
            "inputs, while the reference's results differ); compute them from the inputs"
        )
    if result.get("inputs_modified"):
        reasons.append(
            f"it writes to its input data ({', '.join(result['inputs_modified'])}); "
            "write only through the output connectors"
        )
    if result.get("writes_outside"):
        reasons.append(
            f"it writes outside its connectors' buffers (the bytes around "
            f"{', '.join(result['writes_outside'])} changed)"
        )
    if result.get("reads_outside"):
        reasons.append(
            f"it reads outside its connectors' buffers (poison placed around the inputs reached "
            f"{', '.join(result['reads_outside'])})"
        )
    for key, words in (
        ("after_timing", "when called repeatedly under timing: called once more after the timed calls, its output was"),
        ("timed_call", "under timing: the outputs one of the timed calls left were"),
    ):
        problem = result.get(key)
        if problem:
            where = problem.get("connector") or problem.get("container") or "an output"
            reasons.append(
                f"it behaves differently {words} {'not written' if problem.get('kind') == 'unwritten' else 'wrong'} "
                f"({where}); compute the outputs from the inputs on every call, however often and however it is called"
            )
    bound = bandwidth_reason(result)
    if bound:
        reasons.append(bound)
    return reasons


def bandwidth_bound(result: dict[str, Any]) -> float | None:
    """Seconds this machine needs just to stream the data once (None when not measured)."""
    nbytes, bandwidth = result.get("bytes"), result.get("bandwidth")
    if not nbytes or not bandwidth:
        return None
    return nbytes / bandwidth


def bandwidth_reason(result: dict[str, Any]) -> str | None:
    """Rule: the candidate cannot run faster than streaming its inputs and outputs allows."""
    bound = bandwidth_bound(result)
    times = result.get("candidate") or []
    if bound is None or not times or result.get("bytes", 0) < MIN_BYTES_FOR_BANDWIDTH_RULE:
        return None
    median = statistics.median(times)
    if median * BANDWIDTH_SLACK >= bound:
        return None
    return (
        f"its timing is implausible: {format_seconds(median)} per call, while merely streaming its "
        f"{result['bytes'] / 1e6:.1f} MB of inputs and outputs takes {format_seconds(bound)} at this machine's "
        f"measured {result['bandwidth'] / 1e9:.1f} GB/s (results cached between calls?)"
    )
