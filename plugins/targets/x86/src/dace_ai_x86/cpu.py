"""What this x86 CPU offers: ISA flags, model and caches, read from Linux's /proc and /sys.

Read directly instead of through a CPU-database package so the pack has no
dependencies beyond dace-ai; the flags are the kernel's, in its spelling
(``avx2``, ``avx512f``, ``avx512_vnni``).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path

#: Feature sets of the x86-64 micro-architecture levels GCC and Clang know as ``-march=x86-64-vN``.
LEVEL_FEATURES: dict[str, frozenset[str]] = {
    "x86-64": frozenset({"sse", "sse2"}),
    "x86-64-v2": frozenset({"sse", "sse2", "sse3", "ssse3", "sse4_1", "sse4_2", "popcnt"}),
}
LEVEL_FEATURES["x86-64-v3"] = LEVEL_FEATURES["x86-64-v2"] | {"avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe"}
LEVEL_FEATURES["x86-64-v4"] = LEVEL_FEATURES["x86-64-v3"] | {"avx512f", "avx512bw", "avx512cd", "avx512dq",
                                                             "avx512vl"}

#: ``-m`` options that add one feature (compiler spelling -> /proc/cpuinfo spelling).
M_FLAGS: dict[str, str] = {
    "-mavx": "avx", "-mavx2": "avx2", "-mfma": "fma", "-mf16c": "f16c", "-mbmi2": "bmi2",
    "-mavx512f": "avx512f", "-mavx512bw": "avx512bw", "-mavx512dq": "avx512dq", "-mavx512vl": "avx512vl",
    "-mavx512cd": "avx512cd", "-mavx512vnni": "avx512_vnni", "-mavx512bf16": "avx512_bf16",
    "-mavx512fp16": "avx512_fp16", "-mamx-tile": "amx_tile",
}

#: Extensions named in the prompt when present, in order.
REPORTED = ("sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512dq", "avx512vl",
            "avx512cd", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile")


@dataclass(frozen=True)
class CpuInfo:
    machine: str
    model: str
    flags: frozenset[str]
    caches: tuple[str, ...] = field(default=())  #: e.g. ("L1d 32K", "L2 512K", "L3 32768K")


def read_cpu(cpuinfo: Path = Path("/proc/cpuinfo"),
             cache_dir: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> CpuInfo:
    """The first CPU's model and flags, and cpu0's caches where the kernel exposes them."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key == "model name" and value.strip():
                    model = value.strip()
                elif key == "flags":
                    flags.update(value.split())
                elif not line.strip() and flags:
                    break  # first processor block read
    except OSError:
        pass
    return CpuInfo(platform.machine(), model, frozenset(flags), _caches(cache_dir))


def _caches(cache_dir: Path) -> tuple[str, ...]:
    found = []
    for index in sorted(cache_dir.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        found.append(f"L{level}{suffix} {size}")
    return tuple(found)


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
