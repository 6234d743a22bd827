"""dace-ai target pack for NVIDIA CUDA: GPU detection by nvidia-smi, guidance and the nvcc check.

The target is a ``gpu`` target: it is chosen for nodes inside GPU maps or over
GPU data when this machine has an NVIDIA GPU, or when the ``target`` setting
names it. The architecture comes from the ``cuda_arch`` setting, else from
nvidia-smi, else ``sm_80`` (reported as such).
"""

from __future__ import annotations

from dace_ai.plugin import Checker, Detection, Target, hookimpl

from .checker import CHECKER, DEFAULT_ARCH, applies, check_cuda, gpu_compute_capability


def _detect() -> Detection:
    gpu = gpu_compute_capability()
    if gpu is None:
        return Detection(False, "no NVIDIA GPU (nvidia-smi missing or reports none)")
    return Detection(True, f"nvidia-smi reports {gpu[0]} ({gpu[1]})", {"gpu": gpu[0], "arch": gpu[1]})


def _describe(detection: Detection) -> str:
    if detection.matched:
        head = f"NVIDIA GPU: {detection.details['gpu']}, architecture {detection.details['arch']}."
    else:
        head = f"NVIDIA GPU (none on this machine): code is compiled for the configured cuda_arch or {DEFAULT_ARCH}."
    return (
        head + "\nLanguage: CUDA C++ (nvcc, C++17). Warp size 32; at most 1024 threads per block; "
        "48 KiB of static shared memory per block."
    )


def _flags(detection: Detection) -> tuple[str, ...]:
    return ("-O3", f"-arch={detection.details.get('arch', DEFAULT_ARCH)}")


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


@hookimpl
def dace_ai_targets():
    yield Target(
        name="cuda",
        kind="gpu",
        priority=50,
        detect=_detect,
        describe=_describe,
        guidance=GUIDANCE,
        compiler=("nvcc",),
        flags=_flags,
        checkers=(CHECKER,),
        language="cuda",
        description="NVIDIA GPUs in CUDA C++ (checked by DaCe's own GPU build with nvcc)",
    )


@hookimpl
def dace_ai_checkers():
    yield Checker(
        name=CHECKER,
        stage="compile",
        check=check_cuda,
        applies=applies,
        description="Builds device tasklets and host tasklets over GPU data through DaCe's GPU build (nvcc); "
        "a standalone nvcc unit where DaCe cannot build GPU code",
    )
