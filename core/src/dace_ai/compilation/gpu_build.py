"""GPU tasklets checked by DaCe's own GPU build: the one-node program built as ``sdfg.compile()`` builds it.

The candidate is placed as the expansion places it (device tasklets inside the
node's GPU kernel maps, host tasklets over GPU data with kernel code routed into
the GPU file, :mod:`dace_ai.compat.gpu_host`), with the node's containers,
memlets, symbols and environments, and DaCe generates and builds the program
with its own CMake, GPU backend (``cuda`` with nvcc, ``hip`` with hipcc), C++
standard, architecture and includes. The library is never loaded. A check that
passes means the user's build compiles the tasklet; where DaCe cannot build GPU
programs with the backend on this machine at all,
:func:`~dace_ai.compilation.gpu_toolchain.gpu_build_blocker` says why in one sentence and the check is inconclusive.
The GPU packs' checks share it through :meth:`dace_ai.checkers.gpu_pack.GpuPack.check_build`.
"""

from __future__ import annotations

import re

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.compilation.diagnostics import summarize_output
from dace_ai.compilation.gpu_toolchain import cmake_version, first_cmake_error, gpu_build_blocker, nvcc_version
from dace_ai.compilation.standalone import build_standalone

#: The ``reason`` of a report whose build failed in CMake's set-up of the GPU language (not the candidate's fault).
CMAKE_CANNOT = "CMake cannot set up the GPU language"
#: What CMake prints when it cannot set up the CUDA or HIP language with this compiler (a machine problem).
_CMAKE_GPU_SETUP = re.compile(
    r"CMakeTest(?:CUDA|HIP)Compiler|CMakeDetermine(?:CompilerABI|HIPCompiler)|No CMAKE_(?:CUDA|HIP)_COMPILER|"
    r"CMake does not know the flags|enable_language|(?:CUDA|HIP) compiler identification is unknown|"
    r"hip-config\.cmake|hip-lang"
)


def _cmake_cannot(backend: str, output: str) -> str:
    """The sentence of a report whose build stopped in CMake's set-up of ``backend``'s language."""
    if backend == "hip":
        return (
            f"CMake {cmake_version()} (the cmake on PATH) cannot set up HIP, so DaCe cannot build any HIP program "
            f"here: {first_cmake_error(output) or 'see the CMake output'}"
        )
    nvcc = ".".join(map(str, nvcc_version() or ()))
    return (
        f"CMake {cmake_version()} (the cmake on PATH) cannot set up CUDA with nvcc {nvcc}, so DaCe cannot "
        "build any GPU program here; a newer CMake can (pip install cmake, then put it first on PATH)"
    )


def check_gpu_build(request: CheckRequest, checker: str, backend: str = "cuda") -> CheckReport:
    """Build the candidate's one-node program with DaCe's ``backend`` in ``<workdir>/program`` (never loaded)."""

    blocker = gpu_build_blocker(backend)
    if blocker is not None:
        return CheckReport(checker, "inconclusive", blocker, reason="DaCe cannot build GPU code here")
    where = "device code (inside a GPU kernel)" if request.node.in_gpu_kernel else "host code over GPU data"
    build = build_standalone(request, backend)
    details = {"program": build.program, "unit": where, "built_by": "DaCe", "backend": backend}
    if build.outcome == "not rebuilt":
        return CheckReport(checker, "inconclusive", f"could not rebuild the node as a program: {build.text}")
    if build.outcome in ("compile error", "configuration error") and _CMAKE_GPU_SETUP.search(build.text):
        text = _cmake_cannot(backend, build.text)
        return CheckReport(checker, "inconclusive", text, build.seconds, details, reason=CMAKE_CANNOT)
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
