"""cuBLAS as a DaCe environment for CUDA targets.

The CUDA toolkit does not always ship cuBLAS (CUDA 13 from some sources has no
``cublas_v2.h``); the PyPI wheel ``nvidia-cublas`` carries the headers and the
shared library under ``site-packages/nvidia/cu13`` (``nvidia/cublas`` for CUDA 12).
The pack looks in the toolkit folders first, then in those wheels, and is offered
only to host code of GPU targets when both ``cublas_v2.h`` and ``libcublas.so`` are
found. The wheel has no ``libcublas.so`` link name, so the library is linked by its
full path with a run path to its folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dace_ai.plugin import Detection, EnvironmentGenerator, EnvironmentSpec, find_header, hookimpl, machine_fact

#: DaCe's CUDA environment, which cuBLAS builds on.
CUDA_ENVIRONMENT = "dace.libraries.standard.environments.cuda.CUDA"

GUIDANCE = """\
cuBLAS (`cublas_v2.h`) for host code that launches GPU work. Request it with \
`"environments": [{"name": "cublas", "generator": "cublas"}]`; do not include `cublas_v2.h` yourself.
- Handle: declare `cublasHandle_t handle;` in `state_fields`, create it ONCE in `code_init` \
(`cublasCreate(&__state->handle);`) and destroy it in `code_exit` (`cublasDestroy(__state->handle);`). \
Never create a handle in the tasklet body. A handle must not be used by two host threads at once.
- Streams: call `cublasSetStream(__state->handle, __dace_current_stream);` before the calls so they run on the \
node's stream.
- Calling convention: cuBLAS is column-major. For row-major C = A @ B (M x K times K x N) call \
`cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc)`: \
operands swapped, leading dimensions are the row strides. Matrices are device pointers (GPU_Global); alpha and \
beta are host pointers by default. Check the returned `cublasStatus_t`.
- Not usable inside a GPU kernel (device code): only from host code of a GPU target."""


def _candidates() -> list[tuple[Path, Path]]:
    """(include folder, library folder) pairs where cuBLAS may be, in search order."""
    roots = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    pairs = [(Path(r) / "include", Path(r) / sub) for r in roots if r for sub in ("lib64", "lib")]
    for entry in sys.path:
        for layout in ("cu13", "cu12", "cublas"):
            base = Path(entry or ".") / "nvidia" / layout
            pairs.append((base / "include", base / "lib"))
    return pairs


@machine_fact("dace_ai_cublas.detect")
def detect() -> Detection:
    looked = []
    for include, libdir in _candidates():
        header = find_header("cublas_v2.h", [str(include)]) if include.is_dir() else None
        libraries = sorted(libdir.glob("libcublas.so*")) if libdir.is_dir() else []
        if header is not None and header.parent == include and libraries:
            return Detection(
                True,
                f"found {header} and {libraries[0]}",
                {"include": str(include), "library": str(libraries[0]), "libdir": str(libdir)},
            )
        if str(include) not in looked:
            looked.append(str(include))
    return Detection(
        False,
        "not found: header cublas_v2.h with libcublas.so (looked in the CUDA toolkit and the "
        "nvidia-cublas wheel: pip install nvidia-cublas)",
        {"looked": looked[:6]},
    )


def offer(ctx) -> str | None:
    if ctx.target.kind != "gpu" or ctx.in_gpu_kernel:
        return None
    return GUIDANCE


def generate(request) -> EnvironmentSpec:
    found = detect()
    return EnvironmentSpec(
        name="cublas",
        generator="cublas",
        headers=["cublas_v2.h"],
        include_dirs=[found.details["include"]],
        libraries=[found.details["library"]],
        link_flags=[f"-Wl,-rpath,{found.details['libdir']}"],
        dependencies=[CUDA_ENVIRONMENT],
    )


@hookimpl
def dace_ai_environment_generators():
    yield EnvironmentGenerator(
        name="cublas",
        detect=detect,
        offer=offer,
        generate=generate,
        description="cuBLAS (cublas_v2.h) for host code of CUDA targets",
    )
