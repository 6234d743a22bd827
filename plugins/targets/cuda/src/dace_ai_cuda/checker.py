"""The ``cuda-nvcc`` checker: GPU tasklets built by DaCe's own GPU build, as ``sdfg.compile()`` builds them.

Where DaCe can build GPU programs here, the candidate's one-node program is built
by DaCe (:func:`dace_ai.plugin.check_gpu_build`): the same file, nvcc command,
standard, architecture and headers as the user's build. Where it cannot (DaCe
1.0.2 with CUDA 13, :func:`dace_ai.plugin.gpu_build_blocker`; a CMake that cannot set
up CUDA; a context without its program), the tasklet is
compiled with nvcc in a standalone unit that rebuilds what DaCe gives it (see
:mod:`dace_ai.checking.units`), and the report says the program itself will not
build here and why. ``<dace/dace.h>`` does not compile with nvcc 13 (it uses cub
iterators CUDA 13 removed), so from CUDA 13 on that unit gets a minimal set of
DaCe's definitions instead.
"""

from __future__ import annotations

from dace_ai.plugin import (
    CMAKE_CANNOT,
    CheckReport,
    CheckRequest,
    check_gpu_build,
    check_gpu_unit,
    gpu_build_blocker,
    gpu_compute_capability,
    nvcc_version,
    touches_gpu,
)

CHECKER = "cuda-nvcc"
TARGET = "cuda"
DEFAULT_ARCH = "sm_80"

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


def prelude() -> str:
    """``<dace/dace.h>`` where nvcc can compile it, else :data:`MINIMAL_DACE`."""
    version = nvcc_version()
    if version is not None and version[0] < 13:
        return "#include <cuda_runtime.h>\n#include <dace/dace.h>\n"
    return MINIMAL_DACE


def resolve_arch(settings: object) -> tuple[str, str]:
    """(architecture, where it came from): the ``cuda_arch`` setting, nvidia-smi, or the default."""
    configured = getattr(settings, "cuda_arch", None)
    if configured:
        arch = configured if configured.startswith(("sm_", "compute_")) else "sm_" + configured.replace(".", "")
        source = getattr(settings, "source", lambda key: "settings")("cuda_arch")
        return arch, f"setting cuda_arch ({source})"
    gpu = gpu_compute_capability()
    if gpu is not None:
        return gpu[1], f"nvidia-smi ({gpu[0]})"
    return DEFAULT_ARCH, f"default {DEFAULT_ARCH} (no GPU found by nvidia-smi and no cuda_arch setting)"


def applies(request: CheckRequest) -> bool:
    return touches_gpu(request.node) and (request.node.target.name == TARGET or request.answer.language == "cuda")


def check_cuda(request: CheckRequest) -> CheckReport:
    """Build the tasklet as device code (in a GPU map) or host code over GPU data: DaCe's build, else a unit."""
    if nvcc_version() is None:
        return CheckReport(CHECKER, "inconclusive", "nvcc not found on PATH; CUDA code was not checked")
    blocker = gpu_build_blocker()
    if blocker is None and not (request.node.live or {}).get("sdfg"):
        blocker = "no program holds the node (a context read back from disk), so DaCe has nothing to build"
    if blocker is None:
        built = check_gpu_build(request, CHECKER)
        if built.reason != CMAKE_CANNOT:
            return built
        blocker = built.diagnostics
    arch, arch_source = resolve_arch(request.settings)
    report = check_gpu_unit(
        CHECKER,
        request.answer,
        request.node,
        request.workdir,
        compiler="nvcc",
        arch_flag=f"-arch={arch}",
        arch=arch,
        arch_source=arch_source,
        prelude=prelude(),
        stream_type="cudaStream_t",
        suffix=".cu",
        environments=request.environments,
    )
    report.details["built_by"] = "standalone unit"
    report.details["program_builds"] = blocker
    if report.status == "passed":
        report.diagnostics += f"; compiled in a standalone unit only: {blocker}"
    return report
