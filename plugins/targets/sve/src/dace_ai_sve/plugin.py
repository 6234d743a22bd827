"""dace-ai target pack for ARM SVE: detection, description, guidance and two checkers.

An SVE machine's vector length is chosen by the hardware (128 to 2048 bits), so
the guidance and the ``sve-vector-lengths`` checker insist on vector-length
agnostic code. On other machines the target is chosen with the ``target``
setting (``DACE_ai_target=sve``) and answers are checked with the aarch64 cross
compiler and qemu.
"""

from __future__ import annotations

import platform
from pathlib import Path

from dace_ai.plugin import Checker, Detection, Target, hookimpl, read_cpu

from .checkers import COMPILE_CHECKER, VECTOR_BITS, VL_CHECKER, applies, check_compile, check_vector_lengths


def _detect() -> Detection:
    machine = platform.machine()
    if machine != "aarch64":
        return Detection(False, f"not an aarch64 machine ({machine})", {"machine": machine})
    features = read_cpu().flags
    if "sve" not in features:
        return Detection(False, "this aarch64 CPU has no sve flag in /proc/cpuinfo", {"machine": machine})
    details: dict[str, object] = {"machine": machine, "sve2": "sve2" in features}
    try:
        details["vector_bytes"] = int(Path("/proc/sys/abi/sve_default_vector_length").read_text().strip())
    except (OSError, ValueError):
        pass
    return Detection(True, "this aarch64 CPU has the sve flag", details)


def _describe(detection: Detection) -> str:
    details = detection.details
    lines = [
        "ARM aarch64 CPU with the Scalable Vector Extension (SVE" + (", SVE2" if details.get("sve2") else "") + ")."
    ]
    if "vector_bytes" in details:
        bits = int(details["vector_bytes"]) * 8  # type: ignore[call-overload]
        lines.append(f"This machine's default SVE vector length is {bits} bits, but code must not depend on it.")
    else:
        lines.append(
            "Vector length: unknown, any multiple of 128 bits from 128 to 2048; code must work at all "
            f"of them (it is run at {', '.join(map(str, VECTOR_BITS))} bits before it is accepted)."
        )
    lines.append("Compiled with -march=armv8-a+sve; NEON is also available.")
    return "\n".join(lines)


def _compiler() -> tuple[str, ...]:
    return ("g++",) if platform.machine() == "aarch64" else ("aarch64-linux-gnu-g++",)


GUIDANCE = """\
- Include <arm_sve.h> in code_global and use ACLE SVE intrinsics (svfloat64_t, svld1, svst1, svmla_x, ...).
- Write vector-length agnostic loops: for (int64_t i = 0; i < n; i += svcntd()) { svbool_t pg = \
svwhilelt_b64(i, n); ... } (svcntw / svwhilelt_b32 for float and int32). Never assume a lane count such as 2, \
4 or 8, never size arrays by a constant vector length, never store a whole vector into a fixed-size buffer.
- Use the loop predicate on every load and store so the tail needs no scalar loop; use _x forms for arithmetic \
on inactive lanes you do not read, _m/_z where inactive lanes matter.
- Reduce with svaddv / svmaxv only after the loop; accumulate in vectors (svmla_m with the loop predicate) inside it.
- Respect every connector's strides; use svld1_gather_index for strided access or loop over the unit-stride dimension.
- The code is compiled with the aarch64 compiler and run at several vector lengths: results must be identical.
"""


@hookimpl
def dace_ai_targets():
    yield Target(
        name="sve",
        kind="cpu",
        priority=40,
        detect=_detect,
        describe=_describe,
        guidance=GUIDANCE,
        compiler=_compiler(),
        flags=("-O3", "-march=armv8-a+sve"),
        checkers=(COMPILE_CHECKER, VL_CHECKER),
        language="cpp",
        description="ARM aarch64 with SVE (vector-length agnostic code, checked under qemu)",
    )


@hookimpl
def dace_ai_checkers():
    yield Checker(
        name=COMPILE_CHECKER,
        stage="compile",
        check=check_compile,
        applies=applies,
        description="Cross compiles SVE code with -march=armv8-a+sve",
    )
    yield Checker(
        name=VL_CHECKER,
        stage="verify",
        check=check_vector_lengths,
        applies=applies,
        tools=("qemu-aarch64",),
        description="Runs SVE code under qemu at 128, 512 and 2048 bits; results must agree",
    )
