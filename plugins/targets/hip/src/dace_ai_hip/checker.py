"""The ``hip-hipcc`` checker: GPU tasklets built by DaCe's HIP build, or compiled with hipcc alone.

As for CUDA (:meth:`dace_ai.plugin.GpuPack.check_build`), the candidate's one-node
program is built by DaCe with its HIP backend (``compiler.cuda.backend = "hip"``)
and hipcc, as the user's build does, where DaCe can build HIP programs here.
Where it cannot (:func:`dace_ai.plugin.gpu_build_blocker` with ``"hip"``: the HIP
runtime headers missing, DaCe 2's headers needing a newer HIP, a CMake that cannot
set up HIP), the tasklet is compiled in a standalone unit (see
:mod:`dace_ai.compilation.units`) and the report says why: device tasklets inside
a ``__global__`` kernel with thread indices and no ``__state``, host tasklets with
``hipStream_t __dace_current_stream``. hipcc picks the NVIDIA platform when nvcc
is installed and enumerates GPUs when no architecture is given, so the unit is
compiled with ``HIP_PLATFORM=amd`` and an explicit ``--offload-arch``. Without
hipcc the report is inconclusive and says why.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from dace_ai.plugin import CheckReport, CheckRequest, GpuPack, machine_fact

PRELUDE = "#include <hip/hip_runtime.h>\n// what DaCe includes in every generated file\n#include <dace/dace.h>\n"

GUIDANCE = """\
- Inside a GPU map (device code) the tasklet body runs once per thread: the map parameters are already the \
thread's indices; do not loop over the map range, do not launch kernels, do not call host functions.
- Device code has no __state and no host memory: use only the connectors, the symbols and the map parameters.
- Do not assume a warp of 32: use warpSize, and __shfl_down / __ballot with 64-bit masks on CDNA.
- Outputs with write-conflict resolution need atomics (atomicAdd) when several threads write the same element.
- A host tasklet over GPU data runs on the CPU with device pointers: never dereference them on the host. \
Define __global__ kernels in code_global (unique names) and launch them on DaCe's stream: \
hipLaunchKernelGGL(kernel, dim3(blocks), dim3(threads), 0, __dace_current_stream, ...) or \
kernel<<<blocks, threads, 0, __dace_current_stream>>>(...); use hipMemcpyAsync on the same stream; never call \
hipDeviceSynchronize. Do not use CUDA names (cuda*, cub::): only hip* and hipcub::.
"""


@machine_fact("dace_ai_hip.amd_gpus")
def amd_gpus() -> tuple[str, ...]:
    """gfx names of the AMD GPUs the ROCm driver exposes (empty without /dev/kfd)."""
    if not Path("/dev/kfd").exists() or shutil.which("rocm_agent_enumerator") is None:
        return ()
    try:
        out = subprocess.run(["rocm_agent_enumerator"], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(sorted({g for g in re.findall(r"\bgfx[0-9a-f]+\b", out) if g != "gfx000"}))


def first_amd_gpu() -> tuple[str, str] | None:
    """(name, architecture) of the first AMD GPU (both its gfx name), or None."""
    gpus = amd_gpus()
    return (gpus[0], gpus[0]) if gpus else None


PACK = GpuPack(
    name="hip",
    language="hip",
    checker_name="hip-hipcc",
    vendor="AMD GPU",
    found_by="rocm_agent_enumerator",
    find_gpu=first_amd_gpu,
    missing="no AMD GPU (no /dev/kfd or rocm_agent_enumerator reports none)",
    compiler="hipcc",
    arch_flag="--offload-arch={arch}",
    stream_type="hipStream_t",
    suffix=".hip",
    arch_setting="hip_arch",
    default_arch="gfx90a",
    limits="Language: HIP C++ (hipcc, C++17). Wavefront size 64 on CDNA (gfx9xx), 32 on RDNA; "
    "at most 1024 threads per block; 64 KiB of LDS (shared memory) per block.",
    guidance=GUIDANCE,
    priority=45,
    description="AMD GPUs in HIP C++ (checked by DaCe's HIP build, or hipcc alone for an explicit --offload-arch)",
    checker_description="Builds HIP device tasklets and host tasklets over GPU data through DaCe's HIP build "
    "(hipcc); a standalone hipcc unit where DaCe cannot build HIP code",
    compiler_env={"HIP_PLATFORM": "amd"},
    dace_backend="hip",
)


def check_hip(request: CheckRequest) -> CheckReport:
    """Build the tasklet as HIP device code (in a GPU map) or host code over GPU data: DaCe's build, else a unit."""
    if shutil.which("hipcc") is None:
        return CheckReport(
            PACK.checker_name,
            "inconclusive",
            "hipcc not found on PATH (Debian: hipcc, or ROCm); HIP code was not checked",
        )
    return PACK.check_build(request, prelude=PRELUDE)
