"""Measure the roofline: compile ``roofline.cpp`` like the real build, run it in a child with a timeout.

The microbenchmark is ours, not model output, yet it still runs in a child process:
a compiler that miscompiles it or a machine that stalls must cost the user a timeout
and a clear message, never a hung process. It is compiled with the compiler and flags
DaCe builds programs with (:func:`dace_ai.targets.build_flags.dace_build_command`), so
the peak is what code built here can reach: with ``-march=native`` the widest vectors
this CPU has, without it the baseline ISA.

Working sets: half of each cache level the kernel describes (``/sys``: L1d and L2 per
core, the last level shared), and for memory four times the last-level cache (at
least 64 MiB, at most 512 MiB and an eighth of the free memory: a virtual machine may
report its host's whole last-level cache, of which it gets a slice). One thread and
all cores. About three seconds on a two-core machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from dace_ai.errors import DaceAIError
from dace_ai.performance.roofline import FLOAT_TYPES, LEVELS, Level, Roofline

SOURCE = Path(__file__).with_name("roofline.cpp")
#: CPU seconds of each FMA run (eight runs per element type and thread count, the best one counts).
FMA_SECONDS = 0.015
#: Wall-clock limit of the child; a measurement never takes this long on a working machine.
TIMEOUT_SECONDS = 120.0
#: The memory working set: this many times the last-level cache, within the bounds below.
LLC_FACTOR = 4
MIN_MEMORY_BYTES = 64 << 20
MAX_MEMORY_BYTES = 512 << 20
#: The largest working set per thread measured in a cache (a huge shared cache is measured in part).
MAX_CACHE_SHARE = 32 << 20
#: Fraction of the available memory the memory working set may use.
MEMORY_SHARE = 8


class RooflineError(DaceAIError):
    """The roofline could not be measured (no compiler, a build error, a crash or a timeout)."""


def cache_levels(cache_dir: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> list[tuple[str, int, int]]:
    """(name, bytes, CPUs sharing one instance) of cpu0's data caches, smallest first: ``[("L1", 49152, 1), ...]``."""
    found: dict[str, tuple[int, int]] = {}
    for index in sorted(cache_dir.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            if kind == "Instruction":
                continue
            level = int((index / "level").read_text().strip())
            size = _bytes((index / "size").read_text().strip())
            sharing = _cpu_count((index / "shared_cpu_list").read_text().strip())
        except (OSError, ValueError):
            continue
        name = f"L{level}"
        if name in LEVELS and size > 0:
            found[name] = (size, max(1, sharing))
    return [(name, *found[name]) for name in LEVELS if name in found]


def _bytes(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    return int(text[:-1]) * units[text[-1]] if text and text[-1] in units else int(text)


def _cpu_count(text: str) -> int:
    count = 0
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


def available_memory() -> int | None:
    """Bytes of memory available now (``MemAvailable``), or None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def plan_levels(caches: list[tuple[str, int, int]], available: int | None) -> list[Level]:
    """The working set measured for each level: half of each cache, and memory far beyond the last one.

    Each thread streams its own share, half of what its cache instance holds per CPU.
    """
    levels = [
        Level(name, size, sharing, max(4096, min(size // (2 * sharing), MAX_CACHE_SHARE)))
        for name, size, sharing in caches
    ]
    last = max([size for _, size, _ in caches] or [0])
    memory = max(MIN_MEMORY_BYTES, LLC_FACTOR * last)
    memory = min(memory, MAX_MEMORY_BYTES, *([available // MEMORY_SHARE] if available else []))
    return levels + [Level("memory", 0, 0, max(memory, 4 << 20))]


def _size(level: Level) -> str:
    """How the child is told a level's working set: per thread for caches (``49152p``), in total for memory."""
    return f"{level.measured_bytes}p" if level.sharing else str(level.measured_bytes)


def build(compiler: list[str], flags: list[str], folder: Path) -> Path:
    """Compile the microbenchmark into ``folder`` (raises :class:`RooflineError` with the compiler's words)."""
    folder.mkdir(parents=True, exist_ok=True)
    binary = folder / "roofline"
    # Multiply-adds are fused as in any FMA code; the chains are written as a * b + c.
    command = [*compiler, *flags, "-ffp-contract=fast", str(SOURCE), "-o", str(binary)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False)
    except FileNotFoundError:
        raise RooflineError(f"cannot measure the roofline: compiler {compiler[0]!r} not found") from None
    except subprocess.TimeoutExpired:
        raise RooflineError(f"cannot measure the roofline: compiling took over {TIMEOUT_SECONDS:g} s") from None
    if done.returncode != 0:
        raise RooflineError(
            "cannot measure the roofline: the microbenchmark does not compile with "
            f"{' '.join(command)}:\n{(done.stderr or done.stdout).strip()[-2000:]}"
        )
    return binary


def run(binary: Path, threads: list[int], levels: list[Level]) -> dict[str, Any]:
    """Run the built microbenchmark in a child (its JSON), with :data:`TIMEOUT_SECONDS` of wall time."""
    sizes = ",".join(_size(lv) for lv in levels)
    env = {**os.environ, "OMP_PROC_BIND": os.environ.get("OMP_PROC_BIND", "spread"), "OMP_WAIT_POLICY": "passive"}
    try:
        done = subprocess.run(
            [str(binary), ",".join(map(str, threads)), str(FMA_SECONDS), sizes],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RooflineError(
            f"cannot measure the roofline: the microbenchmark ran over {TIMEOUT_SECONDS:g} s "
            "(is the machine overloaded?)"
        ) from None
    if done.returncode != 0:
        raise RooflineError(
            f"cannot measure the roofline: the microbenchmark exited with status {done.returncode}: "
            f"{(done.stderr or done.stdout).strip()[-500:]}"
        )
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise RooflineError(f"cannot measure the roofline: unreadable output ({exc}): {done.stdout[:200]!r}") from None


def _one_core_at_least_its_share(peaks: dict[int, dict[str, float]]) -> None:
    """One core alone computes at least as fast as each of all cores together (turbo only adds).

    On a machine shared with other work, the one-thread run may have met a busier moment
    than the all-core run; its figure is raised to the all-core figure's share, so the
    roofline stays an upper bound.
    """
    if 1 not in peaks:
        return
    for t, figures in peaks.items():
        for dtype, value in figures.items():
            peaks[1][dtype] = max(peaks[1].get(dtype, 0.0), value / t)


def measure(folder: Path, key: str, compiler: list[str], flags: list[str], all_threads: int, cpu: str) -> Roofline:
    """Build and run the microbenchmark for 1 thread and ``all_threads``; the :class:`Roofline` it measured."""
    started = time.perf_counter()
    levels = plan_levels(cache_levels(), available_memory())
    threads = sorted({1, max(1, all_threads)})
    raw = run(build(compiler, flags, folder), threads, levels)
    peaks: dict[int, dict[str, float]] = {}
    bandwidth: dict[int, dict[str, float]] = {}
    for t in threads:
        peaks[t] = {d: float(raw["fma"][str(t)][d]) for d in FLOAT_TYPES}
        streams = raw["stream"][str(t)]
        bandwidth[t] = {lv.name: max(float(v) for v in streams[_size(lv)].values()) for lv in levels}
    _one_core_at_least_its_share(peaks)
    return Roofline(
        threads=max(threads),
        peak_gflops=peaks,
        bandwidth_gbs=bandwidth,
        levels=tuple(levels),
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        seconds=round(time.perf_counter() - started, 3),
        compiler=" ".join(compiler),
        flags=tuple(flags),
        cpu=cpu,
        key=key,
        vector_bytes=int(raw.get("vector_bytes", 0)),
        kernels={"fma_chains": raw.get("chains"), "stream": raw["stream"]},
    )
