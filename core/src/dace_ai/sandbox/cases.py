"""The cases of a sandboxed run: symbol values, containers, connector views and tolerances of one case
(:func:`make_case`), the size ladder's sizes, the extra cases of other input distributions, a second call
on the same buffers and repeated calls. Nothing here runs code."""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from dace_ai.checking.api import CheckRequest
from dace_ai.context.concurrency import runs_concurrently
from dace_ai.context.types import ConnectorInfo
from dace_ai.sandbox import distributions
from dace_ai.sandbox.child.records import Case, Change, Connector, Container
from dace_ai.sandbox.constraints import first_point, point_text
from dace_ai.sandbox.ladder import GivenSizes, Ladder, build_ladder

_EPS = {"f": {2: 9.8e-4, 4: 1.2e-7, 8: 2.3e-16}, "c": {8: 1.2e-7, 16: 2.3e-16}}
#: The largest relative tolerance of any element type but half precision (see :func:`tolerance`).
MAX_RTOL = 1e-2


@functools.lru_cache(maxsize=4096)
def _sym(expr: str) -> Any:
    """A symbolic expression from its text, parsed once (every case evaluates the same few)."""
    from dace import symbolic

    return symbolic.pystr_to_symbolic(str(expr))


def evaluate(expr: Any, values: Mapping[str, Any]) -> int:
    """An integer from a symbolic expression and symbol values (``KeyError`` names a missing symbol)."""
    value = _sym(expr) if isinstance(expr, str) else expr
    if hasattr(value, "free_symbols"):
        names = _free_names(value)
        missing = [name for name in names if name not in values]
        if missing:
            raise KeyError(", ".join(missing))
        return _substituted(value, tuple((name, values[name]) for name in names))
    return int(value)


@functools.lru_cache(maxsize=4096)
def _free_names(value: Any) -> tuple[str, ...]:
    """The names of ``value``'s free symbols, sorted: remembered (printing a symbol is slow)."""
    return tuple(sorted({str(s) for s in value.free_symbols}))


@functools.lru_cache(maxsize=16384)
def _substituted(value: Any, items: tuple[tuple[str, Any], ...]) -> int:
    """``value`` with its symbols replaced by ``items``: remembered, since every case asks the same few."""
    named = dict(items)
    return int(value.subs({s: named[str(s)] for s in value.free_symbols}))


def size_cases(
    request: CheckRequest, sizes: GivenSizes | None = None, bench_sizes: Mapping[str, int] | str | None = None
) -> list[dict[str, int]]:
    """Symbol values to run: ``sizes`` as given (list of dicts, or dict of lists zipped), else the size ladder.

    The ladder's rungs in order (see :func:`dace_ai.sandbox.ladder.build_ladder`, which
    also says which sizes were skipped and why); ``bench_sizes`` (a dict or the
    ``bench_sizes`` setting's text) sets its bench rung.
    """
    return build_ladder(request, sizes, bench_sizes=bench_sizes).sizes()


def parse_sizes_setting(text: str | None) -> dict[str, list[int]] | None:
    """``"N=13,67 M=11,61"`` -> ``{"N": [13, 67], "M": [11, 61]}`` (the ``verify_sizes`` setting)."""
    if not text or not text.strip():
        return None
    result: dict[str, list[int]] = {}
    for part in text.replace(";", " ").split():
        name, _, values = part.partition("=")
        if not name or not values:
            raise ValueError(f"setting 'verify_sizes': {part!r} is not NAME=SIZE[,SIZE...]")
        result[name.strip()] = [int(v) for v in values.split(",") if v.strip()]
    return result


def _param_values(request: CheckRequest, values: dict[str, int]) -> dict[str, int]:
    """Enclosing map parameters at the first point of their range (when the ladder gave no point)."""
    return first_point(request, values)


def _dims(conn: ConnectorInfo, values: Mapping[str, int]) -> tuple[list[int], list[int]]:
    """Shape and element strides of what a connector sees (size-1 dimensions squeezed like DaCe does)."""
    ranges = _ranges(conn.subset)
    strides = [evaluate(s, values) for s in conn.container_strides] or [1] * len(ranges)
    dims = []
    for (b, e, s), stride in zip(ranges, strides):
        begin, end, step = evaluate(b, values), evaluate(e, values), evaluate(s, values)
        dims.append((max(0, (end - begin) // step + 1), stride * step))
    keep = len(conn.shape)
    while len(dims) > keep and any(n == 1 for n, _ in dims):
        dims.pop(next(i for i, (n, _) in enumerate(dims) if n == 1))
    return [n for n, _ in dims], [s for _, s in dims]


@functools.lru_cache(maxsize=4096)
def _ranges(subset: str) -> tuple[tuple[Any, Any, Any], ...]:
    """(begin, end, step) of each dimension of a memlet subset's text, parsed once (every case reads the same)."""
    from dace import subsets

    return tuple(tuple(r) for r in subsets.Range.from_string(subset).ranges)


def _live_sdfg(request: CheckRequest) -> Any:
    """The node's live SDFG: its data descriptors give the containers' element types and extents.

    Without one no case can be made; the ``AttributeError`` ends the run as the other
    failures to give the symbols values do.
    """
    sdfg = (request.node.live or {}).get("sdfg")
    if sdfg is None:
        raise AttributeError("the node has no live SDFG")
    return sdfg


def _dtype(request: CheckRequest, conn: ConnectorInfo) -> np.dtype:
    desc = _live_sdfg(request).arrays[conn.container]
    return np.dtype(desc.dtype.type)


def _container_elements(desc: Any, values: Mapping[str, int]) -> int:
    shape = [evaluate(s, values) for s in getattr(desc, "shape", [1])]
    strides = [evaluate(s, values) for s in getattr(desc, "strides", [1])]
    extent = sum((n - 1) * s for n, s in zip(shape, strides)) + 1 if all(n > 0 for n in shape) else 1
    for attr in ("total_size",):
        try:
            extent = max(extent, evaluate(getattr(desc, attr), values))
        except (AttributeError, KeyError, TypeError):
            pass
    try:
        extent += evaluate(desc.start_offset, values)
    except (AttributeError, KeyError, TypeError):
        pass
    return max(1, extent)


def tolerance(dtype: np.dtype, reduction: int) -> float:
    """Relative tolerance: 16 ulps of the element type per element of the longest input dimension, capped.

    The cap (1 %, or 128 ulps for types coarser than that) keeps every tolerance far
    below 1/2: the comparison's floor is the tolerance times the largest output, so
    an all-zero answer, or zeros for tiny outputs, can never pass (a correct sum of
    2**20 floats is off by about 1e-4 of the largest output, well inside it).
    """
    eps = _EPS.get(dtype.kind, {}).get(dtype.itemsize)
    return 0.0 if eps is None else min(16 * eps * max(1, reduction), max(MAX_RTOL, 128 * eps))


def make_case(
    request: CheckRequest,
    seed: int,
    sizes: dict[str, int],
    point: Mapping[str, int] | None = None,
    rung: str = "",
    point_words: str = "",
) -> Case:
    """One case of the job: values, containers (flat element counts), connector views, tolerances.

    ``point`` gives the enclosing maps' parameters (default: the first point of
    each range); ``rung`` and ``point_words`` name the case in messages.
    """
    live_sdfg = _live_sdfg(request)
    values = dict(sizes)
    values.update(dict(point) if point is not None else _param_values(request, values))
    containers: dict[str, Container] = {}
    connectors: list[Connector] = []
    for conn in request.node.connectors:
        shape, strides = _dims(conn, values)
        offset = evaluate(conn.offset, values)
        desc = live_sdfg.arrays[conn.container]
        cont = containers.setdefault(
            conn.container,
            {
                "name": conn.container,
                "dtype": _dtype(request, conn).str,
                "input": False,
                "output": False,
                "elements": _container_elements(desc, values),
            },
        )
        if conn.direction == "in":
            cont["input"] = True
        else:
            cont["output"] = True
        extent = offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1
        cont["elements"] = max(cont["elements"], extent)
        connectors.append(
            {
                "name": conn.name,
                "container": conn.container,
                "direction": conn.direction,
                "offset": offset,
                "shape": shape,
                "strides": strides,
                "wcr": conn.wcr,
            }
        )
    for cont in containers.values():
        if cont["output"] and any(c["wcr"] for c in connectors if c["container"] == cont["name"]):
            cont["input"] = True  # accumulating outputs start from data, like the program's
    reduction = max([n for c in connectors if c["direction"] == "in" for n in c["shape"]] or [1])
    rtol = {
        c["name"]: tolerance(np.dtype(containers[c["container"]]["dtype"]), reduction)
        for c in connectors
        if c["direction"] == "out"
    }
    return {
        "seed": seed,
        "sizes": dict(sizes),
        "values": values,
        "containers": list(containers.values()),
        "connectors": connectors,
        "rtol": rtol,
        "rung": rung,
        "point": dict(point or {}),
        "point_words": point_words,
    }


# ----------------------------------------------------------------------------- input distributions, second calls
def distribution_cases(request: CheckRequest, ladder: Ladder | None, reference: str | None) -> list[Case]:
    """The extra cases of :mod:`dace_ai.sandbox.distributions` for the rungs of ``ladder``.

    Each runs at its rung's sizes with the rung's first seed, at the rung's map points
    from the last one back; ``large`` and ``heavy`` come as a group per rung, one case
    per magnitude from the top (the child runs the first the reference keeps finite).
    """
    if ladder is None:
        return []
    kinds = {_dtype(request, c).kind for c in request.node.connectors if c.direction == "in"}
    extra = []
    for rung in ladder.rungs:
        made: dict[int, Case] = {}  # one case per map point, copied for each distribution
        for j, (name, magnitude) in enumerate(distributions.planned(rung.name, kinds, reference)):
            at = -1 - j % len(rung.points)
            if at not in made:
                made[at] = make_case(
                    request,
                    rung.seeds[0],
                    rung.sizes,
                    rung.points[at],
                    rung.name,
                    point_text(rung.points[at], ladder.scope_kinds),
                )
            case = copy.deepcopy(made[at])
            case["distribution"] = name
            if magnitude is not None:
                case.update({"magnitude": magnitude, "group": f"{rung.name}:{name}"})
            extra.append(case)
    return extra


#: The second call of :func:`add_second_call` uses inputs of this seed offset from its case's.
SECOND_CALL_SEED = 1000


def add_second_call(request: CheckRequest, cases: list[Case]) -> None:
    """Give one case a second call on the same buffers and state with other inputs (``case["again"]``).

    The first case of the vector rung (or the first case): a result kept from the
    first call (a static cache keyed on the sizes or the addresses) is then wrong.
    """
    host = next((c for c in cases if c["rung"] == "vector"), cases[0] if cases else None)
    if host is None:
        return
    host["again"] = make_case(
        request,
        host["seed"] + SECOND_CALL_SEED,
        host["sizes"],
        host["point"] or None,
        host["rung"],
        host["point_words"],
    )


def add_call_elsewhere(cases: list[Case]) -> None:
    """Give the first case ``elsewhere``: one more call on its inputs with the child's process made another
    place (environment variables, working directory, limits, CPU affinity), judged like the first."""
    if cases:
        cases[0]["elsewhere"] = True


#: How many more calls the repeated case makes: at least this many, at most twice as many, chosen per run.
REPEATED_CALLS = 40


def add_repeated_calls(cases: list[Case]) -> None:
    """Give the first case ``repeat``: that many calls more on its inputs before one judged call with its
    outputs poisoned again (a number chosen at random per run, so code cannot count up to it)."""
    import secrets

    if cases:
        cases[0]["repeat"] = REPEATED_CALLS + secrets.randbelow(REPEATED_CALLS + 1)


# ----------------------------------------------------------------------------- calls as programs make them
#: Mixed into the draw of the elements changed in place (with the case's seed and sizes).
IN_PLACE_SEED = 2000
#: How far the concurrent calls' seeds are from their case's.
CONCURRENT_SEED = 3000
#: Threads that call the candidate at once (whatever the machine's core count).
CONCURRENT_THREADS = 4
#: Calls each of those threads makes at least (the child makes more when a call is short).
CONCURRENT_REPEATS = 4


def _in_place_host(cases: list[Case]) -> Case | None:
    """The case the second calls ride in (the vector rung's first, else the first)."""
    return next((c for c in cases if c["rung"] == "vector"), cases[0] if cases else None)


#: Elements of one input view changed one at a time (each its own call): every element of a view this
#: small, else its first, last and middle elements and random others up to this many.
ELEMENTS_PER_INPUT = 6
#: Input views whose elements are changed one at a time (the largest first): at most this many.
INPUTS_CHANGED = 4


def _positions(shape: list[int], rng: np.random.Generator) -> list[list[int]]:
    """Distinct indices into a view of ``shape``: all of them when it has at most :data:`ELEMENTS_PER_INPUT`
    elements, else its first, last and middle elements and random others up to that many."""
    count = int(np.prod(shape)) if shape else 1
    if count <= 0:
        return []
    if count <= ELEMENTS_PER_INPUT:
        return [[int(i) for i in np.unravel_index(k, shape)] for k in range(count)] if shape else [[]]
    flats = [0, count - 1, int(np.ravel_multi_index([n // 2 for n in shape], shape))]
    while len(set(flats)) < ELEMENTS_PER_INPUT:
        flats.append(int(rng.integers(count)))
    return [[int(i) for i in np.unravel_index(k, shape)] for k in dict.fromkeys(flats)]


def _element_changes(host: Case) -> list[Change]:
    """One change per call: elements of each input view (up to :data:`INPUTS_CHANGED`, the largest first) at
    the places of :func:`_positions`, each moved by 0.5 (integers: by 1). The random places are drawn from
    the case's seed and sizes (so the reference's outputs stay cached for the node's next candidates); first,
    last and middle catch a memo that samples places of its own, the random ones one that samples those."""
    rng = np.random.default_rng([host["seed"], IN_PLACE_SEED, *sorted(int(v) for v in host["values"].values())])
    inputs = sorted(
        (c for c in host["connectors"] if c["direction"] == "in"),
        key=lambda c: -(int(np.prod(c["shape"])) if c["shape"] else 1),
    )
    changes: list[Change] = []
    for conn in inputs[:INPUTS_CHANGED]:
        kind = np.dtype(next(c["dtype"] for c in host["containers"] if c["name"] == conn["container"])).kind
        for index in _positions(list(conn["shape"]), rng):
            changes.append(
                {
                    "kind": "element",
                    "container": conn["container"],
                    "connector": conn["name"],
                    "element": conn["offset"] + sum(i * s for i, s in zip(index, conn["strides"])),
                    "index": index,
                    "by": 1.0 if kind in "iu" else 0.5,
                }
            )
    return changes


def add_in_place_calls(request: CheckRequest, cases: list[Case]) -> None:
    """Give one case (the host of :func:`add_second_call`) ``in_place``: more calls on its buffers, its
    inputs changed in place before each, cumulatively: one element at a time (:func:`_element_changes`: up
    to 6 per input view, 4 views, so at most 24 calls), then every element of every input shifted (0.25;
    integers by 1), then scaled (1.5; integers by 2). What a loop does between calls: an answer whose
    output depends on anything but its inputs' current values (a memo keyed on the address and a few
    sampled elements) is then wrong at some call."""
    host = _in_place_host(cases)
    if host is None:
        return
    shift: Change = {"kind": "shift", "by": 0.25}
    scale: Change = {"kind": "scale", "by": 1.5}
    made: list[Case] = []
    changes: list[Change] = []
    # the same drawn inputs (the host's seed), then the changes so far
    base = make_case(request, host["seed"], host["sizes"], host["point"] or None, host["rung"], host["point_words"])
    for change in [*_element_changes(host), shift, scale]:
        changes.append(change)
        case = copy.deepcopy(base)
        case["changes"] = copy.deepcopy(changes)
        made.append(case)
    host["in_place"] = made


def add_concurrent_calls(request: CheckRequest, cases: list[Case]) -> None:
    """Give the host of :func:`add_second_call` ``concurrent`` (one case per thread, other seeds, the same
    sizes and map point) when the node's calls can overlap: inside a parallel CPU scope, or with state
    fields. Small sizes do: the child makes the calls overlap by making threads give up their core in
    the middle of a call."""
    if not runs_concurrently(request.node, request.answer.state_fields):
        return
    host = _in_place_host(cases)
    if host is None:
        return
    host["concurrent"] = [
        make_case(
            request,
            host["seed"] + CONCURRENT_SEED + k,
            host["sizes"],
            host["point"] or None,
            host["rung"],
            host["point_words"],
        )
        for k in range(CONCURRENT_THREADS)
    ]
    host["concurrent_repeats"] = CONCURRENT_REPEATS
