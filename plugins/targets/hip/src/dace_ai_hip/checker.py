"""The ``hip-hipcc`` checker: GPU tasklets compiled with hipcc for an AMD architecture.

Like the CUDA check it builds a standalone unit (see :mod:`dace_ai.checking.units`):
device tasklets inside a ``__global__`` kernel with thread indices and no
``__state``, host tasklets with ``hipStream_t __dace_current_stream``. hipcc
picks the NVIDIA platform when nvcc is installed and enumerates GPUs when no
architecture is given, so it runs with ``HIP_PLATFORM=amd`` and an explicit
``--offload-arch``. Without hipcc the report is inconclusive and says why.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

from dace_ai.plugin import CheckReport, CheckRequest, check_gpu_unit, touches_gpu

CHECKER = "hip-hipcc"
TARGET = "hip"
DEFAULT_ARCH = "gfx90a"
PRELUDE = "#include <hip/hip_runtime.h>\n// what DaCe includes in every generated file\n#include <dace/dace.h>\n"


@functools.lru_cache(maxsize=1)
def amd_gpus() -> tuple[str, ...]:
    """gfx names of the AMD GPUs the ROCm driver exposes (empty without /dev/kfd)."""
    if not Path("/dev/kfd").exists() or shutil.which("rocm_agent_enumerator") is None:
        return ()
    try:
        out = subprocess.run(["rocm_agent_enumerator"], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(sorted({g for g in re.findall(r"\bgfx[0-9a-f]+\b", out) if g != "gfx000"}))


def resolve_arch(settings: object) -> tuple[str, str]:
    """(architecture, where it came from): the ``hip_arch`` setting, the driver, or the default."""
    configured = getattr(settings, "hip_arch", None)
    if configured:
        source = getattr(settings, "source", lambda key: "settings")("hip_arch")
        return configured, f"setting hip_arch ({source})"
    gpus = amd_gpus()
    if gpus:
        return gpus[0], "rocm_agent_enumerator"
    return DEFAULT_ARCH, f"default {DEFAULT_ARCH} (no AMD GPU found and no hip_arch setting)"


def applies(request: CheckRequest) -> bool:
    return touches_gpu(request.node) and (request.node.target.name == TARGET or request.answer.language == "hip")


def check_hip(request: CheckRequest) -> CheckReport:
    """Compile the tasklet as HIP device code (in a GPU map) or host code over GPU data."""
    if shutil.which("hipcc") is None:
        return CheckReport(
            CHECKER, "inconclusive", "hipcc not found on PATH (Debian: hipcc, or ROCm); HIP code was not checked"
        )
    arch, arch_source = resolve_arch(request.settings)
    return check_gpu_unit(
        CHECKER,
        request.answer,
        request.node,
        request.workdir,
        compiler="hipcc",
        arch_flag=f"--offload-arch={arch}",
        arch=arch,
        arch_source=arch_source,
        prelude=PRELUDE,
        stream_type="hipStream_t",
        suffix=".hip",
        env={"HIP_PLATFORM": "amd"},
        environments=request.environments,
    )
