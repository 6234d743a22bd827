"""What differs on DaCe 2.0: per-thread configuration, the C++ standard setting, and DaCe's own AI library.

DaCe 2.0 reserves the implementation name ``'ai'`` on every library node and resolves
it in ``LibraryNode.expand`` through ``dace.libraries.ai.expansion.ExpandAI.for_node_class``.
Taking that library over (:func:`route_reserved_implementation`,
:func:`replace_library_functions`) changes those two places and the library's public
functions, nothing else; leaving it alone means registering under another name
(:func:`register_node_implementation` with ``'dace-ai'``).
"""

from __future__ import annotations

import importlib
from typing import Any

from dace.config import Config

#: DaCe 2.0 ships ``dace.libraries.ai``.
HAS_BUILTIN_AI = True

#: DaCe's AI library modules whose public functions dace-ai may stand in for.
_LIBRARY = "dace.libraries.ai"
_SUBMODULES = ("exchange", "iterate", "diagnose")

#: What was replaced, by (module, name) -> DaCe's original; empty while DaCe's library is untouched.
_replaced: dict[tuple[str, str], Any] = {}


def config_store() -> tuple[dict[str, Any], dict[str, Any]]:
    """(schema, values) of DaCe's configuration: an instance (per thread) behind ``Config`` on DaCe 2.0."""
    data = Config._data
    return data._config_metadata, data._config


def config_snapshot() -> Any:
    """This thread's configuration (schema and values), for :func:`use_config` in a worker thread.

    DaCe 2.0 keeps its configuration per thread: a new thread starts from the defaults,
    without ``Config.set`` calls or dace-ai's registered keys. Workers adopt the caller's.
    """
    import copy

    data = Config._data
    return copy.deepcopy((data._config_metadata, data._config))


def use_config(snapshot: Any) -> None:
    """Make ``snapshot`` (from :func:`config_snapshot`) this thread's configuration."""
    import copy

    data = Config._data
    data._config_metadata, data._config = copy.deepcopy(snapshot)


def cpp_standard_flags() -> list[str]:
    """``-std=c++NN`` from ``compiler.cpp_standard``: DaCe 2.0's CMake build sets the standard itself."""
    standard = str(Config.get("compiler", "cpp_standard") or "").strip()
    return [f"-std=c++{standard}"] if standard else []


def host_cpu_args() -> str:
    """``compiler.cpu.args`` as DaCe 2.0's build passes it (the host compiler family's defaults swapped in)."""
    from dace.codegen import compiler_family

    return compiler_family.cpu_args() or ""


def patch_expand_spellings() -> None:
    """Nothing to do: DaCe 2.0 accepts ``node.expand(state, 'ai')`` and ``node.expand(sdfg, state)`` itself."""


def _import(name: str) -> Any:
    """Import a module of DaCe's AI library; DaCe's own deprecation notices on the way are DaCe's business.

    (Importing ``dace.libraries.ai`` imports the deprecated ``dace.libraries.mpi``, which warns.)
    """
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(name)


def builtin_library() -> Any:
    """DaCe's own AI library module (imported now), or None where it cannot be imported."""
    try:
        return _import(_LIBRARY)
    except ImportError:
        return None


def builtin_node_class() -> type[Any] | None:
    """DaCe's own ``AINode`` class, or None."""
    library = builtin_library()
    return getattr(library, "AINode", None) if library is not None else None


def route_reserved_implementation(expansion_for: Any) -> None:
    """Make DaCe's reserved ``'ai'`` expand with ``expansion_for(node_class)`` on every library node class."""
    expansion = _import(f"{_LIBRARY}.expansion")
    key = (expansion.ExpandAI.__module__, "ExpandAI.for_node_class")
    if key not in _replaced:
        _replaced[key] = expansion.ExpandAI.__dict__["for_node_class"]
    expansion.ExpandAI.for_node_class = staticmethod(expansion_for)


def replace_library_functions(functions: dict[str, Any]) -> None:
    """Stand in for DaCe's AI library functions by name, in the package and in the submodule defining each.

    Replacing the name in the defining submodule too routes DaCe's own callers of it
    (``LibraryNode.generate_prompt`` calls ``exchange.generate_prompt``, for example).
    """
    library = builtin_library()
    if library is None:
        return
    modules = [library] + [_import(f"{_LIBRARY}.{name}") for name in _SUBMODULES]
    for name, function in functions.items():
        for module in modules:
            if hasattr(module, name):
                _replaced.setdefault((module.__name__, name), getattr(module, name))
                setattr(module, name, function)


def replaced() -> list[str]:
    """The names of DaCe's AI library that dace-ai stands in for (``module.name``), for ``dace-ai doctor``."""
    return sorted(f"{module}.{name}" for module, name in _replaced)


def serialize_by_class_path(type_name: str) -> None:
    """Deserialize nodes whose type is ``type_name`` as the class their ``classpath`` names.

    DaCe's and dace-ai's ``AINode`` share a class name, and DaCe looks serialized nodes up
    by class name first; this keeps a saved SDFG's nodes of each kind what they were.
    """
    import pydoc

    from dace import serialize

    registered = serialize._DACE_SERIALIZE_TYPES.get(type_name)
    if registered is None or isinstance(registered, _ByClassPath):
        return
    serialize._DACE_SERIALIZE_TYPES[type_name] = _ByClassPath(registered, pydoc.locate)


class _ByClassPath:
    """A stand-in serializer: the class named by an object's ``classpath``, else the one registered before."""

    def __init__(self, fallback: type[Any], locate: Any) -> None:
        self.fallback = fallback
        self._locate = locate

    def from_json(self, obj: Any, context: Any = None) -> Any:
        path = obj.get("classpath") if isinstance(obj, dict) else None
        located = self._locate(path) if path else None
        cls: type[Any] = located if isinstance(located, type) else self.fallback
        return cls.from_json(obj, context=context)
