"""The data that describes one node to prompt sections, checkers and targets.

These are plain dataclasses so that plugins can read them without touching
DaCe objects; the live DaCe objects (SDFG, state, node) stay reachable through
``NodeContext.live`` for checkers that must build programs around the node.
Collection lives in :mod:`dace_ai.context.collect`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from dace_ai.environments.installed import EnvironmentInfo
from dace_ai.targets.select import TargetInfo

__all__ = ["ConnectorInfo", "EnvironmentInfo", "NodeContext", "ScopeInfo", "TargetInfo"]


@dataclass
class ConnectorInfo:
    """One connector of the node, as the generated code sees it."""

    name: str  #: connector name in the tasklet, e.g. ``_a``
    direction: Literal["in", "out"]
    ctype: str  #: C++ type of the connector in the tasklet, e.g. ``const double *`` or ``double``
    dtype: str  #: element type, e.g. ``double``
    is_pointer: bool  #: True when the connector is a pointer into the container
    container: str  #: name of the data container
    storage: str  #: storage type of the container, e.g. ``CPU_Heap``, ``GPU_Global``
    subset: str  #: memlet subset, e.g. ``2:10:2, 1:5``
    shape: tuple[str, ...]  #: shape of the subset the connector sees
    strides: tuple[str, ...]  #: element strides of that view (per dimension)
    container_shape: tuple[str, ...]
    container_strides: tuple[str, ...]
    offset: str  #: element offset of the view's first element in the container
    index_formula: str  #: how to address element (i0, i1, ...) through the connector
    volume: str = "1"
    wcr: str | None = None  #: write-conflict resolution, e.g. ``lambda a, b: a + b``
    transient: bool = False


@dataclass
class ScopeInfo:
    """An enclosing scope, outermost first: map, consume, loop, nested SDFG or state."""

    kind: Literal["map", "consume", "loop", "nested_sdfg", "state", "sdfg"]
    label: str
    params: tuple[str, ...] = ()
    ranges: tuple[str, ...] = ()
    schedule: str = ""  #: resolved schedule, e.g. ``CPU_Multicore``, ``GPU_Device``


@dataclass
class NodeContext:
    """Everything known about one node to be implemented."""

    key: str  #: stable identity of the node in its SDFG (used in file names, sessions)
    name: str  #: node label
    node_type: str  #: class name, e.g. ``Gemm``, ``AINode``
    library: str | None  #: library module, e.g. ``dace.libraries.blas``
    doc: str  #: class docstring
    description: str  #: the AINode description or a summary of the library node's semantics
    properties: dict[str, str]
    inputs: list[ConnectorInfo]
    outputs: list[ConnectorInfo]
    scopes: list[ScopeInfo]  #: enclosing scopes, outermost first
    symbols: dict[str, str]  #: symbols in scope -> C++ type
    in_gpu_kernel: bool
    gpu_notes: str  #: what device code may not do/dereference here ("" on the host)
    target: TargetInfo
    environments: list[EnvironmentInfo] = field(default_factory=list)
    sdfg_name: str = ""
    state_label: str = ""
    schedule: str = ""  #: the node's resolved schedule, e.g. ``CPU_Multicore``, ``Sequential``
    notes: list[str] = field(default_factory=list)  #: what could not be inferred while collecting
    #: Live DaCe objects (sdfg, state, node); never serialised, never hashed.
    live: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def connectors(self) -> list[ConnectorInfo]:
        return [*self.inputs, *self.outputs]
