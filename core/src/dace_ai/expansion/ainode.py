"""``AINode``: a library node whose only specification is a natural-language description.

It exists for computations no library provides. Its one implementation is the
reserved ``'ai'`` (registered by :mod:`dace_ai.expansion.implementation` on every library node
class), so compiling a program that contains one asks the configured provider,
replays the cache, or reads a manual answer. Connector names are the contract the
description refers to (``_a``, ``_in0``, ``_out``, ...).

Example::

    node = AINode("fma", "Compute _out = _a * _b + _c elementwise.",
                  inputs={"_a", "_b", "_c"}, outputs={"_out"},
                  reference=lambda a, b, c: a * b + c)
    state.add_node(node)

``flops`` (optional) is the floating-point work of one call as an expression of the
node's symbols (``"2*N"``): the bench stage then says how close the code comes to this
machine's peak (its speed of light); without it the node is judged by its bytes alone.

``reference`` is a NumPy function of the named inputs (``_a`` -> ``a``, ``_in0`` ->
first positional) that the verify stage compares the generated code with; without
one the node is recorded as unverified. It stays in this process (see
:mod:`dace_ai.sandbox.reference`): the node keeps only its registry key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import dace.library
from dace import properties
from dace.sdfg import nodes

from dace_ai.errors import AIUsageError
from dace_ai.expansion.charge import IMPLEMENTATION

ConnectorSpec = Iterable[str] | Mapping[str, Any] | None


def _connectors(spec: ConnectorSpec, what: str, node_name: str) -> dict[str, Any]:
    if spec is None:
        return {}
    if isinstance(spec, str):
        raise AIUsageError(
            f"AINode {node_name!r}: {what} must be a set or dict of connector names, "
            f"got the string {spec!r} (write {{{spec!r}}})"
        )
    result = dict(spec) if isinstance(spec, Mapping) else dict.fromkeys(spec)
    for name in result:
        if not isinstance(name, str) or not name.isidentifier():
            raise AIUsageError(f"AINode {node_name!r}: {what} connector {name!r} is not a valid identifier")
    return result


def _flops_text(node_name: str, flops: Any) -> str:
    """``flops=`` as the expression text the node keeps ("" for none); a bad one is refused where it is written."""
    if flops is None or (isinstance(flops, str) and not flops.strip()):
        return ""
    if isinstance(flops, bool) or not isinstance(flops, (str, int, float)) and not hasattr(flops, "free_symbols"):
        raise AIUsageError(
            f"AINode {node_name!r}: flops must be an expression of the node's symbols such as "
            f"'2*N', got {type(flops).__name__}"
        )
    from dace_ai.compat import symbolic  # local: import dace_ai stays light

    text = str(flops).strip()
    try:
        symbolic.parse(text)
    except ValueError as exc:
        raise AIUsageError(f"AINode {node_name!r}: flops {exc}") from None
    return text


@dace.library.node
class AINode(nodes.LibraryNode):
    """A computation described in natural language; a language model writes its code.

    The description is the whole specification the model gets besides the
    node's context (connector types, shapes, strides, enclosing scopes, target),
    so it should name connectors and any required technique ("use AVX2 FMA
    intrinsics").
    """

    # The reserved 'ai' implementation is added by dace_ai.expansion.implementation for every library node class.
    implementations: dict[str, Any] = {}
    default_implementation = IMPLEMENTATION

    description = properties.Property(dtype=str, default="", desc="What the node computes, in natural language")
    reference = properties.Property(
        dtype=str, default="", desc="Key of the NumPy reference function registered in this process"
    )
    flops = properties.Property(
        dtype=str,
        default="",
        desc="Floating-point operations of one call, an expression of the node's symbols "
        "(e.g. '2*N'); without it the node is judged as memory-bound only",
    )

    def __init__(
        self,
        name: str,
        description: str = "",
        *args: Any,
        inputs: ConnectorSpec = None,
        outputs: ConnectorSpec = None,
        reference: Any = None,
        flops: Any = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise AIUsageError(f"AINode: name must be a non-empty string, got {name!r}")
        if not isinstance(description, str):
            raise AIUsageError(f"AINode {name!r}: description must be a string, got {type(description).__name__}")
        ins = _connectors(inputs, "inputs", name)
        outs = _connectors(outputs, "outputs", name)
        clash = sorted(set(ins) & set(outs))
        if clash:
            raise AIUsageError(f"AINode {name!r}: connector(s) {clash} are both inputs and outputs")
        if reference is not None and not callable(reference):
            raise AIUsageError(
                f"AINode {name!r}: reference must be a NumPy function of the inputs, got {type(reference).__name__}"
            )
        work = _flops_text(name, flops)
        super().__init__(name, *args, inputs=ins, outputs=outs, **kwargs)
        self.description = description
        self.flops = work
        if reference is not None:
            from dace_ai.sandbox.reference import register_reference  # local: import dace_ai stays light

            self.reference = register_reference(reference)

    def validate(self, sdfg: Any, state: Any) -> None:
        """Refuse a node that says nothing about what it computes (the model would have to guess)."""
        if not self.description.strip():
            raise AIUsageError(f"AINode {self.name!r} has no description of what it computes")
        if not self.out_connectors:
            raise AIUsageError(f"AINode {self.name!r} has no output connector")
