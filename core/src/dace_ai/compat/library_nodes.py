"""Library node classes and their implementations: the reserved ``ai`` implementation, hooks on new classes and
on expansion passes, and choosing or applying DaCe's own expansion.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dace
import dace.library
from dace.config import Config


def library_node_base() -> type[Any]:
    """DaCe's library node base class."""
    from dace.sdfg.nodes import LibraryNode

    return LibraryNode


def library_node_classes() -> list[type[Any]]:
    """Every library node class defined so far (all subclasses, recursively)."""
    base = library_node_base()
    seen: list[type[Any]] = []
    stack: list[type[Any]] = list(base.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls not in seen:
            seen.append(cls)
            stack.extend(cls.__subclasses__())
    return seen


def make_expansion_class(name: str, base: type[Any], node_class: type[Any]) -> type[Any]:
    """A per-node-class expansion class (DaCe matches expansions by ``_match_node``, one class each)."""
    cls = type(name, (base,), {"environments": [], "__module__": base.__module__})
    cls = dace.library.expansion(cls)
    cls._match_node = node_class  # what registering sets; DaCe 2's reserved 'ai' is never registered
    return cls


def own_implementations(node_class: type[Any]) -> dict[str, Any]:
    """The class's own implementations dict (a subclass without one would otherwise share its parent's)."""
    if "implementations" not in node_class.__dict__:
        node_class.implementations = dict(getattr(node_class, "implementations", {}) or {})
    return node_class.implementations


def register_node_implementation(node_class: type[Any], name: str, expansion: type[Any]) -> None:
    """``NodeClass.register_implementation`` (sets ``_match_node``); DaCe's module-level helper does not."""
    own_implementations(node_class)
    node_class.register_implementation(name, expansion)


_subclass_hooks: list[Callable[[type[Any]], object]] = []


def on_library_node_class(callback: Callable[[type[Any]], object]) -> None:
    """Call ``callback(cls)`` for every existing library node class and for every one defined later.

    Later classes are caught in ``LibraryNode.__init_subclass__``, which runs before
    ``@dace.library.node`` rebuilds the implementations dict; the decorator then
    re-registers what it finds, the callback's addition included.
    """
    base: Any = library_node_base()  # its ``__init_subclass__`` is replaced below
    if not _subclass_hooks:
        previous = base.__dict__.get("__init_subclass__")

        def __init_subclass__(cls: type, **kwargs: Any) -> None:  # noqa: N807
            if previous is not None:
                previous.__func__(cls, **kwargs)
            else:
                super(base, cls).__init_subclass__(**kwargs)
            for hook in list(_subclass_hooks):
                hook(cls)

        base.__init_subclass__ = classmethod(__init_subclass__)
    _subclass_hooks.append(callback)
    for cls in library_node_classes():
        callback(cls)


def is_unregistered_library_node(node_class: type[Any]) -> bool:
    from dace.sdfg.nodes import UnregisteredLibraryNode

    return issubclass(node_class, UnregisteredLibraryNode)


_pass_hooks: list[Any] = []


def wrap_expand_library_nodes(context_manager: Any) -> None:
    """Run every (outermost) ``SDFG.expand_library_nodes`` inside ``context_manager()``.

    dace-ai uses this to collect the context of an SDFG once per expansion pass
    rather than once per node.
    """
    if _pass_hooks:
        return
    from dace.sdfg.sdfg import SDFG

    original = SDFG.expand_library_nodes

    def expand_library_nodes(self: Any, *args: Any, **kwargs: Any) -> Any:
        with context_manager():
            return original(self, *args, **kwargs)

    expand_library_nodes.__doc__ = original.__doc__
    expand_library_nodes.__wrapped__ = original  # type: ignore[attr-defined]  # functools' convention, not a declared attribute
    SDFG.expand_library_nodes = expand_library_nodes
    _pass_hooks.append(context_manager)


def node_library(node: Any) -> str | None:
    """The library module a library node class belongs to (its own module for unregistered classes)."""
    name = getattr(type(node), "_dace_library_name", None)
    module = dace.library._DACE_REGISTERED_LIBRARIES.get(name) if name else None
    return module.__name__ if module is not None else type(node).__module__


def add_library_node_methods(**methods: Any) -> None:
    """Add methods to every library node (``node.generate_prompt(state)``, ...); existing ones are kept."""
    base = library_node_base()
    for name, function in methods.items():
        if not hasattr(base, name):
            setattr(base, name, function)


def name_unnamed_connectors(state: Any, node: Any) -> list[str]:
    """Give connectors to edges of ``node`` that have none (e.g. DaCe's ``Reduce``).

    Generated code can only address data through connectors. A single input
    becomes ``_in`` and a single output ``_out`` (the names DaCe's own expansions
    use); several become ``_in0, _in1, ...``. Returns the names added.
    """
    added: list[str] = []
    for edges, prefix, inward in ((state.in_edges(node), "_in", True), (state.out_edges(node), "_out", False)):
        unnamed = [e for e in edges if (e.dst_conn if inward else e.src_conn) is None and not e.data.is_empty()]
        taken = set(node.in_connectors if inward else node.out_connectors)
        for i, edge in enumerate(unnamed):
            name = prefix if len(unnamed) == 1 and prefix not in taken else f"{prefix}{i}"
            while name in taken:
                name += "_"
            taken.add(name)
            if inward:
                node.add_in_connector(name)
                edge.dst_conn = name
            else:
                node.add_out_connector(name)
                edge.src_conn = name
            added.append(name)
    return added


def resolved_implementation(node: Any) -> str | None:
    """The implementation DaCe would pick for ``node`` (node, class, library, config), or None."""
    if node.implementation is not None:
        return node.implementation
    cls = type(node)
    if cls.default_implementation is not None:
        return cls.default_implementation
    try:
        library = dace.library._DACE_REGISTERED_LIBRARIES.get(getattr(cls, "_dace_library_name", ""))
        if library is not None and library.default_implementation is not None:
            return library.default_implementation
        return Config.get("library", cls._dace_library_name, "default_implementation")
    except Exception:
        return None


def node_guid(node: Any) -> str | None:
    """A node's ``guid``: kept by ``deepcopy`` and by ``save``/``from_file``, distinct between nodes.

    Sessions are named after it, so a node keeps its session across compiles and
    processes, and two programs that share a name never share one.
    """
    guid = getattr(node, "guid", None)
    return str(guid) if guid else None


#: The reserved implementation name dace-ai registers on every library node class.
AI_IMPLEMENTATION = "ai"


def native_implementation(node: Any, reserved: str = AI_IMPLEMENTATION, exclude: tuple[str, ...] = ()) -> str | None:
    """DaCe's own implementation of ``node`` to use instead of ``reserved`` ('ai'), or None.

    DaCe's portable ``pure`` expansion when the class has one (it needs no external
    library), else the class's or the library's default, else ``specialize``, else the
    first other one; names containing any of ``exclude`` (e.g. "cuda", "mkl") are
    skipped. None for nodes that are not library nodes.
    """
    cls = type(node)
    available = [
        name
        for name in getattr(cls, "implementations", None) or ()
        if name != reserved and not any(word in name.lower() for word in exclude)
    ]
    if not available:
        return None
    library = dace.library._DACE_REGISTERED_LIBRARIES.get(getattr(cls, "_dace_library_name", ""))
    for choice in ("pure", cls.default_implementation, getattr(library, "default_implementation", None), "specialize"):
        if choice in available:
            return choice
    return available[0]


def expand_with(sdfg: Any, state: Any, node: Any, implementation: str) -> None:
    """Expand ``node`` now with ``implementation``, whatever its ``implementation`` property says.

    The transformation is applied directly (as ``LibraryNode.expand`` does after
    choosing), so DaCe's library-level overrides cannot send it back to 'ai'.
    """
    transformation_type = type(node).implementations[implementation]
    subgraph = {transformation_type._match_node: state.node_id(node)}
    transformation = transformation_type()
    transformation.setup_match(sdfg, sdfg.cfg_id, sdfg.nodes().index(state), subgraph, 0)
    node.implementation = implementation
    transformation.apply(state, sdfg)


def library_node_from_json(data: dict[str, Any], sdfg: Any, state: Any) -> Any:
    """A library node rebuilt from its ``to_json`` record (a session's ``node.json``), not placed anywhere."""
    return dace.serialize.from_json(data, context={"sdfg": sdfg, "sdfg_state": state})
