"""DaCe environments (what a library node needs to build): those registered, defining one from plain values, and
the file that defined one.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import Any

import dace
import dace.library

#: DaCe's bundled libraries; importing them registers their environments.
_BUNDLED_LIBRARIES = ("blas", "lapack", "linalg", "standard", "sparse", "fft", "mpi", "pblas")


def registered_environments() -> dict[str, Any]:
    """Every DaCe environment registered in this process (full class path -> class).

    DaCe registers an environment when its module is imported, so the bundled
    libraries are imported first (once) to make the list complete.
    """

    for name in _BUNDLED_LIBRARIES:
        try:
            with warnings.catch_warnings():  # e.g. "MKL was not found": the check below says so
                warnings.simplefilter("ignore")
                importlib.import_module(f"dace.libraries.{name}")
        except Exception:  # noqa: BLE001, S110 - a broken optional library only hides its environments
            pass
    try:  # code generation imports it (LIKWID); import it now so the list is the same before and during compile
        importlib.import_module("dace.codegen.instrumentation")
    except Exception:  # noqa: BLE001, S110
        pass
    return dict(dace.library._DACE_REGISTERED_ENVIRONMENTS)


#: The fields DaCe 1.0.2 requires of an environment class.
ENVIRONMENT_FIELDS = (
    "cmake_minimum_version",
    "cmake_packages",
    "cmake_variables",
    "cmake_includes",
    "cmake_libraries",
    "cmake_compile_flags",
    "cmake_link_flags",
    "cmake_files",
    "headers",
    "state_fields",
    "init_code",
    "finalize_code",
    "dependencies",
)


def define_environment(module: str, class_name: str, fields: dict[str, Any]) -> Any:
    """Build and register a DaCe environment class from plain values; return the class.

    ``module`` must be an imported module with a file: DaCe records that file and names
    the environment ``<module>.<class_name>``. The class is also set as an attribute of
    the module so the path resolves like any other. Missing fields get DaCe's empty values.
    """
    import dace.library

    defaults: dict[str, Any] = {
        "cmake_minimum_version": None,
        "cmake_variables": {},
        "init_code": "",
        "finalize_code": "",
    }
    values = {name: fields.get(name, defaults.get(name, [])) for name in ENVIRONMENT_FIELDS}
    unknown = set(fields) - set(ENVIRONMENT_FIELDS)
    if unknown:
        raise ValueError(f"not DaCe environment fields: {sorted(unknown)}")
    cls = type(class_name, (), {**values, "__module__": module, "__doc__": f"DaCe environment {class_name}."})
    cls = dace.library.environment(cls)
    setattr(sys.modules[module], class_name, cls)
    return cls


def registered_environment(path: str) -> Any | None:
    """The environment registered under ``path`` in this process, or None."""
    return dace.library._DACE_REGISTERED_ENVIRONMENTS.get(path)


def environment_file(env: Any) -> str | None:
    """The module file that defined an environment (its relative headers are resolved from there)."""
    return getattr(env, "_dace_file_path", None)
