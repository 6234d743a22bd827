"""The size ladder: the symbol values and map points at which a candidate is compared with its reference.

Odd sizes alone miss the answers models most often get wrong: a vector loop whose
tail is wrong only when the size is a multiple of the vector width, a reduction
that covers only its first tile, an answer right only at the first point of its
map. So every check climbs a ladder of *rungs*, in this order (the run stops at
the first failing case, and the message names its rung):

==========  =================================================================  ===========  =======================
rung        value of the k-th integer symbol                                   seeds        map points
==========  =================================================================  ===========  =======================
small       13, 11, 17, 19, 23, 7, 29, 31 (odd primes)                         all          first, ~1/3, ~2/3, last
odd         67, 61, 71, 73, 59, 79, 83, 53 (odd primes)                        all          first, ~1/3, ~2/3, last
vector      u, 2u, 3u, u, ... (u = 64 on CPUs up to AVX-512, see vector_unit)  first two    middle, last
multi-tile  520, 536, 552, ... (beyond two tiles of 256), lowered toward 264,  first one    last
            280, ... to fit the work budget; a node over budget even there
            (a matrix product) gets one set per symbol: that symbol beyond
            its tiles, the others at their odd-rung sizes
bench       ``bench_sizes``, else ~2**16 elements per container                first one    last
==========  =================================================================  ===========  =======================

"All" seeds are ``verify_seeds`` (3 by default). A rung has as many cases as it
has seeds or map points, whichever is more, the seeds cycling over the points.
``verify_sizes`` replaces the whole ladder by the sizes it lists (rung ``given``,
all seeds, map points spread like ``small``); a node without integer symbols runs
once at its own sizes (rung ``own``). A rung whose sizes equal an earlier one's is
not run twice.

*Constraints.* Sizes must respect the program (:mod:`dace_ai.sandbox.constraints`):
every connector's subset, and every view's subset into the array it views, inside
its container at every corner of the enclosing maps; nothing empty. A rung that
breaks a constraint is repaired by moving a size that is free (not given by the
user): first a size that only shapes containers (``L`` in a column slice
``A[:, 0:K]`` of an ``M x L`` array is raised to at least ``K``, plus the rung's
step so the view stays strided), then any size that can be raised, then one that
can be lowered. What cannot be repaired is never run: it becomes a
:class:`SkippedSize` with the reason, in the result's ``skipped`` list.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from dace_ai.checking.api import CheckRequest
from dace_ai.context.types import TargetInfo
from dace_ai.sandbox.bench_sizes import parse_sizes
from dace_ai.sandbox.constraints import (
    ProgramSizes,
    int_value,
    map_points,
    point_text,
    program_sizes,
    satisfy,
)
from dace_ai.sandbox.distributions import words as distribution_words
from dace_ai.sandbox.run_records import RungRecord
from dace_ai.targets.cpu import read_cpu

#: Small rung: odd primes, a different one per symbol, so no size is a multiple of a vector width
#: and swapped dimensions show.
SMALL_SIZES = (13, 11, 17, 19, 23, 7, 29, 31)
#: Odd rung: larger odd primes (several vectors and a remainder).
ODD_SIZES = (67, 61, 71, 73, 59, 79, 83, 53)
#: Multi-tile rung: more than two tiles of 256 (four of 128) in every dimension, 8 past a multiple of 16,
#: so the last tile of a tiled loop is partial.
TILE_SIZES = (520, 536, 552, 568, 584, 600, 616, 632)
#: The least the multi-tile rung comes down to: still beyond one 256-element tile in every dimension.
TILE_FLOORS = (264, 280, 296, 312, 328, 344, 360, 376)
#: One call of the node at the multi-tile and vector rungs: at most this many element operations
#: (the product of the sizes the connectors' shapes use, e.g. M*N*K for a matrix product)...
WORK_BUDGET = 2**24
#: ... and at most this many elements in any one container (32 MiB of doubles).
ELEMENT_BUDGET = 2**22
#: Bench rung default: about this many elements per container (as the bench stage picks).
BENCH_ELEMENTS = 2**16
#: Cache-line length assumed for CPU targets, and a GPU's memory transaction, in bytes.
CPU_LINE_BYTES = 64
GPU_LINE_BYTES = 128
#: The least vector-multiple size (elements): a few vectors of the widest registers, unrolled.
MIN_VECTOR_MULTIPLE = 64

RUNGS = ("small", "odd", "vector", "multi-tile", "bench")
#: How a failure message names a rung.
RUNG_WORDS = {
    "small": "the small odd size",
    "odd": "the larger odd size",
    "vector": "the vector-multiple size",
    "multi-tile": "the multi-tile size",
    "bench": "the bench size",
    "given": "a size from verify_sizes",
    "own": "the program's own sizes",
}
#: Where in each enclosing map the rung's cases run (fractions of the range, 0 = first point, 1 = last).
POINT_FRACTIONS = {
    "small": (0.0, 1 / 3, 2 / 3, 1.0),
    "odd": (0.0, 1 / 3, 2 / 3, 1.0),
    "given": (0.0, 1 / 3, 2 / 3, 1.0),
    "own": (0.0, 1 / 3, 2 / 3, 1.0),
    "vector": (0.5, 1.0),
    "multi-tile": (1.0,),
    "bench": (1.0,),
}
#: How many of the seeds each rung runs (None: all of them).
RUNG_SEEDS = {"small": None, "odd": None, "given": None, "own": None, "vector": 2, "multi-tile": 1, "bench": 1}


# ----------------------------------------------------------------------------- records
@dataclass(frozen=True)
class SkippedSize:
    """A size the ladder did not run, and why (the program does not allow it, or it is over budget)."""

    sizes: dict[str, int]
    rung: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{RUNG_WORDS.get(self.rung, self.rung)} {_sizes_text(self.sizes)}: {self.reason}"


@dataclass(frozen=True)
class Rung:
    """One size of the ladder: the symbol values, the seeds and map points run there, and what was adjusted."""

    name: str
    sizes: dict[str, int]
    seeds: tuple[int, ...]
    points: tuple[dict[str, int], ...] = ({},)
    note: str = ""

    @property
    def words(self) -> str:
        return RUNG_WORDS.get(self.name, self.name)

    def as_dict(self) -> RungRecord:
        return {
            "rung": self.name,
            "sizes": dict(self.sizes),
            "seeds": list(self.seeds),
            "points": [dict(p) for p in self.points],
            "note": self.note,
        }


@dataclass(frozen=True)
class PlannedCase:
    """One run of candidate and reference: a seed, the symbol values, the map point, and the rung they come from."""

    seed: int
    sizes: dict[str, int]
    rung: str
    point: dict[str, int] = field(default_factory=dict)
    point_words: str = ""  #: ``map point i=37`` (empty outside maps)


@dataclass
class Ladder:
    """The rungs to run and the sizes skipped."""

    rungs: list[Rung]
    skipped: list[SkippedSize]
    scope_kinds: dict[str, str] = field(default_factory=dict)  #: map/loop parameter -> "map", "loop", ...

    def sizes(self) -> list[dict[str, int]]:
        return [dict(r.sizes) for r in self.rungs]

    def cases(self) -> list[PlannedCase]:
        """Every rung's cases: as many as its seeds or its map points, whichever is more, the seeds cycling."""
        cases = []
        for rung in self.rungs:
            count = max(len(rung.seeds), len(rung.points))
            for j in range(count):
                point = dict(rung.points[j % len(rung.points)])
                cases.append(
                    PlannedCase(
                        rung.seeds[j % len(rung.seeds)],
                        dict(rung.sizes),
                        rung.name,
                        point,
                        point_text(point, self.scope_kinds),
                    )
                )
        return cases

    def describe(self) -> list[RungRecord]:
        return [r.as_dict() for r in self.rungs]


# ----------------------------------------------------------------------------- helpers
def _sizes_text(sizes: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items()) or "(no symbols)"


# ----------------------------------------------------------------------------- rung values
def vector_bytes(target: TargetInfo) -> int:
    """The widest vector register the target's code may use, in bytes (from its name, flags or this CPU)."""
    if getattr(target, "kind", "cpu") == "gpu":
        return GPU_LINE_BYTES
    text = " ".join([getattr(target, "name", ""), *getattr(target, "flags", ())]).lower()
    found = 16  # SSE2 / NEON: every 64-bit CPU has 128-bit vectors
    if "sve" in text:
        found = max(found, 256)  # SVE allows up to 2048 bits
    if "avx512" in text or "x86-64-v4" in text or "skylake-avx512" in text or "sapphirerapids" in text:
        found = max(found, 64)
    if "avx2" in text or "x86-64-v3" in text or re.search(r"-mavx\b", text) or "haswell" in text:
        found = max(found, 32)
    width = re.search(r"-mprefer-vector-width=(\d+)", text)
    if width:
        found = max(found, int(width.group(1)) // 8)
    if "-march=native" in text or "-mcpu=native" in text or getattr(target, "name", "") == "host":
        flags = read_cpu().flags
        if "sve" in flags:
            found = max(found, 256)
        if "avx512f" in flags:
            found = max(found, 64)
        elif "avx" in flags or "avx2" in flags:
            found = max(found, 32)
    return found


def vector_unit(target: TargetInfo, element_bytes: Sequence[int]) -> int:
    """Elements that are a multiple of every vector width and cache line of the target, for every element size.

    Vector and line lengths are powers of two, so the least common multiple is the
    widest of them over the narrowest element; at least :data:`MIN_VECTOR_MULTIPLE`
    (64 covers AVX-512 doubles and floats and a 64-byte line, unrolled by a few vectors).
    """
    line = GPU_LINE_BYTES if getattr(target, "kind", "cpu") == "gpu" else CPU_LINE_BYTES
    widest = max(vector_bytes(target), line)
    unit = widest // max(1, min(element_bytes or [8]))
    return max(MIN_VECTOR_MULTIPLE, math.lcm(unit, MIN_VECTOR_MULTIPLE))


def _element_bytes(request: CheckRequest) -> list[int]:
    sdfg = (request.node.live or {}).get("sdfg")
    found = []
    for conn in request.node.connectors:
        desc = sdfg.arrays.get(conn.container) if sdfg is not None else None
        if desc is not None:
            found.append(int(desc.dtype.bytes))
    return found


def _cost(program: ProgramSizes, values: Mapping[str, int]) -> tuple[float, str]:
    """How far over budget one call at ``values`` is (<= 1 fits), and which budget binds."""
    work = math.prod(values[n] for n in program.work if n in values)
    worst, what = work / WORK_BUDGET, f"{work:.3g} element operations per call (budget {WORK_BUDGET:.3g})"
    for name, shape in program.containers:
        try:
            elements = math.prod(int_value(d, values) for d in shape)
        except (KeyError, TypeError, ValueError):
            continue
        if elements / ELEMENT_BUDGET > worst:
            worst, what = elements / ELEMENT_BUDGET, f"{elements:.3g} elements in {name} (budget {ELEMENT_BUDGET:.3g})"
    return worst, what


def _multi_tile(program: ProgramSizes) -> tuple[list[dict[str, int]], str]:
    """Beyond-tile sizes that fit the budgets: (one or more sets of values, what was chosen and why).

    Every dimension at once when that fits: the k-th symbol gets ``base + 16 k``,
    ``base`` from 520 down by 16 to 264 (one tile of 256 and a partial one) until
    one call fits :data:`WORK_BUDGET` and every container :data:`ELEMENT_BUDGET`.
    Otherwise (a matrix product: 264 x 280 x 296 is already over budget) one set per
    symbol, that symbol at ``520 + 16 k`` (lowered likewise) and the others at their
    odd-rung values, so every dimension is beyond its tiles in one of the sets.
    """
    names = program.symbols

    def together(base: int) -> dict[str, int]:
        return {n: base + 16 * (k % len(TILE_SIZES)) for k, n in enumerate(names)}

    def alone(name: str, base: int) -> dict[str, int]:
        values = {n: ODD_SIZES[k % len(ODD_SIZES)] for k, n in enumerate(names)}
        values[name] = together(base)[name]
        return values

    def lowest(make: Any) -> tuple[dict[str, int], float, str]:
        base = TILE_SIZES[0]
        cost, what = _cost(program, make(base))
        while cost > 1 and base - 16 >= TILE_FLOORS[0]:
            base -= 16
            cost, what = _cost(program, make(base))
        return make(base), cost, what

    first = together(TILE_SIZES[0])
    values, cost, what = lowest(together)
    if cost <= 1:
        if values == first:
            return [values], "every dimension more than two 256-element tiles"
        return [values], (
            f"every dimension beyond one 256-element tile, lowered from {_sizes_text(first)} to keep "
            f"one call within {WORK_BUDGET:.3g} element operations and every container within "
            f"{ELEMENT_BUDGET:.3g} elements"
        )
    tiled = [n for n in names if n in program.work or n in program.ranks]
    sets = []
    for name in tiled:
        one, one_cost, one_what = lowest(lambda base, n=name: alone(n, base))
        if one_cost > 1:
            return [], f"even one dimension beyond one 256-element tile needs {one_what} at {_sizes_text(one)}"
        sets.append(one)
    return sets, (
        f"one dimension at a time beyond its tiles, the others at their odd-rung sizes: all "
        f"{len(tiled)} at once would need {what} at {_sizes_text(values)}"
    )


def _vector(program: ProgramSizes, unit: int) -> tuple[dict[str, int] | None, str]:
    names = program.symbols
    values = {n: unit * (1 + k % 3) for k, n in enumerate(names)}
    if _cost(program, values)[0] > 1:
        values = {n: unit for n in names}
        cost, what = _cost(program, values)
        if cost > 1:
            return None, f"multiples of {unit} in every dimension need {what}"
        return values, f"every size {unit}: a multiple of every vector width and cache line (larger ones over budget)"
    return values, f"multiples of {unit}: of every vector width and cache line of the target"


def bench_sizes(request: CheckRequest, given: Mapping[str, int] | str | None = None) -> dict[str, int]:
    """The bench rung: ``given`` (the ``bench_sizes`` setting), else ~2**16 elements per container.

    A symbol is given ``BENCH_ELEMENTS ** (1 / rank)`` where rank is the largest rank of
    a container whose shape uses it (256 for a matrix, 65536 for a vector), the rule of
    the bench stage; a symbol no container's shape uses gets its odd-rung value. Sizes
    that are not given are repaired like every rung's, so the bench times exactly
    the sizes the ladder checked; ``ValueError`` says why when none can be found.
    """
    program = program_sizes(request)
    fixed = _given(given)
    values, _ = satisfy(program, _bench(program, fixed), set(fixed), 0)
    return {**{name: values[name] for name in fixed if name in values}, **values}  # the user's order first


def _given(given: Mapping[str, int] | str | None) -> dict[str, int]:
    if not given:
        return {}
    if isinstance(given, str):
        return parse_sizes(given)
    return {k: int(v) for k, v in given.items()}


def _bench(program: ProgramSizes, given: Mapping[str, int]) -> dict[str, int]:
    values = {}
    for k, name in enumerate(program.symbols):
        if name in given:
            values[name] = int(given[name])
        elif name in program.ranks:
            values[name] = round(BENCH_ELEMENTS ** (1 / program.ranks[name]))
        else:
            values[name] = ODD_SIZES[k % len(ODD_SIZES)]
    values.update({k: int(v) for k, v in given.items() if k not in values})
    return values


# ----------------------------------------------------------------------------- the ladder
#: Sizes a user gives (``verify_sizes``, ``dace_ai.verify(sizes=...)``): a list of ``{symbol: value}``
#: or one ``{symbol: [values]}``.
GivenSizes = Sequence[Mapping[str, int]] | Mapping[str, "int | list[int] | tuple[int, ...]"]


def _given_list(sizes: GivenSizes) -> list[dict[str, int]]:
    """``verify_sizes`` as a list of dicts (a ``{symbol: [values]}`` is zipped, shorter lists repeat their last)."""
    if isinstance(sizes, Mapping):
        lists = {k: list(v) if isinstance(v, (list, tuple)) else [v] for k, v in sizes.items()}
        count = max((len(v) for v in lists.values()), default=0)
        return [{k: int(v[min(i, len(v) - 1)]) for k, v in lists.items()} for i in range(count)]
    return [{k: int(v) for k, v in given.items()} for given in sizes]


def build_ladder(
    request: CheckRequest,
    sizes: GivenSizes | None = None,
    *,
    bench_sizes: Mapping[str, int] | str | None = None,
    seeds: Sequence[int] | int = (0, 1, 2),
    rungs: Sequence[str] = RUNGS,
) -> Ladder:
    """The rungs for ``request``'s node: ``sizes`` (``verify_sizes``) when given, else the full ladder.

    ``rungs`` selects rungs of the full ladder (``("bench",)`` for a timing run).
    Raises ``KeyError``/``ValueError`` when the node's symbols cannot be given values at all.
    """
    seeds = tuple(range(seeds)) if isinstance(seeds, int) else tuple(seeds)
    program = program_sizes(request)
    names = program.symbols
    plans: list[tuple[str, dict[str, int] | None, set[str], int, str]] = []  # rung, values, fixed, step, note
    values: dict[str, int] | None  # None: a rung left out, its note says why
    if sizes:
        for given in _given_list(sizes):
            values = {n: ODD_SIZES[k % len(ODD_SIZES)] for k, n in enumerate(names)}
            values.update(given)
            plans.append(("given", values, set(given), 0, ""))
    elif not names:
        plans.append(("own", {}, set(), 0, ""))
    else:
        unit = vector_unit(request.node.target, _element_bytes(request))
        for name in rungs:
            if name == "small":
                plans.append((name, {n: SMALL_SIZES[k % len(SMALL_SIZES)] for k, n in enumerate(names)}, set(), 2, ""))
            elif name == "odd":
                plans.append((name, {n: ODD_SIZES[k % len(ODD_SIZES)] for k, n in enumerate(names)}, set(), 2, ""))
            elif name == "vector":
                values, note = _vector(program, unit)
                plans.append((name, values, set(), unit, note))
            elif name == "multi-tile":
                sets, note = _multi_tile(program)
                chosen: list[dict[str, int] | None] = [*sets] or [None]
                plans.extend((name, values, set(), 16, note) for values in chosen)
            elif name == "bench":
                given = _given(bench_sizes)
                plans.append(
                    (
                        name,
                        _bench(program, given),
                        set(given),
                        0,
                        "from the bench_sizes setting"
                        if given
                        else f"about {BENCH_ELEMENTS} elements per container, as the bench stage picks",
                    )
                )
            else:
                raise ValueError(f"unknown rung {name!r}; the ladder has {', '.join(RUNGS)}")
    ladder = Ladder([], [], {s.param: s.kind for s in program.scopes})
    for name, values, fixed, step, note in plans:
        if values is None:
            ladder.skipped.append(SkippedSize({}, name, note))
            continue
        try:
            repaired, changes = satisfy(program, values, fixed, step)
            points = map_points(program, repaired, POINT_FRACTIONS[name])
        except ValueError as exc:
            ladder.skipped.append(SkippedSize(dict(values), name, f"the program does not allow these sizes: {exc}"))
            continue
        if any(r.sizes == repaired for r in ladder.rungs):
            continue
        count = RUNG_SEEDS[name]
        rung_seeds = seeds[:count] if count else seeds
        text = "; ".join([t for t in (note, *changes) if t])
        ladder.rungs.append(Rung(name, repaired, rung_seeds or (0,), tuple(points), text))
    return ladder


def case_place(case: Mapping[str, Any]) -> str:
    """``seed 0, sizes N=64 (the vector-multiple size), at map point i=37``: where a case ran, for messages."""
    sizes = case.get("sizes") or {}
    rung = case.get("rung") or ""
    words = RUNG_WORDS.get(rung, "")
    text = f"seed {case['seed']}, "
    if sizes:
        text += f"sizes {_sizes_text(sizes)}" + (f" ({words})" if words else "")
    else:
        text += "the program's own sizes"
    point = case.get("point") or {}
    if point:
        text += f", at {case.get('point_words') or point_text(point)}"
    inputs = distribution_words(case)
    return text + (f", {inputs}" if inputs else "")
