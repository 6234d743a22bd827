"""The DaCe version installed and the module that speaks to it (:mod:`~dace_ai.compat.dace1` or
:mod:`~dace_ai.compat.dace2`), chosen once, at import, from ``dace.__version__``.
"""

from __future__ import annotations

from typing import Any, Protocol

import dace

DACE_VERSION = dace.__version__
#: DaCe's major version (1 or 2), which picks the version module below.
DACE_MAJOR = int(DACE_VERSION.split(".", 1)[0])


class DaceVersionModule(Protocol):
    """What each version module provides: :mod:`~dace_ai.compat.dace1` and :mod:`~dace_ai.compat.dace2` are
    checked against it, so the rest of the package can rely on either."""

    HAS_BUILTIN_AI: bool

    def config_store(self) -> tuple[dict[str, Any], dict[str, Any]]: ...
    def config_snapshot(self) -> Any: ...
    def use_config(self, snapshot: Any) -> None: ...
    def cpp_standard_flags(self) -> list[str]: ...
    def host_cpu_args(self) -> str: ...
    def patch_expand_spellings(self) -> None: ...
    def builtin_library(self) -> Any: ...
    def builtin_node_class(self) -> type[Any] | None: ...
    def route_reserved_implementation(self, expansion_for: Any) -> None: ...
    def replace_library_functions(self, functions: dict[str, Any]) -> None: ...
    def replaced(self) -> list[str]: ...
    def serialize_by_class_path(self, type_name: str) -> None: ...


def _version_module() -> DaceVersionModule:
    """The module for the installed DaCe; only that one is imported (the other may not import at all)."""
    if DACE_MAJOR >= 2:
        from dace_ai.compat import dace2  # local: only the installed DaCe's module imports

        return dace2
    from dace_ai.compat import dace1  # local: only the installed DaCe's module imports

    return dace1


version = _version_module()

#: True when DaCe ships its own AI library (``dace.libraries.ai``, DaCe 2.0 on).
HAS_BUILTIN_AI: bool = version.HAS_BUILTIN_AI
patch_expand_spellings = version.patch_expand_spellings
cpp_standard_flags = version.cpp_standard_flags
host_cpu_args = version.host_cpu_args
#: Worker threads adopt the caller's DaCe configuration (``ThreadPoolExecutor(initializer=use_config,
#: initargs=(config_snapshot(),))``): DaCe 2.0 keeps it per thread.
config_snapshot = version.config_snapshot
use_config = version.use_config
builtin_library = version.builtin_library
builtin_node_class = version.builtin_node_class
route_reserved_implementation = version.route_reserved_implementation
replace_library_functions = version.replace_library_functions
replaced = version.replaced
serialize_by_class_path = version.serialize_by_class_path
