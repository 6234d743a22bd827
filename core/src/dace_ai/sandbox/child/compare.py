"""Judging a run: outputs against the reference, the fill pattern and poison in them, writes outside.

What is judged is what the outputs held the moment the call returned
(:func:`outputs_now`); each finding is a :class:`~.records.Problem`, data the parent
words for the model.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .buffers import GuardedBuffer
from .inputs import CANARY, OUTPUT_NAN, QUIET_BIT, SIGN_BIT, WORDS, output_containers, view
from .records import Case, Connector, Problem


def _words(values: np.ndarray) -> np.ndarray:
    """Each element's bytes as one unsigned word (or a row of bytes for other sizes), same shape."""
    flat = np.ascontiguousarray(values)
    word = WORDS.get(flat.dtype.itemsize)
    if word is not None:
        return flat.view(word).reshape(values.shape)
    return flat.view(np.uint8).reshape(values.shape + (flat.dtype.itemsize,))


def _halves(values: np.ndarray) -> tuple[np.ndarray, int] | None:
    """The bits of each float (each part of a complex) as unsigned words, last axis the parts; None for others."""
    kind, size = values.dtype.kind, values.dtype.itemsize
    half = size // 2 if kind == "c" else size
    if kind not in "fc" or half not in OUTPUT_NAN:
        return None
    words = np.ascontiguousarray(values).view(WORDS[half]).reshape(values.shape + ((2,) if kind == "c" else (1,)))
    return words, half


def is_fill(values: np.ndarray) -> np.ndarray:
    """Elements that still hold the exact fill pattern of :func:`fill_values` (never written)."""
    split = _halves(values)
    if split is not None:
        words, half = split
        return np.all(words == words.dtype.type(OUTPUT_NAN[half]), axis=-1)
    words = _words(values)
    if words.ndim == values.ndim:
        return words == words.dtype.type(int.from_bytes(bytes([CANARY]) * words.dtype.itemsize, "little"))
    return np.all(words == CANARY, axis=-1)


def fill_derived(values: np.ndarray) -> np.ndarray:
    """Float elements holding a NaN computed from the fill pattern: its payload, quieted or negated.

    Arithmetic on a NaN returns it quieted with its payload (x86, Arm), so an output read
    before it was written shows the pattern's payload with the quiet (or sign) bit set.
    """
    split = _halves(values)
    if split is None:
        return np.zeros(values.shape, bool)
    words, half = split
    keep = words.dtype.type(~(QUIET_BIT[half] | SIGN_BIT[half]) & ((1 << (8 * half)) - 1))
    pattern = words.dtype.type(OUTPUT_NAN[half])
    derived = ((words & keep) == (pattern & keep)) & (words != pattern)
    return np.any(derived, axis=-1)


def slack_derived(values: np.ndarray) -> np.ndarray:
    """Float elements holding the NaN of the slack around buffers (0xFF...): read from outside a buffer."""
    split = _halves(values)
    if split is None:
        return np.zeros(values.shape, bool)
    words, half = split
    return np.any(words == words.dtype.type((1 << (8 * half)) - 1), axis=-1)


def _integer_read_first(expected: np.ndarray, got: np.ndarray, wrong: np.ndarray) -> bool:
    """Whether every wrong integer element is the right value plus the fill pattern (accumulated into it)."""
    if got.dtype.kind not in "iu" or expected.dtype != got.dtype or not np.any(wrong):
        return False
    word = WORDS[got.dtype.itemsize]
    fill = word(int.from_bytes(bytes([CANARY]) * got.dtype.itemsize, "little"))
    with np.errstate(over="ignore"):
        offset = np.ascontiguousarray(got).view(word) - np.ascontiguousarray(expected).view(word)
    return bool(np.all(offset.reshape(got.shape)[wrong] == fill))


def changed_elements(now: np.ndarray, before: np.ndarray) -> np.ndarray:
    """Elements whose bytes differ (NaN-safe, unlike ``!=`` on floats)."""
    a, b = _words(now), _words(before)
    return a != b if a.ndim == now.ndim else np.any(a != b, axis=-1)


def _scalar(value: Any) -> Any:
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, complex):
        return [value.real, value.imag]
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return value


def compare(conn: Connector, expected: np.ndarray, got: np.ndarray, rtol: float) -> Problem | None:
    """The first problem between ``expected`` and ``got`` of one output connector, or None.

    Kinds: ``unwritten`` (still the fill pattern), ``read_before_write`` (a NaN computed
    from the fill pattern, or integers offset by it, where the reference has a value),
    ``mismatch`` (beyond the relative tolerance, or NaN/infinite where the reference is finite).
    """
    if expected.dtype == got.dtype and np.array_equal(expected, got):  # the common case, without temporaries
        return None

    def elements(kind: str, where: np.ndarray) -> Problem:
        """A problem of ``kind`` at the elements ``where`` (first index, count, the expected value there)."""
        index = np.argwhere(where)[0] if got.ndim else []
        return {
            "kind": kind,
            "connector": conn["name"],
            "index": [int(i) for i in index],
            "count": int(np.count_nonzero(where)),
            "elements": int(got.size),
            "expected": _scalar(expected[tuple(int(i) for i in index)]),
        }

    expected_fill = is_fill(expected) if expected.dtype == got.dtype else np.zeros(expected.shape, bool)
    unwritten = is_fill(got) & ~expected_fill
    if np.any(unwritten):
        return elements("unwritten", unwritten)
    check = ~expected_fill
    kind = np.dtype(got.dtype).kind
    if kind in "fc":
        for name, derived in (("read_before_write", fill_derived), ("read_outside", slack_derived)):
            found = check & derived(got) & ~np.isnan(expected)
            if np.any(found):
                return elements(name, found)
        exp = expected.astype(np.complex128 if kind == "c" else np.float64)
        val = got.astype(exp.dtype)
        both_nan = np.isnan(exp) & np.isnan(val)
        same_inf = np.isinf(exp) & (exp == val)
        finite = np.isfinite(exp) & np.isfinite(val)
        scale = float(np.max(np.abs(exp[np.isfinite(exp)]), initial=0.0))
        with np.errstate(invalid="ignore", over="ignore"):
            error = np.where(finite, np.abs(val - exp), np.inf)
        error = np.where(both_nan | same_inf, 0.0, error)
        tolerance = rtol * (np.abs(np.where(np.isfinite(exp), exp, 0)) + scale) + np.finfo(np.float64).tiny
        wrong = check & (error > tolerance)
        max_error = float(np.max(np.where(check, error, 0.0), initial=0.0))
    else:
        wrong = check & (expected != got)
        if _integer_read_first(expected, got, wrong):
            return elements("read_before_write", wrong)
        max_error = (
            float(np.max(np.abs(expected.astype(np.float64) - got.astype(np.float64)), initial=0.0))
            if kind != "b"
            else float(np.count_nonzero(wrong))
        )
    if not np.any(wrong):
        return None
    index = np.argwhere(wrong)[0] if got.ndim else []
    key = tuple(int(i) for i in index)
    problem: Problem = {
        "kind": "mismatch",
        "connector": conn["name"],
        "index": list(key),
        "count": int(np.count_nonzero(wrong)),
        "elements": int(got.size),
        "expected": _scalar(expected[key]),
        "got": _scalar(got[key]),
        "max_error": max_error if np.isfinite(max_error) else str(max_error),
        "rtol": rtol,
    }
    if kind in "fc":
        problem["not_finite"] = int(np.count_nonzero(check & np.isfinite(expected) & ~np.isfinite(got)))
        problem["scale"] = scale
    return problem


def outside_problem(
    case: Case, buffers: dict[str, GuardedBuffer], initial: dict[str, np.ndarray], who: str
) -> Problem | None:
    """Writes to inputs, outside the output subsets, or into the slack around a buffer."""
    covered: dict[str, np.ndarray] = {}
    for conn in case["connectors"]:
        if conn["direction"] == "out":
            mask = covered.setdefault(conn["container"], np.zeros(len(initial[conn["container"]]), bool))
            if conn["shape"]:
                np.lib.stride_tricks.as_strided(
                    mask[conn["offset"] :], shape=tuple(conn["shape"]), strides=tuple(conn["strides"])
                )[...] = True
            else:
                mask[conn["offset"]] = True
    for name, buf in buffers.items():
        side = buf.slack_intact()
        if side is not None:
            return {"kind": "outside_buffer", "who": who, "container": name, "side": side}
        changed = changed_elements(buf.array, initial[name])
        if name in covered:
            changed &= ~covered[name]
        if np.any(changed):
            return {
                "kind": "outside_subset",
                "who": who,
                "container": name,
                "element": int(np.argwhere(changed)[0][0]),
                "count": int(np.count_nonzero(changed)),
                "input": name not in covered,
            }
    return None


def expected_of(case: Case, conn: Connector, native: dict[str, np.ndarray] | None) -> np.ndarray | None:
    if native is not None:
        return np.asarray(view(native[conn["container"]], conn))
    files = case.get("expected") or {}
    if conn["name"] in files:
        return np.load(files[conn["name"]], allow_pickle=False)
    return None


def nan_reads(case: Case, outs: dict[str, np.ndarray], native: dict[str, np.ndarray] | None) -> list[str]:
    """Output containers holding a NaN the reference's do not: poison read from outside a buffer."""
    found = []
    for conn in case["connectors"]:
        got = outs.get(conn["name"])
        if conn["direction"] != "out" or got is None or got.dtype.kind not in "fc" or not np.isnan(got).any():
            continue
        expected = expected_of(case, conn, native)
        if expected is None or not np.isnan(expected).any():
            found.append(conn["container"])
    return found


def outputs_now(case: Case, buffers: dict[str, GuardedBuffer]) -> dict[str, np.ndarray]:
    """A copy of every output container, taken the moment the call returned: what is judged."""
    return {name: buffers[name].array.copy() for name in output_containers(case)}


def written_late(
    buffers: dict[str, GuardedBuffer], returned: dict[str, np.ndarray], wait: float = 0.0
) -> Problem | None:
    """An output container that changed after the call had returned: work left running (a detached thread)."""
    if wait:
        time.sleep(wait)
    for name, before in returned.items():
        changed = changed_elements(buffers[name].array, before)
        if np.any(changed):
            return {
                "kind": "late_write",
                "container": name,
                "count": int(np.count_nonzero(changed)),
                "element": int(np.argwhere(changed)[0][0]),
            }
    return None


def connector_views(case: Case, containers: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {
        c["name"]: np.array(view(containers[c["container"]], c)) for c in case["connectors"] if c["direction"] == "out"
    }


def against_reference(case: Case, outs: dict[str, np.ndarray], native: dict[str, np.ndarray] | None) -> Problem | None:
    """The first output connector of ``case`` that differs from the reference, as a problem."""
    for conn in case["connectors"]:
        if conn["direction"] != "out":
            continue
        expected = expected_of(case, conn, native)
        if expected is None:
            continue
        problem = compare(conn, np.asarray(expected), outs[conn["name"]], case["rtol"][conn["name"]])
        if problem is not None:
            return problem
    return None


def same_outputs(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=a[k].dtype.kind in "fc") for k in a)
