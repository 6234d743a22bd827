"""A small program that runs one tasklet body on deterministic data and prints its outputs.

SVE code is correct only if it is correct at every vector length (128 to 2048
bits); an emulator can run the same binary at several lengths, so comparing the
outputs catches code that assumes one length. Inputs are odd multiples of 1/16
in (-1, 1) (integers 1..13): never zero, and sums and products of them are
exact in binary floating point, so a correct reduction gives the same bits in
any lane order. Symbol values are primes, so every loop has a remainder.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import sympy
from dace_ai.plugin import (
    TASKLET_FUNCTION,
    Answer,
    ConnectorInfo,
    NodeContext,
    host_unit,
    init_symbols,
    scope_parameters,
)

#: Values given to the node's symbols, by sorted name; primes so that no vector length divides them.
SYMBOL_VALUES = (37, 41, 43, 29, 31, 23, 19, 17, 13, 11)

_FLOAT_TYPES = {"double", "float", "dace::float64", "dace::float32", "float64", "float32"}
_INT_TYPES = {
    "int",
    "long",
    "long long",
    "short",
    "char",
    "signed char",
    "unsigned",
    "unsigned int",
    "unsigned long",
    "unsigned long long",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "size_t",
    "dace::int32",
    "dace::int64",
    "dace::uint32",
    "dace::uint64",
    "bool",
}


class HarnessError(Exception):
    """The node cannot be run in a harness (unsized connector, unsupported type); the check is inconclusive."""


@dataclass(frozen=True)
class Buffer:
    conn: ConnectorInfo
    ctype: str  #: element C type
    count: int  #: elements reachable through the connector
    is_float: bool


def element_type(conn: ConnectorInfo) -> tuple[str, bool]:
    """The connector's element C type and whether it is a floating-point type."""
    ctype = re.sub(r"\b(const|volatile|__restrict__)\b|\*|&", " ", conn.ctype)
    ctype = " ".join(ctype.split())
    if ctype in _FLOAT_TYPES:
        return ctype, True
    if ctype in _INT_TYPES:
        return ctype, False
    raise HarnessError(
        f"connector {conn.name!r} has element type {ctype!r}, which the harness cannot fill "
        "(floating-point and integer types only)"
    )


def symbol_values(node: NodeContext) -> dict[str, int]:
    values = {name: SYMBOL_VALUES[i % len(SYMBOL_VALUES)] for i, name in enumerate(sorted(node.symbols))}
    values.update({p: 0 for p in scope_parameters(node)})
    return values


def _evaluate(expr: str, values: dict[str, int], where: str) -> int:
    try:
        value = sympy.sympify(expr, locals={k: sympy.Symbol(k) for k in values}).subs(values)
        return int(value)
    except (sympy.SympifyError, TypeError, ValueError) as exc:
        raise HarnessError(f"{where}: cannot evaluate {expr!r} with {values}: {exc}") from None


def buffers(node: NodeContext, values: dict[str, int]) -> list[Buffer]:
    """Every connector with the number of elements its view reaches (from its shape and strides)."""
    result = []
    for conn in node.connectors:
        ctype, is_float = element_type(conn)
        count = 1
        if conn.is_pointer:
            shape = [_evaluate(s, values, f"shape of {conn.name}") for s in conn.shape]
            strides = [_evaluate(s, values, f"strides of {conn.name}") for s in conn.strides] or [1] * len(shape)
            if any(s <= 0 for s in shape):
                raise HarnessError(f"connector {conn.name!r} has an empty shape {shape} with {values}")
            count = 1 + sum((n - 1) * abs(st) for n, st in zip(shape, strides))
        result.append(Buffer(conn, ctype, count, is_float))
    return result


def _value(buf: Buffer, index: int, k: str) -> str:
    if buf.is_float:
        return f"({buf.ctype})((double)((({k}) * 7 + {3 * index}) % 16 - 8) / 8.0 + 1.0 / 16.0)"
    if buf.ctype == "bool":
        return f"(bool)((({k}) + {index}) % 2)"
    return f"({buf.ctype})((({k}) * 7 + {3 * index}) % 13 + 1)"


def harness_source(answer: Answer, node: NodeContext, prelude: str) -> str:
    """The tasklet unit plus a ``main`` that fills inputs and outputs, runs init, tasklet, exit and prints outputs."""
    values = symbol_values(node)
    bufs = buffers(node, values)
    body = [
        "int main() {",
        "    static dace_ai_state_t state_storage{};",
        "    dace_ai_state_t* __state = &state_storage;",
    ]
    for name, ctype in node.symbols.items():
        body.append(f"    {ctype} {name} = ({ctype}){values[name]};")
    for p in scope_parameters(node):
        body.append(f"    int {p} = 0;")
    args = []
    for i, buf in enumerate(bufs):
        var = f"dace_ai_buf_{i}"
        if buf.conn.is_pointer:
            body.append(f"    {buf.ctype}* {var} = new {buf.ctype}[{buf.count}];")
            body.append(f"    for (long k = 0; k < {buf.count}; ++k) {var}[k] = {_value(buf, i, 'k')};")
        else:
            body.append(f"    {buf.ctype} {var} = {_value(buf, i, '0')};")
        args.append(var)
    syms = list(node.symbols)
    body.append(f"    dace_ai_init({', '.join(['__state', *init_symbols(node)])});")
    body.append(f"    {TASKLET_FUNCTION}({', '.join(['__state', *syms, *scope_parameters(node), *args])});")
    body.append("    dace_ai_exit(__state);")
    for i, buf in enumerate(bufs):
        if buf.conn.direction != "out":
            continue
        var = f"dace_ai_buf_{i}"
        element = f"{var}[k]" if buf.conn.is_pointer else var
        printed = (
            f'std::printf("%a\\n", (double){element});'
            if buf.is_float
            else f'std::printf("%lld\\n", (long long){element});'
        )
        body.append(f'    std::printf("OUT {buf.conn.name} {buf.count}\\n");')
        body.append(f"    for (long k = 0; k < {buf.count}; ++k) {printed}")
    body += ["    return 0;", "}"]
    return host_unit(answer, node, prelude=prelude + "#include <cstdio>\n") + "\n" + "\n".join(body) + "\n"


def parse_outputs(text: str) -> dict[str, list[float]]:
    """The ``OUT name count`` blocks the harness printed, as numbers."""
    outputs: dict[str, list[float]] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        parts = lines[i].split()
        if len(parts) == 3 and parts[0] == "OUT":
            count = int(parts[2])
            raw = lines[i + 1 : i + 1 + count]
            outputs[parts[1]] = [
                float.fromhex(v) if ("0x" in v or v in ("inf", "-inf", "nan", "-nan")) else float(v)
                for v in (r.strip() for r in raw)
            ]
            i += 1 + count
        else:
            i += 1
    return outputs


def first_difference(a: list[float], b: list[float], tol: float = 1e-9) -> int | None:
    """Index of the first element that differs beyond a relative tolerance, or None."""
    if len(a) != len(b):
        return min(len(a), len(b))
    for k, (x, y) in enumerate(zip(a, b)):
        if math.isnan(x) and math.isnan(y):
            continue
        if not abs(x - y) <= tol * max(1.0, abs(x), abs(y)):
            return k
    return None
