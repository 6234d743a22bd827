"""``dace_ai.ai(...)``: an AI node written inline in a ``@dace.program``.

::

    @dace.program
    def scale(A: dace.float64[N], B: dace.float64[N]):
        return dace_ai.ai("Write _out[i] = _a[i] * 2 + _b[i] for every i < N.", a=A, b=B)

Connector names are the contract the description refers to: a keyword input
``a=A`` becomes ``_a``; positional inputs become ``_in0, _in1, ...``; the output
is ``_out`` (``_out0, _out1, ...`` when ``out`` names several containers).
Program symbols (``N`` above) are visible to the generated code by name. Without
``out`` the output is a new transient shaped like the first input (``shape``,
``dtype`` and ``storage`` change that). ``name`` labels the node and must be
unique in the program, since sessions and manual prompt files are named by it.

The call is replaced while the program is parsed (a frontend replacement
registered under every name DaCe may look it up by); calling it from plain
Python raises :class:`~dace_ai.errors.AIUsageError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Number
from typing import Any

from dace_ai import compat
from dace_ai.errors import AIUsageError
from dace_ai.expansion.ainode import AINode
from dace_ai.expansion.charge import CHARGE

_CONFIG_KEYWORDS = ("out", "shape", "dtype", "storage", "name", "schedule", "reference", "flops")


class AICallError(compat.syntax_error_class(), AIUsageError):  # type: ignore[misc]  # DaCe's class, found at run time
    """A bad ``dace_ai.ai(...)`` call; the message ends with the file and line of the call."""

    def __init__(self, visitor: Any, message: str) -> None:
        compat.syntax_error_class().__init__(self, visitor, None, "dace_ai.ai: " + message)


def ai(
    description: str,
    *inputs: Any,
    out: Any = None,
    shape: Any = None,
    dtype: Any = None,
    storage: Any = None,
    name: str | None = None,
    schedule: Any = None,
    reference: Any = None,
    flops: Any = None,
    **named: Any,
) -> Any:
    """Add a node, described in natural language, whose code a language model writes.

    Only meaningful inside ``@dace.program``: the frontend replaces the call by an
    :class:`~dace_ai.expansion.ainode.AINode` connected to the given containers.

    :param description: What the node computes, naming its connectors (``_a``, ``_in0``, ``_out``).
    :param inputs: Containers read through ``_in0``, ``_in1``, ...
    :param out: Container (or sequence of containers) to write; default: a new transient.
    :param shape: Shape of the new output (default: the first input's shape).
    :param dtype: Element type of the new output (default: the first input's).
    :param storage: Storage of the new output (default: the first input's).
    :param name: Node name, unique in the program (default ``ai``, ``ai_1``, ...).
    :param schedule: Schedule of the node.
    :param reference: NumPy function of the named inputs that the verify stage compares the
        generated code with (``a=A`` arrives as ``a``, positional inputs in order).
    :param flops: Floating-point operations of one call, an expression of the program's symbols
        (``"2*N"`` or ``2 * N``): the bench stage compares the code with this machine's peak; without
        it the node is judged by its bytes alone (memory-bound).
    :param named: Containers read through ``_<keyword>``.
    :return: The output container (a tuple of them for several ``out`` containers).
    """
    raise AIUsageError(
        "dace_ai.ai(...) only works inside a @dace.program, where it becomes a node of the "
        "program; to build an SDFG by hand use dace_ai.AINode"
    )


def _is_string(value: Any) -> bool:
    return isinstance(value, (str, compat.string_literal_class()))


def _description(pv: Any, sdfg: Any, description: Any) -> str:
    if type(description) is str and description in sdfg.arrays:
        raise AICallError(
            pv, f"the first argument must be a description string, but the container {description!r} was given"
        )
    if not _is_string(description):
        raise AICallError(
            pv, f"the first argument must be a description string, got {type(description).__name__} {description!r:.60}"
        )
    text = str(description).strip()
    if not text:
        raise AICallError(pv, "the description is empty; say what the node computes")
    return text


def _container(pv: Any, sdfg: Any, value: Any, what: str) -> str:
    from dace import symbolic

    if type(value) is str and value in sdfg.arrays:
        return value
    if isinstance(value, (Number, compat.string_literal_class())) or symbolic.issymbolic(value):
        raise AICallError(
            pv,
            f"{what} is a constant or a symbol ({value!s:.60}); only data containers can be "
            "connected (symbols are visible to the code by name, constants belong in the "
            "description)",
        )
    raise AICallError(pv, f"{what} ({value!s:.60}) is not a data container of this program")


def _inputs(pv: Any, sdfg: Any, inputs: Sequence[Any], named: dict[str, Any]) -> dict[str, str]:
    connectors = {f"_in{i}": _container(pv, sdfg, value, f"positional input {i}") for i, value in enumerate(inputs)}
    for keyword, value in named.items():
        connector = f"_{keyword}"
        if connector in connectors:
            raise AICallError(
                pv,
                f"keyword input {keyword!r} maps to connector {connector!r}, which a positional "
                "input already uses; choose another keyword",
            )
        connectors[connector] = _container(pv, sdfg, value, f"input {keyword!r}")
    return connectors


def _outputs(pv: Any, sdfg: Any, out: Any) -> dict[str, str]:
    names = list(out) if isinstance(out, (list, tuple)) else [out]
    if not names:
        raise AICallError(pv, "'out' is empty; leave it out to allocate the output, or name containers")
    containers = [_container(pv, sdfg, value, f"output {i}") for i, value in enumerate(names)]
    read_only = [c for c in containers if c in getattr(pv, "inputs", {}) and c not in getattr(pv, "outputs", {})]
    if read_only:
        raise AICallError(
            pv,
            "'out' got a slice that the frontend passes here as a read-only copy, so the result "
            "would be lost; assign the result instead, e.g. "
            "C[i:i+8, j:j+8] = dace_ai.ai(..., shape=(8, 8))",
        )
    if len(set(containers)) != len(containers):
        raise AICallError(pv, f"'out' names the same container twice: {containers}")
    if len(containers) == 1 and not isinstance(out, (list, tuple)):
        return {"_out": containers[0]}
    return {f"_out{i}": c for i, c in enumerate(containers)}


def _allocate(pv: Any, sdfg: Any, inputs: dict[str, str], shape: Any, dtype: Any, storage: Any) -> str:
    from dace import data, dtypes

    first = sdfg.arrays[next(iter(inputs.values()))] if inputs else None
    if first is None and shape is None:
        raise AICallError(pv, "no inputs and no 'shape': give 'shape' and 'dtype' for the output, or 'out'")
    if first is None and dtype is None:
        raise AICallError(pv, "no inputs to take the output's type from: give 'dtype'")
    if dtype is not None and not isinstance(dtype, dtypes.typeclass):
        raise AICallError(pv, f"'dtype' must be a DaCe type such as dace.float64, got {dtype!r:.60}")
    if first is not None:  # what is not given comes from the first input
        dtype = dtype if dtype is not None else first.dtype
        storage = storage if storage is not None else first.storage
        if shape is None:
            shape = () if isinstance(first, data.Scalar) else tuple(first.shape)
    elif storage is None:
        storage = dtypes.StorageType.Default
    if isinstance(shape, (Number, str)) or not isinstance(shape, (list, tuple)):
        shape = (shape,)
    if not shape:
        name, _ = sdfg.add_scalar("ai_out", dtype, storage=storage, transient=True, find_new_name=True)
        return name
    name, _ = sdfg.add_temp_transient(list(shape), dtype, storage=storage)
    return name


def _library_names(sdfg: Any) -> set[str]:
    from dace.sdfg import nodes

    return {n.name for n, _ in sdfg.all_nodes_recursive() if isinstance(n, nodes.LibraryNode)}


def _node_name(pv: Any, sdfg: Any, name: Any) -> str:
    taken = _library_names(sdfg)
    if name is None:
        base, index = "ai", 1
        candidate = base
        while candidate in taken:
            candidate, index = f"{base}_{index}", index + 1
        return candidate
    if not _is_string(name) or (type(name) is str and name in sdfg.arrays):
        raise AICallError(
            pv,
            f"'name' must be a string literal (the node's label), got {name!s:.60}; "
            f"'name' is reserved, like {', '.join(_CONFIG_KEYWORDS)}",
        )
    text = str(name).strip()
    if not text.isidentifier():
        raise AICallError(pv, f"'name' {text!r} must be an identifier (it names files and sessions)")
    if text in taken:
        raise AICallError(pv, f"another node of this program is already named {text!r}; names must be unique")
    return text


def _replacement(
    pv: Any,
    sdfg: Any,
    state: Any,
    description: Any = None,
    *inputs: Any,
    out: Any = None,
    shape: Any = None,
    dtype: Any = None,
    storage: Any = None,
    name: Any = None,
    schedule: Any = None,
    reference: Any = None,
    flops: Any = None,
    **named: Any,
) -> Any:
    """Frontend replacement: add an AINode and its memlets; return the written container(s)."""
    from dace import Memlet

    text = _description(pv, sdfg, description)
    label = _node_name(pv, sdfg, name)
    in_conns = _inputs(pv, sdfg, inputs, named)
    if out is None:
        out_conns = {"_out": _allocate(pv, sdfg, in_conns, shape, dtype, storage)}
    else:
        given = [k for k, v in (("shape", shape), ("dtype", dtype), ("storage", storage)) if v is not None]
        if given:
            raise AICallError(
                pv,
                f"{', '.join(repr(g) for g in given)} describe a new output and cannot be "
                "combined with 'out', which writes an existing container",
            )
        out_conns = _outputs(pv, sdfg, out)
    if reference is not None and not callable(reference):
        hint = (
            " (a lambda written inside the program becomes program text; define the function outside "
            "the program and pass its name)"
            if "lambda" in str(reference)
            else ""
        )
        raise AICallError(pv, f"'reference' must be a NumPy function of the inputs, got {reference!s:.60}{hint}")
    if flops is not None and type(flops) is str and flops in sdfg.arrays:
        raise AICallError(
            pv,
            f"'flops' names the container {flops!r}; give the floating-point operations of one "
            'call as an expression of the program\'s symbols, e.g. flops="2*N"',
        )
    try:
        node = AINode(
            label,
            text,
            inputs=dict.fromkeys(in_conns),
            outputs=dict.fromkeys(out_conns),
            schedule=schedule,
            reference=reference,
            flops=str(flops) if flops is not None and _is_string(flops) else flops,
        )
    except AIUsageError as exc:
        raise AICallError(pv, str(exc)) from None
    state.add_node(node)
    for conn, container in in_conns.items():
        state.add_edge(
            state.add_read(container), None, node, conn, Memlet.from_array(container, sdfg.arrays[container])
        )
    for conn, container in out_conns.items():
        state.add_edge(
            node, conn, state.add_write(container), None, Memlet.from_array(container, sdfg.arrays[container])
        )
    written = tuple(out_conns.values())
    return written[0] if len(written) == 1 else written


#: Every name the frontend may look the call up by.
FRONTEND_NAMES = ["dace_ai.ai", f"{ai.__module__}.{ai.__qualname__}"]
#: The names of ``dace.ai`` (DaCe 2 defines it in ``dace.frontend.python.interface``).
DACE_NAMES = ["dace.ai", "dace.frontend.python.interface.ai"]


def install() -> None:
    """Register the frontend replacement; make ``dace.ai`` an alias of :func:`ai` unless DaCe's own library keeps it."""
    import dace

    if CHARGE.dace_ai_in_charge:
        compat.register_frontend_call(_replacement, FRONTEND_NAMES + DACE_NAMES)
        dace.ai = ai
    else:
        compat.register_frontend_call(_replacement, FRONTEND_NAMES)
