"""This machine's GPU tools as DaCe's GPU build and the GPU checks see them: nvcc's and CMake's versions,
the first NVIDIA GPU and its architecture, and whether this DaCe can build GPU programs with a backend
(``cuda`` or ``hip``) here at all (:func:`gpu_build_blocker`, one sentence when it cannot)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path


@functools.lru_cache(maxsize=1)
def nvcc_version() -> tuple[int, int] | None:
    """nvcc's (major, minor), or None when it is missing."""
    if shutil.which("nvcc") is None:
        return None
    try:
        out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"release (\d+)\.(\d+)", out)
    return (int(match.group(1)), int(match.group(2))) if match else None


@functools.lru_cache(maxsize=1)
def gpu_compute_capability() -> tuple[str, str] | None:
    """(GPU name, ``sm_XY``) of the first GPU nvidia-smi reports, or None without a working nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line for line in proc.stdout.splitlines() if "," in line]
    if proc.returncode != 0 or not lines:
        return None
    name, cap = (part.strip() for part in lines[0].rsplit(",", 1))
    return name, "sm_" + cap.replace(".", "")


def cmake_version() -> str:
    """The ``cmake`` on PATH's version (DaCe runs that one), or ``missing``."""
    if shutil.which("cmake") is None:
        return "missing"
    try:
        out = subprocess.run(["cmake", "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    match = re.search(r"version (\S+)", out)
    return match.group(1) if match else "unknown"


def gpu_build_blocker(backend: str = "cuda") -> str | None:
    """One sentence when this DaCe cannot build any GPU program with ``backend`` (DaCe's
    ``compiler.cuda.backend``: ``cuda`` with nvcc, ``hip`` with hipcc) on this machine, else None."""
    import dace

    if backend == "hip":
        return _hip_blocker(dace.__version__)
    version = nvcc_version()
    if version is None:
        return "nvcc is not on PATH, so DaCe cannot build GPU programs on this machine"
    if dace.__version__.startswith("1.") and version[0] >= 13:
        return (
            f"DaCe {dace.__version__} cannot build GPU programs with CUDA {version[0]}.{version[1]} (it compiles "
            "CUDA as C++14 for compute_60, and CUDA 13 needs C++17 and dropped that architecture; DaCe's own "
            "headers then fail too): use DaCe 2 (pip install --pre 'dace>=2.0.0b1') or CUDA 12"
        )
    return None


def nvidia_gpu() -> str | None:
    """``<name> sm_XY`` of the first GPU nvidia-smi reports, or None."""

    gpu = gpu_compute_capability()
    return f"{gpu[0]} {gpu[1]}" if gpu is not None else None


def hip_include_dir() -> Path | None:
    """The include folder holding ``hip/hip_runtime.h`` ($ROCM_PATH, /opt/rocm, /usr), or None."""
    roots = [os.environ.get("ROCM_PATH", ""), "/opt/rocm", "/usr"]
    return next((Path(r, "include") for r in roots if r and Path(r, "include", "hip", "hip_runtime.h").is_file()), None)


def _hip_blocker(dace_version: str) -> str | None:
    if shutil.which("hipcc") is None:
        return "hipcc is not on PATH, so DaCe cannot build HIP programs on this machine"
    include = hip_include_dir()
    if include is None:
        return (
            "the HIP runtime headers (hip/hip_runtime.h; Debian: libamdhip64-dev, or ROCm) are not installed, "
            "so DaCe cannot build HIP programs on this machine"
        )
    if not dace_version.startswith("1.") and not (include / "hip" / "hip_bf16.h").is_file():
        return (
            f"DaCe {dace_version}'s runtime headers include hip/hip_bf16.h, which this HIP installation "
            f"({include}) lacks, so DaCe cannot build HIP programs here: a newer ROCm has it"
        )
    problem = hip_cmake_problem(shutil.which("cmake"))
    if problem is not None:
        return (
            f"CMake {cmake_version()} (the cmake on PATH) cannot set up HIP as DaCe's build does, so DaCe "
            f"cannot build HIP programs here: {problem}"
        )
    return None


#: DaCe's HIP set-up in its CMakeLists.txt (1.0.2 and 2), without DaCe's sources.
_HIP_PROBE = """cmake_minimum_required(VERSION 3.17)
project(dace_ai_hip_probe LANGUAGES CXX)
find_package(HIP REQUIRED)
enable_language(HIP)
"""


@functools.lru_cache(maxsize=4)
def hip_cmake_problem(cmake: str | None) -> str | None:
    """The first error of ``cmake`` (the one on PATH) setting up HIP as DaCe's CMakeLists.txt does, or None."""
    if cmake is None:
        return "cmake is not on PATH"
    with tempfile.TemporaryDirectory(prefix="dace_ai_hip_probe_") as folder:
        Path(folder, "CMakeLists.txt").write_text(_HIP_PROBE)
        try:
            proc = subprocess.run(
                [cmake, "-S", folder, "-B", str(Path(folder, "build"))],
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"cmake did not finish ({type(exc).__name__})"
    if proc.returncode == 0:
        return None
    return first_cmake_error(proc.stdout + proc.stderr) or f"cmake exited with {proc.returncode}"


def first_cmake_error(output: str) -> str:
    """The message of the first ``CMake Error`` in ``output`` on one line ("" when there is none)."""
    match = re.search(
        r"CMake Error(?: at (\S+?):(\d+))?[^\n]*\n(.*?)(?:\nCall Stack|\n-- |\nCMake (?:Error|Warning)|\Z)",
        output,
        re.S,
    )
    if match is None:
        return ""
    where = f" ({Path(match.group(1)).name}:{match.group(2)})" if match.group(1) else ""
    return " ".join(match.group(3).split())[:240] + where
