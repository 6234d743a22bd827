"""Which candidates the host checkers judge: C++ for this machine's CPU that DaCe's own build compiles.

A small module at the bottom of :mod:`dace_ai.checking`, so every checker can ask without
importing the host checkers themselves (:mod:`dace_ai.checking.host` re-exports both).
"""

from __future__ import annotations

from dace_ai.checking.api import CheckRequest
from dace_ai.targets.build_flags import builds_with_dace


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
