"""Executors ``dask``, ``slurm``, ``pbs`` and ``lsf``: run dace-ai jobs on a dask.distributed cluster.

``--scheduler tcp://host:8786`` uses a running cluster. Without it the run starts its
own (:mod:`dace_ai_dask.clusters`): worker processes on this machine (``--workers``,
default 2) that never re-import the caller's script, or, for ``slurm``/``pbs``/``lsf``
(or ``dask`` with the ``cluster`` setting), workers submitted as batch jobs through
dask-jobqueue. Either declares what its machine offers
(:func:`dace_ai.plugin.machine_resources`). Placement uses dask's worker resources:

* a job for target ``T`` asks for resource ``T`` (``x86-avx512``, ``sve``, ``cuda``):
  workers that can run such code declare it with as many slots as they run jobs
  (``--nthreads 4 --resources "sve=4 bench=1 cores=4"``);
* a job that takes timings asks for the worker's ``bench`` slot and all of its ``cores``,
  so no two timed runs share cores; other jobs take one core each and pack. Resources no
  worker declares are not asked for (a plain ``dask worker`` runs one job per thread);
* :meth:`DaskRunner.missing` names the resources of a job no worker offers: drivers then
  send the job without its target (compile stage only, and say so); :meth:`DaskRunner.run`
  fails such a job at once with that reason instead of waiting forever.

When a worker dies, the scheduler runs its jobs again on another worker; the result
says how many times a job was started again and which workers were lost. A job that
keeps killing workers (dask's ``KilledWorker``) is resubmitted up to ``MAX_RETRIES``.
A scheduler that goes away raises :class:`~dace_ai.plugin.ExecutorUnavailable`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator
from typing import Any

from dace_ai.plugin import (
    BENCH_RESOURCE,
    CORES_RESOURCE,
    Executor,
    ExecutorOptions,
    ExecutorUnavailable,
    Job,
    JobResult,
    hookimpl,
    run_job,
)

from dace_ai_dask import clusters

MAX_RETRIES = 3
DEFAULT_WORKERS = 2
#: Seconds to reach a scheduler given by address before giving up with a short error.
CONNECT_TIMEOUT = 10
_serial = itertools.count()
_KEY_PREFIX = "dace-ai-"


def _job_id(key: str) -> str:
    """The job id in a task key ``dace-ai-<job id>-<serial>``."""
    return key[len(_KEY_PREFIX) :].rpartition("-")[0]


def _starts(story: list[Any]) -> int:
    """How many times the scheduler sent a task to a worker, from its transition story."""
    return sum(1 for entry in story if len(entry) > 2 and entry[2] == "processing")


class DaskRunner:
    def __init__(self, options: ExecutorOptions | None = None, batch: str | None = None) -> None:
        self.options = options or ExecutorOptions()
        self.cluster: Any = None
        self.client: Any = None
        self.address = self.options.scheduler or ""
        self._batch = batch
        #: What the workers of a batch cluster started here will declare, before any job has started.
        self._promised: dict[str, Any] | None = None

    def _settings(self) -> Any:
        if self.options.settings is not None:
            return self.options.settings
        from dace_ai.plugin import resolve_settings

        return resolve_settings()

    def batch_system(self) -> str | None:
        """The batch system workers are submitted to (``slurm``, ...), or None for a scheduler or local workers."""
        if self.options.scheduler:
            return None
        return self._batch or self._settings().cluster

    def dry_run(self) -> str:
        """What this executor would start, without starting it: a batch job script, or a sentence."""
        system = self.batch_system()
        if system:
            return clusters.job_script(clusters.batch_spec(system, self._settings()))
        if self.options.scheduler:
            return f"# no job script: the checks go to the running scheduler at {self.options.scheduler}\n"
        return (
            f"# no job script: {self.options.workers or DEFAULT_WORKERS} worker processes start on this "
            "machine (python -m dask spec ...)\n"
        )

    def __enter__(self) -> DaskRunner:  # noqa: PYI034
        from distributed import Client

        if self.options.scheduler:
            try:
                self.client = Client(
                    self.options.scheduler, timeout=self.options.extra.get("connect_timeout", CONNECT_TIMEOUT)
                )
            except (OSError, TimeoutError) as exc:
                raise ExecutorUnavailable(
                    f"no dask scheduler answers at {self.options.scheduler}: {type(exc).__name__}: {exc}"
                ) from None
            return self
        workers = self.options.workers or DEFAULT_WORKERS
        system = self.batch_system()
        if system:
            spec = clusters.batch_spec(system, self._settings())
            self.cluster = clusters.start_batch(spec, workers)
            self._promised = {"resources": dict(spec.resources), "nthreads": spec.cores}
            scale = f"adaptive, {spec.adapt[0]} to {spec.adapt[1]} jobs" if spec.adapt else f"{workers} job(s)"
            what = f"a {system.upper()} cluster ({scale} of {spec.cores} core(s), queue {spec.queue or 'default'})"
        else:
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
            threads = int(self.options.extra.get("threads") or max(1, cores // workers))
            self.cluster = clusters.start_local(workers, threads)
            what = f"{workers} local dask worker process(es) of {threads} thread(s)"
        try:
            self.client = Client(self.cluster)
            if not system:  # seconds here; batch jobs may wait in their queue, the jobs wait for them
                self.client.wait_for_workers(workers, timeout=CONNECT_TIMEOUT * 6)
        except BaseException:
            self.cluster.close()
            raise
        self.address = self.cluster.scheduler_address
        clusters.announce(self.cluster, what)
        return self

    def __exit__(self, *exc: object) -> None:
        lost = self.client is not None and self.client.status not in ("running", "newly-created")
        if self.client is not None:
            self.client.close(timeout=CONNECT_TIMEOUT) if lost else self.client.close()
        if self.cluster is not None:
            self.cluster.close(timeout=CONNECT_TIMEOUT) if lost else self.cluster.close()

    def running(self) -> set[str]:
        """Ids of this runner's jobs a worker is running now (the others submitted are queued)."""
        try:
            processing = self.client.processing()
        except Exception:  # noqa: BLE001 - a display must not end the run
            return set()
        return {_job_id(str(key)) for keys in processing.values() for key in keys if str(key).startswith(_KEY_PREFIX)}

    def _workers(self) -> dict[str, dict[str, Any]]:
        try:
            info = self.client.scheduler_info(n_workers=-1)
        except TypeError:  # older distributed: no n_workers argument
            info = self.client.scheduler_info()
        return info.get("workers", {})  # nothing while the client has lost its scheduler

    def _placing(self) -> dict[str, dict[str, Any]]:
        """The workers jobs are placed by: those connected, or a batch job's promised worker while none is."""
        workers = self._workers()
        if not workers and self._promised is not None:
            return {"(batch job not started yet)": self._promised}
        return workers

    def capacity(self) -> int:
        """Jobs the cluster runs at once (its workers' threads)."""
        return max(1, sum(int(info.get("nthreads", 1)) for info in self._placing().values()))

    def _resources(self, job: Job, workers: dict[str, dict[str, Any]]) -> dict[str, float]:
        """What ``job`` asks the scheduler for, given what the workers declare."""
        declared = {name for info in workers.values() for name in (info.get("resources") or {})}
        needed: dict[str, float] = {k: v for k, v in job.resources().items() if k != BENCH_RESOURCE or k in declared}
        if CORES_RESOURCE in declared:
            if job.stage == "bench":  # a timing job takes every core of its worker
                fits = [(info.get("resources") or {}) for info in workers.values()]
                fits = [have for have in fits if all(have.get(k, 0) >= v for k, v in needed.items())]
                needed[CORES_RESOURCE] = min((have.get(CORES_RESOURCE, 1) for have in fits), default=1) or 1
            else:
                needed[CORES_RESOURCE] = 1
        return needed

    def missing(self, job: Job) -> list[str]:
        """Resources ``job`` needs that no worker of the cluster offers (at their amounts)."""
        workers = self._placing()
        needed = self._resources(job, workers)
        offered: dict[str, float] = {}
        for info in workers.values():
            for name, amount in (info.get("resources") or {}).items():
                offered[name] = max(offered.get(name, 0), amount)
        return sorted(name for name, amount in needed.items() if offered.get(name, 0) < amount)

    def _unplaceable(self, job: Job, workers: dict[str, dict[str, Any]]) -> str | None:
        needed = self._resources(job, workers)
        for info in workers.values():
            have = info.get("resources") or {}
            if all(have.get(name, 0) >= amount for name, amount in needed.items()):
                return None
        return (
            f"no worker of the dask cluster offers the resources {needed} this job needs; start workers with "
            f'--resources "{" ".join(f"{k}={v:g}" for k, v in needed.items())}"'
        )

    def _refreshed(self, workers: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The workers read again after waiting a little for the cluster's full count.

        A loaded machine can answer the first read before every local worker has
        registered its resources; a job is refused as unplaceable only on a second read.
        """
        expected = self.options.workers or DEFAULT_WORKERS
        try:
            self.client.wait_for_workers(expected, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError):
            pass  # fewer workers than started: judge by those there are
        return self._placing() or workers

    def _submit(self, job: Job, resources: dict[str, float]) -> Any:
        return self.client.submit(
            run_job, job, key=f"{_KEY_PREFIX}{job.id}-{next(_serial)}", pure=False, resources=resources or None
        )

    def _gone(self, exc: BaseException) -> ExecutorUnavailable | None:
        """An ExecutorUnavailable when the client lost its scheduler (not just a worker)."""
        if self.client.status in ("running", "newly-created"):
            return None
        return ExecutorUnavailable(
            f"the dask scheduler at {self.address or 'its address'} went away "
            f"({type(exc).__name__}); the run stops here"
        )

    def run(self, jobs: Iterable[Job]) -> Iterator[JobResult]:
        from distributed import as_completed
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        try:
            if self._promised is None:
                self.client.wait_for_workers(1, timeout=self.options.extra.get("connect_timeout", CONNECT_TIMEOUT) * 6)
            workers = self._placing()
        except (OSError, TimeoutError) as exc:
            raise ExecutorUnavailable(
                f"the dask cluster at {self.address} has no worker or does not answer: {type(exc).__name__}: {exc}"
            ) from None
        known = {name for name in workers if not name.startswith("(")}
        departed: set[str] = set()
        by_key: dict[str, tuple[Job, dict[str, float]]] = {}
        retries: dict[str, int] = {}
        lost: dict[str, list[str]] = {}
        futures = []
        refreshed = False
        for job in jobs:
            reason = self._unplaceable(job, workers)
            if reason and not refreshed and self.cluster is not None and self._promised is None:
                workers, refreshed = self._refreshed(workers), True  # workers this run started may lag
                reason = self._unplaceable(job, workers)
            if reason:
                yield JobResult(job.id, error=reason)
                continue
            resources = self._resources(job, workers)
            future = self._submit(job, resources)
            by_key[future.key] = (job, resources)
            retries[job.id], lost[job.id] = 0, []
            futures.append(future)
        pending = as_completed(futures)
        for future in pending:
            job, resources = by_key[future.key]
            try:
                now = set(self._workers())
            except (OSError, TimeoutError) as exc:
                raise self._gone(exc) or ExecutorUnavailable(
                    f"the dask scheduler at {self.address} does not answer"
                ) from exc
            departed |= known - now
            known = now
            gone = sorted(departed)
            try:
                out = future.result()
            except (KilledWorker, FutureCancelledError, OSError) as exc:
                unavailable = self._gone(exc)
                if unavailable is not None:
                    raise unavailable from None
                retries[job.id] += 1
                lost[job.id] += gone or [f"a worker ({type(exc).__name__})"]
                if retries[job.id] > MAX_RETRIES:
                    yield JobResult(
                        job.id,
                        error=f"lost its worker {retries[job.id]} times: {exc}",
                        retries=retries[job.id],
                        lost_workers=lost[job.id],
                    )
                    continue
                again = self._submit(job, resources)
                by_key[again.key] = (job, resources)
                pending.add(again)
                continue
            starts = _starts(self.client.story(future.key, on_error="ignore") or [])
            if starts > 1:
                retries[job.id] += starts - 1
                lost[job.id] += gone or ["a worker that left the cluster"]
            yield JobResult(job.id, out["value"], out["error"], out["worker"], retries[job.id], lost[job.id])
            future.release()


def _batch_factory(system: str) -> Any:
    return lambda options: DaskRunner(options, batch=system)


@hookimpl
def dace_ai_executors():
    yield Executor(
        name="dask",
        factory=DaskRunner,
        settings=clusters.SETTINGS,
        description="dask.distributed: a running scheduler (--scheduler), worker processes started "
        "here, or batch jobs (setting cluster)",
    )
    for system in clusters.BATCH_SYSTEMS:
        yield Executor(
            name=system,
            factory=_batch_factory(system),
            settings=clusters.SETTINGS,
            description=f"dask workers as {system.upper()} batch jobs (dask-jobqueue; settings "
            "cluster_queue, cluster_walltime, ...)",
        )
