"""Start the cluster a run's check jobs go to when no scheduler address is given.

Two kinds, each a dask cluster object with a ``scheduler_address``:

* **Local workers** (``executor="dask"``): worker processes on this machine, started
  as fresh interpreters (``python -m dask spec``, distributed's ``SubprocessCluster``)
  that never import the caller's ``__main__``. A ``LocalCluster`` spawns its workers
  with multiprocessing, which re-runs a script's top-level code in every worker
  (``__mp_main__``): a script without an ``if __name__ == "__main__":`` guard would
  start its run again in each of them. With subprocesses a plain script works.
* **Batch jobs** (``executor="slurm"``, ``"pbs"``, ``"lsf"``, or ``"dask"`` with the
  ``cluster`` setting): dask-jobqueue submits one worker per job, with the queue,
  account, walltime, cores, memory, prologue and directives of the settings. Each
  worker declares what it offers (``--resources``) like a local one. The submit
  command runs without the API keys of this environment (SLURM and PBS copy the
  submitting environment into the job and keep it on disk), and a job script that
  would carry a credential is refused before anything is submitted.

:func:`job_script` writes the script a batch cluster would submit, without
starting anything (``dace-ai generate --executor slurm --dry-run``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Any

from dace_ai.plugin import (
    BENCH_RESOURCE,
    CORES_RESOURCE,
    ExecutorUnavailable,
    KeyInPayload,
    Setting,
    assert_key_free,
    environment_without_secrets,
    machine_resources,
    target_resource,
)

#: Batch systems reached through dask-jobqueue: setting value -> (module attribute of the cluster class).
BATCH_SYSTEMS = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "lsf": "LSFCluster"}

#: The settings of batch clusters (owned by this plugin; ``.dace.conf``, ``DACE_ai_*``, pyproject, CLI).
SETTINGS = (
    Setting(
        "cluster",
        str,
        None,
        "Batch system the dask executor submits its workers to when no scheduler is "
        "given; empty: worker processes on this machine",
        choices=tuple(BATCH_SYSTEMS),
    ),
    Setting("cluster_queue", str, None, "Queue (SLURM partition) of the workers' batch jobs"),
    Setting("cluster_account", str, None, "Account (project) the workers' batch jobs are charged to"),
    Setting("cluster_walltime", str, "01:00:00", "Wall-clock limit of each worker's batch job, HH:MM:SS"),
    Setting(
        "cluster_cores",
        int,
        4,
        "Cores of each worker's batch job: the worker runs that many check jobs at "
        "once and a timed job takes all of them",
    ),
    Setting("cluster_memory", str, "8GB", "Memory of each worker's batch job, e.g. 16GB"),
    Setting(
        "cluster_prologue",
        str,
        "",
        "Shell lines run before the worker starts in each batch job (one per "
        "line), e.g. 'module load gcc/12; source ~/venv/bin/activate'",
    ),
    Setting(
        "cluster_directives",
        str,
        "",
        "Extra job directives, separated by ';' or new lines, e.g. "
        "'--exclusive;--constraint=a64fx' (SLURM) or '-l select=1:ncpus=48' (PBS)",
    ),
    Setting(
        "cluster_targets",
        str,
        "",
        "Targets the batch workers can run (comma separated, e.g. 'sve'), "
        "declared as their resources; empty: the targets this machine matches",
    ),
    Setting(
        "cluster_interface",
        str,
        None,
        "Network interface the scheduler and the batch workers talk over, "
        "e.g. ib0, when the default one does not reach the compute nodes",
    ),
    Setting(
        "cluster_adapt",
        str,
        "",
        "Scale the batch workers with the queue of jobs, 'MIN:MAX' jobs; empty: a "
        "fixed number (executor_workers, default 2)",
    ),
)


@dataclass(frozen=True)
class BatchSpec:
    """One batch cluster's shape, read from the settings (see :data:`SETTINGS`)."""

    system: str
    queue: str | None
    account: str | None
    walltime: str
    cores: int
    memory: str
    prologue: list[str]
    directives: list[str]
    resources: dict[str, float]
    adapt: tuple[int, int] | None
    interface: str | None = None

    def cluster_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the dask-jobqueue cluster class: one worker per job, its resources declared."""
        # Commas, not spaces: dask-jobqueue writes the arguments into the script unquoted.
        declared = ",".join(f"{name}={amount:g}" for name, amount in sorted(self.resources.items()))
        kwargs: dict[str, Any] = {
            "cores": self.cores,
            "processes": 1,
            "memory": self.memory,
            "walltime": self.walltime,
            "job_name": "dace-ai-worker",
            "python": sys.executable,
            "worker_extra_args": ["--resources", declared],
            "job_script_prologue": list(self.prologue),
            "job_extra_directives": list(self.directives),
        }
        if self.queue:
            kwargs["queue"] = self.queue
        if self.interface:
            kwargs["interface"] = self.interface
        if self.account:
            kwargs["account" if self.system != "lsf" else "project"] = self.account
        return kwargs


def _lines(text: str | None, separators: str) -> list[str]:
    out = [text or ""]
    for sep in separators:
        out = [part for chunk in out for part in chunk.split(sep)]
    return [line.strip() for line in out if line.strip()]


def _adapt(text: str | None) -> tuple[int, int] | None:
    if not text or not text.strip():
        return None
    low, sep, high = text.strip().partition(":")
    try:
        bounds = (int(low), int(high)) if sep else None
    except ValueError:
        bounds = None
    if bounds is None or bounds[0] < 0 or bounds[1] < max(1, bounds[0]):
        raise ExecutorUnavailable(
            f"setting cluster_adapt = {text!r}: expected MIN:MAX jobs with 0 <= MIN <= MAX and MAX >= 1, e.g. '0:8'"
        )
    return bounds


def batch_spec(system: str, settings: Any) -> BatchSpec:
    """The batch cluster the settings describe; a bad value is one short error naming the setting."""
    if system not in BATCH_SYSTEMS:
        raise ExecutorUnavailable(f"no batch system {system!r}: use one of {', '.join(BATCH_SYSTEMS)}")
    cores = int(settings.cluster_cores)
    if cores < 1:
        raise ExecutorUnavailable(f"setting cluster_cores = {cores}: a batch job needs at least 1 core")
    targets = [t.strip() for t in (settings.cluster_targets or "").split(",") if t.strip()]
    if targets:
        resources: dict[str, float] = {BENCH_RESOURCE: 1, CORES_RESOURCE: cores}
        resources.update({target_resource(t): cores for t in targets})
    else:
        resources = machine_resources(cores)
    return BatchSpec(
        system=system,
        queue=settings.cluster_queue,
        account=settings.cluster_account,
        walltime=settings.cluster_walltime or "01:00:00",
        cores=cores,
        memory=settings.cluster_memory or "8GB",
        prologue=_lines(settings.cluster_prologue, "\n"),
        directives=_lines(settings.cluster_directives, ";\n"),
        resources=resources,
        adapt=_adapt(settings.cluster_adapt),
        interface=settings.cluster_interface,
    )


def _jobqueue() -> Any:
    try:
        import dask_jobqueue
    except ImportError:
        raise ExecutorUnavailable("batch clusters need dask-jobqueue: pip install dask-jobqueue") from None
    return dask_jobqueue


def _scrubbed(job_class: type) -> type:
    """``job_class`` whose submit and cancel commands run without this environment's credentials."""
    base_call = job_class._call

    async def _call(cmd: list[str], *, shell: bool = False, **kwargs: Any) -> str:
        kwargs.setdefault("env", environment_without_secrets())
        return await base_call(cmd, shell=shell, **kwargs)

    return type(f"KeyFree{job_class.__name__}", (job_class,), {"_call": staticmethod(_call)})


def refuse_credentials(script: str) -> None:
    """Raise when ``script`` holds a credential of this process (nothing is submitted then)."""
    try:
        assert_key_free(script)
    except KeyInPayload:
        raise ExecutorUnavailable(
            "the batch job script would carry a credential (an API key, or a URL with a "
            "password) from settings cluster_prologue or cluster_directives; nothing was "
            "submitted. Workers need no key: remove it from the prologue"
        ) from None


def job_script(spec: BatchSpec, scheduler: str = "tcp://SCHEDULER:8786") -> str:
    """The job script a worker of ``spec`` is submitted with (nothing is started or submitted)."""
    cluster_class = getattr(_jobqueue(), BATCH_SYSTEMS[spec.system])
    script = cluster_class.job_cls(scheduler=scheduler, name="dace-ai-worker", **spec.cluster_kwargs()).job_script()
    refuse_credentials(script)
    return script


def start_batch(spec: BatchSpec, jobs: int) -> Any:
    """A dask-jobqueue cluster of ``spec``, scaled to ``jobs`` jobs or adaptive; its job script checked first."""
    cluster_class = getattr(_jobqueue(), BATCH_SYSTEMS[spec.system])
    job_class = _scrubbed(cluster_class.job_cls)
    dashboard = dashboard_address()
    cluster = cluster_class(
        job_cls=job_class,
        **spec.cluster_kwargs(),
        **({"scheduler_options": {"dashboard_address": dashboard}} if dashboard else {}),
    )
    try:
        refuse_credentials(cluster.job_script())
        if spec.adapt:
            cluster.adapt(minimum_jobs=spec.adapt[0], maximum_jobs=spec.adapt[1])
        else:
            cluster.scale(jobs=jobs)
    except BaseException:
        cluster.close()
        raise
    return cluster


def start_local(workers: int, threads: int) -> Any:
    """``workers`` worker processes on this machine that never import the caller's ``__main__``."""
    if os.name == "nt":
        raise ExecutorUnavailable(
            "executor 'dask' cannot start worker processes on Windows without re-running "
            "your script: start a scheduler and workers ('dask scheduler', 'dask worker') "
            "and pass scheduler='tcp://...'"
        )
    from distributed.deploy.subprocess import SubprocessCluster

    return SubprocessCluster(
        n_workers=workers,
        threads_per_worker=threads,
        dashboard_address=dashboard_address(),
        worker_kwargs={"resources": machine_resources(threads)},
    )


def dashboard_address() -> str | None:
    """``:0`` (any free port) when the dashboard can run (bokeh installed), else None (no dashboard)."""
    return ":0" if importlib.util.find_spec("bokeh") is not None else None


def announce(cluster: Any, what: str) -> None:
    """Say on stderr what was started and where its dashboard is."""
    link = getattr(cluster, "dashboard_link", "") if dashboard_address() else ""
    where = f"dashboard {link}" if link else "no dashboard (pip install 'dace-ai-dask[dashboard]' for it)"
    print(f"dace-ai: started {what} at {cluster.scheduler_address}; {where}", file=sys.stderr, flush=True)
