"""Compare one recorded call of a tasklet with the node's reference, within a time budget.

An AINode's ``reference=`` (the user's own NumPy function) is called on the recorded
inputs and every output element is compared, as the verify stage does. A product
(Gemm, MatMul, Gemv, Dot) is checked in NumPy too: a matrix product by Freivalds' test
(two random vectors, O(n^2) however large the product), the row it finds wrong then
computed exactly to name the first wrong element; Gemv and Dot in full.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dace_ai.checking.child.compare import compare
from dace_ai.checking.child.records import Connector
from dace_ai.checking.harness import tolerance
from dace_ai.checking.reference import call_reference, reference_function
from dace_ai.runtime_check.plan import SpotPlan


@dataclass(frozen=True)
class SpotFinding:
    """What a check found: ``wrong`` is None when the outputs agree; ``checked`` says how it compared."""

    checked: str
    wrong: str | None
    seconds: float


def _connector(name: str) -> Connector:
    """The connector record :func:`~dace_ai.checking.child.compare.compare` names in its problem."""
    return {"name": name, "container": name, "direction": "out", "offset": 0, "shape": [], "strides": [], "wcr": None}


def _agrees(want: np.ndarray, got: np.ndarray, rtol: float) -> bool:
    """True when every element agrees by the verifier's rule (:func:`~dace_ai.checking.child.compare.compare`:
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


def _freivalds(plan: SpotPlan, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> SpotFinding:
    start = time.perf_counter()
    a = _op(inputs["_a"], bool(plan.prop("transA", False)))
    b = _op(inputs["_b"], bool(plan.prop("transB", False)))
    c = outputs["_c"]
    alpha = complex(plan.prop("alpha", 1))
    beta = complex(plan.prop("beta", 0))
    alpha_v = alpha.real if alpha.imag == 0 else alpha
    beta_v = beta.real if beta.imag == 0 else beta
    cin = inputs.get("_cin")
    work = np.complex128 if np.iscomplexobj(c) else np.float64
    if a.ndim != 2 or b.ndim != 2 or c.ndim != 2:
        raise LookupError("only two-dimensional products are spot-checked")
    eps = float(np.finfo(c.dtype).eps) if c.dtype.kind in "fc" else 0.0
    rng = np.random.default_rng()
    for _ in range(2):
        r = rng.uniform(0.5, 1.5, c.shape[1]) * rng.choice([-1.0, 1.0], c.shape[1])
        left = c.astype(work) @ r
        right = alpha_v * (a.astype(work) @ (b.astype(work) @ r))
        bound = abs(alpha) * (np.abs(a) @ (np.abs(b) @ np.abs(r)))
        if cin is not None and beta != 0:
            right = right + beta_v * (cin.astype(work) @ r)
            bound = bound + abs(beta) * (np.abs(cin) @ np.abs(r))
        bound = 8 * eps * max(a.shape[1], 1) * (bound + np.abs(c) @ np.abs(r)) + np.finfo(np.float64).tiny
        bad = np.flatnonzero(~(np.abs(left - right) <= bound))
        if bad.size:
            row = int(bad[0])
            exact = alpha_v * (a[row].astype(work) @ b.astype(work))
            if cin is not None and beta != 0:
                exact = exact + beta_v * cin[row].astype(work)
            rtol = 8 * eps * max(a.shape[1], 1)
            scale = np.abs(a[row]) @ np.abs(b) * abs(alpha) + 1e-300
            cols = np.flatnonzero(~(np.abs(c[row] - exact) <= rtol * scale))
            col = int(cols[0]) if cols.size else int(np.argmax(np.abs(c[row] - exact)))
            return SpotFinding(
                "Freivalds' test (two random vectors)",
                f"_c[{row}, {col}] = {_v(c[row, col])!r}, the product gives {_v(exact[col])!r} (row {row} of "
                f"{c.shape[0]} fails Freivalds' test)",
                time.perf_counter() - start,
            )
    return SpotFinding(
        f"Freivalds' test (two random vectors; the full product is {c.shape[0]}x{a.shape[1]}x{c.shape[1]})",
        None,
        time.perf_counter() - start,
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
