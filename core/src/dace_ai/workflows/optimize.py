"""``dace_ai.optimize(sdfg)``: best of several candidates, refined with measured timings.

For one node (by name or object) or every pending AI node:

1. the library nodes whose expansion creates AI nodes are expanded first
   (``A @ B`` -> ``Gemm``), so those count;
2. ``samples`` candidates are asked for concurrently. The provider interface
   has no sampling knob common to every provider, so each request asks for a
   distinct approach in its prompt (which also gives each its own cache key);
3. each candidate runs the checks (compile, verify, bench) as soon as its answer
   arrives, up to ``check_concurrency`` at once; benches take a machine-wide
   lock so two never share the cores;
4. the fastest candidate that passed wins; ``rounds`` refinement rounds send the
   best code, its timings against the native expansion, "Where the time goes"
   (figures, speed of light, the compiler's remarks on its loops:
   :mod:`dace_ai.prompt.feedback`) and the other candidates' failure reasons back
   to the model for ``samples`` new candidates. Once the best candidate reaches the
   fraction ``target_sol`` of the machine's speed of light, the remaining rounds are
   skipped (``NodeOptimization.stopped_early`` says so);
5. the winner becomes the node's tasklet (figures in its provenance and the
   session). Under ``bench=gate`` a winner below ``min_speedup`` is refused and the
   native expansion is kept, as when no candidate passed at all.

Pinned nodes (their session says so) are skipped. Every candidate is recorded as
a round of the node's session.

When the checks run on an executor's workers (``dask``, ``slurm``, ``local``), the
nodes are optimized together (``node_concurrency``; by default every node, at most
:data:`MAX_NODES_AT_ONCE`): their check jobs are queued on the executor at once, so
the workers never wait for one node's provider answers or its last slow candidate.
Each node's rounds still follow one another. The winners are placed in the nodes'
order once every node is done, so the SDFG, the sessions and the cache come out as
from a run node by node. Provider requests stay within ``max_concurrency`` over all
nodes. On a terminal a table shows each node's jobs done, running and queued.

``executor=`` (or the ``executor`` setting) names the executor plugin that runs each
candidate's checks (``threads`` of this process by default, ``local`` worker processes,
``dask`` on a cluster; see :mod:`dace_ai.dispatch.dispatcher`); the provider is asked here
either way. When the run ends with an error (an executor whose scheduler went away
raises :class:`~dace_ai.execution.jobs.ExecutorUnavailable`), the SDFG is put back as
it was and no session summary changes; the rounds of candidates whose checks finished
stay recorded, as what they are.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Mapping
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dace_ai import compat
from dace_ai.checking.verdict import falls_back_natively
from dace_ai.dispatch.dispatcher import CheckDispatcher, CheckJobFailed, executor_options, job_note
from dace_ai.dispatch.job_board import JobBoard
from dace_ai.errors import AIUsageError, DaceAIError
from dace_ai.execution.jobs import ExecutorOptions, ExecutorUnavailable
from dace_ai.expansion.charge import IMPLEMENTATION
from dace_ai.expansion.expansion_pass import expansion_pass, node_context, resolve
from dace_ai.expansion.fallback import fallback_implementation
from dace_ai.expansion.pending import expand_nodes_leading_to_ai, pending_nodes
from dace_ai.prompt.feedback import TimeEvidence, where_the_time_goes
from dace_ai.prompt.render import render_prompt
from dace_ai.providers.api import Message, ProviderReply, ProviderRequest
from dace_ai.providers.select import select_provider
from dace_ai.runtime_check.instrument import add_spot_check
from dace_ai.runtime_check.registry import Origin
from dace_ai.sandbox.deception import format_seconds
from dace_ai.solving.answer_source import AnswerSource
from dace_ai.solving.provenance import bench_figures
from dace_ai.solving.requests import node_record, request_for
from dace_ai.solving.rounds import Asked, Keeping, Round, Table, ask, check, keep, provenance
from dace_ai.solving.tasklet import make_tasklet, place_tasklet
from dace_ai.storage.session_store import RoundContent, open_session
from dace_ai.workflows.optimize_report import Candidate, NodeOptimization, OptimizeReport

if TYPE_CHECKING:
    from dace_ai.checking.api import CheckReport
    from dace_ai.checking.verdict import Verdict
    from dace_ai.config.settings import AISettings
    from dace_ai.context.types import NodeContext
    from dace_ai.performance.records import BenchFigures
    from dace_ai.plugins.registrations import Provider
    from dace_ai.prompt.answer import Answer
    from dace_ai.storage.session_store import Session

#: Nodes optimized at once on an executor when ``node_concurrency`` is 0 (each holds a few waiting threads).
MAX_NODES_AT_ONCE = 64

#: Distinct approaches asked of concurrent samples (cycled).
APPROACHES = (
    "a straightforward, cache-friendly loop nest that the compiler can vectorise well",
    "blocking/tiling for the cache hierarchy, with contiguous innermost accesses",
    "explicit SIMD intrinsics of the target, with a scalar remainder loop",
    "loop reordering, unrolling and register accumulators that maximise data reuse",
    "an OpenMP-parallel outermost loop over independent work, each thread on contiguous data",
    "restructuring the computation to stream every input exactly once",
)


@dataclass
class _Attempt:
    """One candidate in flight: its request, reply, answer and check reports."""

    candidate: Candidate
    request: ProviderRequest
    reply: ProviderReply | None = None
    key: str = ""  #: the reply's answer-cache key
    answer: Answer | None = None
    asked: Asked | None = None  #: the round asked and parsed
    round: Round | None = None  #: the round checked, judged and recorded
    reports: list[CheckReport] | None = None
    environments: set[str] | None = None  #: class paths the answer's environments resolved to (when it passed)
    figures: BenchFigures | None = None
    verdict: Verdict | None = None  #: :func:`dace_ai.checking.verdict.judge` on its reports


class _Changes:
    """What a run did to the SDFG (undone when the run fails) and the session summaries it will write."""

    def __init__(self) -> None:
        self._undo: list[Any] = []
        self._summaries: list[tuple[Any, NodeOptimization, int | None]] = []

    def set_implementation(self, node: Any, implementation: str) -> None:
        previous = node.implementation
        node.implementation = implementation
        self._undo.append(lambda: setattr(node, "implementation", previous))

    def place(self, state: Any, node: Any, tasklet: Any) -> None:
        order = state.nodes()
        place_tasklet(state, node, tasklet)

        def put_back() -> None:
            compat.replace_node(state, tasklet, node)
            compat.restore_node_order(state, order)

        self._undo.append(put_back)

    def summarize(self, session: Session, result: NodeOptimization, current: int | None) -> None:
        self._summaries.append((session, result, current))

    def undo(self) -> None:
        for action in reversed(self._undo):
            action()
        self._undo.clear()
        self._summaries.clear()

    def commit(self) -> None:
        for session, result, current in self._summaries:
            _summarize(session, result, current)
        self._summaries.clear()


def optimize(
    sdfg: Any,
    node: Any = None,
    *,
    samples: int = 4,
    rounds: int = 2,
    sizes: dict[str, int] | None = None,
    settings: AISettings | dict[str, Any] | None = None,
    executor: str | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: bool | None = None,
) -> OptimizeReport:
    """Ask for ``samples`` candidates per node, keep the fastest correct one, refine ``rounds`` times.

    ``node``: a node name (label) or a library node object; None for every pending AI
    node. ``sizes``: symbol values for the timing runs (default: the ``bench_sizes``
    setting, else about 2**16 elements per container). ``settings``: an
    :class:`~dace_ai.config.settings.AISettings` or a dict of overrides. ``executor``:
    the executor plugin running the checks (default: the ``executor`` setting, else
    threads of this process), with ``scheduler`` (an address) and ``workers`` for it.
    ``progress``: show each node's check jobs live (default: when stderr is a terminal).
    Returns an :class:`~dace_ai.workflows.optimize_report.OptimizeReport`; the SDFG is
    changed in place (winners become tasklets, refused nodes are set to their native
    implementation), and only when the run completes.
    """
    if samples < 1 or rounds < 0:
        raise AIUsageError(f"dace_ai.optimize: samples must be >= 1 and rounds >= 0 (got {samples}, {rounds})")
    started = time.perf_counter()
    base = resolve(settings)
    settings = _measuring(base, sizes)
    provider = select_provider(settings)
    report = OptimizeReport(provider.name, samples, rounds)
    report.expanded = expand_nodes_leading_to_ai(sdfg)
    targets = _targets(sdfg, node)
    answers = AnswerSource(provider, settings)
    name, options = executor_options(
        settings, executor, ExecutorOptions(workers=workers, scheduler=scheduler) if (workers or scheduler) else None
    )
    report.executor = name
    changes = _Changes()
    gate = base.min_speedup if base.bench == "gate" else None
    asks = threading.BoundedSemaphore(1 if provider.offline else max(1, settings.max_concurrency))
    with expansion_pass():  # every node's context from one collection, before any node changes
        work = [
            _NodeWork(nsdfg, state, libnode, node_context(nsdfg, state, libnode, settings))
            for nsdfg, state, libnode in targets
        ]
    try:
        with CheckDispatcher(name, options) as dispatcher:
            report.stats = dispatcher.stats
            outcomes = _run_on_board(
                work,
                settings,
                dispatcher,
                progress,
                lambda w: _optimize_node(w, settings, provider, answers, samples, rounds, dispatcher, asks),
            )
            _place_winners(work, outcomes, report, gate, provider.name, changes, settings)
    except BaseException:
        changes.undo()
        raise
    changes.commit()
    report.seconds = time.perf_counter() - started
    return report


def _measuring(base: AISettings, sizes: dict[str, int] | None) -> AISettings:
    """``base`` for checking candidates: every one compiled and timed, at ``sizes`` when given."""
    # Optimizing means measuring: every candidate is timed ("report"); the gate, when set, is
    # applied to the fastest one at the end, so slower candidates still inform the refinement.
    update: dict[str, Any] = {"compile_check": True, "bench": "report"}
    if sizes:
        update["bench_sizes"] = ",".join(f"{k}={int(v)}" for k, v in sizes.items())
    return base.model_copy(update=update)


def _run_on_board(
    work: list[_NodeWork], settings: AISettings, dispatcher: CheckDispatcher, progress: bool | None, run: Any
) -> list[Any]:
    """``run`` of every node (:func:`_run_nodes`), their check jobs shown live on a :class:`JobBoard`."""
    import sys

    board = JobBoard(
        "dace-ai optimize",
        enabled=sys.stderr.isatty() if progress is None else progress,
        running=dispatcher.running,
    )
    dispatcher.board = board
    with board:
        return _run_nodes(work, _nodes_at_once(settings, dispatcher, len(work)), run)


def _place_winners(
    work: list[_NodeWork],
    outcomes: list[Any],
    report: OptimizeReport,
    gate: float | None,
    provider: str,
    changes: _Changes,
    settings: AISettings,
) -> None:
    """Place each node's winner, or keep its native expansion, in the nodes' order; add its result to ``report``."""
    for item, (result, best, session) in zip(work, outcomes):  # placed in the nodes' order
        if session is not None:
            _apply(result, best, item.sdfg, item.state, item.node, item.ctx, gate, provider, session, changes, settings)
        report.nodes.append(result)


@dataclass
class _NodeWork:
    """One node to optimize: where it is and its context (collected before any node changes)."""

    sdfg: Any
    state: Any
    node: Any
    ctx: NodeContext


def _nodes_at_once(settings: AISettings, dispatcher: CheckDispatcher, nodes: int) -> int:
    """How many nodes are optimized together (see the module docstring)."""
    if settings.node_concurrency:
        return max(1, min(settings.node_concurrency, nodes))
    if dispatcher.in_process:
        return 1
    return max(1, min(nodes, MAX_NODES_AT_ONCE))


def _run_nodes(work: list[_NodeWork], at_once: int, run: Any) -> list[Any]:
    """``run`` of every node, ``at_once`` of them together; results in the nodes' order; the first error ends it."""
    if at_once <= 1:
        return [run(item) for item in work]
    pool = ThreadPoolExecutor(at_once, "dace-ai-optimize-node", compat.use_config, (compat.config_snapshot(),))
    futures = [pool.submit(run, item) for item in work]
    try:
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((f for f in futures if f in done and f.exception() is not None), None)
        if failed is not None:
            failed.result()  # raises the node's exception
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _targets(sdfg: Any, node: Any) -> list[tuple[Any, Any, Any]]:
    pending = pending_nodes(sdfg)
    if node is None:
        return pending
    chosen = [item for item in pending if item[2] is node or (isinstance(node, str) and str(item[2].label) == node)]
    if not chosen:
        names = ", ".join(sorted(str(n.label) for _, _, n in pending)) or "none"
        raise AIUsageError(
            f"dace_ai.optimize: no pending AI node {getattr(node, 'label', node)!r} in SDFG "
            f"{sdfg.name!r}; pending AI nodes: {names}"
        )
    return chosen


def _pinned(sdfg_name: str, key: str) -> bool:
    return bool(open_session(sdfg_name, key).summary().get("pinned"))


def _optimize_node(
    work: _NodeWork,
    settings: AISettings,
    provider: Provider,
    answers: AnswerSource,
    samples: int,
    rounds: int,
    dispatcher: CheckDispatcher,
    asks: threading.BoundedSemaphore,
) -> tuple[NodeOptimization, Any, Any]:
    """The node's candidates, round after round: (its result, the best attempt, its session or None if skipped)."""
    started = time.perf_counter()
    ctx = work.ctx
    result = NodeOptimization(name=ctx.name, node_type=ctx.node_type, sdfg=ctx.sdfg_name)
    if _pinned(ctx.sdfg_name, ctx.key):
        result.outcome, result.reason = "skipped", "pinned"
        return result, None, None
    prompt = render_prompt(ctx, settings)
    session = open_session(ctx.sdfg_name, ctx.key)
    result.session = str(session.folder)
    try:
        node_json = work.node.to_json(work.state)
    except Exception:  # noqa: BLE001 - only needed to restore the node later
        node_json = None
    runner = _Runner(ctx, settings, provider, answers, session, node_json, prompt, dispatcher, asks)
    attempts: list[_Attempt] = []
    history: list[Message] = []
    for rnd in range(rounds + 1):
        batch = runner.run_round(rnd, samples, history)
        attempts += batch
        best = _best(attempts)
        if rnd < rounds:
            result.stopped_early = _near_speed_of_light(best, settings.target_sol, rounds - rnd)
            if result.stopped_early:
                break
            history = _refinement_history(best, attempts, ctx) if best else _retry_history(attempts)
    result.candidates = [a.candidate for a in attempts]
    result.seconds = time.perf_counter() - started
    return result, _best(attempts), session


def _near_speed_of_light(best: _Attempt | None, target: float, left: int) -> str:
    """Why the ``left`` remaining rounds are not worth asking for (setting ``target_sol``), or "".

    A candidate at that fraction of the machine's roofline has little left to gain; more
    rounds would cost tokens and check time for noise.
    """
    if best is None or not target:
        return ""
    c, fraction = best.candidate, best.candidate.sol_fraction
    if fraction is None or fraction < target:
        return ""
    return (
        f"stopped after round {c.round}: r{c.round}s{c.sample} reached {100 * fraction:.0f}% of speed of light "
        f"(target_sol {target:g}); {left} refinement round(s) skipped"
    )


def _best(attempts: list[_Attempt]) -> _Attempt | None:
    """The passed candidate with the shortest median time per call (the first when none was timed)."""
    passed = [a for a in attempts if a.candidate.status == "passed"]
    if not passed:
        return None
    timed = [(seconds, a) for a in passed if (seconds := a.candidate.seconds_per_call) is not None]
    return min(timed, key=lambda pair: pair[0])[1] if timed else passed[0]


class _Runner:
    """Asks for one round's candidates concurrently and checks each as soon as it arrives."""

    def __init__(
        self,
        ctx: NodeContext,
        settings: AISettings,
        provider: Provider,
        answers: AnswerSource,
        session: Session,
        node_json: Any,
        prompt: Any,
        dispatcher: CheckDispatcher,
        asks: threading.BoundedSemaphore,
    ) -> None:
        self.ctx, self.settings, self.provider = ctx, settings, provider
        self.node_json, self.prompt = node_json, prompt
        self.dispatcher = dispatcher
        # Candidates are checked on the run's executor and recorded as "passed" (the winner is chosen
        # later); every one that passed is cached, without a record of its checks to reuse. ``asks``
        # bounds the requests in flight over every node of the run.
        self.table = Table(
            ctx,
            settings,
            provider.name,
            answers,
            session,
            reuse_checks=False,
            run=dispatcher.check,
            keeping=Keeping(checks=False),
            accepted="passed",
            asking=asks,
        )

    def run_round(self, rnd: int, samples: int, history: list[Message]) -> list[_Attempt]:
        attempts = []
        for sample in range(samples):
            user = self.prompt.user + (_approach(rnd, sample, samples) if samples > 1 else "")
            request = request_for(self.prompt.system, user, self.settings, history)
            attempts.append(_Attempt(Candidate(round=rnd, sample=sample, status="error"), request))
        ask_workers = 1 if self.provider.offline else max(1, min(self.settings.max_concurrency, samples))
        local = self.settings.check_concurrency or (os.cpu_count() or 1)
        check_workers = max(1, min(local if self.dispatcher.in_process else self.dispatcher.capacity(), samples))
        config = (compat.use_config, (compat.config_snapshot(),))  # DaCe 2 keeps its configuration per thread
        with (
            ThreadPoolExecutor(ask_workers, "dace-ai-optimize-ask", *config) as asks,
            ThreadPoolExecutor(check_workers, "dace-ai-optimize-check", *config) as checks,
        ):
            futures: list[Future[None]] = []
            for attempt in attempts:
                asked = asks.submit(self._ask, attempt)
                asked.add_done_callback(functools.partial(self._check_when_answered, attempt, checks, futures))
            asks.shutdown(wait=True)
            for future in futures:
                future.result()
        return attempts

    def _check_when_answered(
        self, attempt: _Attempt, checks: ThreadPoolExecutor, futures: list[Future[None]], asked: Future[None]
    ) -> None:
        """Once ``attempt`` is asked: check its answer in ``checks`` (nothing to check when it has none)."""
        if asked.exception() is None and attempt.asked is not None and attempt.answer is not None:
            futures.append(checks.submit(self._check, attempt, attempt.asked))

    def _ask(self, attempt: _Attempt) -> None:
        """Ask for ``attempt``'s answer and parse it (an answer that does not parse is recorded as an error)."""
        c = attempt.candidate
        content = RoundContent(
            node=node_record(self.ctx),
            system="",
            messages=[],
            request={"optimize": {"round": c.round, "sample": c.sample}},
            node_json=self.node_json,
        )
        try:
            asked = ask(self.table, attempt.request, content, origin=f"answer for node {self.ctx.name!r}", limit=False)
        except DaceAIError as exc:
            c.stage, c.reason = "provider", str(exc)
            return
        except Exception as exc:  # noqa: BLE001 - a provider plugin's bug must not stop the other samples
            c.stage, c.reason = "provider", f"{type(exc).__name__}: {exc}"
            return
        attempt.asked, attempt.reply, attempt.key, c.source = asked, asked.reply, asked.key, asked.source
        usage = asked.reply.usage
        c.input_tokens, c.output_tokens, c.cost_usd = usage.input_tokens or 0, usage.output_tokens or 0, usage.cost_usd
        if asked.error is not None:
            c.stage, c.reason, c.session_round = "answer", str(asked.error), asked.number
            return
        attempt.answer = asked.answer

    def _check(self, attempt: _Attempt, asked: Asked) -> None:
        """Check ``attempt``'s answer, judge and record it; a passed answer is kept for reuse."""
        c = attempt.candidate
        started = time.perf_counter()
        try:
            rnd = check(self.table, asked)
        except ExecutorUnavailable:
            raise  # the run ends
        except CheckJobFailed as exc:  # not checked: never passed
            c.status, c.stage, c.reason = "error", "check", str(exc)
            return
        except Exception as exc:  # noqa: BLE001 - one candidate's trouble must not stop the others
            c.status, c.stage, c.reason = "error", "check", f"{type(exc).__name__}: {exc}"
            return
        c.check_seconds = time.perf_counter() - started
        reports = attempt.reports = rnd.checked.reports
        attempt.round, attempt.environments, c.session_round = rnd, rnd.checked.environments, rnd.number
        note = job_note(reports)
        if note and note.get("executor") != "threads":
            c.worker, c.retries, c.lost_workers = (
                str(note.get("worker", "")),
                int(note.get("retries", 0)),
                list(note.get("lost_workers", [])),
            )
        fig = bench_figures(reports)
        attempt.figures = fig
        c.speed_of_light = TimeEvidence.from_reports(reports).speed_of_light
        if fig is not None:
            c.speedup, c.speedup_range = fig.speedup, list(fig.speedup_range) if fig.speedup_range else None
            c.native, c.strongest, c.speedup_strongest = fig.native, fig.strongest, fig.speedup_strongest
            c.seconds_per_call, c.native_seconds_per_call = fig.candidate_median, fig.native_median
        verdict = attempt.verdict = rnd.verdict
        if verdict.failed:
            first = verdict.failed[0]
            c.status, c.stage, c.reason = "refused", first.stage, first.diagnostics.strip()
        elif not verdict.accepted:  # a check could not decide and on_inconclusive=reject
            c.status, c.stage, c.reason = "refused", verdict.inconclusive[0].stage, verdict.reason
        else:
            c.status = "passed"
            c.verification = verdict.level
            keep(self.table, rnd)  # only what passed


def _approach(rnd: int, sample: int, samples: int) -> str:
    approach = APPROACHES[(sample + rnd) % len(APPROACHES)]
    return (
        f"\n\nThis is candidate {sample + 1} of {samples} written independently for the same node; "
        f"the fastest correct one will be kept. Take a distinct approach: {approach}.\n"
    )


def _refinement_history(best: _Attempt, attempts: list[_Attempt], ctx: NodeContext) -> list[Message]:
    """The best answer so far, then its timings and the other candidates' failure reasons."""
    c = best.candidate
    seconds, native_seconds = c.seconds_per_call, c.native_seconds_per_call
    if c.speedup is not None and seconds is not None and native_seconds is not None:
        low, high = c.speedup_range or (c.speedup, c.speedup)
        timing = (
            f"It runs in {format_seconds(seconds)} per call against "
            f"{format_seconds(native_seconds)} for the native expansion: speedup {c.speedup:.2f}x "
            f"(range {low:.2f}-{high:.2f} over {len(best.figures.candidate_seconds if best.figures else ())} "
            f"timed runs, sizes {_sizes(best.figures.sizes if best.figures else None)})."
        )
    elif seconds is not None:
        timing = f"It runs in {format_seconds(seconds)} per call (no native expansion to compare)."
    else:
        timing = "It was not timed."
    lines = [f"Your answer above is the fastest correct candidate so far for node {ctx.name!r}. {timing}"]
    refused = [a.candidate for a in attempts if a.candidate.status != "passed"]
    if refused:
        lines.append("Other candidates were refused:")
        lines += [
            f"- candidate r{r.round}s{r.sample} ({r.stage or r.status}): {_first_lines(r.reason)}" for r in refused
        ]
    others = [
        (a.candidate, other_seconds)
        for a in attempts
        if a.candidate.status == "passed" and a is not best and (other_seconds := a.candidate.seconds_per_call)
    ]
    if others:
        lines.append(
            "Slower correct candidates: "
            + ", ".join(f"r{o.round}s{o.sample} {format_seconds(taken)}" for o, taken in others)
        )
    time_section = where_the_time_goes(best.reports or []).strip()
    if time_section:
        lines += ["", time_section, ""]
    lines.append(
        "Write a faster version that computes exactly the same results. Answer with the complete "
        "answer in the same JSON format."
    )
    return [Message("assistant", best.reply.text if best.reply else ""), Message("user", "\n".join(lines))]


def _retry_history(attempts: list[_Attempt]) -> list[Message]:
    """No candidate passed: show one failed answer and every candidate's failure reason."""
    replies = [a.reply for a in attempts if a.reply is not None]
    if not replies:
        return []
    lines = ["None of the candidates passed the checks:"]
    lines += [
        f"- candidate r{a.candidate.round}s{a.candidate.sample} ({a.candidate.stage}): "
        f"{_first_lines(a.candidate.reason)}"
        for a in attempts
    ]
    lines.append(
        "Write a correct answer (the one above is the first candidate). Answer with the complete answer "
        "in the same JSON format."
    )
    return [Message("assistant", replies[-1].text), Message("user", "\n".join(lines))]


def _first_lines(text: str, limit: int = 12) -> str:
    lines = text.strip().splitlines()
    return "\n  ".join(lines[:limit]) + ("\n  ..." if len(lines) > limit else "")


def _sizes(sizes: Mapping[str, int] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (sizes or {}).items()) or "default"


def _apply(
    result: NodeOptimization,
    best: _Attempt | None,
    sdfg: Any,
    state: Any,
    node: Any,
    ctx: NodeContext,
    gate: float | None,
    provider: str,
    session: Session,
    changes: _Changes,
    settings: AISettings,
) -> None:
    """Place the winner's tasklet, or keep the native expansion (gate, or nothing passed and ``on_failure`` allows)."""
    native = fallback_implementation(node)
    if best is None:
        result.reason = "no candidate passed its checks"
        if native is not None and falls_back_natively(settings.on_failure, has_native=True):
            changes.set_implementation(node, native)
            result.outcome, result.reason = "native kept", result.reason + f"; node set to {native!r}"
        elif native is not None:  # on_failure=error: no silent native code; the expansion asks again, or stops
            result.reason += f"; on_failure=error, so the node keeps implementation {IMPLEMENTATION!r}"
        changes.summarize(session, result, None)
        return
    c = best.candidate
    if gate is not None and c.speedup is not None and c.speedup < gate and native:
        for other in result.candidates:
            if other.status == "passed":
                other.status, other.stage = "refused", "bench"
                other.reason = (
                    f"speedup {other.speedup:.2f}x over the native expansion is below min_speedup "
                    f"{gate:.2f} (bench=gate)"
                    if other.speedup is not None
                    else "not timed (bench=gate)"
                )
        changes.set_implementation(node, native)
        result.outcome = "native kept"
        result.reason = (
            f"every candidate was slower than required: best {c.speedup:.2f}x < min_speedup {gate:.2f}; "
            f"node set to {native!r}"
        )
        changes.summarize(session, result, None)
        return
    if best.round is None:
        raise RuntimeError(f"candidate r{c.round}s{c.sample} of node {ctx.name!r} passed its checks without an answer")
    c.winner = True
    for other in result.candidates:
        if other.status == "passed" and other is not c and other.seconds_per_call and c.seconds_per_call:
            other.reason = (
                f"slower than the winner r{c.round}s{c.sample}: {format_seconds(other.seconds_per_call)} "
                f"vs {format_seconds(c.seconds_per_call)} per call"
            )
    environments = best.environments or set()
    fields = provenance(best.round, ctx.name, provider, session, optimize=f"r{c.round}s{c.sample}")
    tasklet = make_tasklet(node, best.round.answer, ctx, fields, environments, state.sdfg)
    add_spot_check(tasklet, ctx, node, settings, Origin(str(session.folder), c.session_round or 0, best.key or ""))
    changes.place(state, node, tasklet)
    if best.verdict is not None:  # the winner is used: never silently while one of its checks could not decide
        best.verdict.warn(ctx, session.folder, stacklevel=4)
    result.outcome = "optimized"
    changes.summarize(session, result, c.session_round)


def _summarize(session: Session, result: NodeOptimization, current: int | None) -> None:
    from dataclasses import asdict

    summary = {"outcome": result.outcome, "reason": result.reason, "candidates": [asdict(c) for c in result.candidates]}
    session.update_summary(optimize=summary, **({"current": current} if current is not None else {}))
