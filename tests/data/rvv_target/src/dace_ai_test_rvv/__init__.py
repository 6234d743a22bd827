"""A RISC-V vector (RVV 1.0) target: registered by installation alone, nothing else changes."""

from __future__ import annotations

import platform
from pathlib import Path

from dace_ai.plugin import Detection, Target, hookimpl


def _detect() -> Detection:
    if platform.machine() != "riscv64":
        return Detection(False, f"not a RISC-V machine ({platform.machine()})")
    isa = ""
    for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
        if line.lower().startswith("isa"):
            isa = line.partition(":")[2].strip()
    base = isa.split("_")[0]
    return Detection("v" in base[4:], f"isa {isa or 'unknown'}")


def _describe(detection: Detection) -> str:
    return (
        "RISC-V 64 (RV64GC) with the V extension 1.0: vector length (VLEN) chosen by the hardware, "
        "from 128 bits up; LMUL groups of 1 to 8 registers."
    )


GUIDANCE = """\
- Include <riscv_vector.h> and use the RVV 1.0 intrinsics (__riscv_ prefix).
- Strip-mine every loop with vl = __riscv_vsetvl_e64m4(n - i); never assume VLEN.
- Use __riscv_vlse64_v_f64m4 for strided loads; reduce with __riscv_vfredusum after the loop.
"""


@hookimpl
def dace_ai_targets():
    yield Target(
        name="rvv",
        kind="cpu",
        priority=35,
        detect=_detect,
        describe=_describe,
        guidance=GUIDANCE,
        compiler=("riscv64-linux-gnu-g++",),
        flags=("-O3", "-march=rv64gcv", "-mabi=lp64d"),
        description="RISC-V 64 with the vector extension (RVV 1.0)",
    )
