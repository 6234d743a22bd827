"""Send each candidate's checks to an executor plugin, route them by target, and check what comes back.

:class:`CheckDispatcher` is what ``generate(..., executor=)`` and ``optimize(..., executor=)``
open for a run. Its :meth:`~CheckDispatcher.check` has the signature of the local
checks (``checked_answer.check_answer(..., run=dispatcher.check)``), so a driver's threads
block on a job exactly as they blocked on a local check:

* the job's payload is plain data without any key (:mod:`dace_ai.dispatch.check_jobs`);
* a job for target ``T`` asks for a worker declaring resource ``T``; when the executor
  says no worker offers it, the job runs where it can, compile stage only, and its
  reports say so (``compile-only: no worker with resource 'cuda'``): the answer's
  verification level shows it and the usual "could not decide" warning names it;
* the result is validated like a local one; a job that failed, lost its workers more
  often than the executor retries, or came back malformed raises
  :class:`CheckJobFailed` (the candidate counts as not checked, never as passed);
* the worker, its retries and the workers lost on the way go into every report's
  ``details["job"]`` (and from there into sessions and summaries);
* an executor that cannot run jobs any more (its scheduler went away) raises
  :class:`~dace_ai.execution.jobs.ExecutorUnavailable`, which ends the driver's run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.checking.stages import any_checker_applies
from dace_ai.dispatch.check_jobs import forget_live, register_live, run_check_job
from dace_ai.dispatch.check_results import read_outcome, reemit_warnings, to_reports
from dace_ai.errors import DaceAIError
from dace_ai.execution.jobs import ExecutorOptions, ExecutorUnavailable, Job, JobResult, JobStage, Runner
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.plugins.registrations import Executor
from dace_ai.solving.check_records import carrier_program, make_payload

if TYPE_CHECKING:
    from dace_ai.config.settings import AISettings
    from dace_ai.context.types import NodeContext
    from dace_ai.dispatch.job_board import JobBoard
    from dace_ai.prompt.answer import Answer

#: The executor of generate/optimize when none is named (threads of this process, as before executors).
DEFAULT_EXECUTOR = "threads"
_serial = itertools.count(1)


class CheckJobFailed(DaceAIError):
    """A candidate's check job gave no usable result (it failed, kept losing workers, or came back malformed)."""


@dataclass
class DispatchStats:
    """Where the time of a run's check jobs went (for ``bench/cluster_scaling.py`` and summaries)."""

    jobs: int = 0
    retried: int = 0
    compile_only: int = 0
    round_trip_seconds: float = 0.0  #: submit to result, in this process
    job_seconds: float = 0.0  #: the job function on the worker
    check_seconds: float = 0.0  #: the checkers themselves
    workers: dict[str, int] = field(default_factory=dict)
    #: How the candidates' compiles included dace.h ("pch built", "pch reused", ...): the build cache at work.
    pch: dict[str, int] = field(default_factory=dict)

    @property
    def outside_checks(self) -> float:
        """Share of the jobs' round-trip time spent outside the checkers (scheduling, transfer, rebuilding)."""
        return 1.0 - self.check_seconds / self.round_trip_seconds if self.round_trip_seconds else 0.0


def executor_options(
    settings: AISettings, executor: str | None, options: ExecutorOptions | None
) -> tuple[str, ExecutorOptions]:
    """The executor's name and options: arguments first, then the settings, then the default.

    The options carry the settings, so an executor reads its own (a batch queue, a walltime).
    """
    name = executor or getattr(settings, "executor", None) or DEFAULT_EXECUTOR
    if options is None:
        options = ExecutorOptions(
            workers=getattr(settings, "executor_workers", None) or None,
            scheduler=getattr(settings, "executor_scheduler", None) or None,
        )
    return name, dataclasses.replace(options, settings=settings)


class CheckDispatcher:
    """Runs candidates' checks on the executor ``name`` (a context manager; see the module docstring)."""

    def __init__(self, name: str = DEFAULT_EXECUTOR, options: ExecutorOptions | None = None) -> None:
        self.name, self.options = name, options or ExecutorOptions()
        self.runner: Runner | None = None
        self.in_process = False
        self.stats = DispatchStats()
        #: Where the drivers watch the jobs (a :class:`~dace_ai.dispatch.job_board.JobBoard`); None: nowhere.
        self.board: JobBoard | None = None
        self._lock = threading.Lock()
        self._programs: dict[int, str] = {}

    def __enter__(self) -> CheckDispatcher:  # noqa: PYI034
        registration = get_plugin_manager().get_as("executors", self.name, Executor)
        runner = registration.factory(self.options)
        try:
            self.runner = runner.__enter__()
        except DaceAIError:
            raise
        except Exception as exc:  # noqa: BLE001 - a scheduler that cannot be reached is a short error
            raise ExecutorUnavailable(f"executor {self.name!r} could not start: {type(exc).__name__}: {exc}") from None
        self.in_process = bool(getattr(self.runner, "in_process", False))
        return self

    def __exit__(self, *exc: object) -> None:
        if self.runner is not None:
            try:
                self.runner.__exit__(*exc)
            except Exception:  # noqa: BLE001, S110 - closing a cluster that is gone must not hide the run's error
                pass
            self.runner = None

    def capacity(self) -> int:
        """How many jobs the executor runs at once (the drivers size their thread pools by it)."""
        measure = getattr(self.runner, "capacity", None)
        try:
            return max(1, int(measure())) if callable(measure) else 4
        except Exception:  # noqa: BLE001
            return 4

    def running(self) -> set[str] | None:
        """Ids of the jobs a worker is running now, when the executor can tell (None: it cannot)."""
        ask = getattr(self.runner, "running", None)
        if not callable(ask):
            return None
        try:
            return set(ask())
        except Exception:  # noqa: BLE001 - a display must not end the run
            return None

    def _program(self, ctx: NodeContext) -> str:
        """The node's one-node program, built once per node for all its candidates."""
        node = (ctx.live or {}).get("node")
        with self._lock:
            known = self._programs.get(id(node))
        if known is None:
            known = carrier_program(ctx)
            with self._lock:
                self._programs[id(node)] = known
        return known

    def check(
        self, answer: Answer, ctx: NodeContext, settings: AISettings, environments: set[str]
    ) -> list[CheckReport]:
        """The reports of ``answer``'s checks, run as one job on the executor (blocks until they are back)."""
        runner = self.runner
        if runner is None:
            raise RuntimeError(
                f"executor {self.name!r} is not started: check answers inside `with CheckDispatcher(...)`"
            )
        digest = hashlib.sha256(ctx.key.encode()).hexdigest()[:10]
        job_id = f"check-{digest}-{next(_serial)}"
        target = ctx.target.name
        stage: JobStage = "bench" if settings.bench != "off" else "check"
        job = Job(job_id, run_check_job, {}, stage=stage, target=target)
        compile_only = None
        missing = getattr(self.runner, "missing", None)
        if callable(missing) and target in missing(job):
            compile_only = f"compile-only: no worker with resource {target!r}"
            job = Job(job_id, run_check_job, {}, stage="check", target=None)  # nothing is timed
        program = "" if self.in_process else self._program(ctx)
        payload = make_payload(job_id, answer, ctx, settings, environments, compile_only, program, self.in_process)
        job = Job(job_id, run_check_job, payload.model_dump(mode="json"), stage=job.stage, target=job.target)
        if self.in_process:
            register_live(job_id, ctx, settings)
        board = self.board
        if board is not None:
            board.submitted(ctx.name, job_id)
        ok = False
        try:
            started = time.perf_counter()
            try:
                results = list(runner.run([job]))
            except ExecutorUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001 - the executor itself broke (e.g. its scheduler went away)
                raise ExecutorUnavailable(
                    f"executor {self.name!r} stopped running jobs: {type(exc).__name__}: "
                    f"{str(exc).splitlines()[0] if str(exc) else ''}"
                ) from None
            finally:
                forget_live(job_id)
            round_trip = time.perf_counter() - started
            if not results:
                raise ExecutorUnavailable(f"executor {self.name!r} returned no result for a check job")
            reports = self._reports(results[0], answer, ctx, settings, compile_only, round_trip)
            ok = True
            return reports
        finally:
            if board is not None:
                board.finished(ctx.name, job_id, ok)

    def _reports(
        self,
        result: JobResult,
        answer: Answer,
        ctx: NodeContext,
        settings: AISettings,
        compile_only: str | None,
        round_trip: float,
    ) -> list[CheckReport]:
        where = f"worker {result.worker}" if result.worker else f"executor {self.name!r}"
        lost = (
            f" after losing {len(result.lost_workers)} worker(s): {', '.join(result.lost_workers)}"
            if result.lost_workers
            else ""
        )
        if result.error is not None:
            raise CheckJobFailed(
                f"node {ctx.name!r}: the check job failed on {where}{lost}: "
                f"{result.error.strip().splitlines()[0] if result.error.strip() else 'no reason'}"
            )
        outcome, problem = read_outcome(
            result.value,
            # no report is believed only where no checker applies here either (every one switched off)
            checks_on=any_checker_applies(CheckRequest(answer, ctx, settings, Path("."))),
            known_checkers=set(get_plugin_manager().checkers()),
        )
        if outcome is None:
            raise CheckJobFailed(f"node {ctx.name!r}: {where} returned a result that is not believed: {problem}")
        reemit_warnings(outcome)
        reports = to_reports(outcome)
        note = {
            "executor": self.name,
            "worker": result.worker,
            "retries": result.retries,
            "lost_workers": list(result.lost_workers),
        }
        if compile_only:
            note["routed"] = compile_only
        for report in reports:
            report.details["job"] = note
        with self._lock:
            stats = self.stats
            stats.jobs += 1
            stats.retried += 1 if result.retries else 0
            stats.compile_only += 1 if compile_only else 0
            stats.round_trip_seconds += round_trip
            stats.job_seconds += outcome.seconds
            stats.check_seconds += outcome.check_seconds
            stats.workers[result.worker] = stats.workers.get(result.worker, 0) + 1
            for report in reports:
                if isinstance(report.details.get("pch"), str):
                    how = report.details["pch"].split(":")[0]
                    stats.pch[how] = stats.pch.get(how, 0) + 1
        return reports


def job_note(reports: list[CheckReport]) -> dict[str, Any]:
    """The ``details["job"]`` a dispatched check put into its reports ({} for a check run in place)."""
    for report in reports:
        note = report.details.get("job")
        if isinstance(note, dict):
            return note
    return {}
