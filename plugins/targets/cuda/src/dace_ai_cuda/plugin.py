"""dace-ai target pack for NVIDIA CUDA: GPU detection by nvidia-smi, guidance and the nvcc check.

The target is a ``gpu`` target: it is chosen for nodes inside GPU maps or over
GPU data when this machine has an NVIDIA GPU, or when the ``target`` setting
names it. The architecture comes from the ``cuda_arch`` setting, else from
nvidia-smi, else ``sm_80`` (reported as such). What every GPU pack shares is
:class:`dace_ai.plugin.GpuPack`; this pack's description is :data:`~dace_ai_cuda.checker.PACK`.
"""

from __future__ import annotations

from dace_ai.plugin import hookimpl

from .checker import PACK, check_cuda


@hookimpl
def dace_ai_targets():
    yield PACK.target()


@hookimpl
def dace_ai_checkers():
    """The compile check, and the CPU twin of device tasklets (``cuda-cpu-twin``, shared by every GPU pack)."""
    yield PACK.checker(check_cuda)
    yield PACK.twin_checker()
