"""Collect what a model must know about a node, once per SDFG.

Types, schedules and storage of an SDFG are only known after DaCe's inference
passes, and those passes mutate the graph. So :func:`collect_sdfg_context`
deep-copies the whole SDFG tree ONCE, runs the inference (and loop detection)
on that copy, and indexes every state and node of the original by position
(cfg id / state id / node id) into the copy. :meth:`SDFGContext.node_context`
then only reads: its cost is bounded by the node's own connectors and scopes,
so prompts for many nodes scale linearly.

The index is built at collection time, so nodes that still exist keep their
context even after other nodes of the SDFG were expanded.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Literal

from dace import data as dt
from dace import dtypes
from dace.sdfg import nodes as nd
from dace.sdfg.state import SDFGState

from dace_ai import compat
from dace_ai.config.settings import AISettings, resolve_settings
from dace_ai.context.types import ConnectorInfo, EnvironmentInfo, NodeContext, ScopeInfo, TargetInfo
from dace_ai.environments.installed import environment_infos
from dace_ai.errors import DaceAIError
from dace_ai.targets.select import resolve_target, target_info

#: Properties that are identity, layout or bookkeeping, not semantics.
NOISY_PROPERTIES = frozenset(
    {
        "name",
        "label",
        "guid",
        "debuginfo",
        "location",
        "environments",
        "implementation",
        "in_connectors",
        "out_connectors",
        "instrument",
        "description",
        "symbol_mapping",
        "sdfg",
        "code",
        "code_global",
        "code_init",
        "code_exit",
        "state_fields",
        "side_effects",
        "ignored_symbols",
        "schedule",  # shown resolved, as NodeContext.schedule
        "flops",  # an AI node's work, for its speed of light; not part of what it computes
    }
)
#: Longest property value shown; longer values are cut so one property cannot flood the prompt.
#: A cut value ends with its length and a digest of the whole value, so two nodes that differ
#: only beyond the cut still get different prompts (and so different answer cache keys).
MAX_PROPERTY_CHARS = 200


class ContextError(DaceAIError, LookupError):
    """A state or node is not part of the SDFG whose context was collected."""


@dataclass
class _StateIndex:
    """One state of the original SDFG and its counterpart in the inferred copy."""

    state: SDFGState
    inferred: SDFGState
    cfg_id: int
    state_id: int
    node_ids: dict[int, int]  #: id(original node) -> node id in the state
    inferred_nodes: list[nd.Node]  #: nodes of the inferred state, by node id
    scope_dict: dict[nd.Node, Any] | None = field(default=None, repr=False)


def _root(sdfg: Any) -> Any:
    while sdfg.parent_sdfg is not None:
        sdfg = sdfg.parent_sdfg
    return sdfg


def _cpp(expr: Any) -> str:
    try:
        return compat.cpp_expr(expr)
    except Exception:  # noqa: BLE001 - an unprintable expression is shown as Python text
        return str(expr)


def _prop_text(value: Any) -> str:
    """A property value as text: enum members by name (``CPU_Multicore``), long values cut (with a digest)."""
    import hashlib

    text = value.name if hasattr(type(value), "__members__") and hasattr(value, "name") else str(value)
    if len(text) <= MAX_PROPERTY_CHARS:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:MAX_PROPERTY_CHARS]}... ({len(text)} characters in all, sha256 {digest})"


def _first_paragraph(doc: str) -> str:
    return " ".join(doc.strip().split("\n\n")[0].split()) if doc else ""


class SDFGContext:
    """The collected context of one SDFG tree; ask it for :meth:`node_context` per node."""

    def __init__(
        self, sdfg: Any, settings: AISettings, inferred: Any, states: dict[int, _StateIndex], notes: list[str]
    ) -> None:
        self.sdfg = sdfg  #: the root SDFG (original)
        self.settings = settings
        self.inferred = inferred  #: the inferred copy; never hand it to users to modify
        self.notes = notes  #: what could not be inferred (shown in every node's context)
        self._states = states
        self._targets: dict[str, TargetInfo] = {}
        self._environments: list[EnvironmentInfo] | None = None
        self._symbols: dict[int, dict[str, str]] = {}
        self._by_inferred = {id(i.inferred): i for i in states.values()}
        self._entry_cache: dict[tuple[Any, ...], dict[str, Any]] = {}

    # ------------------------------------------------------------------ shared, lazily computed
    @property
    def environments(self) -> list[EnvironmentInfo]:
        """Registered DaCe environments with their installation check (computed once)."""
        if self._environments is None:
            self._environments = environment_infos()
        return self._environments

    def target(self, kind: str) -> TargetInfo:
        """The resolved target for code of ``kind`` ("cpu" or "gpu"), resolved once per kind."""
        if kind not in self._targets:
            self._targets[kind] = target_info(*resolve_target(self.settings, kind=kind))
        return self._targets[kind]

    def library_nodes(self) -> list[tuple[SDFGState, nd.LibraryNode]]:
        """Every library node of the tree as (original state, node), in (cfg, state, node) id order."""
        found = []
        for index in sorted(self._states.values(), key=lambda i: (i.cfg_id, i.state_id)):
            found += [
                (index.state, n)
                for n in index.state.nodes()
                if isinstance(n, nd.LibraryNode) and id(n) in index.node_ids
            ]
        return found

    # ------------------------------------------------------------------------------ per node
    def node_context(self, state: SDFGState, node: nd.Node) -> NodeContext:
        """Everything about ``node`` (in ``state`` of the original SDFG), read from the inferred copy."""
        index = self._states.get(id(state))
        if index is None or index.state is not state:
            raise ContextError(
                f"state {getattr(state, 'label', state)!r} is not part of SDFG {self.sdfg.name!r} "
                "as it was when its context was collected (collect the context again)"
            )
        node_id = index.node_ids.get(id(node))
        if node_id is None:
            raise ContextError(
                f"node {getattr(node, 'label', node)!r} is not in state {state.label!r} of SDFG "
                f"{self.sdfg.name!r} as it was when its context was collected"
            )
        inode = index.inferred_nodes[node_id]
        istate = index.inferred
        scopes, kernel = self._scopes(istate, inode)
        # Sorted: connector dicts of nodes built from sets follow the string hash seed, and the
        # prompt must not change between processes.
        inputs = [self._connector(istate, inode, c, "in") for c in sorted(inode.in_connectors)]
        outputs = [self._connector(istate, inode, c, "out") for c in sorted(inode.out_connectors)]
        connectors = [*inputs, *outputs]
        gpu_data = [c for c in connectors if c.storage in compat.GPU_STORAGE]
        kind = "gpu" if kernel is not None or (connectors and len(gpu_data) == len(connectors)) else "cpu"
        schedule = getattr(inode, "schedule", None)
        cls = type(node)
        description = getattr(node, "description", None)
        if not isinstance(description, str) or not description.strip():
            description = self._summary(inode)
        return NodeContext(
            key=f"{self.sdfg.name}/{index.cfg_id}/{index.state_id}/{node_id}/{node.label}",
            name=node.label,
            node_type=cls.__name__,
            library=compat.node_library(node) if isinstance(node, nd.LibraryNode) else None,
            doc=inspect.cleandoc(cls.__doc__ or ""),
            description=description.strip(),
            properties=self._properties(inode),
            inputs=inputs,
            outputs=outputs,
            scopes=scopes,
            symbols=self._node_symbols(istate, inode, scopes),
            in_gpu_kernel=kernel is not None,
            gpu_notes=self._gpu_notes(kernel, connectors),
            target=self.target(kind),
            environments=list(self.environments),
            sdfg_name=state.sdfg.name,
            state_label=state.label,
            schedule=schedule.name if schedule is not None else "",
            notes=list(self.notes),
            live={
                "sdfg": state.sdfg,
                "state": state,
                "node": node,
                "root": self.sdfg,
                "inferred_state": istate,
                "inferred_node": inode,
            },
        )

    # --------------------------------------------------------------------------- node parts
    @staticmethod
    def _summary(node: nd.Node) -> str:
        """What a library node computes: its docstring's first sentence (the full text is in the node section)."""
        first = _first_paragraph(type(node).__doc__ or "").split(". ")[0].rstrip(".")
        name = type(node).__name__
        text = (
            f"Compute exactly what a `{name}` library node computes, for the connectors, properties and "
            "scopes given below."
        )
        return f"{text} In short: {first}." if first else text

    @staticmethod
    def _properties(node: nd.Node) -> dict[str, str]:
        result = {}
        for prop, value in node.properties():
            if prop.attr_name not in NOISY_PROPERTIES:
                result[prop.attr_name] = _prop_text(value)
        return result

    def _connector(self, state: SDFGState, node: nd.Node, name: str, direction: Literal["in", "out"]) -> ConnectorInfo:
        """One connector as the tasklet sees it, following DaCe's CPU code generator."""
        edges = list(
            state.in_edges_by_connector(node, name) if direction == "in" else state.out_edges_by_connector(node, name)
        )
        declared = (node.in_connectors if direction == "in" else node.out_connectors)[name]
        memlet = edges[0].data if edges else None
        if memlet is None or memlet.data is None or memlet.data not in state.sdfg.arrays:
            ctype = declared.ctype if declared is not None and declared.type is not None else "auto"
            return ConnectorInfo(
                name,
                direction,
                ctype,
                ctype,
                isinstance(declared, dtypes.pointer),
                "",
                "",
                "",
                (),
                (),
                (),
                (),
                "0",
                f"{name} (not connected to a container)",
            )
        desc = state.sdfg.arrays[memlet.data]
        subset = memlet.subset
        storage = desc.storage.name
        if declared is not None and declared.type is not None:
            is_pointer = isinstance(declared, dtypes.pointer)
            base = declared.base_type.ctype if is_pointer else declared.ctype
        else:  # DaCe's inference rule (dace.sdfg.infer_types) for library-node connectors
            scalar = subset.num_elements() == 1 or isinstance(desc, dt.Scalar)
            if direction == "out":
                scalar = scalar and (not memlet.dynamic or memlet.wcr is not None)
            scalar = scalar and desc.storage is not dtypes.StorageType.GPU_Global
            is_pointer, base = not scalar, desc.dtype.ctype
        if is_pointer:
            ctype = f"const {base} *" if direction == "in" else f"{base} *"
        else:
            ctype = base
        sizes = subset.size()
        steps = [r[2] for r in subset.ranges] if hasattr(subset, "ranges") else [1] * len(sizes)
        container_strides = list(desc.strides)
        if len(container_strides) != len(sizes):  # e.g. a scalar container
            container_strides = [1] * len(sizes)
        strides = [step * stride for step, stride in zip(steps, container_strides)]
        try:
            offset = compat.cpp_offset(desc, subset)
        except Exception:  # noqa: BLE001
            offset = "?"
        if is_pointer:
            terms = [
                f"i{d}" if stride == 1 else f"i{d}*{_cpp(stride)}"
                for d, (size, stride) in enumerate(zip(sizes, strides))
                if size != 1
            ]
            formula = f"{name}[{' + '.join(terms) or '0'}]"
        else:
            formula = name
        volume = _cpp(memlet.volume)
        return ConnectorInfo(
            name=name,
            direction=direction,
            ctype=ctype,
            dtype=base,
            is_pointer=is_pointer,
            container=memlet.data,
            storage=storage,
            subset=str(subset),
            shape=tuple(_cpp(s) for s in sizes),
            strides=tuple(_cpp(s) for s in strides),
            container_shape=tuple(_cpp(s) for s in desc.shape),
            container_strides=tuple(_cpp(s) for s in desc.strides),
            offset=offset,
            index_formula=formula,
            volume=f"dynamic (at most {volume})" if memlet.dynamic else volume,
            wcr=str(memlet.wcr) if memlet.wcr is not None else None,
            transient=bool(desc.transient),
        )

    def _scope_dict(self, state: SDFGState) -> dict[nd.Node, Any]:
        index = self._inferred_index(state)
        if index is None:
            return state.scope_dict()
        if index.scope_dict is None:
            index.scope_dict = state.scope_dict()
        return index.scope_dict

    def _inferred_index(self, inferred_state: SDFGState) -> _StateIndex | None:
        return self._by_inferred.get(id(inferred_state))

    def _scopes(self, state: SDFGState, node: nd.Node) -> tuple[list[ScopeInfo], ScopeInfo | None]:
        """Enclosing scopes outermost first, and the outermost GPU-kernel scope (None on the host)."""
        inner_first: list[ScopeInfo] = []
        while True:
            sdict = self._scope_dict(state)
            entry = sdict.get(node)
            while entry is not None:
                if isinstance(entry, nd.MapEntry):
                    inner_first.append(
                        ScopeInfo(
                            "map",
                            entry.map.label,
                            tuple(entry.map.params),
                            tuple(str(type(entry.map.range)([r])) for r in entry.map.range.ranges),
                            entry.map.schedule.name,
                        )
                    )
                elif isinstance(entry, nd.ConsumeEntry):
                    cons = entry.consume
                    inner_first.append(
                        ScopeInfo("consume", cons.label, (cons.pe_index,), (str(cons.num_pes),), cons.schedule.name)
                    )
                entry = sdict.get(entry)
            region = state.parent_graph
            while region is not None and region is not state.sdfg:
                loop = compat.loop_description(region)
                if loop is not None:
                    label, var, header = loop
                    inner_first.append(ScopeInfo("loop", label, (var,) if var else (), (header,), "Sequential"))
                region = getattr(region, "parent_graph", None)
            nsdfg_node, parent_state = state.sdfg.parent_nsdfg_node, state.sdfg.parent
            if nsdfg_node is None or parent_state is None:
                break
            inner_first.append(ScopeInfo("nested_sdfg", nsdfg_node.label, (), (), compat.schedule_name(nsdfg_node)))
            state, node = parent_state, nsdfg_node
        scopes = inner_first[::-1]
        kernel = next((s for s in scopes if s.schedule in compat.GPU_KERNEL_SCHEDULES), None)
        return scopes, kernel

    def _sdfg_symbols(self, sdfg: Any) -> dict[str, str]:
        """Symbols defined anywhere in one SDFG (its symbols, data shapes, inter-state assignments)."""
        key = id(sdfg)
        if key not in self._symbols:
            found = {name: getattr(t, "ctype", str(t)) for name, t in sdfg.symbols.items()}
            for desc in sdfg.arrays.values():
                for sym in desc.free_symbols:
                    found.setdefault(str(sym), getattr(sym, "dtype", dtypes.int64).ctype)
            typed = dict(sdfg.symbols)
            for edge in sdfg.all_interstate_edges():
                if not edge.data.assignments:  # new_symbols() costs O(arrays) even for plain edges
                    continue
                try:
                    for name, t in edge.data.new_symbols(sdfg, typed).items():
                        found.setdefault(name, getattr(t, "ctype", str(t)))
                except Exception:  # noqa: BLE001, S112 - an untypable assignment is left out
                    continue
            self._symbols[key] = found
        return self._symbols[key]

    def _node_symbols(self, state: SDFGState, node: nd.Node, scopes: list[ScopeInfo]) -> dict[str, str]:
        symbols = dict(self._sdfg_symbols(state.sdfg))
        for scope in scopes:
            if scope.kind == "loop":
                for var in scope.params:
                    symbols.setdefault(var, "int")
        sdict = self._scope_dict(state)
        entry = sdict.get(node)
        typed = dict(state.sdfg.symbols)
        chain = []
        while entry is not None:
            chain.append(entry)
            entry = sdict.get(entry)
        for entry in reversed(chain):
            for name, t in self._entry_symbols(state, entry, typed).items():
                typed[name] = t
                symbols[name] = getattr(t, "ctype", str(t))
        return dict(sorted(symbols.items()))

    def _entry_symbols(self, state: SDFGState, entry: nd.EntryNode, typed: dict[str, Any]) -> dict[str, Any]:
        """Symbols a scope entry defines, with types; cached because DaCe infers them from expressions."""
        sdfg = state.sdfg
        static = isinstance(entry, nd.MapEntry) and all(c.startswith("IN_") for c in entry.in_connectors)
        key = None
        if static:
            outer = tuple(sorted((k, str(v)) for k, v in typed.items() if k not in sdfg.symbols))
            key = (id(sdfg), tuple(entry.map.params), str(entry.map.range), outer)
            if key in self._entry_cache:
                return self._entry_cache[key]
        try:
            found = dict(entry.new_symbols(sdfg, state, typed))
        except Exception:  # noqa: BLE001 - an untypable scope symbol is left out
            found = {}
        if key is not None:
            self._entry_cache[key] = found
        return found

    @staticmethod
    def _gpu_notes(kernel: ScopeInfo | None, connectors: list[ConnectorInfo]) -> str:
        if kernel is not None:
            host = [c for c in connectors if c.storage in compat.HOST_ONLY_STORAGE and c.is_pointer]
            lines = [
                (
                    f"This code runs on the GPU inside the kernel of {kernel.kind} `{kernel.label}` "
                    f"(schedule {kernel.schedule}), once per iteration of the innermost scope, i.e. per thread."
                ),
                (
                    "Write device code: no host-only calls (malloc/new, std:: containers, I/O, host BLAS), "
                    "no kernel launches, no global synchronisation."
                ),
            ]
            if host:
                lines.append(
                    "Device code may NOT dereference these host containers: "
                    + ", ".join(f"`{c.name}` -> {c.container} ({c.storage})" for c in host)
                    + "."
                )
            else:
                lines.append(
                    "Device code may not dereference host memory (CPU_Heap, CPU_ThreadLocal); "
                    "no connector of this node points to host memory."
                )
            return "\n".join(lines)
        device = [c for c in connectors if c.storage in compat.GPU_STORAGE and c.is_pointer]
        if device:
            return (
                "This code runs on the host, but these connectors point to GPU memory, which host code may "
                "not dereference: "
                + ", ".join(f"`{c.name}` -> {c.container} ({c.storage})" for c in device)
                + ". Launch a kernel or call a GPU library on these pointers."
            )
        return ""


def collect_sdfg_context(sdfg: Any, settings: AISettings | None = None) -> SDFGContext:
    """Collect the context of every node of ``sdfg``'s SDFG tree (nested SDFGs included), once.

    ``sdfg`` may be a nested SDFG: the whole tree it belongs to is collected, so
    scopes enclosing the nested SDFG are known. The SDFG itself is not changed.
    """
    settings = settings or resolve_settings()
    root = _root(sdfg)
    inferred, notes = compat.inferred_copy(root)
    cfg_ids = {id(cfg): i for i, cfg in enumerate(inferred.cfg_list)}
    states: dict[int, _StateIndex] = {}
    regions = zip(root.all_control_flow_regions(recursive=True), inferred.all_control_flow_regions(recursive=True))
    for cfg, icfg in regions:
        for state_id, (block, iblock) in enumerate(zip(cfg.nodes(), icfg.nodes())):
            if not isinstance(block, SDFGState):
                continue
            originals, copies = block.nodes(), iblock.nodes()
            if type(block) is not type(iblock) or len(originals) != len(copies):
                raise DaceAIError(
                    f"internal error: the copy of SDFG {root.name!r} differs from it in state {block.label!r}"
                )
            states[id(block)] = _StateIndex(
                block, iblock, cfg_ids.get(id(icfg), -1), state_id, {id(n): i for i, n in enumerate(originals)}, copies
            )
    notes += compat.lift_state_machine_loops(inferred)
    return SDFGContext(root, settings, inferred, states, notes)
