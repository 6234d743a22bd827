"""Generate every pending node of an SDFG at once: ``dace_ai.generate(sdfg)``.

Expanding an SDFG asks the provider one node after another. Before compiling a
program with many AI nodes, :func:`generate` sends all first-round requests
concurrently instead and fills the answer cache; the expansion that follows
(``sdfg.compile()``, ``sdfg.expand_library_nodes()``, a call of the program)
then finds a cache hit for every node and reuses the checks it passed here, unless
something they depend on changed in between (:mod:`dace_ai.solving.check_reuse`).

* The requests are exactly the ones the expansion would send
  (:func:`dace_ai.expansion.expansion_pass.node_context` and :func:`~dace_ai.solving.requests.build_request`
  inside one :func:`~dace_ai.expansion.expansion_pass.expansion_pass`), so their cache keys match.
* Identical requests (the same cache key: same prompt, model, schema, ...) are
  sent once; every node that shares the key is served by the one answer.
* Up to ``max_concurrency`` requests are in flight (threads; provider clients
  are thread-safe). An offline provider (the manual exchange) is asked one node
  at a time.
* Only answers that parse and pass their checks (the same checks the expansion
  runs, see :func:`dace_ai.checking.stages.run_checks`) are cached, with the
  verification level they reached; a failed, malformed or refused reply caches
  nothing and is listed in the summary (the expansion then asks again and repairs).
* On a terminal a table shows nodes done / failed / cached and, per node, its check
  jobs done, running and queued on the executor (:mod:`dace_ai.dispatch.job_board`).

Repair rounds still happen during the expansion, one node at a time, because
they need the checks' diagnostics.

``executor=`` (or the ``executor`` setting) names the executor plugin that runs each
answer's checks: ``threads`` of this process by default, ``local`` worker processes,
``dask`` on a cluster (:mod:`dace_ai.dispatch.dispatcher`). The provider is asked here
either way; a node whose checks ran elsewhere says on which worker, and whether the job
had to be started again after a lost worker. An executor that stops (its scheduler
went away) ends the run with :class:`~dace_ai.execution.jobs.ExecutorUnavailable`;
the SDFG is not changed and only answers whose checks passed were cached.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from dace_ai import compat
from dace_ai.checking.stages import repair_message
from dace_ai.dispatch.dispatcher import CheckDispatcher, executor_options, job_note
from dace_ai.dispatch.job_board import JobBoard
from dace_ai.errors import AIUsageError, DaceAIError, DaceAIWarning, ProviderError
from dace_ai.execution.jobs import ExecutorOptions, ExecutorUnavailable
from dace_ai.expansion.expansion_pass import expansion_pass, node_context, resolve
from dace_ai.expansion.pending import expand_nodes_leading_to_ai, pending_nodes
from dace_ai.providers.api import ProviderRequest, Usage
from dace_ai.providers.select import make_client, select_provider
from dace_ai.solving.answer_source import AnswerSource
from dace_ai.solving.requests import build_request
from dace_ai.solving.rounds import Keeping, Table, keep, play_round
from dace_ai.storage.cache import AnswerCache, cache_key

if TYPE_CHECKING:
    from dace_ai.checking.verdict import Verdict
    from dace_ai.config.settings import AISettings
    from dace_ai.context.types import NodeContext
    from dace_ai.dispatch.dispatcher import DispatchStats

Status = Literal["pending", "cached", "generated", "failed"]


@dataclass
class NodeResult:
    """What happened to one node."""

    name: str
    sdfg: str
    state: str
    status: Status
    key: str = ""
    #: True when another node with the identical request was asked instead of this one.
    shared: bool = False
    error: str | None = None
    usage: Usage | None = None
    seconds: float = 0.0
    #: How far the cached answer was checked (``verified (3 seeds)``, ``compile-only``, ``unverified: ...``).
    verification: str = ""
    #: Where the checks ran (an executor's worker; "" in this process) and how often the job was restarted.
    worker: str = ""
    retries: int = 0
    lost_workers: list[str] = field(default_factory=list)


@dataclass
class GenerateSummary:
    """The outcome of :func:`generate`: one :class:`NodeResult` per pending node."""

    provider: str
    nodes: list[NodeResult] = field(default_factory=list)
    #: Requests actually sent to the provider (after de-duplication and cache hits).
    requests: int = 0
    seconds: float = 0.0
    #: The executor that ran the checks and where their time went.
    executor: str = ""
    stats: DispatchStats | None = None

    def count(self, status: Status) -> int:
        return sum(1 for n in self.nodes if n.status == status)

    @property
    def generated(self) -> int:
        return self.count("generated")

    @property
    def cached(self) -> int:
        return self.count("cached")

    @property
    def failed(self) -> int:
        return self.count("failed")

    @property
    def failures(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.status == "failed"]

    @property
    def usage(self) -> Usage:
        """Tokens and cost of the requests sent (each shared request counted once)."""
        sent = [n.usage for n in self.nodes if n.status == "generated" and not n.shared and n.usage]
        costs = [u.cost_usd for u in sent if u.cost_usd is not None]
        return Usage(
            input_tokens=sum(u.input_tokens or 0 for u in sent),
            output_tokens=sum(u.output_tokens or 0 for u in sent),
            cost_usd=sum(costs) if costs else None,
        )

    def raise_for_failures(self) -> GenerateSummary:
        """Raise a :class:`ProviderError` listing every failed node; return self otherwise."""
        if self.failures:
            lines = "\n".join(f"  - node {n.name!r} (state {n.state!r}): {n.error}" for n in self.failures)
            raise ProviderError(
                f"dace_ai.generate: {self.failed} of {len(self.nodes)} node(s) failed "
                f"(provider {self.provider!r}); nothing was cached for them:\n{lines}"
            )
        return self

    def __str__(self) -> str:
        usage = self.usage
        cost = f", ${usage.cost_usd:.4f}" if usage.cost_usd is not None else ""
        head = (
            f"{len(self.nodes)} node(s): {self.generated} generated, {self.cached} cached, {self.failed} failed; "
            f"{self.requests} request(s) to {self.provider!r} in {self.seconds:.1f} s "
            f"({usage.input_tokens} input / {usage.output_tokens} output tokens{cost})"
        )
        lines = [
            f"  - {n.name}: {n.verification if n.status != 'failed' else 'failed: ' + (n.error or '')}".splitlines()[0]
            + _retried(n)
            for n in self.nodes
        ]
        return "\n".join([head, *lines])


def _retried(node: NodeResult) -> str:
    if not node.retries:
        return ""
    return (
        f" (checks restarted {node.retries} time(s) after losing {', '.join(node.lost_workers) or 'a worker'}; "
        f"finished on {node.worker})"
    )


class GenerateWarning(DaceAIWarning):
    """Some nodes of ``dace_ai.generate`` got no answer (see the summary's ``failures``)."""


def _warn_failures(summary: GenerateSummary, settings: AISettings) -> None:
    """Say, as a Python warning, which nodes failed and, when no provider was chosen, what to choose."""
    if not summary.failures:
        return
    lines = "\n".join(f"  - node {n.name!r}: {n.error}" for n in summary.failures[:10])
    more = f"\n  ... and {summary.failed - 10} more" if summary.failed > 10 else ""
    hint = ""
    if settings.provider is None and summary.provider == "manual":
        hint = (
            "\nNo provider is configured and none is usable (no SDK with an API key), so the manual exchange "
            "was used: answer its prompt files, or set the provider (DACE_ai_provider) and its API key."
        )
    warnings.warn(
        f"dace_ai.generate: {summary.failed} of {len(summary.nodes)} node(s) got no answer from "
        f"provider {summary.provider!r}:\n{lines}{more}{hint}",
        GenerateWarning,
        stacklevel=3,
    )


@dataclass
class _Job:
    """One distinct request and the nodes waiting for its answer."""

    key: str
    request: ProviderRequest
    ctx: NodeContext
    results: list[NodeResult]


def generate(
    sdfg: Any,
    settings: AISettings | dict[str, Any] | None = None,
    *,
    progress: bool | None = None,
    executor: str | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
) -> GenerateSummary:
    """Ask the provider for every pending AI node of ``sdfg`` concurrently and cache the answers.

    ``settings``: an :class:`~dace_ai.config.settings.AISettings`, a dict of overrides, or
    None (the usual sources). ``progress``: show the nodes' progress (default: when
    stderr is a terminal). ``executor``: the executor plugin running the checks
    (``threads``, ``local``, ``dask``; default: the ``executor`` setting, else threads of
    this process), with ``scheduler`` (an address) and ``workers`` for it. Returns a
    :class:`GenerateSummary`; failures do not raise (call
    :meth:`GenerateSummary.raise_for_failures`), except a provider that cannot start
    at all (no SDK, no key), which raises :class:`~dace_ai.errors.ProviderError` at
    once, and an executor that stops running jobs
    (:class:`~dace_ai.execution.jobs.ExecutorUnavailable`).
    """
    started = time.perf_counter()
    settings = resolve(settings)
    if not settings.cache:
        raise AIUsageError(
            "dace_ai.generate fills the answer cache that the expansion reads, but the cache "
            f"setting is off (from {settings.source('cache')}); turn it on or let the "
            "expansion ask node by node"
        )
    provider = select_provider(settings)
    summary = GenerateSummary(provider.name)
    cache = AnswerCache()
    expand_nodes_leading_to_ai(sdfg)
    jobs = _pending_jobs(sdfg, settings, provider.name, summary, cache)

    name, options = executor_options(
        settings, executor, ExecutorOptions(workers=workers, scheduler=scheduler) if (workers or scheduler) else None
    )
    summary.executor = name
    bar = _Progress(len(summary.nodes), enabled=sys.stderr.isatty() if progress is None else progress)
    bar.advance(cached=summary.cached, failed=summary.failed)
    try:
        if jobs:
            # The client is built here, so a provider that cannot start fails at once, not once per node.
            answers = AnswerSource(provider, settings, make_client(provider, settings))
            asking = 1 if provider.offline else max(1, min(settings.max_concurrency, len(jobs)))
            summary.requests = len(jobs)
            with CheckDispatcher(name, options) as dispatcher:
                summary.stats = dispatcher.stats
                bar.watch(dispatcher)
                # In this process the checks run in the asking threads, as always; elsewhere the
                # threads mostly wait on jobs, so there are enough of them to keep every worker busy.
                threads = asking if dispatcher.in_process else max(1, min(len(jobs), asking + dispatcher.capacity()))
                asks = threading.BoundedSemaphore(asking)
                _run(
                    jobs.values(),
                    threads,
                    lambda job: _answer(answers, job, settings, dispatcher, asks),
                    bar,
                )
    finally:
        bar.close()
    summary.seconds = time.perf_counter() - started
    _warn_failures(summary, settings)
    return summary


def _pending_jobs(
    sdfg: Any, settings: AISettings, provider: str, summary: GenerateSummary, cache: AnswerCache
) -> dict[str, _Job]:
    """Add every pending node's result to ``summary``; return the distinct requests still to ask, by cache key."""
    jobs: dict[str, _Job] = {}
    with expansion_pass():
        for nsdfg, state, node in pending_nodes(sdfg):
            result = NodeResult(name=str(node.label), sdfg=str(nsdfg.name), state=str(state.label), status="pending")
            summary.nodes.append(result)
            try:
                ctx = node_context(nsdfg, state, node, settings)
                request = build_request(ctx, settings)
            except Exception as exc:  # noqa: BLE001 - this node cannot be asked; the others still can
                result.status = "failed"
                result.error = str(exc) if isinstance(exc, DaceAIError) else f"{type(exc).__name__}: {exc}"
                continue
            key = result.key = cache_key(provider, request)
            if key in jobs:
                result.shared = True
                jobs[key].results.append(result)
            elif (hit := cache.get(key)) is not None:
                result.status = "cached"
                result.verification = hit.verification
            else:
                jobs[key] = _Job(key, request, ctx, [result])
    return jobs


@dataclass
class _Answered:
    status: Status
    error: str | None = None
    usage: Usage | None = None
    level: str = ""
    job: dict[str, Any] = field(default_factory=dict)  #: where the checks ran (``details["job"]``)
    #: The verdict on an accepted answer and its node: checks that could not decide are warned about afterwards.
    verdict: Verdict | None = None
    ctx: NodeContext | None = None


def _answer(
    answers: AnswerSource,
    job: _Job,
    settings: AISettings,
    dispatcher: CheckDispatcher,
    asks: threading.BoundedSemaphore,
) -> _Answered:
    """Play one round for one distinct request; cache the reply only when it is a valid answer that passes its
    checks."""
    # No session: generate only fills the cache. The checks run on the executor, and an answer that
    # passed is cached with its node's name and where it came from.
    table = Table(
        job.ctx,
        settings,
        answers.provider.name,
        answers,
        None,
        reuse_checks=False,
        run=dispatcher.check,
        keeping=Keeping(note={"node": job.ctx.name, "via": "dace_ai.generate"}),
        asking=asks,
    )
    try:
        rnd = play_round(table, job.request, origin=f"answer for node {job.ctx.name!r}")
    except ExecutorUnavailable:
        raise  # the run ends: no node can be checked any more
    except DaceAIError as exc:
        return _Answered("failed", str(exc))
    except Exception as exc:  # noqa: BLE001 - a provider plugin's bug must not take the other nodes down
        return _Answered("failed", f"{type(exc).__name__}: {exc}")
    reports, verdict, usage = rnd.checked.reports, rnd.verdict, rnd.reply.usage
    where = job_note(reports)
    if verdict.repairable:
        first = repair_message(reports).split("\n\n", 2)[1:2]
        return _Answered(
            "failed",
            "refused by its checks, nothing cached (the expansion asks again with the "
            "diagnostics): " + (first[0].splitlines()[0] if first else ""),
            usage,
            "",
            where,
        )
    if not verdict.accepted:
        return _Answered("failed", f"refused: {verdict.reason}; nothing cached", usage, "", where)
    keep(table, rnd)
    return _Answered("generated", None, usage, verdict.level, where, verdict, job.ctx)


def _run(jobs: Any, workers: int, work: Callable[[_Job], _Answered], bar: _Progress) -> None:
    pool = ThreadPoolExecutor(
        max_workers=workers,
        thread_name_prefix="dace-ai-generate",
        initializer=compat.use_config,
        initargs=(compat.config_snapshot(),),
    )
    started: dict[Future, tuple[_Job, float]] = {}
    try:
        for job in jobs:
            started[pool.submit(work, job)] = (job, time.perf_counter())
        pending = set(started)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                job, t0 = started[future]
                out = future.result()
                for result in job.results:
                    result.status, result.error, result.usage, result.verification = (
                        out.status,
                        out.error,
                        out.usage,
                        out.level,
                    )
                    result.worker = str(out.job.get("worker", "")) if out.job.get("executor") != "threads" else ""
                    result.retries = int(out.job.get("retries", 0))
                    result.lost_workers = list(out.job.get("lost_workers", []))
                    result.seconds = time.perf_counter() - t0
                if out.verdict is not None:  # said here, in the calling thread, where warning filters apply
                    out.verdict.warn(out.ctx, stacklevel=3)
                bar.advance(
                    done=len(job.results) if out.status == "generated" else 0,
                    failed=len(job.results) if out.status == "failed" else 0,
                )
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


class _Progress:
    """Nodes done / failed / cached above the per-node table of check jobs (a :class:`JobBoard`), on a terminal."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total = total
        self.counts = {"done": 0, "failed": 0, "cached": 0}
        self.board = JobBoard("dace-ai generate", enabled=enabled and total > 0)
        self._header()
        self.board.__enter__()

    def watch(self, dispatcher: CheckDispatcher) -> None:
        """Count the dispatcher's jobs on the board (running ones as its executor reports them)."""
        self.board.running_jobs = dispatcher.running
        dispatcher.board = self.board

    def _header(self) -> None:
        c = self.counts
        self.board.header = (
            f"{sum(c.values())}/{self.total} nodes: {c['done']} done, {c['failed']} failed, {c['cached']} cached"
        )

    def advance(self, done: int = 0, failed: int = 0, cached: int = 0) -> None:
        self.counts["done"] += done
        self.counts["failed"] += failed
        self.counts["cached"] += cached
        self._header()

    def close(self) -> None:
        self.board.__exit__(None, None, None)
