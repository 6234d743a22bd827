"""Self-contained job descriptions and their results.

A :class:`Job` is what an executor ships to a worker: a module-level function (pickled
by reference, so every worker with the same installation can run it) and plain data.
It never holds live DaCe objects: a job about a node carries what a worker needs to
rebuild it (a suite and task id plus the answer, or an SDFG as JSON).

Resource tags say where a job may run (executors that place jobs, like dask, use them):

* a job for target ``T`` (``x86-avx512``, ``sve``, ``cuda``, ...) needs a worker that
  declares the resource ``T``;
* a ``bench`` job (it takes timings) needs the worker's ``bench`` slot and all of its
  ``cores``, so no two timed runs share cores, while other jobs take one core each and pack.

A runner that can tell which resources no worker offers has ``missing(job)``; the
drivers then send a job whose target nobody offers without its target and say what
could not be checked (see :mod:`dace_ai.dispatch.dispatcher`).
"""

from __future__ import annotations

import os
import socket
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from dace_ai.errors import DaceAIError, is_secret_variable
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.plugins.types import SettingsView
from dace_ai.targets.select import detect

JobStage = Literal["check", "verify", "bench"]
#: Resource name a worker advertises to accept timing jobs (one slot per set of dedicated cores).
BENCH_RESOURCE = "bench"
#: Resource name of a worker's cores: a timing job takes all of them, any other job one.
CORES_RESOURCE = "cores"


class ExecutorUnavailable(DaceAIError):
    """The executor cannot run jobs any more (its scheduler went away); the run ends."""


def target_resource(target: str) -> str:
    """Resource name of workers that can run jobs for ``target``: the target's own name (``sve``, ``cuda``)."""
    return target


def machine_resources(threads: int) -> dict[str, float]:
    """Resources of a worker on this machine running ``threads`` jobs at once: one bench slot,
    its cores, and every installed target this machine matches (as many slots as threads)."""
    resources: dict[str, float] = {BENCH_RESOURCE: 1, CORES_RESOURCE: threads}
    for name, target in get_plugin_manager().targets().items():
        if detect(target).matched:
            resources[target_resource(name)] = threads
    return resources


@dataclass(frozen=True)
class Job:
    id: str
    function: Callable[[dict[str, Any]], dict[str, Any]]
    payload: dict[str, Any]
    stage: JobStage = "check"
    #: A target the job needs a worker for (``None``: any worker, e.g. host code).
    target: str | None = None

    def resources(self) -> dict[str, int]:
        needed = {BENCH_RESOURCE: 1} if self.stage == "bench" else {}
        if self.target:
            needed[target_resource(self.target)] = 1
        return needed


@dataclass
class JobResult:
    id: str
    value: dict[str, Any] | None = None
    error: str | None = None
    worker: str = ""
    #: How many times the job was started again after its worker was lost.
    retries: int = 0
    lost_workers: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class ExecutorOptions:
    """What a user may say about where jobs run (``--workers``, ``--scheduler``).

    ``settings``: the run's resolved :class:`~dace_ai.config.settings.AISettings`, so an
    executor reads its own plugin-owned settings (a batch queue, a walltime) from the
    same sources as every other setting; None where a caller has none (the executor
    then resolves them itself).
    """

    workers: int | None = None
    scheduler: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    settings: SettingsView | None = None


class Runner(Protocol):
    """What an executor's factory returns: a context manager that runs jobs."""

    def __enter__(self) -> Runner: ...  # noqa: PYI034

    def __exit__(self, *exc: object) -> None: ...

    def run(self, jobs: Iterable[Job]) -> Iterator[JobResult]: ...


def environment_without_secrets(environ: dict[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) without API keys, tokens or URLs with credentials.

    What an executor hands a command that submits batch jobs: SLURM and PBS copy the
    submitting environment into the job and keep it in their state files, so a key
    there would be written to disk on the controller.
    """
    source = dict(os.environ if environ is None else environ)
    return {name: value for name, value in source.items() if not is_secret_variable(name, value)}


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def run_job(job: Job) -> dict[str, Any]:
    """Run ``job`` here; never raises for the job's own failure (it comes back as ``error``)."""
    try:
        return {"value": job.function(job.payload), "error": None, "worker": worker_name()}
    except Exception as exc:  # noqa: BLE001 - a failed job is data, the run goes on
        return {
            "value": None,
            "error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}",
            "worker": worker_name(),
        }
