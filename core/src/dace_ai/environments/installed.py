"""Which registered DaCe environments can be used on this machine.

A model may only ask for an environment (``use_environments``) whose library
is actually installed, so the prompt lists them split by a cheap installation
check: the environment's own ``is_installed()`` when it has one, otherwise
whether its headers and libraries can be found. Nothing is compiled; results
are cached per process (the machine does not change while we run).
"""

from __future__ import annotations

import ctypes.util
import os
import shutil
import sysconfig
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dace_ai import compat
from dace_ai.plugins.registrations import Detection
from dace_ai.state import STATE


#: CMake packages whose presence we can check without CMake (others are not checked).
@dataclass
class EnvironmentInfo:
    name: str  #: full class path, as used in ``tasklet.environments``
    headers: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()
    available: bool = True
    reason: str = ""
    gpu: bool = False  #: builds on CUDA or HIP (offered to GPU targets only)


_PACKAGE_TOOLS = {"CUDA": ("nvcc",), "HIP": ("hipcc",), "MPI": ("mpicxx", "mpic++", "mpicc")}


@STATE.cached("environments.installed.include_dirs", maxsize=1)
def include_dirs() -> tuple[Path, ...]:
    """Where a compiler on this machine looks for headers (the usual places, no compiler run)."""
    dirs: list[str] = []
    for var in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"):
        dirs += [d for d in os.environ.get(var, "").split(os.pathsep) if d]
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    dirs += ["/usr/local/include", "/usr/include"]
    if multiarch:
        dirs.append(f"/usr/include/{multiarch}")
    for var in ("CUDA_HOME", "CUDA_PATH", "ROCM_PATH"):
        if os.environ.get(var):
            dirs.append(os.path.join(os.environ[var], "include"))
    dirs += ["/usr/local/cuda/include", "/opt/rocm/include"]
    return tuple(Path(d) for d in dict.fromkeys(dirs) if Path(d).is_dir())


def _value(env: Any, field: str) -> list[str]:
    value = getattr(env, field, None) or []
    if callable(value):
        value = value()
    if isinstance(value, dict):  # headers per code object: {'frame': [...], 'cuda': [...]}
        value = [h for part in value.values() for h in part]
    if isinstance(value, str):
        value = [value]
    return [str(v) for v in value if str(v).strip()]


def _header_found(header: str, env_dir: Path | None, extra: Iterable[str]) -> bool:
    if os.path.isabs(header):
        return os.path.exists(header)
    if env_dir is not None and (header.startswith(".") or "/" in header) and (env_dir / header).exists():
        return True
    folders: tuple[str | Path, ...] = (*extra, *include_dirs())
    return any((Path(d) / header).exists() for d in folders)


def _library_found(lib: str) -> bool | None:
    """True/False when checkable; None for CMake variables such as ``${MPI_CXX_LIBRARIES}``."""
    if "${" in lib:
        return None
    if os.path.isabs(lib):
        return os.path.exists(lib)
    name = os.path.basename(lib)
    name = name.removeprefix("lib")
    name = name.split(".so")[0].split(".a")[0]
    return ctypes.util.find_library(name) is not None


def _include_places(env: Any) -> tuple[Path | None, list[str]]:
    """(the environment's own folder, its ``cmake_includes``): where its headers may be besides the compiler's path."""
    env_file = compat.environment_file(env)
    try:
        extra_includes = list(_value(env, "cmake_includes"))
    except Exception:  # noqa: BLE001
        extra_includes = []
    return (Path(env_file).parent if env_file else None), extra_includes


def check_environment(path: str, env: Any) -> EnvironmentInfo:
    """The installation check of one environment (never raises: a crashing check is 'unavailable')."""
    try:
        headers = tuple(_value(env, "headers"))
        libraries = tuple(_value(env, "cmake_libraries"))
    except Exception as exc:  # noqa: BLE001 - a broken environment is reported, not fatal
        return EnvironmentInfo(path, available=False, reason=f"cannot read its fields: {type(exc).__name__}: {exc}")
    info = EnvironmentInfo(path, headers=headers, libraries=libraries, gpu=is_gpu_environment(env))
    installed = getattr(env, "is_installed", None)
    if callable(installed):
        try:
            with warnings.catch_warnings():  # DaCe's checks warn about what they do not find
                warnings.simplefilter("ignore")
                ok = bool(installed())
        except Exception as exc:  # noqa: BLE001
            ok, exc_text = False, f"{type(exc).__name__}: {exc}"
            info.reason = f"is_installed() failed: {exc_text}"
        else:
            info.reason = "is_installed() " + ("passed" if ok else "returned False")
        if ok:  # a shared library alone (a runtime package) does not build: its headers must be here too
            missing_headers = [h for h in headers if not _header_found(h, *_include_places(env))]
            if missing_headers:
                ok = False
                info.reason = f"is_installed() passed but its headers are not found: {', '.join(missing_headers)}"
        info.available = ok
        return info
    env_dir, extra_includes = _include_places(env)
    missing = [h for h in headers if not _header_found(h, env_dir, extra_includes)]
    missing += [lib for lib in libraries if _library_found(lib) is False]
    try:
        packages = _value(env, "cmake_packages")
    except Exception:  # noqa: BLE001
        packages = []
    for package in packages:
        tools = _PACKAGE_TOOLS.get(package)
        if tools and not any(shutil.which(t) for t in tools):
            missing.append(f"CMake package {package} ({' or '.join(tools)} not on PATH)")
    missing = list(dict.fromkeys(missing))
    info.available = not missing
    info.reason = "headers and libraries found" if not missing else "not found: " + ", ".join(missing)
    return info


@STATE.cached("environments.installed.detected", maxsize=8)
def _check_all(names: tuple[str, ...]) -> tuple[EnvironmentInfo, ...]:
    envs = compat.registered_environments()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(check_environment(name, envs[name]) for name in names)


def environment_infos() -> list[EnvironmentInfo]:
    """Every registered environment with its installation check, sorted by name (cached per registry)."""
    names = tuple(sorted(compat.registered_environments()))
    return [EnvironmentInfo(e.name, e.headers, e.libraries, e.available, e.reason, e.gpu) for e in _check_all(names)]


_GPU_PACKAGES = {"CUDA", "HIP", "hip", "CUDAToolkit"}


def is_gpu_environment(env: Any, _depth: int = 0) -> bool:
    """True when an environment builds on CUDA or HIP (itself or through its dependencies)."""
    try:
        if set(_value(env, "cmake_packages")) & _GPU_PACKAGES:
            return True
        return _depth < 8 and any(is_gpu_environment(dep, _depth + 1) for dep in (env.dependencies or ()))
    except Exception:  # noqa: BLE001 - unreadable fields: treat as not GPU
        return False


def suits(info: EnvironmentInfo, target_kind: str) -> bool:
    """Whether an environment may be offered to code for a target of ``target_kind``."""
    return info.available and (target_kind == "gpu" or not info.gpu)


def find_header(header: str, extra_dirs: Iterable[str] = ()) -> Path | None:
    """The file a compiler would include for ``<header>`` (extra folders first), or None."""
    for folder in (*map(Path, extra_dirs), *include_dirs()):
        candidate = folder / header
        if candidate.is_file():
            return candidate
    return None


def find_shared_library(name: str, extra_dirs: Iterable[str] = ()) -> str | None:
    """Where the shared library ``lib<name>.so`` is (extra folders first), or None."""
    for folder in extra_dirs:
        hits = sorted(Path(folder).glob(f"lib{name}.so*"))
        if hits:
            return str(hits[0])
    found = ctypes.util.find_library(name)
    return found


def detect_library(
    headers: Iterable[str],
    libraries: Iterable[str],
    *,
    header_dirs: Iterable[str] = (),
    library_dirs: Iterable[str] = (),
) -> Detection:
    """Whether every header and shared library is found on this machine (no compiler run).

    ``details`` maps ``headers`` and ``libraries`` to where each was found; the reason
    names what is missing. Library packs use it in their ``detect``.
    """
    extra_inc, extra_lib = list(header_dirs), list(library_dirs)
    found_headers = {h: find_header(h, extra_inc) for h in headers}
    found_libs = {lib: find_shared_library(lib, extra_lib) for lib in libraries}
    missing = [f"header {h}" for h, p in found_headers.items() if p is None]
    missing += [f"library lib{lib}.so" for lib, p in found_libs.items() if p is None]
    details = {
        "headers": {h: str(p) for h, p in found_headers.items() if p},
        "libraries": {lib: p for lib, p in found_libs.items() if p},
    }
    if missing:
        return Detection(False, "not found: " + ", ".join(missing), details)
    where = ", ".join([*details["headers"].values(), *details["libraries"].values()])
    return Detection(True, f"found {where}", details)
