"""What x86 ISA features compiler flags enable, in the kernel's spelling (``avx2``, ``avx512_vnni``).

The CPU itself is read by :func:`dace_ai.plugin.read_cpu` (one reader for every pack).
"""

from __future__ import annotations

from dace_ai.plugin import CpuInfo, read_cpu

__all__ = ["LEVEL_FEATURES", "M_FLAGS", "REPORTED", "CpuInfo", "features_for_flags", "read_cpu"]

#: Feature sets of the x86-64 micro-architecture levels GCC and Clang know as ``-march=x86-64-vN``.
LEVEL_FEATURES: dict[str, frozenset[str]] = {
    "x86-64": frozenset({"sse", "sse2"}),
    "x86-64-v2": frozenset({"sse", "sse2", "sse3", "ssse3", "sse4_1", "sse4_2", "popcnt"}),
}
LEVEL_FEATURES["x86-64-v3"] = LEVEL_FEATURES["x86-64-v2"] | {"avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe"}
LEVEL_FEATURES["x86-64-v4"] = LEVEL_FEATURES["x86-64-v3"] | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}

#: ``-m`` options that add one feature (compiler spelling -> /proc/cpuinfo spelling).
M_FLAGS: dict[str, str] = {
    "-mavx": "avx",
    "-mavx2": "avx2",
    "-mfma": "fma",
    "-mf16c": "f16c",
    "-mbmi2": "bmi2",
    "-mavx512f": "avx512f",
    "-mavx512bw": "avx512bw",
    "-mavx512dq": "avx512dq",
    "-mavx512vl": "avx512vl",
    "-mavx512cd": "avx512cd",
    "-mavx512vnni": "avx512_vnni",
    "-mavx512bf16": "avx512_bf16",
    "-mavx512fp16": "avx512_fp16",
    "-mamx-tile": "amx_tile",
}

#: Extensions named in the prompt when present, in order.
REPORTED = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "bmi2",
    "avx512f",
    "avx512bw",
    "avx512dq",
    "avx512vl",
    "avx512cd",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
)


def features_for_flags(flags: tuple[str, ...] | list[str], native: frozenset[str]) -> frozenset[str]:
    """The ISA features code compiled with ``flags`` may use (``-march=native`` means this CPU's)."""
    features: set[str] = set(LEVEL_FEATURES["x86-64"])
    for flag in flags:
        if flag.startswith("-march="):
            arch = flag.split("=", 1)[1]
            features |= native if arch == "native" else LEVEL_FEATURES.get(arch, frozenset())
        elif flag in M_FLAGS:
            features.add(M_FLAGS[flag])
        elif flag.startswith("-mno-") and "-m" + flag[5:] in M_FLAGS:
            features.discard(M_FLAGS["-m" + flag[5:]])
    return frozenset(features)
