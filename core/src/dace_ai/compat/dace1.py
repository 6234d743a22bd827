"""What differs on DaCe 1.0.x: class-level configuration, no AI library of its own, the old ``expand`` spelling."""

from __future__ import annotations

from typing import Any

from dace.config import Config

#: DaCe 1.0 has no ``dace.libraries.ai``; dace-ai's implementation is the only ``'ai'``.
HAS_BUILTIN_AI = False


def config_store() -> tuple[dict[str, Any], dict[str, Any]]:
    """(schema, values) of DaCe's configuration: class attributes of ``Config`` on DaCe 1.0."""
    return Config._config_metadata, Config._config


def config_snapshot() -> Any:
    """Nothing to carry: DaCe 1.0's configuration is shared by every thread."""
    return None


def use_config(snapshot: Any) -> None:
    """Nothing to do on DaCe 1.0 (see :func:`config_snapshot`)."""


def cpp_standard_flags() -> list[str]:
    """Flags naming the C++ standard the build uses beyond ``compiler.cpu.args`` (DaCe 1.0 keeps ``-std`` there)."""
    return []


def host_cpu_args() -> str:
    """``compiler.cpu.args`` as DaCe 1.0's CMake build passes it."""
    return Config.get("compiler", "cpu", "args") or ""


def builtin_library() -> Any:
    """DaCe's own AI library: none on DaCe 1.0."""
    return None


def builtin_node_class() -> type[Any] | None:
    return None


def route_reserved_implementation(expansion_for: Any) -> None:
    """DaCe 1.0 reserves no ``'ai'``: dace-ai registers it on every class instead."""
    raise RuntimeError("DaCe 1.0 has no AI library to take over")


def replace_library_functions(functions: dict[str, Any]) -> None:
    raise RuntimeError("DaCe 1.0 has no AI library to take over")


def replaced() -> list[str]:
    return []


def serialize_by_class_path(type_name: str) -> None:
    """Only one ``AINode`` class exists on DaCe 1.0: nothing to tell apart."""


_expand_patched = False


def patch_expand_spellings() -> None:
    """Let ``node.expand(state, 'ai')`` (the seed spelling) work next to DaCe's ``expand(sdfg, state)``.

    The seed spelling passes the state first and an implementation name second;
    the SDFG is the state's parent. The implementation is set for this call only.
    DaCe 2.0 accepts both spellings itself.
    """
    global _expand_patched
    if _expand_patched:
        return
    from dace.sdfg.nodes import LibraryNode
    from dace.sdfg.state import SDFGState

    original = LibraryNode.expand

    def expand(self: Any, sdfg: Any, state: Any = None, *args: Any, **kwargs: Any) -> str:
        if isinstance(sdfg, SDFGState) and (state is None or isinstance(state, str)):
            implementation, state, sdfg = state, sdfg, sdfg.sdfg
            if implementation is not None:
                previous_impl = self.implementation
                self.implementation = implementation
                try:
                    return original(self, sdfg, state, *args, **kwargs)
                finally:
                    self.implementation = previous_impl
        return original(self, sdfg, state, *args, **kwargs)

    expand.__doc__ = original.__doc__
    expand.__wrapped__ = original  # type: ignore[attr-defined]  # functools' convention, not a declared attribute
    LibraryNode.expand = expand
    _expand_patched = True
