"""dace-ai target pack for AMD GPUs in HIP: detection through the ROCm driver, guidance, the hipcc check.

A ``gpu`` target chosen when this machine has an AMD GPU, or by the ``target``
setting; the architecture comes from the ``hip_arch`` setting, the driver, or
``gfx90a`` (reported as such). What every GPU pack shares is
:class:`dace_ai.plugin.GpuPack`; this pack's description is :data:`~dace_ai_hip.checker.PACK`.
"""

from __future__ import annotations

from dace_ai.plugin import hookimpl

from .checker import PACK, check_hip


@hookimpl
def dace_ai_targets():
    yield PACK.target()


@hookimpl
def dace_ai_checkers():
    """The compile check, and the CPU twin of device tasklets (``hip-cpu-twin``, shared by every GPU pack)."""
    yield PACK.checker(check_hip)
    yield PACK.twin_checker()
