"""The child process itself: the limits it sets first, the phase file it reports each step in, OpenMP's threads.

Before each call the child appends a line to the *phase file* saying who runs and
where the buffers are; if the process dies, the parent reads the last line to say
what crashed.
"""

from __future__ import annotations

import ctypes
import json
import os
from typing import Any

from .records import Limits


class Phase:
    """Appends one JSON line per step to the phase file (read by the parent if the child dies)."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def __call__(self, **record: Any) -> None:
        os.write(self.fd, (json.dumps(record) + "\n").encode())


def apply_limits(limits: Limits) -> None:
    """No core files; the CPU seconds and address space of the job's limits."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.get("cpu_seconds"):
        cpu = int(limits["cpu_seconds"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    if limits.get("memory_bytes"):
        memory = int(limits["memory_bytes"])
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


class Threads:
    """The OpenMP thread count of the calls that follow.

    The parent starts the child with ``OMP_NUM_THREADS`` set to the all-core count,
    so the OpenMP runtime reads it when a library first loads it. Other counts are
    set through that runtime's ``omp_set_num_threads`` (found among the loaded
    libraries after loading), which governs the parallel regions the calling thread
    starts next. Code without OpenMP has no runtime loaded and nothing to set. ``parallel``: that
    runtime's ``GOMP_parallel(fn, data, threads, flags)`` (libgomp's, and LLVM's libomp's for GCC's code),
    which runs ``fn(data)`` on a team of ``threads`` (the calling thread is one of them), or None.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.runtime: str | None = None
        self._set: Any = None
        self.parallel: Any = None

    def attach(self) -> None:
        if self._set is not None:
            return
        try:
            with open("/proc/self/maps", encoding="utf-8") as maps:
                paths = {line.split()[-1] for line in maps if "/" in line}
        except OSError:
            return
        for path in sorted(paths):
            name = os.path.basename(path)
            if name.startswith(("libgomp", "libomp", "libiomp")):
                try:
                    lib = ctypes.CDLL(path)
                    self._set = lib.omp_set_num_threads
                    self._set.argtypes = [ctypes.c_int]
                    parallel = getattr(lib, "GOMP_parallel", None)
                    if parallel is not None:
                        parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
                        parallel.restype = None
                    self.parallel = parallel
                    self.runtime = name
                    return
                except (OSError, AttributeError):
                    continue

    def use(self, count: int | None) -> None:
        if self._set is not None:
            self._set(int(count or self.count))
