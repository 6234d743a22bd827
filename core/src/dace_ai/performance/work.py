"""What one call of a node must do: floating-point operations and bytes moved, as expressions of its symbols.

Speed of light needs the work of a node, not of a candidate: what any correct
implementation must compute and move. Both come from the node's semantics and its
connectors (:class:`~dace_ai.context.types.NodeContext`):

* *flops*, by library node class: Gemm, MatMul and BatchedMatMul ``2*M*N*K`` (plus
  ``2*M*N`` with a ``C`` input), Gemv ``2*M*N``, Ger ``2*M*N``, Dot and Axpy ``2*N``,
  Reduce one operation per input element, Transpose none, Cholesky ``N**3/3``, Solve
  ``2*N**3/3 + 2*N**2*R``, Inv ``2*N**3``; an AI node states its own (``flops=`` of
  ``dace_ai.ai(...)`` / ``AINode``), else it has none and is judged as memory-bound
  only (:attr:`Work.note` says so);
* *bytes*: every input and output connector's view (the shape it sees) times its
  element size, read or written once: the compulsory traffic.

Expressions are text in the node's symbols (``2*K*M*N``); :meth:`Work.at` evaluates
them at the sizes a bench ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dace_ai.compat import symbolic
from dace_ai.context.per_node import PerNode

if TYPE_CHECKING:
    from dace_ai.context.types import NodeContext


@dataclass(frozen=True)
class Work:
    """The work of one call of a node."""

    flops: str | None  #: floating-point operations, an expression of the node's symbols; None when unknown
    bytes: str  #: bytes read and written through its connectors, an expression of its symbols
    dtype: str  #: element type the operations are in (NumPy name: float32, float64, int32, ...)
    source: str  #: where the flops come from: "Gemm semantics", "flops= of the AI node", ...
    note: str = ""  #: what the figure leaves out ("no flops known: memory-bound only")

    def at(self, values: Mapping[str, Any]) -> tuple[float | None, float]:
        """(flops, bytes) at symbol values (``KeyError`` names a symbol without a value)."""
        flops = symbolic.evaluate(self.flops, values) if self.flops is not None else None
        return flops, symbolic.evaluate(self.bytes, values)


def _shape(conn: Any) -> list[str]:
    return [str(s) for s in conn.shape]


def _size(conn: Any) -> Any:
    return symbolic.product(_shape(conn))


def _by_name(ctx: NodeContext) -> dict[str, Any]:
    return {c.name: c for c in ctx.connectors}


def _true(text: str | None) -> bool:
    return str(text).strip().lower() in ("true", "1")


def _nonzero(text: str | None) -> bool:
    try:
        return float(str(text)) != 0.0
    except ValueError:
        return True  # a symbolic beta: counted


def _gemm_like(ctx: NodeContext) -> Any:
    """``2*|C|*K``: K is A's inner dimension (its first one when transposed); ``+2*|C|`` with a C input."""
    conns = _by_name(ctx)
    a, c = conns.get("_a"), conns.get("_c")
    if a is None or c is None or not a.shape:
        return None
    shape = _shape(a)
    inner = shape[-2] if _true(ctx.properties.get("transA")) and len(shape) >= 2 else shape[-1]
    flops = 2 * _size(c) * symbolic.parse(inner)
    if "_cin" in conns:
        flops += 2 * _size(c)
    return flops


def _matrix_vector(ctx: NodeContext) -> Any:
    conns = _by_name(ctx)
    matrix = conns.get("_A")
    if matrix is None:
        return None
    flops = 2 * _size(matrix)
    if ctx.node_type == "Gemv" and any(c.name == "_y" for c in ctx.inputs):
        flops += 2 * _size(next(c for c in ctx.outputs if c.name == "_y"))
    return flops


def _vector(ctx: NodeContext) -> Any:
    x = _by_name(ctx).get("_x")
    return 2 * _size(x) if x is not None else None


def _reduce(ctx: NodeContext) -> Any:
    return _size(ctx.inputs[0]) if ctx.inputs else None


def _cholesky(ctx: NodeContext) -> Any:
    a = ctx.inputs[0] if ctx.inputs else None
    return symbolic.parse(_shape(a)[0]) ** 3 / 3 if a is not None and a.shape else None


def _solve(ctx: NodeContext) -> Any:
    conns = _by_name(ctx)
    a, b = conns.get("_ain"), conns.get("_bin")
    if a is None or b is None or not a.shape:
        return None
    n = symbolic.parse(_shape(a)[0])
    return 2 * n**3 / 3 + 2 * _size(b) * n


def _inverse(ctx: NodeContext) -> Any:
    a = _by_name(ctx).get("_ain")
    return 2 * symbolic.parse(_shape(a)[0]) ** 3 if a is not None and a.shape else None


#: Floating-point operations of one call, by library node class name.
FLOPS = {
    "Gemm": _gemm_like,
    "MatMul": _gemm_like,
    "BatchedMatMul": _gemm_like,
    "Gemv": _matrix_vector,
    "Ger": _matrix_vector,
    "Dot": _vector,
    "Axpy": _vector,
    "Reduce": _reduce,
    "Transpose": lambda ctx: 0,
    "TensorTranspose": lambda ctx: 0,
    "Cholesky": _cholesky,
    "Solve": _solve,
    "Inv": _inverse,
}


def _dtype(ctx: NodeContext) -> str:
    """The element type the work is in: the widest floating-point type of the connectors, else the outputs'."""
    import numpy as np

    sdfg = (ctx.live or {}).get("sdfg")
    types = [(c.direction, symbolic.container_dtype(sdfg, c.container)) for c in ctx.connectors]
    floats = [t for _, t in types if t is not None and t.kind in "fc"]
    if floats:
        widest = max(floats, key=lambda t: t.itemsize)
        return str(np.dtype(f"f{widest.itemsize // 2}") if widest.kind == "c" else widest)
    outputs = [t for d, t in types if t is not None and d == "out"]
    return str(outputs[0]) if outputs else "unknown"


def _bytes(ctx: NodeContext) -> Any:
    sdfg = (ctx.live or {}).get("sdfg")
    total: Any = 0
    for conn in ctx.connectors:
        dtype = symbolic.container_dtype(sdfg, conn.container)
        if dtype is None:
            raise ValueError(f"connector {conn.name}: element type of {conn.container!r} unknown")
        total += _size(conn) * dtype.itemsize
    return total


def ai_flops(ctx: NodeContext) -> str:
    """The ``flops=`` expression an AI node was given ("" when none).

    The node is the one the code implements: itself, or the node a revised tasklet replaced.
    """
    live = ctx.live or {}
    node = live.get("reference_node") or live.get("node")
    return str(getattr(node, "flops", "") or "").strip()


def node_work(ctx: NodeContext) -> Work:
    """The :class:`Work` of the node of ``ctx`` (``ValueError`` when its traffic cannot be told); worked out
    once per context object (every candidate of the node asks)."""
    return _NODE_WORK(ctx)


def _node_work(ctx: NodeContext) -> Work:
    traffic = symbolic.text(_bytes(ctx))
    dtype = _dtype(ctx)
    given = ai_flops(ctx)
    if given:
        return Work(symbolic.text(symbolic.parse(given)), traffic, dtype, "flops= of the AI node")
    rule = FLOPS.get(ctx.node_type)
    flops = rule(ctx) if rule is not None else None
    if flops is None:
        what = "an AI node without flops=" if ctx.node_type == "AINode" else f"{ctx.node_type} (no rule)"
        return Work(None, traffic, dtype, what, note="no flops known: judged as memory-bound only")
    return Work(symbolic.text(flops), traffic, dtype, f"{ctx.node_type} semantics")


_NODE_WORK: PerNode[Work] = PerNode(_node_work)
