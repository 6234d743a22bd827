"""dace-ai target pack for x86-64: one target per vector ISA level, and the ``x86-isa`` checker.

``x86-avx512`` (priority 30) matches a CPU with AVX-512 F/BW/DQ/VL, ``x86-avx2``
(priority 20) one with AVX2 and FMA; the highest matching one is chosen, and
both rank above the core's generic ``host`` target. Each compiles for the
matching ``-march=x86-64-vN`` level, so what the prompt allows, what the checker
accepts and what the compiler enables are the same set of instructions.
"""

from __future__ import annotations

import os
import shutil

from dace_ai.plugin import COMPILED, Checker, Detection, Target, VendorPeaks, hookimpl

from .checker import CHECKER, applies, check_x86
from .cpu import LEVEL_FEATURES, REPORTED, read_cpu

AVX512_NEEDS = ("avx512f", "avx512bw", "avx512dq", "avx512vl")
AVX2_NEEDS = ("avx2", "fma")


def _detect(needs: tuple[str, ...]) -> Detection:
    cpu = read_cpu()
    details = {
        "model": cpu.model,
        "machine": cpu.machine,
        "flags": sorted(cpu.flags & set(REPORTED)),
        "caches": list(cpu.caches),
    }
    if cpu.machine not in ("x86_64", "AMD64", "i686"):
        return Detection(False, f"not an x86-64 machine ({cpu.machine})", details)
    lacking = [f for f in needs if f not in cpu.flags]
    if lacking:
        hidden = " (hidden by the setting hide_cpu_features)" if set(lacking) <= cpu.hidden else ""
        return Detection(False, f"this CPU ({cpu.model}) lacks {', '.join(lacking)}{hidden}", details)
    return Detection(True, f"this CPU ({cpu.model}) has {', '.join(needs)}", details)


def _describe(level: str, width: int):
    def describe(detection: Detection) -> str:
        details = detection.details
        level_features = LEVEL_FEATURES[level]
        # This level's features, and what the CPU adds that needs no wider registers (never AVX-512 on AVX2).
        extra = [f for f in details.get("flags", ()) if detection.matched and not f.startswith(("avx512", "amx"))]
        isa = [f for f in REPORTED if f in level_features or f in extra]
        lanes = f"{width // 64} doubles / {width // 32} floats / {width // 32} int32 per register"
        lines = [
            f"x86-64 CPU, ISA level {level}: {details.get('model', 'unknown model')}.",
            f"ISA extensions: {', '.join(isa)}.",
            f"Vector width: {width} bits ({lanes}).",
            f"Cores: {os.cpu_count()}.",
        ]
        if details.get("caches"):
            lines.append(f"Caches (cpu0): {', '.join(details['caches'])}.")
        if not detection.matched:
            lines.append(
                f"This machine is not such a CPU ({detection.reason}): the code is compiled for "
                f"{level} and must not rely on anything beyond it."
            )
        return "\n".join(lines)

    return describe


def _compiler() -> tuple[str, ...]:
    from dace.config import Config

    configured = Config.get("compiler", "cpu", "executable") or ""
    return (configured or ("g++" if shutil.which("g++") else "c++"),)


def _avx512_flags(detection: Detection) -> tuple[str, ...]:
    flags = ["-O3", "-march=x86-64-v4", "-mprefer-vector-width=512"]
    if detection.matched and "avx512_vnni" in detection.details.get("flags", ()):
        flags.append("-mavx512vnni")
    return tuple(flags)


#: FMA units per core the nominal peak assumes (Intel's server cores and AMD's Zen 4 have two).
FMA_UNITS = 2


def _nominal_peaks(width: int):
    """Nominal peaks of the matched CPU: cores x clock x FMA units x lanes x 2 flops (None when no clock is known).

    The clock is the one ``/proc/cpuinfo`` reports (no turbo): the figure says what the
    ISA level promises at that clock, beside what ``dace-ai targets --roofline`` measures.
    """

    def peaks(detection: Detection) -> VendorPeaks | None:
        cpu = read_cpu()
        if not detection.matched or not cpu.mhz:
            return None
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        per_lane = cores * cpu.mhz / 1e3 * FMA_UNITS * 2
        return VendorPeaks(
            peak_gflops={"float32": per_lane * width / 32, "float64": per_lane * width / 64},
            threads=cores,
            source=f"nominal: {cores} cores x {cpu.mhz:.0f} MHz x {FMA_UNITS} FMA units x {width}-bit vectors",
        )

    return peaks


GUIDANCE_COMMON = """\
- Include <immintrin.h> in code_global; it declares every intrinsic.
- Use unaligned loads and stores (_mm256_loadu_pd / _mm512_loadu_pd): DaCe does not promise alignment of \
connector pointers or of their subsets.
- Handle the remainder: process full vectors in the main loop, then the last n % lanes elements in a scalar \
loop (or with a masked load/store where the ISA has masks); never read or write past the connector's extent.
- Use FMA (_mm256_fmadd_pd) for multiply-add chains; keep several independent accumulators to hide latency, \
and reduce them at the end.
- For matrix products, block for the caches listed above and vectorize along the unit-stride dimension; \
respect the given strides of every connector (they may not be contiguous).
- Every intrinsic must be one the listed ISA extensions provide: the code is rejected before it runs otherwise.
"""

GUIDANCE_AVX2 = (
    GUIDANCE_COMMON
    + """\
- This CPU has no AVX-512: never use _mm512_* intrinsics, __m512* types or __mmask* masks. Use __m256d \
(4 doubles) / __m256 (8 floats) and _mm256_* intrinsics (AVX, AVX2, FMA).
- AVX2 has no masked arithmetic; use _mm256_maskload_pd / _mm256_maskstore_pd or a scalar tail for remainders.
"""
)

GUIDANCE_AVX512 = (
    GUIDANCE_COMMON
    + """\
- Use __m512d (8 doubles) / __m512 (16 floats) and _mm512_* intrinsics; handle remainders with masks: \
__mmask8 m = (__mmask8)((1u << rem) - 1); _mm512_maskz_loadu_pd(m, p); _mm512_mask_storeu_pd(p, m, v).
- _mm512_reduce_add_pd reduces a vector at the end of a loop (not inside it).
"""
)


@hookimpl
def dace_ai_targets():
    yield Target(
        name="x86-avx512",
        kind="cpu",
        priority=30,
        detect=lambda: _detect(AVX512_NEEDS),
        cpu_features=AVX512_NEEDS,
        describe=_describe("x86-64-v4", 512),
        guidance=GUIDANCE_AVX512,
        compiler=_compiler(),
        flags=_avx512_flags,
        checkers=(CHECKER,),
        language="cpp",
        peaks=_nominal_peaks(512),
        description="x86-64 with AVX-512 (F, BW, DQ, VL): 512-bit vectors, -march=x86-64-v4",
    )
    yield Target(
        name="x86-avx2",
        kind="cpu",
        priority=20,
        detect=lambda: _detect(AVX2_NEEDS),
        cpu_features=AVX2_NEEDS,
        describe=_describe("x86-64-v3", 256),
        guidance=GUIDANCE_AVX2,
        compiler=_compiler(),
        flags=("-O3", "-march=x86-64-v3"),
        checkers=(CHECKER,),
        language="cpp",
        peaks=_nominal_peaks(256),
        description="x86-64 with AVX2 and FMA: 256-bit vectors, -march=x86-64-v3",
    )


@hookimpl
def dace_ai_checkers():
    yield Checker(
        name=CHECKER,
        stage="compile",
        check=check_x86,
        applies=applies,
        needs=(COMPILED,),  # the candidate's one compile, shared with the core's probe
        description="Rejects intrinsics beyond the x86 target's ISA level (scan and compile with its -march flags)",
    )
