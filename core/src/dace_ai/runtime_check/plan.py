"""What a run-time spot check of one node records and compares, decided when its tasklet is placed."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dace_ai import compat
from dace_ai.compat.symbolic import parse
from dace_ai.config.settings import AISettings
from dace_ai.context.types import ConnectorInfo, NodeContext

#: Library nodes whose reference the check computes with NumPy in the user's process.
PRODUCTS = ("Gemm", "MatMul", "Gemv", "Dot")


@dataclass(frozen=True)
class Recorded:
    """One connector as the check records it: a C++ element type, and its view's dimensions and strides."""

    name: str
    direction: str  #: ``in`` or ``out``
    ctype: str  #: the element type in C++ (``double``)
    numpy: str  #: the element type in NumPy (``float64``)
    is_pointer: bool
    shape: tuple[str, ...]  #: C++ expressions, evaluated where the tasklet runs
    strides: tuple[str, ...]


@dataclass(frozen=True)
class SpotPlan:
    """A node checked where it runs: ``ident`` names its C++ functions, ``values`` the symbols recorded."""

    ident: str
    node: str
    node_type: str
    connectors: tuple[Recorded, ...]
    values: tuple[tuple[str, str], ...]  #: (symbol, C++ expression) recorded for the reference
    reference: str  #: the AINode's reference key, or "" for a product checked by NumPy
    properties: tuple[tuple[str, Any], ...]  #: alpha, beta, transA, transB of a product
    mode: str  #: ``auto``, ``first`` or ``every:N``
    budget: float
    share: float
    action: str
    root: Path | None

    def prop(self, name: str, default: Any = None) -> Any:
        return dict(self.properties).get(name, default)

    @property
    def every(self) -> int:
        """Program calls between checks (0: only the first)."""
        return int(self.mode.split(":", 1)[1]) if self.mode.startswith("every:") else 0

    def layout(self) -> dict[str, tuple[int, int]]:
        """Where each pointer connector's dimensions start in the recorded numbers, and how many."""
        at, where = len(self.values), {}
        for conn in self.connectors:
            if conn.is_pointer:
                where[conn.name] = (at, len(conn.shape))
                at += 2 * len(conn.shape)
        return where

    @property
    def numbers(self) -> int:
        return len(self.values) + sum(2 * len(c.shape) for c in self.connectors if c.is_pointer)


def _cpp(text: str) -> str:
    return compat.cpp_expr(parse(text))


def _recorded(conn: ConnectorInfo, typeclass: Any) -> Recorded:
    shape = tuple(_cpp(s) for s in conn.shape) if conn.is_pointer else ()
    strides = tuple(_cpp(s) for s in conn.strides) if conn.is_pointer else ()
    base = getattr(typeclass, "base_type", typeclass)
    if type(base).__name__ != "typeclass" or getattr(base, "veclen", 1) != 1:
        raise ValueError(f"{conn.name} has elements of type {base}")
    numpy = np.dtype(base.type).name
    ctype = conn.dtype.replace("const ", "").strip()
    return Recorded(conn.name, conn.direction, ctype, numpy, conn.is_pointer, shape, strides)


def _symbols(ctx: NodeContext) -> list[str]:
    """Integer symbols the connectors' views are made of (so they are in scope where the tasklet runs)."""
    names: set[str] = set()
    for conn in ctx.connectors:
        for text in (*conn.shape, *conn.strides):
            try:
                names |= {str(s) for s in getattr(parse(text), "free_symbols", ())}
            except ValueError:
                continue
    return sorted(n for n in names if n in ctx.symbols and not any(w in ctx.symbols[n] for w in ("float", "double")))


def plan_for(ctx: NodeContext, node: Any, tasklet: Any, settings: AISettings, root: Path | None) -> SpotPlan | str:
    """The plan for ``tasklet`` (placed for ``node``, described by ``ctx``), or why it is not checked where it runs."""
    if ctx.in_gpu_kernel or any(c.storage.startswith("GPU") for c in ctx.connectors):
        return "GPU nodes are not spot-checked in the program yet"
    if any(c.wcr for c in ctx.outputs):
        return "an output with write-conflict resolution is not spot-checked"
    reference = str(getattr(node, "reference", "") or "") if ctx.node_type == "AINode" else ""
    properties: tuple[tuple[str, Any], ...] = ()
    if ctx.node_type == "AINode":
        if not reference:
            return "the node has no reference"
    elif ctx.node_type in PRODUCTS:
        names = {c.name for c in ctx.inputs}
        beta = getattr(node, "beta", 0)
        if ctx.node_type in ("Gemm", "Gemv") and beta not in (0, 0.0) and not ({"_cin", "_y"} & names):
            return "its output is updated in place (beta != 0 without an input for C)"
        try:
            properties = tuple(
                (name, complex(getattr(node, name)) if name in ("alpha", "beta") else bool(getattr(node, name)))
                for name in ("alpha", "beta", "transA", "transB")
                if hasattr(node, name)
            )
        except (TypeError, ValueError):
            return "its alpha or beta is not a number"
    else:
        return f"no reference for {ctx.node_type} runs in the user's process"
    try:
        types = {**tasklet.in_connectors, **tasklet.out_connectors}
        connectors = tuple(_recorded(c, types[c.name]) for c in ctx.connectors)
        values = tuple((name, _cpp(name)) for name in _symbols(ctx))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"a view of the node cannot be recorded ({exc})"
    # the same node and views give the same id (the same code, so DaCe's build is reused); any difference in
    # what is recorded gives another, so one id always means one layout of the recorded numbers
    identity = repr((ctx.sdfg_name, ctx.state_label, ctx.key, ctx.node_type, connectors, values, properties))
    return SpotPlan(
        ident=hashlib.sha256(identity.encode()).hexdigest()[:12],
        node=ctx.name,
        node_type=ctx.node_type,
        connectors=connectors,
        values=values,
        reference=reference,
        properties=properties,
        mode=settings.runtime_check,
        budget=float(settings.runtime_check_budget),
        share=float(settings.runtime_check_share),
        action=settings.runtime_check_action,
        root=root,
    )
