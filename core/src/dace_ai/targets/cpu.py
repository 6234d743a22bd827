"""What this machine's CPU is: model, ISA flags and caches, read once from Linux's /proc and /sys.

The one reader of ``/proc/cpuinfo`` for the core and every target pack (x86 flags
come from ``flags``, ARM ones from ``Features``; both end up in :attr:`CpuInfo.flags`
in the kernel's spelling: ``avx2``, ``avx512_vnni``, ``sve``). The ``hide_cpu_features`` setting
leaves features out of this machine's description, as on a CPU without them (see docs/user/checks.md).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field, replace
from pathlib import Path

from dace_ai.config.settings import early_setting
from dace_ai.state import STATE

CPUINFO = Path("/proc/cpuinfo")
CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True)
class CpuInfo:
    """The first processor's description (all cores of the machines we target are alike)."""

    machine: str  #: ``platform.machine()``: x86_64, aarch64, ...
    model: str
    flags: frozenset[str]
    caches: tuple[str, ...] = field(default=())  #: e.g. ("L1d 32K", "L2 512K", "L3 32768K")
    mhz: float = 0.0  #: the clock ``/proc/cpuinfo`` reports (``cpu MHz``; 0 where it says none)
    hidden: frozenset[str] = field(default=frozenset())  #: features the CPU has, left out by ``hide_cpu_features``


def read_cpu(cpuinfo: Path = CPUINFO, cache_dir: Path = CACHE_DIR) -> CpuInfo:
    """The first CPU's model and flags, and cpu0's caches where the kernel exposes them.

    Paths are parameters so tests (and packs) can read a recorded ``cpuinfo``; with the
    defaults the answer is this machine's, without the features the ``hide_cpu_features``
    setting hides, and is cached for the process.
    """
    if cpuinfo == CPUINFO and cache_dir == CACHE_DIR:
        return _this_cpu()
    return _read(cpuinfo, cache_dir)


@STATE.cached("targets.cpu.this_cpu", maxsize=1)
def _this_cpu() -> CpuInfo:
    return hide_features(_read(CPUINFO, CACHE_DIR), hidden_features())


def hidden_features() -> frozenset[str]:
    """The features the ``hide_cpu_features`` setting names (empty by default)."""
    value, _ = early_setting("hide_cpu_features")
    return frozenset(name for name in str(value or "").split(",") if name)


def hide_features(cpu: CpuInfo, features: frozenset[str]) -> CpuInfo:
    """``cpu`` as a CPU without ``features``: they leave ``flags`` and are named in ``hidden``."""
    if not features & cpu.flags:
        return cpu
    return replace(cpu, flags=cpu.flags - features, hidden=cpu.hidden | (cpu.flags & features))


def _read(cpuinfo: Path, cache_dir: Path) -> CpuInfo:
    model, flags, named, mhz = platform.processor() or platform.machine(), set(), False, 0.0
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key in ("model name", "cpu model", "hardware") and value.strip() and not named:
                    model, named = value.strip(), True
                elif key in ("flags", "features"):
                    flags.update(value.split())
                elif key == "cpu mhz" and not mhz:
                    try:
                        mhz = float(value.strip())
                    except ValueError:
                        pass
                elif not line.strip() and flags:
                    break  # first processor block read
    except OSError:
        pass
    return CpuInfo(platform.machine(), model, frozenset(flags), _caches(cache_dir), mhz)


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
