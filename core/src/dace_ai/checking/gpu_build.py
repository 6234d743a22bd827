"""GPU tasklets checked by DaCe's own GPU build: the one-node program built as ``sdfg.compile()`` builds it.

The candidate is placed as the expansion places it (device tasklets inside the
node's GPU kernel maps, host tasklets over GPU data with kernel code routed into
the GPU file, :mod:`dace_ai.compat.gpu_host`), with the node's containers,
memlets, symbols and environments, and DaCe generates and builds the program
with its own CMake, nvcc command, C++ standard, architecture and includes. The
library is never loaded. A check that passes means the user's build compiles the
tasklet; where DaCe cannot build GPU programs on this machine at all,
:func:`gpu_build_blocker` says why in one sentence and the check is inconclusive.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.checking.diagnostics import summarize_output
from dace_ai.checking.host import build_standalone

#: The ``reason`` of a report whose build failed in CMake's set-up of CUDA (not the candidate's fault).
CMAKE_CANNOT = "CMake cannot set up CUDA"
#: What CMake prints when it cannot set up the CUDA language with this nvcc (a machine problem).
_CMAKE_CUDA_SETUP = re.compile(
    r"CMakeTestCUDACompiler|CMakeDetermineCompilerABI|No CMAKE_CUDA_COMPILER|"
    r"CMake does not know the flags|enable_language|CUDA compiler identification is unknown"
)


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


def gpu_build_blocker() -> str | None:
    """One sentence when this DaCe cannot build any GPU program with this machine's nvcc, else None."""
    import dace

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


def check_gpu_build(request: CheckRequest, checker: str) -> CheckReport:
    """Build the candidate's one-node program with DaCe in ``<workdir>/program`` (never loaded)."""

    blocker = gpu_build_blocker()
    if blocker is not None:
        return CheckReport(checker, "inconclusive", blocker, reason="DaCe cannot build GPU code here")
    where = "device code (inside a GPU kernel)" if request.node.in_gpu_kernel else "host code over GPU data"
    build = build_standalone(request)
    details = {"program": build.program, "unit": where, "built_by": "DaCe"}
    if build.outcome == "not rebuilt":
        return CheckReport(checker, "inconclusive", f"could not rebuild the node as a program: {build.text}")
    if build.outcome == "compile error" and _CMAKE_CUDA_SETUP.search(build.text):
        nvcc = ".".join(map(str, nvcc_version() or ()))
        return CheckReport(
            checker,
            "inconclusive",
            f"CMake {cmake_version()} (the cmake on PATH) cannot set up CUDA with nvcc {nvcc}, so DaCe cannot "
            "build any GPU program here; a newer CMake can (pip install cmake, then put it first on PATH)",
            build.seconds,
            details,
            reason=CMAKE_CANNOT,
        )
    if build.outcome == "compile error":
        return CheckReport(
            checker,
            "failed",
            f"DaCe's GPU build rejected the code as {where}:\n" + summarize_output(build.text),
            build.seconds,
            details,
        )
    if build.outcome == "configuration error":
        return CheckReport(checker, "inconclusive", f"DaCe could not configure the GPU build: {build.text}")
    if build.outcome == "generation error":
        return CheckReport(checker, "inconclusive", f"DaCe could not generate the GPU program: {build.text}")
    note = f"built by DaCe as {where} in the program's GPU file"
    return CheckReport(checker, "passed", note, build.seconds, details)
