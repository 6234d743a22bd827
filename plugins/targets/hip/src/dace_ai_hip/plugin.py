"""dace-ai target pack for AMD GPUs in HIP: detection through the ROCm driver, guidance, the hipcc check.

A ``gpu`` target chosen when this machine has an AMD GPU, or by the ``target``
setting; the architecture comes from the ``hip_arch`` setting, the driver, or
``gfx90a`` (reported as such).
"""

from __future__ import annotations

from dace_ai.plugin import Checker, Detection, Target, hookimpl

from .checker import CHECKER, DEFAULT_ARCH, amd_gpus, applies, check_hip


def _detect() -> Detection:
    gpus = amd_gpus()
    if not gpus:
        return Detection(False, "no AMD GPU (no /dev/kfd or rocm_agent_enumerator reports none)")
    return Detection(True, f"ROCm reports {', '.join(gpus)}", {"arch": gpus[0]})


def _describe(detection: Detection) -> str:
    if detection.matched:
        head = f"AMD GPU, architecture {detection.details['arch']}."
    else:
        head = f"AMD GPU (none on this machine): code is compiled for the configured hip_arch or {DEFAULT_ARCH}."
    return (
        head + "\nLanguage: HIP C++ (hipcc, C++17). Wavefront size 64 on CDNA (gfx9xx), 32 on RDNA; "
        "at most 1024 threads per block; 64 KiB of LDS (shared memory) per block."
    )


def _flags(detection: Detection) -> tuple[str, ...]:
    return ("-O3", f"--offload-arch={detection.details.get('arch', DEFAULT_ARCH)}")


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


@hookimpl
def dace_ai_targets():
    yield Target(
        name="hip",
        kind="gpu",
        priority=45,
        detect=_detect,
        describe=_describe,
        guidance=GUIDANCE,
        compiler=("hipcc",),
        flags=_flags,
        checkers=(CHECKER,),
        language="hip",
        description="AMD GPUs in HIP C++ (checked with hipcc for an explicit --offload-arch)",
    )


@hookimpl
def dace_ai_checkers():
    yield Checker(
        name=CHECKER,
        stage="compile",
        check=check_hip,
        applies=applies,
        description="Compiles HIP device tasklets and host tasklets over GPU data with hipcc",
    )
