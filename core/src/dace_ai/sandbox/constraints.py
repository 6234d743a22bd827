"""What sizes a program allows a node to run at: constraints from its subsets and shapes, and its map points.

The size ladder (:mod:`dace_ai.sandbox.ladder`) proposes symbol values; this
module says whether the program allows them and repairs them when it can:

* every connector's memlet subset lies inside its container's shape, every view
  (the frontend turns ``A[:, 0:K]`` into a view of ``A``) looks at a part of the
  viewed array that exists (:func:`dace_ai.compat.viewed_subsets`), and every
  subset and enclosing range is non-empty, at every corner of the enclosing maps
  and loops (the first and the last point of each parameter);
* :func:`satisfy` repairs a proposal by moving a free size: first one that only
  shapes containers (``L`` for ``A[:, 0:K]`` of an ``M x L`` array), then any that
  can be raised, then one that can be lowered; otherwise it says which constraint
  no free size repairs;
* :func:`map_points` picks points of the enclosing ranges (first, last, between).

Constraints are sympy expressions (``expr >= 0``) built with :mod:`dace.symbolic`
and :mod:`dace.subsets`, evaluated with integers (cached: a ladder evaluates the
same expressions at many sizes).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dace_ai.checking.api import CheckRequest
from dace_ai.compat import viewed_subsets
from dace_ai.context.per_node import PerNode
from dace_ai.context.types import NodeContext


# ----------------------------------------------------------------------------- symbolic helpers
def _sym(expr: Any) -> Any:
    """A sympy expression (through DaCe's parser, which knows ``int_floor`` and friends) from text or a number."""
    from dace import symbolic

    return expr if hasattr(expr, "free_symbols") else symbolic.pystr_to_symbolic(str(expr))


def _names(expr: Any) -> set[str]:
    return {str(s) for s in getattr(expr, "free_symbols", ())}


def int_value(expr: Any, values: Mapping[str, int]) -> int:
    """The integer value of ``expr`` at ``values`` (``KeyError`` names a missing symbol)."""
    names = _free_names(expr) if hasattr(expr, "free_symbols") else ()
    if not names:
        return int(expr)
    try:
        key = (expr, tuple((name, int(values[name])) for name in names))
    except KeyError:
        raise KeyError(", ".join(name for name in names if name not in values)) from None
    return _cached_value(*key)


@functools.lru_cache(maxsize=4096)
def _free_names(expr: Any) -> tuple[str, ...]:
    return tuple(sorted(s.name for s in expr.free_symbols))


@functools.lru_cache(maxsize=65536)
def _cached_value(expr: Any, items: tuple[tuple[str, int], ...]) -> int:
    import sympy

    given = dict(items)
    result = expr.xreplace({s: sympy.Integer(given[s.name]) for s in expr.free_symbols})
    try:
        return int(result)
    except TypeError:
        from dace import symbolic

        return int(symbolic.evaluate(expr, given))


def _range(text: str) -> tuple[Any, Any, Any]:
    """(begin, inclusive end, step) of a one-dimensional DaCe range string such as ``0:N`` or ``1:N-1:2``."""
    from dace import subsets

    ((begin, end, step),) = subsets.Range.from_string(text).ranges
    return begin, end, step


# ----------------------------------------------------------------------------- the program's shape
@dataclass(frozen=True)
class Scope:
    """An enclosing map (or loop) parameter and its range in symbols (end inclusive)."""

    kind: str
    param: str
    begin: Any
    end: Any
    step: Any


@dataclass(frozen=True)
class Constraint:
    """``expr >= 0`` must hold at the first and last point of every map; ``text`` says what it protects."""

    expr: Any
    text: str


@dataclass
class ProgramSizes:
    """What the sizes of one node's program must respect, and what its symbols shape (read once per ladder)."""

    symbols: list[str]  #: integer symbols that take sizes (map parameters excluded)
    work: set[str]  #: symbols of the connectors' shapes: one call's work is their product
    extents: set[str]  #: symbols a connector's extent uses (not merely a container's)
    ranks: dict[str, int]  #: symbol -> largest rank of a container whose shape uses it
    containers: list[tuple[str, tuple[Any, ...]]]  #: name, shape
    scopes: list[Scope]
    constraints: list[Constraint]
    scope_problems: list[str] = field(default_factory=list)


_LOOP = re.compile(r"^\s*\(?\s*(\w+)\s*(<=|<|>=|>)\s*(.+?)\s*\)?\s*$")
_INIT = re.compile(r"^\s*(\w+)\s*=\s*(.+?)\s*$")
_STEP = re.compile(r"^\s*(\w+)\s*=\s*\(?\s*(\w+)\s*([+-])\s*(.+?)\s*\)?\s*$")


def _loop_scope(param: str, header: str) -> Scope | None:
    """An ascending ``for (v = a; v < b; v = v + s)`` loop as a range; None when the header says otherwise."""
    parts = [p.strip() for p in header.split(";")]
    if len(parts) != 3:
        return None
    init, cond, update = (_INIT.match(parts[0]), _LOOP.match(parts[1]), _STEP.match(parts[2]))
    if not (init and cond and update) or init.group(1) != param or cond.group(1) != param:
        return None
    if update.group(3) != "+" or cond.group(2) not in ("<", "<="):
        return None
    begin, bound, step = _sym(init.group(2)), _sym(cond.group(3)), _sym(update.group(4))
    return Scope("loop", param, begin, bound - 1 if cond.group(2) == "<" else bound, step)


def _scope_params(node: NodeContext) -> list[str]:
    """Every parameter of an enclosing map, consume scope or loop, outermost first."""
    return list(dict.fromkeys(p for scope in node.scopes for p in scope.params if p))


def _size_symbols(node: NodeContext) -> list[str]:
    """Integer symbols of the node that take sizes: symbols in scope, without the enclosing maps' parameters."""
    params = set(_scope_params(node))
    return [
        name
        for name, ctype in node.symbols.items()
        if name not in params and not any(t in ctype for t in ("float", "double", "complex"))
    ]


def program_sizes(request: CheckRequest) -> ProgramSizes:
    """What the sizes of the node's program must respect (read once per node object: every case asks)."""
    return _PROGRAM_SIZES(request.node)


def _program_sizes(node: NodeContext) -> ProgramSizes:
    from dace import subsets

    live = node.live or {}
    sdfg, state = live.get("sdfg"), live.get("state")
    symbols = _size_symbols(node)
    scopes: list[Scope] = []
    problems: list[str] = []
    for scope in node.scopes:
        for param, text in zip(scope.params, scope.ranges):
            if not param:
                continue
            try:
                if scope.kind == "map":
                    scopes.append(Scope("map", param, *_range(text)))
                elif scope.kind == "consume":
                    scopes.append(Scope("consume", param, _sym(0), _sym(text) - 1, _sym(1)))
                elif scope.kind == "loop":
                    loop = _loop_scope(param, text)
                    if loop is None:
                        init = _INIT.match(text.split(";")[0])
                        if init is None:
                            raise ValueError(text)
                        begin = _sym(init.group(2))
                        loop = Scope("loop", param, begin, begin, _sym(1))  # only its first point is known
                    scopes.append(loop)
            except Exception:  # noqa: BLE001 - an unreadable range: reported when a point is needed
                problems.append(f"the range of {scope.kind} parameter {param} ({text}) could not be read")
    containers: dict[str, tuple[Any, ...]] = {}
    constraints: list[Constraint] = []
    work: set[str] = set()
    extents: set[str] = set()

    def fits(subset_text: str, container: str, shape: tuple[Any, ...], what: str) -> None:
        ranges = subsets.Range.from_string(subset_text).ranges
        shown = f"{container} ({' x '.join(str(s) for s in shape) or 'scalar'})"
        for d, (begin, end, _step) in enumerate(ranges):
            constraints.append(Constraint(end - begin, f"{what} is empty in dimension {d}"))
            if len(shape) == len(ranges):
                constraints.append(Constraint(begin, f"{what} starts before dimension {d} of {shown}"))
                constraints.append(Constraint(shape[d] - 1 - end, f"{what} reaches past dimension {d} of {shown}"))

    for conn in node.connectors:
        if not conn.container or sdfg is None or conn.container not in sdfg.arrays:
            continue
        desc = sdfg.arrays[conn.container]
        shape = tuple(_sym(s) for s in getattr(desc, "shape", ()))
        containers.setdefault(conn.container, shape)
        for dim in conn.shape:
            names = _names(_sym(dim))
            work |= names
            extents |= names
        if conn.subset:
            fits(conn.subset, conn.container, shape, f"connector {conn.name}'s subset {conn.container}[{conn.subset}]")
            for begin, end, _step in subsets.Range.from_string(conn.subset).ranges:
                extents |= _names(end - begin)
        if state is not None:
            seen = conn.container
            for viewed, subset_text, viewed_shape in viewed_subsets(sdfg, state, conn.container):
                viewed_shape = tuple(_sym(s) for s in viewed_shape)
                containers.setdefault(viewed, viewed_shape)
                fits(subset_text, viewed, viewed_shape, f"view {seen}'s subset {viewed}[{subset_text}]")
                seen = viewed
    for ranged in scopes:
        constraints.append(
            Constraint(ranged.end - ranged.begin, f"the range of {ranged.kind} parameter {ranged.param} is empty")
        )
    ranks: dict[str, int] = {}
    for shape in containers.values():
        for dim in shape:
            for name in _names(dim):
                ranks[name] = max(ranks.get(name, 0), len(shape))
    params = {s.param for s in scopes}
    return ProgramSizes(
        symbols, work - params, extents - params, ranks, list(containers.items()), scopes, constraints, problems
    )


# ----------------------------------------------------------------------------- map points
def map_points(program: ProgramSizes, values: Mapping[str, int], fractions: Sequence[float]) -> list[dict[str, int]]:
    """Map points at ``fractions`` of every enclosing range (diagonally: the j-th point of each), deduplicated."""
    if not program.scopes:
        return [{}]
    if program.scope_problems:
        raise KeyError("; ".join(program.scope_problems))
    found: list[dict[str, int]] = []
    for fraction in fractions:
        point: dict[str, int] = {}
        for scope in program.scopes:
            scope_values = {**values, **point}
            begin, end, step = (int_value(e, scope_values) for e in (scope.begin, scope.end, scope.step))
            count = (end - begin) // step + 1 if step > 0 else 0
            if count <= 0:
                raise ValueError(f"the range of {scope.kind} parameter {scope.param} is empty")
            point[scope.param] = begin + step * int(fraction * (count - 1))
        if point not in found:
            found.append(point)
    return found


#: :func:`_program_sizes` per node object.
_PROGRAM_SIZES: PerNode[ProgramSizes] = PerNode(_program_sizes)


def first_point(request: CheckRequest, values: Mapping[str, int]) -> dict[str, int]:
    """The enclosing maps' parameters at the first point of their ranges (``{}`` outside maps)."""
    (point,) = map_points(program_sizes(request), values, (0.0,))
    return point


def range_corners(program: ProgramSizes, values: Mapping[str, int]) -> list[dict[str, int]]:
    """Every combination of first and last point of the enclosing ranges (diagonal only past 4 parameters)."""
    if len(program.scopes) > 4:
        return map_points(program, values, (0.0, 1.0))
    if program.scope_problems:
        raise KeyError("; ".join(program.scope_problems))
    corners: list[dict[str, int]] = [{}]
    for scope in program.scopes:
        grown = []
        for corner in corners:
            scope_values = {**values, **corner}
            begin, end, step = (int_value(e, scope_values) for e in (scope.begin, scope.end, scope.step))
            count = (end - begin) // step + 1 if step > 0 else 0
            if count <= 0:
                raise ValueError(f"the range of {scope.kind} parameter {scope.param} is empty")
            grown += [{**corner, scope.param: begin}, {**corner, scope.param: begin + step * (count - 1)}]
        corners = grown
    return corners


def point_text(point: Mapping[str, int], kinds: Mapping[str, str] | None = None) -> str:
    """``map point i=37`` (``loop point`` when every parameter belongs to a loop)."""
    if not point:
        return ""
    kind = "loop" if kinds and all(kinds.get(p) == "loop" for p in point) else "map"
    return f"{kind} point " + ", ".join(f"{k}={v}" for k, v in point.items())


# ----------------------------------------------------------------------------- constraints
def _violated(program: ProgramSizes, values: Mapping[str, int]) -> Constraint | None:
    """The first constraint broken at a corner of the enclosing ranges (first or last point of each), else None."""
    try:
        corners = range_corners(program, values)
    except ValueError:
        return next((c for c in program.constraints if c.text.startswith("the range of")), None) or Constraint(
            0, "an enclosing range is empty"
        )
    for constraint in program.constraints:
        for corner in corners:
            try:
                if int_value(constraint.expr, {**values, **corner}) < 0:
                    return constraint
            except KeyError:
                continue  # the expression uses a symbol no size or point gives: nothing to check
    return None


def _holds(constraint: Constraint, program: ProgramSizes, values: Mapping[str, int]) -> bool:
    try:
        corners = range_corners(program, values)
        return all(int_value(constraint.expr, {**values, **c}) >= 0 for c in corners)
    except (KeyError, ValueError):
        return False


def _raise_to(constraint: Constraint, program: ProgramSizes, values: dict[str, int], name: str) -> int | None:
    """The least value of ``name`` above its own for which ``constraint`` holds.

    The next 64 values are tried one by one first (a map over ``0:M:8`` of ``A[i:i + 8]``
    fits only when M is a multiple of 8: not monotone), then doubling and bisection.
    """
    low = values[name]
    for candidate in range(low + 1, low + 65):
        if _holds(constraint, program, {**values, name: candidate}):
            return candidate
    low += 64
    cap = max(4 * max(values.values(), default=1), 4096)
    high = max(low + 1, 2 * low)
    while not _holds(constraint, program, {**values, name: high}):
        if high >= cap:
            return None
        high = min(cap, 2 * high)
    while high - low > 1:
        middle = (low + high) // 2
        if _holds(constraint, program, {**values, name: middle}):
            high = middle
        else:
            low = middle
    return high


def _lower_to(constraint: Constraint, program: ProgramSizes, values: dict[str, int], name: str) -> int | None:
    """The greatest value of ``name`` below its own (at least 1) for which ``constraint`` holds."""
    for candidate in sorted({max(1, values[name] * k // 8) for k in range(7, -1, -1)} - {values[name]}, reverse=True):
        if _holds(constraint, program, {**values, name: candidate}):
            high = values[name]
            low = candidate
            while high - low > 1:
                middle = (low + high) // 2
                if _holds(constraint, program, {**values, name: middle}):
                    low = middle
                else:
                    high = middle
            return low
    return None


def satisfy(
    program: ProgramSizes, values: dict[str, int], fixed: set[str], step: int
) -> tuple[dict[str, int], list[str]]:
    """Repair ``values`` until every constraint holds; (values, what was changed and why).

    Raises ``ValueError`` with the broken constraint when no free size can repair it.
    """
    values = dict(values)
    changes: list[str] = []
    for _ in range(64):
        broken = _violated(program, values)
        if broken is None:
            return values, changes
        used = _names(broken.expr) | {n for s in program.scopes for n in _names(s.end - s.begin)}
        free = [n for n in program.symbols if n in used and n not in fixed]
        dependent = [n for n in free if n not in program.extents]
        repaired = False
        for name in [*dependent, *[n for n in free if n not in dependent]]:
            value = _raise_to(broken, program, values, name)
            if value is None:
                continue
            if step and _holds(broken, program, {**values, name: value + step}):
                value += step
            changes.append(f"{name} raised from {values[name]} to {value} ({broken.text} otherwise)")
            values[name] = value
            repaired = True
            break
        if not repaired:
            for name in free:
                value = _lower_to(broken, program, values, name)
                if value is None:
                    continue
                changes.append(f"{name} lowered from {values[name]} to {value} ({broken.text} otherwise)")
                values[name] = value
                repaired = True
                break
        if not repaired:
            why = "no size is free to change" if not free else f"no value of {', '.join(free)} repairs it"
            raise ValueError(f"{broken.text} ({why})")
    raise ValueError("the program's constraints could not all be met")
