"""Executor ``dask``: run dace-ai jobs on a dask.distributed cluster.

``--scheduler tcp://host:8786`` uses a running cluster; without it a
:class:`~distributed.LocalCluster` of worker processes (``--workers``, default 2,
one thread each) is started for the run. Placement uses dask's worker resources:

* a job that takes timings asks for one ``bench`` slot; start workers that may time
  with ``--resources bench=1`` (one per set of dedicated cores), so no two timings
  share cores and checks-only workers never time;
* a job for a target other than the host asks for ``target-<name>`` (``target-sve``,
  ``target-cuda``); workers that can run such code advertise it
  (``--resources "bench=1 target-sve=1"``). A job nobody can take fails at once with
  that reason instead of waiting forever.

When a worker dies, the scheduler runs its jobs again on another worker; the result
says how many times a job was started again and which workers were lost. A job that
keeps killing workers (dask's ``KilledWorker``) is resubmitted up to ``MAX_RETRIES``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from dace_ai.plugin import Executor, ExecutorOptions, Job, JobResult, hookimpl, run_job

MAX_RETRIES = 3
DEFAULT_WORKERS = 2
_serial = itertools.count()


def _starts(story: list[Any]) -> int:
    """How many times the scheduler sent a task to a worker, from its transition story."""
    return sum(1 for entry in story if len(entry) > 2 and entry[2] == "processing")


class DaskRunner:
    def __init__(self, options: ExecutorOptions | None = None) -> None:
        self.options = options or ExecutorOptions()
        self.cluster: Any = None
        self.client: Any = None

    def __enter__(self) -> DaskRunner:  # noqa: PYI034
        from distributed import Client, LocalCluster

        if self.options.scheduler:
            self.client = Client(self.options.scheduler)
        else:
            workers = self.options.workers or DEFAULT_WORKERS
            self.cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                        resources={"bench": 1}, dashboard_address=None)
            self.client = Client(self.cluster)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def _workers(self) -> dict[str, dict[str, Any]]:
        return self.client.scheduler_info(n_workers=-1)["workers"]

    def _unplaceable(self, job: Job, workers: dict[str, dict[str, Any]]) -> str | None:
        needed = job.resources()
        for info in workers.values():
            have = info.get("resources") or {}
            if all(have.get(name, 0) >= amount for name, amount in needed.items()):
                return None
        return (f"no worker of the dask cluster offers the resources {needed} this job needs; start workers with "
                f"--resources \"{' '.join(f'{k}={v}' for k, v in needed.items())}\"")

    def _submit(self, job: Job) -> Any:
        return self.client.submit(run_job, job, key=f"dace-ai-{job.id}-{next(_serial)}", pure=False,
                                  resources=job.resources() or None)

    def run(self, jobs: Iterable[Job]) -> Iterator[JobResult]:
        from distributed import as_completed
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        self.client.wait_for_workers(1)
        known = set(self._workers())
        departed: set[str] = set()
        by_key: dict[str, Job] = {}
        retries: dict[str, int] = {}
        lost: dict[str, list[str]] = {}
        futures = []
        for job in jobs:
            reason = self._unplaceable(job, self._workers())
            if reason:
                yield JobResult(job.id, error=reason)
                continue
            future = self._submit(job)
            by_key[future.key] = job
            retries[job.id], lost[job.id] = 0, []
            futures.append(future)
        pending = as_completed(futures)
        for future in pending:
            job = by_key[future.key]
            now = set(self._workers())
            departed |= known - now
            known = now
            gone = sorted(departed)
            try:
                out = future.result()
            except (KilledWorker, FutureCancelledError, OSError) as exc:
                retries[job.id] += 1
                lost[job.id] += gone or [f"a worker ({type(exc).__name__})"]
                if retries[job.id] > MAX_RETRIES:
                    yield JobResult(job.id, error=f"lost its worker {retries[job.id]} times: {exc}",
                                    retries=retries[job.id], lost_workers=lost[job.id])
                    continue
                again = self._submit(job)
                by_key[again.key] = job
                pending.add(again)
                continue
            starts = _starts(self.client.story(future.key, on_error="ignore") or [])
            if starts > 1:
                retries[job.id] += starts - 1
                lost[job.id] += gone or ["a worker that left the cluster"]
            yield JobResult(job.id, out["value"], out["error"], out["worker"], retries[job.id], lost[job.id])
            future.release()


@hookimpl
def dace_ai_executors():
    yield Executor(name="dask", factory=DaskRunner,
                   description="dask.distributed: a running scheduler (--scheduler) or a LocalCluster")
