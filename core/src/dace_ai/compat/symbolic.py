"""DaCe's symbolic expressions and data types, for figures computed from a node's symbols.

The work of a node (floating-point operations, bytes moved) is an expression of its
symbols, built from connector shapes (DaCe's own expression text) and evaluated at
the sizes a bench ran. DaCe parses such text with its own sympy dialect (``int_floor``,
``Min``, ...); these helpers are the only place that calls it for that purpose.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Any:
    """A symbolic expression from DaCe's text of one (``ValueError`` naming the text when it is not one)."""
    from dace import symbolic

    try:
        return symbolic.pystr_to_symbolic(str(text))
    except Exception as exc:  # noqa: BLE001 - sympy raises many kinds for bad text
        raise ValueError(f"{text!r} is not an expression of the node's symbols ({type(exc).__name__})") from None


def product(texts: Iterable[str]) -> Any:
    """The product of expressions given as text (1 for none: a scalar)."""
    result: Any = 1
    for text in texts:
        result = result * parse(text)
    return result


def text(expr: Any) -> str:
    """An expression as DaCe writes it, simplified (``2*K*M*N``)."""
    import sympy

    return str(sympy.simplify(expr)) if not isinstance(expr, (int, float)) else str(expr)


def symbols(expr: Any) -> set[str]:
    return {str(s) for s in getattr(expr, "free_symbols", ())}


def evaluate(expr: Any, values: Mapping[str, Any]) -> float:
    """A number from an expression and symbol values (``KeyError`` naming the symbols without a value)."""
    value = parse(expr) if isinstance(expr, str) else expr
    missing = sorted(symbols(value) - set(values))
    if missing:
        raise KeyError(", ".join(missing))
    if hasattr(value, "subs"):
        value = value.subs({s: values[str(s)] for s in value.free_symbols})
    return float(value)


def container_dtype(sdfg: Any, container: str) -> Any:
    """The NumPy element type of ``container`` in ``sdfg`` (None when unknown)."""
    import numpy as np

    desc = getattr(sdfg, "arrays", {}).get(container)
    if desc is None:
        return None
    try:
        return np.dtype(desc.dtype.type)
    except (AttributeError, TypeError):
        return None
