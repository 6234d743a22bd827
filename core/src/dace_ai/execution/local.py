"""Built-in executor ``local``: a pool of worker processes on this machine.

The default for ``dace-ai bench`` and usable by any driver through
:func:`run_jobs` (``dace_ai.generate``-style drivers hand it their check jobs). A
worker process that dies (killed, out of memory) breaks the pool: the jobs it had
not finished are started again in a fresh pool and their results say so.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from dace_ai import compat
from dace_ai.execution.jobs import ExecutorOptions, Job, JobResult, run_job
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.plugins.registrations import Executor

#: How often a job is started again after its worker process died, before giving up.
MAX_RETRIES = 3


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


class LocalRunner:
    """Runs jobs in ``workers`` processes (spawned: no state of the caller leaks in)."""

    def __init__(self, options: ExecutorOptions | None = None) -> None:
        options = options or ExecutorOptions()
        self.workers = options.workers or default_workers()
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()  # run() may be called from several threads at once

    def capacity(self) -> int:
        """Jobs that run at once."""
        return self.workers

    def __enter__(self) -> LocalRunner:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _new_pool(self, broken: ProcessPoolExecutor | None = None) -> ProcessPoolExecutor:
        """A fresh pool in place of ``broken`` (the current one, unless another thread replaced it already)."""
        with self._lock:
            if self._pool is not None and (broken is None or self._pool is broken):
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=self.workers, mp_context=multiprocessing.get_context("spawn")
                )
            return self._pool

    def _current(self) -> ProcessPoolExecutor:
        with self._lock:
            pool = self._pool
        return pool or self._new_pool()

    def run(self, jobs: Iterable[Job]) -> Iterator[JobResult]:
        pending = {job.id: job for job in jobs}
        retries: dict[str, int] = dict.fromkeys(pending, 0)
        lost: dict[str, list[str]] = {job_id: [] for job_id in pending}
        while pending:
            pool = self._current()
            try:
                futures: dict[Future, Job] = {pool.submit(run_job, job): job for job in pending.values()}
            except BrokenProcessPool:
                self._new_pool(pool)
                continue
            broken = False
            while futures:
                done, _ = wait(futures, return_when=FIRST_COMPLETED)
                for future in done:
                    job = futures.pop(future)
                    try:
                        out = future.result()
                    except BrokenProcessPool:
                        broken = True
                        continue
                    del pending[job.id]
                    yield JobResult(job.id, out["value"], out["error"], out["worker"], retries[job.id], lost[job.id])
                if broken:
                    break
            if broken:
                for job_id in pending:
                    retries[job_id] += 1
                    lost[job_id].append("local worker process (pool broken)")
                    if retries[job_id] > MAX_RETRIES:
                        raise RuntimeError(f"job {job_id!r} lost its worker {retries[job_id]} times; giving up")
                self._new_pool(pool)


class ThreadRunner:
    """Runs jobs in threads of this process: the default of ``generate`` and ``optimize``.

    Each candidate's checks already run the generated code in sandboxed child
    processes, so threads here only wait on compilers and children, as before
    executors existed. ``in_process`` lets drivers hand over the node they hold
    instead of a rebuilt copy (see :mod:`dace_ai.dispatch.check_jobs`).
    """

    in_process = True

    def __init__(self, options: ExecutorOptions | None = None) -> None:
        self.workers = (options or ExecutorOptions()).workers or default_workers()

    def __enter__(self) -> ThreadRunner:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def capacity(self) -> int:
        return self.workers

    def run(self, jobs: Iterable[Job]) -> Iterator[JobResult]:
        from concurrent.futures import ThreadPoolExecutor, as_completed

        jobs = list(jobs)
        if len(jobs) == 1:  # the drivers' case: they bring their own threads
            out = run_job(jobs[0])
            yield JobResult(jobs[0].id, out["value"], out["error"], out["worker"])
            return

        workers = max(1, min(self.workers, len(jobs)))
        # Workers adopt this thread's DaCe configuration (DaCe 2 keeps it per thread).
        with ThreadPoolExecutor(workers, "dace-ai-job", compat.use_config, (compat.config_snapshot(),)) as pool:
            futures = {pool.submit(run_job, job): job for job in jobs}
            for future in as_completed(futures):
                out = future.result()
                yield JobResult(futures[future].id, out["value"], out["error"], out["worker"])


def run_jobs(jobs: Iterable[Job], executor: str = "local", options: ExecutorOptions | None = None) -> list[JobResult]:
    """Run ``jobs`` on the named executor and return their results in the jobs' order.

    The small API drivers use (``bench``; ``generate``/``optimize`` may hand their checks
    to it): any registered executor, the local pool by default.
    """
    jobs = list(jobs)
    registration = get_plugin_manager().get_as("executors", executor, Executor)
    with registration.factory(options or ExecutorOptions()) as runner:
        results = {r.id: r for r in runner.run(jobs)}
    return [results[job.id] for job in jobs]


@hookimpl
def dace_ai_executors():
    yield Executor(
        name="local",
        factory=LocalRunner,
        description="a pool of worker processes on this machine (one per core by default)",
    )
    yield Executor(
        name="threads",
        factory=ThreadRunner,
        description="threads of this process (the checks' own sandboxed children run the code); "
        "the default of generate and optimize",
    )
