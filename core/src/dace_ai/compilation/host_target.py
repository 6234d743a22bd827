"""Which candidates the host checkers judge: C++ for this machine's CPU that DaCe's own build compiles,
and which of them this machine can run (code for a target whose `cpu_features` this CPU lacks is compiled, not run).

A small module of :mod:`dace_ai.compilation`, so every checker can ask without importing the host
checkers themselves (:mod:`dace_ai.checkers.host_compile`).
"""

from __future__ import annotations

from dace_ai.checking.api import CheckRequest
from dace_ai.targets.build_flags import builds_with_dace
from dace_ai.targets.select import cannot_run_here


def is_host_cpp(request: CheckRequest) -> bool:
    """Host checkers judge C++ code for a CPU target outside GPU kernels."""
    node = request.node
    return (
        node.target.kind == "cpu"
        and node.target.language == "cpp"
        and request.answer.language == "cpp"
        and not node.in_gpu_kernel
    )


def uses_host_compiler(request: CheckRequest) -> bool:
    """Host C++ that DaCe's own build compiles (see :func:`dace_ai.targets.build_flags.builds_with_dace`).

    Cross-compiling targets (ARM SVE, RISC-V, ...) bring their own compile
    checkers: a precompiled ``dace.h`` from a cross compiler is not reliable
    (GCC 12 reports spurious overload ambiguities in ``arm_sve.h`` with it), and
    DaCe's own build cannot produce code for them.
    """
    return is_host_cpp(request) and builds_with_dace(request.node.target)


def not_runnable_here(request: CheckRequest) -> str:
    """Why this machine cannot run the candidate (``compiled for x86-avx512; this host cannot run it``), or ""."""
    why = cannot_run_here(request.node.target)
    return f"compiled for {request.node.target.name}; this host cannot run it ({why})" if why else ""


def runs_on_host(request: CheckRequest) -> bool:
    """Host C++ DaCe builds (:func:`uses_host_compiler`) for a target this machine can run."""
    return uses_host_compiler(request) and not not_runnable_here(request)
