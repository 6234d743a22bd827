"""Where the roofline is kept: one JSON record per machine, compiler and flags, under the build root.

``<build root>/ai-roofline/<key>.json``. The key covers what changes the peaks: the
CPU (model, ISA flags, caches), the cores this process may use, the compiler's
identity and the build flags, and the record's format. Measuring takes seconds, so
it happens once: two processes that ask at once take a file lock, the second finds
the first one's record. Writes are atomic like every other store.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

from dace_ai.config.settings import resolve_settings
from dace_ai.performance.measure import measure
from dace_ai.performance.roofline import FORMAT, Roofline
from dace_ai.storage.files import ai_folder, atomic_write_json, lock_for
from dace_ai.targets.build_flags import compiler_identity, dace_build_command
from dace_ai.targets.cpu import read_cpu

#: Records read or measured in this process, by key: one machine is measured once per process,
#: whichever build root is current (tests give every test its own).
_memo: dict[str, Roofline] = {}
_memo_lock = threading.Lock()


def microbenchmark_build_command() -> tuple[list[str], list[str]]:
    """(compiler argv, flags) the microbenchmark is compiled with: those of DaCe's host build."""
    return dace_build_command()


def all_threads() -> int:
    """The all-core thread count of the sandboxed runs: setting ``check_threads``, else the cores this process
    may use (as :func:`dace_ai.sandbox.run_plan.all_cores` counts them, so a bench finds its thread count here)."""
    try:
        given = int(resolve_settings().check_threads or 0)
    except Exception:  # noqa: BLE001 - a bad settings file is reported where settings are used
        given = 0
    return given if given > 0 else usable_cores()


def usable_cores() -> int:
    """The cores this process may use (its affinity mask where the system has one)."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def machine_key(compiler: list[str], flags: list[str], threads: int) -> str:
    """What determines the peaks, hashed: CPU, cores, compiler identity, flags, record format."""
    cpu = read_cpu()
    what = {
        "cpu": cpu.model,
        "machine": cpu.machine,
        "flags": sorted(cpu.flags),
        "caches": list(cpu.caches),
        "threads": threads,
        "compiler": compiler_identity(compiler[0]),
        "argv": compiler,
        "build": flags,
        "format": FORMAT,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:20]


def folder() -> Path:
    return ai_folder("ai-roofline")


def _current() -> tuple[list[str], list[str], int, str]:
    compiler, flags = microbenchmark_build_command()
    threads = all_threads()
    return compiler, flags, threads, machine_key(compiler, flags, threads)


def cached_roofline() -> Roofline | None:
    """This machine's stored roofline, or None when it was never measured (never measures: cheap)."""
    _, _, _, key = _current()
    with _memo_lock:
        if key in _memo:
            return _memo[key]
    return _load(folder() / f"{key}.json", key)


def _load(path: Path, key: str) -> Roofline | None:
    try:
        found = Roofline.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None  # missing, or written by another version: measured again
    if found.key != key:
        return None
    with _memo_lock:
        _memo[key] = found
    return found


def machine_roofline(*, remeasure: bool = False) -> Roofline:
    """This machine's roofline: the stored one, else measured now (a few seconds) and stored.

    Raises :class:`~dace_ai.performance.measure.RooflineError` when it cannot be measured.
    """
    from filelock import FileLock

    compiler, flags, threads, key = _current()
    path = folder() / f"{key}.json"
    if not remeasure:
        found = cached_roofline()
        if found is not None:
            return found
    with lock_for(path), FileLock(str(ai_folder("ai-check") / "bench.lock")):  # never beside a timed bench
        if not remeasure:
            found = _load(path, key)
            if found is not None:
                return found
        measured = measure(folder() / f"build-{key}", key, compiler, flags, threads, read_cpu().model)
        atomic_write_json(path, measured.to_json())
    with _memo_lock:
        _memo[key] = measured
    return measured


def clear_memo() -> None:
    """Forget the records read in this process (tests that change the build root)."""
    with _memo_lock:
        _memo.clear()
