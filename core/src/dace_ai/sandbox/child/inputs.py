"""The inputs of a case: drawn from its seed and distribution, and the fill pattern of its outputs.

Shared with the parent, which imports this module for :func:`case_inputs` so both
sides generate the very same inputs. NumPy and the standard library only.
"""

from __future__ import annotations

import numpy as np

from .records import Case, Connector

CANARY = 0xA5  #: byte that fills non-float output buffers (and the slack around buffers of non-float elements)
#: Byte of the slack around floating-point buffers: 0xFF... is a NaN, so a read outside a buffer
#: shows as a NaN in the outputs (the poison the bench's read rule looks for).
POISON = 0xFF

#: What fills floating-point outputs before every call: a *signalling* NaN with a recognisable payload,
#: per element size in bytes. An element never written keeps these exact bits; any arithmetic on it
#: (``C += ...`` on an output never zeroed) gives the *quiet* NaN with the same payload, so "never
#: written" and "read before written" are told apart (:func:`fill_derived`). Integer outputs hold the
#: large pattern 0xA5A5... (-1.5e9 as int32), so an integer accumulated into it is far off too.
OUTPUT_NAN = {2: 0x7DA5, 4: 0x7FA5A5A5, 8: 0x7FF5A5A5A5A5A5A5}
QUIET_BIT = {2: 1 << 9, 4: 1 << 22, 8: 1 << 51}
SIGN_BIT = {2: 1 << 15, 4: 1 << 31, 8: 1 << 63}
#: The unsigned word of each element size in bytes.
WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

#: Input distributions, by name (``case["distribution"]``; ``unit`` when absent). Each rung runs
#: ``unit``; the parent adds cases with the others (:mod:`dace_ai.sandbox.distributions`).
#: ``magnitude`` scales ``large`` and bounds ``heavy``. Integer inputs take ``zeros``, ``ties`` and
#: ``edge``; under the float-only ones (``small``, ``large``, ``heavy``) they keep ``unit`` values.
DISTRIBUTIONS = ("unit", "small", "large", "zeros", "ties", "heavy", "edge")
_STREAM = {name: index for index, name in enumerate(DISTRIBUTIONS)}


def _unit(rng: np.random.Generator, dtype: np.dtype, count: int) -> np.ndarray:
    """[-1, 1) for floats (both parts of complex), small integers otherwise."""
    if dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, count).astype(dtype)
    if dtype.kind == "c":
        return (rng.uniform(-1.0, 1.0, count) + 1j * rng.uniform(-1.0, 1.0, count)).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, count).astype(dtype)
    if dtype.kind == "u":
        return rng.integers(0, 10, count).astype(dtype)
    return rng.integers(-10, 11, count).astype(dtype)


def _edges(dtype: np.dtype) -> np.ndarray:
    """An integer type's extreme values and the values next to them and to zero."""
    info = np.iinfo(dtype)
    values = {info.min, info.min + 1, info.max - 1, info.max, 0, 1} | ({-1} if info.min < 0 else set())
    return np.array(sorted(values), dtype=dtype)


def random_values(
    rng: np.random.Generator, dtype: np.dtype | str, count: int, distribution: str = "unit", magnitude: float = 1.0
) -> np.ndarray:
    """Values of one input container drawn from ``distribution`` (see :data:`DISTRIBUTIONS`)."""
    dtype = np.dtype(dtype)
    unit = _unit(rng, dtype, count)
    floating = dtype.kind in "fc"
    if distribution == "unit" or dtype.kind == "b" and distribution != "zeros":
        return unit
    if distribution == "zeros":  # half the elements exactly zero (some of them -0.0), the rest unit values
        zero = rng.random(count) < 0.5
        out = np.where(zero, np.zeros(1, dtype), unit).astype(dtype)
        if floating:
            out[zero & (rng.random(count) < 0.3)] *= -1  # 0.0 * -1 = -0.0
        return out
    if distribution == "ties":  # every element one of four values: equal keys, equal maxima
        return rng.choice(unit[:4] if count >= 4 else unit, count).astype(dtype)
    if distribution == "edge":
        return rng.choice(_edges(dtype), count).astype(dtype) if dtype.kind in "iu" else unit
    if not floating:
        return unit
    if distribution == "small":
        return (unit * 1e-3).astype(dtype)
    if distribution == "large":
        return (unit * magnitude).astype(dtype)
    if distribution == "heavy":  # Cauchy: most values near 1, a few up to the bound
        draw = rng.standard_cauchy(count)
        if dtype.kind == "c":
            draw = draw + 1j * rng.standard_cauchy(count)
            return (np.clip(draw.real, -magnitude, magnitude) + 1j * np.clip(draw.imag, -magnitude, magnitude)).astype(
                dtype
            )
        return np.clip(draw, -magnitude, magnitude).astype(dtype)
    raise ValueError(f"unknown input distribution {distribution!r}")


def fill_values(dtype: np.dtype | str, count: int) -> np.ndarray:
    """``count`` elements of the fill pattern outputs hold before every call (:data:`OUTPUT_NAN`, or 0xA5 bytes)."""
    dtype = np.dtype(dtype)
    half = dtype.itemsize // 2 if dtype.kind == "c" else dtype.itemsize
    if dtype.kind in "fc" and half in OUTPUT_NAN:
        words = np.full(count * (2 if dtype.kind == "c" else 1), OUTPUT_NAN[half], dtype=WORDS[half])
        return words.view(dtype).copy()
    return np.frombuffer(bytes([CANARY]) * (dtype.itemsize * count), dtype=dtype).copy()


def case_inputs(case: Case) -> dict[str, np.ndarray]:
    """The initial contents of every container of a case, flat: inputs drawn from its seed and distribution,
    then changed as ``case["changes"]`` says.

    ``unit`` cases draw from the seed alone (the same inputs as ever); the other
    distributions from a stream of their own per seed. Outputs hold the fill pattern.
    """
    return changed(_drawn(case), case)


def changed(data: dict[str, np.ndarray], case: Case) -> dict[str, np.ndarray]:
    """``data`` with the changes of ``case["changes"]`` made, in order (in place; returned).

    Integers move by whole numbers (an element and a shift by 1, a scale by 2) and stay in their type's
    range (clipped); booleans are flipped, never shifted or scaled.
    """
    inputs = [c["name"] for c in case["containers"] if c["input"]]
    for change in case.get("changes") or []:
        names = [change["container"]] if change["kind"] == "element" else inputs
        for name in names:
            values = data[name]
            dtype = values.dtype
            if dtype.kind == "b":
                if change["kind"] == "element":
                    values[change["element"]] = not values[change["element"]]
                continue
            wide = np.complex128 if dtype.kind == "c" else np.float64
            by = change["by"] if dtype.kind not in "iu" else (2.0 if change["kind"] == "scale" else 1.0)
            if change["kind"] == "element":
                new = values[change["element"] : change["element"] + 1].astype(wide) + by
            elif change["kind"] == "shift":
                new = values.astype(wide) + by
            else:
                new = values.astype(wide) * by
            if dtype.kind in "iu":
                info = np.iinfo(dtype)
                new = np.clip(np.rint(new), info.min, info.max)
            if change["kind"] == "element":
                values[change["element"]] = new[0].astype(dtype)
            else:
                values[:] = new.astype(dtype)
    return data


def _drawn(case: Case) -> dict[str, np.ndarray]:
    """Every container's contents as drawn from the case's seed and distribution (no changes)."""
    distribution = case.get("distribution") or "unit"
    stream = case["seed"] if distribution == "unit" else [case["seed"], _STREAM[distribution]]
    rng = np.random.default_rng(stream)
    magnitude = float(case.get("magnitude") or 1.0)
    data = {}
    for cont in case["containers"]:
        if cont["input"]:
            data[cont["name"]] = random_values(rng, cont["dtype"], cont["elements"], distribution, magnitude)
        else:
            data[cont["name"]] = fill_values(cont["dtype"], cont["elements"])
    return data


def view(flat: np.ndarray, conn: Connector) -> np.ndarray:
    """The elements a connector sees: offset, shape and element strides into its container."""
    if not conn["shape"]:
        return flat[conn["offset"] : conn["offset"] + 1].reshape(())
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(
        flat[conn["offset"] :],
        shape=tuple(conn["shape"]),
        strides=tuple(s * item for s in conn["strides"]),
        writeable=False,
    )


def case_data(case: Case) -> dict[str, np.ndarray]:
    """The case's initial container contents: given files (``case["inputs"]``) or drawn from its seed."""
    data = _drawn(case)
    for name, path in (case.get("inputs") or {}).items():
        data[name] = np.load(path, allow_pickle=False).reshape(-1).astype(data[name].dtype, copy=True)
    return changed(data, case)


def output_containers(case: Case) -> list[str]:
    """The names of the containers a case writes."""
    return [c["name"] for c in case["containers"] if c["output"]]
