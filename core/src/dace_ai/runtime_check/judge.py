"""Compare one recorded call of a tasklet with the node's reference, within a time budget.

An AINode's ``reference=`` (the user's own NumPy function) is called on the recorded
inputs and every output element is compared, as the verify stage does. A product
(Gemm, MatMul, Gemv, Dot) is checked in NumPy too: a matrix product by Freivalds' test
(random sign vectors, O(n^2) however large the product, with a bound sized for the element
type: :func:`freivalds_rows`), the row it finds wrong then computed exactly to name its most
wrong element; Gemv and Dot in full.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dace_ai.runtime_check.plan import SpotPlan
from dace_ai.sandbox.cases import tolerance
from dace_ai.sandbox.child.compare import compare
from dace_ai.sandbox.child.records import Connector
from dace_ai.sandbox.reference import call_reference, reference_function


@dataclass(frozen=True)
class SpotFinding:
    """What a check found: ``wrong`` is None when the outputs agree; ``checked`` says how it compared."""

    checked: str
    wrong: str | None
    seconds: float


def _connector(name: str) -> Connector:
    """The connector record :func:`~dace_ai.sandbox.child.compare.compare` names in its problem."""
    return {"name": name, "container": name, "direction": "out", "offset": 0, "shape": [], "strides": [], "wcr": None}


def _agrees(want: np.ndarray, got: np.ndarray, rtol: float) -> bool:
    """True when every element agrees by the verifier's rule (:func:`~dace_ai.sandbox.child.compare.compare`:
    within ``rtol`` of the element plus ``rtol`` of the largest one), all finite: the fast path; anything else
    goes to ``compare``, which names the first wrong element."""
    if got.dtype.kind not in "fc":
        return bool(np.array_equal(want, got))
    work = np.complex128 if got.dtype.kind == "c" or want.dtype.kind == "c" else np.float64
    w, g = want.astype(work, copy=False), got.astype(work, copy=False)
    with np.errstate(invalid="ignore", over="ignore"):
        if not (np.isfinite(w).all() and np.isfinite(g).all()):
            return False
        scale = float(np.max(np.abs(w), initial=0.0))
        return bool(np.all(np.abs(g - w) <= rtol * (np.abs(w) + scale)))


def _rtol(plan: SpotPlan, inputs: dict[str, np.ndarray], got: np.ndarray) -> float:
    reduction = max([n for a in inputs.values() for n in a.shape] or [1])
    return tolerance(np.dtype(got.dtype), reduction)


def _v(value: Any) -> Any:
    """A NumPy scalar as the Python number it is (so messages read ``0.0``, not ``np.float64(0.0)``)."""
    return value.item() if hasattr(value, "item") and getattr(value, "ndim", 1) == 0 else value


def _where(index: list[int]) -> str:
    return f"[{', '.join(str(i) for i in index)}]" if index else ""


def _sizes(values: dict[str, int], inputs: dict[str, np.ndarray]) -> str:
    named = ", ".join(f"{k}={v}" for k, v in values.items())
    shapes = ", ".join(f"{k} {'x'.join(map(str, a.shape)) or 'scalar'}" for k, a in inputs.items())
    return named or shapes


def _by_function(
    plan: SpotPlan, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray], values: dict[str, int]
) -> SpotFinding:
    function = reference_function(plan.reference)
    if function is None:
        raise LookupError(f"the reference {plan.reference!r} is not registered in this process")
    start = time.perf_counter()
    expected = call_reference(function, {k: v.copy() for k, v in inputs.items()}, values, list(outputs))
    for name, got in outputs.items():
        want = np.asarray(expected[name])
        if want.size == got.size and want.shape != got.shape:
            want = want.reshape(got.shape)
        if want.shape != got.shape:
            return SpotFinding(
                "the reference",
                f"{name}: the reference returned shape {want.shape}, the call wrote {got.shape}",
                time.perf_counter() - start,
            )
        rtol = _rtol(plan, inputs, got)
        if _agrees(want, got, rtol):
            continue
        problem = compare(_connector(name), want.astype(got.dtype, copy=False), got, rtol)
        if problem is not None:
            index = problem.get("index", [])
            value = got[tuple(index)] if index else got
            seconds = time.perf_counter() - start
            return SpotFinding(
                "every output element against the reference",
                f"{name}{_where(index)} = {_v(value)!r}, the reference gives {_v(problem.get('expected'))!r} "
                f"({problem.get('count', 1)} of {problem.get('elements', got.size)} elements differ)",
                seconds,
            )
    return SpotFinding("every output element against the reference", None, time.perf_counter() - start)


def _op(a: np.ndarray, transposed: bool) -> np.ndarray:
    return a.T if transposed else a


#: How far beyond the rounding a right product's row is expected to carry a row of Freivalds' test may differ.
FREIVALDS_MARGIN = 3.0
#: Random vectors of Freivalds' test: always the first count, up to the second while the check stays cheap.
FREIVALDS_VECTORS = (2, 8)


def _eps(*arrays: np.ndarray) -> float:
    """The unit roundoff of the least precise floating type among ``arrays`` (at least float64's)."""
    found = [float(np.finfo(a.dtype).eps) / 2 for a in arrays if a.dtype.kind in "fc"]
    return max([float(np.finfo(np.float64).eps) / 2, *found])


def freivalds_excess(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    alpha: complex = 1,
    beta: complex = 0,
    cin: np.ndarray | None = None,
    vectors: int = 2,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Per row of ``c``, the largest ratio of Freivalds' test's difference to its bound (a row over 1 fails),
    ``c`` tested against ``alpha * a @ b + beta * cin`` with ``vectors`` random sign vectors ``r`` at once
    (float64 or complex128 accumulation, O(n^2) per vector).

    A row fails when ``|(c r)_i - (alpha a (b r) + beta cin r)_i|`` is over a bound sized for the element type
    and the reduction length ``K``: a right product's element ``c_ij`` carries rounding of about
    ``u sqrt(K) (|a||b|)_ij`` (``u`` the unit roundoff of the least precise operand), and the row of the test
    sums those with random signs, so the row's rounding is about ``u sqrt(K) sqrt(sum_j (|a||b|)_ij^2 r_j^2)``;
    the bound uses ``K (a*a)((b*b)(r*r))``, which is never smaller than that sum (Cauchy-Schwarz), times
    :data:`FREIVALDS_MARGIN`. It grows with the rounding a right product has, not with the row's size, so one
    wrong element of a float32 1024^3 product is seen unless it is about as small as that rounding.
    """
    rng = rng or np.random.default_rng()
    work = np.complex128 if np.iscomplexobj(c) or np.iscomplexobj(a) or np.iscomplexobj(b) else np.float64
    k = max(a.shape[1], 1)
    u = _eps(a, b, c)
    alpha_v = alpha.real if complex(alpha).imag == 0 else alpha
    beta_v = beta.real if complex(beta).imag == 0 else beta
    r = rng.choice([-1.0, 1.0], (c.shape[1], vectors)) * rng.uniform(0.75, 1.25, (c.shape[1], vectors))
    a64, b64 = a.astype(work, copy=False), b.astype(work, copy=False)
    left = c.astype(work, copy=False) @ r
    right = alpha_v * (a64 @ (b64 @ r))
    a2, b2 = np.abs(a64) ** 2, np.abs(b64) ** 2
    r2 = r * r
    square = k * abs(alpha) ** 2 * (a2 @ (b2 @ r2))
    if cin is not None and beta != 0:
        c64 = cin.astype(work, copy=False)
        right = right + beta_v * (c64 @ r)
        square = square + abs(beta) ** 2 * ((np.abs(c64) ** 2) @ r2)
    bound = FREIVALDS_MARGIN * u * np.sqrt(k) * np.sqrt(square) + np.finfo(np.float64).tiny
    with np.errstate(invalid="ignore", over="ignore"):
        ratio = np.abs(left - right) / bound
    return np.where(np.isnan(ratio), np.inf, ratio).max(axis=1)


def freivalds_rows(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    alpha: complex = 1,
    beta: complex = 0,
    cin: np.ndarray | None = None,
    vectors: int = 2,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Rows of ``c`` that fail Freivalds' test (:func:`freivalds_excess` over 1)."""
    return np.flatnonzero(~(freivalds_excess(a, b, c, alpha, beta, cin, vectors, rng) <= 1.0))


def _freivalds(plan: SpotPlan, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> SpotFinding:
    start = time.perf_counter()
    a = _op(inputs["_a"], bool(plan.prop("transA", False)))
    b = _op(inputs["_b"], bool(plan.prop("transB", False)))
    c = outputs["_c"]
    alpha = complex(plan.prop("alpha", 1))
    beta = complex(plan.prop("beta", 0))
    cin = inputs.get("_cin")
    if a.ndim != 2 or b.ndim != 2 or c.ndim != 2:
        raise LookupError("only two-dimensional products are spot-checked")
    first, most = FREIVALDS_VECTORS
    bad = freivalds_rows(a, b, c, alpha, beta, cin, first)
    used = first
    # more vectors while the test has taken under a tenth of the budget (each doubling costs about as much again)
    while not bad.size and used < most and 2 * (time.perf_counter() - start) < 0.1 * plan.budget:
        bad = freivalds_rows(a, b, c, alpha, beta, cin, used)
        used += used
    words = f"Freivalds' test ({used} random vectors, bound sized for {c.dtype} and K={a.shape[1]})"
    if bad.size:
        row = int(bad[0])
        work = np.complex128 if np.iscomplexobj(c) else np.float64
        alpha_v = alpha.real if alpha.imag == 0 else alpha
        beta_v = beta.real if beta.imag == 0 else beta
        exact = alpha_v * (a[row].astype(work) @ b.astype(work))
        if cin is not None and beta != 0:
            exact = exact + beta_v * cin[row].astype(work)
        col = int(np.argmax(np.abs(c[row].astype(work) - exact)))
        return SpotFinding(
            words,
            f"_c[{row}, {col}] = {_v(c[row, col])!r}, the product gives {_v(exact[col])!r} (row {row} of "
            f"{c.shape[0]} fails Freivalds' test)",
            time.perf_counter() - start,
        )
    return SpotFinding(
        f"{words}; the full product is {c.shape[0]}x{a.shape[1]}x{c.shape[1]}", None, time.perf_counter() - start
    )


def _product(plan: SpotPlan, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> SpotFinding:
    if plan.node_type in ("Gemm", "MatMul") and inputs["_a"].ndim == 2:
        return _freivalds(plan, inputs, outputs)
    start = time.perf_counter()
    if plan.node_type == "Dot":
        want = {"_result": np.dot(inputs["_x"], inputs["_y"])}
    elif plan.node_type == "Gemv":
        alpha, beta = complex(plan.prop("alpha", 1)), complex(plan.prop("beta", 0))
        alpha_v = alpha.real if alpha.imag == 0 else alpha
        beta_v = beta.real if beta.imag == 0 else beta
        y = alpha_v * (_op(inputs["_A"], bool(plan.prop("transA", False))) @ inputs["_x"])
        if beta != 0 and "_y" in inputs:
            y = y + beta_v * inputs["_y"]
        want = {"_y": y}
    else:
        raise LookupError(f"{plan.node_type} with these shapes is not spot-checked")
    for name, got in outputs.items():
        expected = np.asarray(want[name]).reshape(got.shape).astype(got.dtype)
        rtol = _rtol(plan, inputs, got)
        problem = None if _agrees(expected, got, rtol) else compare(_connector(name), expected, got, rtol)
        if problem is not None:
            index = problem.get("index", [])
            return SpotFinding(
                "every output element against NumPy",
                f"{name}{_where(index)} = {_v(got[tuple(index)] if index else got)!r}, "
                f"NumPy gives {_v(problem.get('expected'))!r}",
                time.perf_counter() - start,
            )
    return SpotFinding("every output element against NumPy", None, time.perf_counter() - start)


def judge(
    plan: SpotPlan, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray], values: dict[str, int]
) -> SpotFinding:
    """Compare one recorded call (``LookupError`` when this node cannot be compared here)."""
    if plan.reference:
        return _by_function(plan, inputs, outputs, values)
    return _product(plan, inputs, outputs)


def sizes_words(values: dict[str, int], inputs: dict[str, Any]) -> str:
    """The sizes of a recorded call, for messages."""
    return _sizes(values, inputs)
