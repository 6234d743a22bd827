"""On a machine with an NVIDIA GPU: host tasklets over GPU data are run on the GPU against the node's reference.

Skipped, with the reason, where there is no GPU or DaCe cannot build GPU programs
(``bench/gpu_lane.sh`` runs these on a GPU machine). The wrong answers are the ones a
compile-only check accepted: a kernel and a cuBLAS call that skip the last element.
"""

from __future__ import annotations

import json

import pytest
from dace_ai.checkers.gpu_sanitize import compute_sanitizer
from dace_ai.compilation.gpu_toolchain import gpu_build_blocker, nvidia_gpu
from dace_ai.errors import CheckFailed

from tests.test_gpu_build import CUBLAS, KERNEL, LAUNCH, axpy_program, cublas_found, gpu_build, tasklets  # noqa: F401

#: Where there is no GPU, every test here says so first (the marks below name what else a GPU machine lacks).
GPU = nvidia_gpu() is not None
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(nvidia_gpu() is None, reason="needs an NVIDIA GPU (nvidia-smi reports none)"),
    pytest.mark.skipif(
        nvidia_gpu() is not None and gpu_build_blocker() is not None,
        reason=f"DaCe cannot build GPU programs here: {gpu_build_blocker() if nvidia_gpu() else ''}",
    ),
]

WRONG_KERNEL = KERNEL.replace("if (i < n)", "if (i < n - 1)")  # skips the last element
#: A refusal by the comparison on the GPU (the last element left unwritten), not by a build error or a crash.
REFUSED_UNWRITTEN = r"Check 'gpu-verify' \(stage verify\) failed:[\s\S]*Output not written \("


def test_a_right_kernel_is_verified_on_the_gpu_and_the_level_names_it(gpu_build):
    sdfg = axpy_program("dev_right", device=False)
    gpu_build.queue(json.dumps({"code": LAUNCH, "code_global": KERNEL}))
    sdfg.expand_library_nodes()
    (tasklet,) = tasklets(sdfg)
    level = tasklet.code.as_string.splitlines()[0].split("verification=", 1)[1]
    assert level.startswith("verified (") and f"on {nvidia_gpu()}" in level, level
    assert level.endswith(", sanitizers)" if compute_sanitizer() else "no sanitizers: compute-sanitizer missing)"), (
        level
    )


def test_a_kernel_that_skips_the_last_element_is_refused_on_the_gpu(gpu_build):
    sdfg = axpy_program("dev_wrong", device=False)
    gpu_build.queue(*[json.dumps({"code": LAUNCH, "code_global": WRONG_KERNEL})] * 3)
    with pytest.raises(CheckFailed, match=REFUSED_UNWRITTEN):
        sdfg.expand_library_nodes()


@pytest.mark.skipif(GPU and not cublas_found(), reason="needs cuBLAS")
def test_a_cublas_call_that_skips_the_last_element_is_refused_on_the_gpu(gpu_build):
    wrong = dict(
        CUBLAS, code=CUBLAS["code"].replace("cublasDaxpy(__state->handle, N,", "cublasDaxpy(__state->handle, N - 1,")
    )
    sdfg = axpy_program("dev_wrong_cublas", device=False)
    gpu_build.queue(*[json.dumps(wrong)] * 3)
    with pytest.raises(CheckFailed, match=REFUSED_UNWRITTEN):
        sdfg.expand_library_nodes()


@pytest.mark.skipif(GPU and compute_sanitizer() is None, reason="needs compute-sanitizer")
def test_a_kernel_that_writes_past_its_output_is_refused_by_memcheck(gpu_build):
    """Right where gpu-verify looks (the n outputs copied back), wrong on the device: one element past the end."""
    past = KERNEL.replace(
        "if (i < n) o[i] = 2.0 * x[i] + y[i];", "if (i < n) o[i] = 2.0 * x[i] + y[i]; if (i == n - 1) o[n] = 0;"
    )
    assert past != KERNEL
    sdfg = axpy_program("dev_past", device=False)
    gpu_build.queue(*[json.dumps({"code": LAUNCH, "code_global": past})] * 3)
    with pytest.raises(CheckFailed, match="compute-sanitizer memcheck: Invalid __global__ write"):
        sdfg.expand_library_nodes()


#: Right results (each thread's own value), but a thread reads its neighbour's shared slot (across warps) with
#: no barrier after the writes: a shared-memory hazard only racecheck sees.
RACY = (
    "__global__ void k_axpy(const double* x, const double* y, double* o, long long n) {\n"
    "    __shared__ double t[256];\n"
    "    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "    t[threadIdx.x] = i < n ? 2.0 * x[i] : 0.0;\n"
    "    volatile double* seen = t;\n"
    "    double other = seen[(threadIdx.x + 1) % blockDim.x];  // kept: a volatile read\n"
    "    (void)other;\n"
    "    if (i < n) o[i] = t[threadIdx.x] + y[i];\n"
    "}"
)


@pytest.mark.skipif(GPU and compute_sanitizer() is None, reason="needs compute-sanitizer")
def test_a_shared_memory_race_is_refused_by_racecheck(gpu_build):
    sdfg = axpy_program("dev_race", device=False)
    gpu_build.queue(*[json.dumps({"code": LAUNCH, "code_global": RACY})] * 3)
    with pytest.raises(CheckFailed, match="compute-sanitizer racecheck"):
        sdfg.expand_library_nodes()
