"""The ``cuda-nvcc`` checker: GPU tasklets built by DaCe's own GPU build, as ``sdfg.compile()`` builds them.

Where DaCe can build GPU programs here, the candidate's one-node program is built
by DaCe (:meth:`dace_ai.plugin.GpuPack.check_build`): the same file, nvcc command,
standard, architecture and headers as the user's build. Where it cannot (DaCe
1.0.2 with CUDA 13, :func:`dace_ai.plugin.gpu_build_blocker`; a CMake that cannot set
up CUDA; a context without its program), the tasklet is
compiled with nvcc in a standalone unit that rebuilds what DaCe gives it (see
:mod:`dace_ai.compilation.units`), and the report says the program itself will not
build here and why. ``<dace/dace.h>`` does not compile with nvcc 13 (it uses cub
iterators CUDA 13 removed), so from CUDA 13 on that unit gets a minimal set of
DaCe's definitions instead.
"""

from __future__ import annotations

from dace_ai.plugin import CheckReport, CheckRequest, GpuPack, gpu_compute_capability, nvcc_version

#: What device and host tasklets may rely on from <dace/dace.h>, for nvcc versions that cannot include it.
MINIMAL_DACE = """\
// Minimal stand-ins for <dace/dace.h>, which does not compile with this nvcc.
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cmath>
#include <algorithm>
#define DACE_DFI __device__ __forceinline__
#define DACE_HDFI __host__ __device__ __forceinline__
#define DACE_HostDev __host__ __device__
namespace dace {
typedef bool bool_; typedef int8_t int8; typedef int16_t int16; typedef int32_t int32; typedef int64_t int64;
typedef uint8_t uint8; typedef uint16_t uint16; typedef uint32_t uint32; typedef uint64_t uint64;
typedef float float32; typedef double float64;
namespace math { static constexpr double pi = 3.14159265358979323846; }
}  // namespace dace
"""

GUIDANCE = """\
- Inside a GPU map (device code) the tasklet body runs once per thread: the map parameters are already the \
thread's indices; do not loop over the map range, do not launch kernels, do not call host functions.
- Device code has no __state and no host memory: use only the connectors, the symbols and the map parameters. \
Scalar connectors are values in registers, pointer connectors point into GPU global memory.
- Outputs with write-conflict resolution need atomics (atomicAdd) when several threads write the same element.
- A host tasklet over GPU data runs on the CPU with device pointers: never dereference them on the host. \
Define __global__ kernels in code_global (unique names) and launch them on the stream DaCe provides: \
kernel<<<blocks, threads, 0, __dace_current_stream>>>(...); use cudaMemcpyAsync/cudaMemsetAsync on the same \
stream; never call cudaDeviceSynchronize or use the default stream.
- Coalesce global memory accesses (consecutive threads, consecutive addresses); use __restrict__ and const \
pointers, shared memory tiles for reuse, and guard every index against the array bounds.
"""


def _spell(arch: str) -> str:
    """``90`` or ``9.0`` -> ``sm_90``; ``sm_``/``compute_`` names unchanged."""
    return arch if arch.startswith(("sm_", "compute_")) else "sm_" + arch.replace(".", "")


PACK = GpuPack(
    name="cuda",
    language="cuda",
    checker_name="cuda-nvcc",
    vendor="NVIDIA GPU",
    found_by="nvidia-smi",
    find_gpu=gpu_compute_capability,
    missing="no NVIDIA GPU (nvidia-smi missing or reports none)",
    compiler="nvcc",
    arch_flag="-arch={arch}",
    stream_type="cudaStream_t",
    suffix=".cu",
    arch_setting="cuda_arch",
    default_arch="sm_80",
    spell_arch=_spell,
    limits="Language: CUDA C++ (nvcc, C++17). Warp size 32; at most 1024 threads per block; "
    "48 KiB of static shared memory per block.",
    guidance=GUIDANCE,
    priority=50,
    description="NVIDIA GPUs in CUDA C++ (checked by DaCe's own GPU build with nvcc)",
    checker_description="Builds device tasklets and host tasklets over GPU data through DaCe's GPU build (nvcc); "
    "a standalone nvcc unit where DaCe cannot build GPU code",
    dace_backend="cuda",
)


def prelude() -> str:
    """``<dace/dace.h>`` where nvcc can compile it, else :data:`MINIMAL_DACE`."""
    version = nvcc_version()
    if version is not None and version[0] < 13:
        return "#include <cuda_runtime.h>\n#include <dace/dace.h>\n"
    return MINIMAL_DACE


def check_cuda(request: CheckRequest) -> CheckReport:
    """Build the tasklet as device code (in a GPU map) or host code over GPU data: DaCe's build, else a unit."""
    if nvcc_version() is None:
        return CheckReport(PACK.checker_name, "inconclusive", "nvcc not found on PATH; CUDA code was not checked")
    return PACK.check_build(request, prelude=prelude())
