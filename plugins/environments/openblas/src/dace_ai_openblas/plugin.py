"""OpenBLAS's CBLAS interface as a DaCe environment.

Offered for CPU code when ``cblas.h`` and ``libopenblas`` are found (Debian:
``apt-get install libopenblas-dev``). A request ``{"name": "openblas", "generator":
"openblas"}`` in an answer becomes an environment that includes ``cblas.h`` and
links ``-lopenblas``; the model writes the calls.
"""

from __future__ import annotations

import os

from dace_ai.plugin import Detection, EnvironmentGenerator, EnvironmentSpec, detect_library, hookimpl, machine_fact

#: Folders other distributions put cblas.h in (the compiler's own folders are searched too).
HEADER_DIRS = (
    "/usr/include/openblas",
    "/usr/include/x86_64-linux-gnu/openblas-pthread",
    "/usr/include/aarch64-linux-gnu/openblas-pthread",
    "/opt/OpenBLAS/include",
)
LIBRARY_DIRS = ("/opt/OpenBLAS/lib",)

GUIDANCE = """\
OpenBLAS through CBLAS (`cblas.h`, linked with `-lopenblas`). Request it with \
`"environments": [{"name": "openblas", "generator": "openblas"}]`; do not include `cblas.h` yourself.
- Calling convention: `cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, \
beta, C, ldc)` (`cblas_dgemm` for double, `cblas_cgemm`/`cblas_zgemm` take alpha and beta by pointer). \
Leading dimensions are in elements and must match the connector strides listed above (row-major: the row stride); \
use `CblasTrans` instead of copying when the data is stored transposed.
- Thread safety: calls are thread-safe, and OpenBLAS runs its own thread pool. Inside a parallel map over many \
small problems call `openblas_set_num_threads(1)` once in `code_init`, not in the tasklet body.
- No handles or plans are needed; do not allocate in the tasklet body."""


def _is_system_dir(folder: str) -> bool:
    return folder in ("/usr/include", "/usr/local/include") or (
        os.path.dirname(folder) == "/usr/include" and os.path.basename(folder).endswith("-linux-gnu")
    )


@machine_fact("dace_ai_openblas.detect")
def detect() -> Detection:
    return detect_library(["cblas.h"], ["openblas"], header_dirs=HEADER_DIRS, library_dirs=LIBRARY_DIRS)


def offer(ctx) -> str | None:
    if ctx.target.kind != "cpu" or ctx.in_gpu_kernel:
        return None
    return GUIDANCE


def generate(request) -> EnvironmentSpec:
    found = detect()
    header = os.path.dirname(found.details["headers"]["cblas.h"])
    library = found.details["libraries"]["openblas"]
    library_dirs = [os.path.dirname(library)] if os.path.isabs(library) else []
    return EnvironmentSpec(
        name="openblas",
        generator="openblas",
        headers=["cblas.h"],
        libraries=["openblas"],
        include_dirs=[] if _is_system_dir(header) else [header],
        link_flags=[f"-L{d}" for d in library_dirs],
    )


@hookimpl
def dace_ai_environment_generators():
    yield EnvironmentGenerator(
        name="openblas",
        detect=detect,
        offer=offer,
        generate=generate,
        description="OpenBLAS CBLAS (cblas.h, -lopenblas) for CPU code",
    )
