"""Solving a node: from a node in an SDFG to its tasklet, through answers, checks and repair rounds.

:func:`solve` asks (or replays) until an answer passes its checks: the request
(:mod:`~dace_ai.expansion.requests`), its answer from the cache or the provider
(:mod:`~dace_ai.expansion.answer_source`), the checks (:mod:`~dace_ai.expansion.checked_answer`),
:func:`~dace_ai.checking.verdict.judge`, and a repair round with the checks' diagnostics
when they refused it; every round is recorded in the node's session.
:func:`generate_tasklet` turns the accepted answer into a tasklet whose first line says
where it came from (:func:`~dace_ai.expansion.provenance.accepted_provenance`), and
:func:`implement` places it in the SDFG, or falls back to the native expansion.

The node's context comes from the SDFG context collected once per expansion pass
(:mod:`~dace_ai.expansion.expansion_pass`).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dace_ai import compat
from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.errors import AnswerError, NativeKept
from dace_ai.expansion.answer_source import AnswerSource
from dace_ai.expansion.checked_answer import CheckedAnswer, check_recorded
from dace_ai.expansion.expansion_pass import node_context, resolve
from dace_ai.expansion.provenance import accepted_provenance
from dace_ai.expansion.requests import node_record, request_for, request_record
from dace_ai.prompt.answer import Answer, parse_answer
from dace_ai.providers.api import Message, ProviderReply
from dace_ai.runtime_check.instrument import add_spot_check
from dace_ai.runtime_check.registry import Origin
from dace_ai.state import STATE
from dace_ai.storage.cache import cache_key
from dace_ai.storage.sessions import RoundContent

if TYPE_CHECKING:
    from dace_ai.checking.api import CheckReport
    from dace_ai.checking.verdict import Verdict
    from dace_ai.plugins.registrations import Provider
    from dace_ai.prompt.render import Prompt
    from dace_ai.storage.sessions import Session


@dataclass
class Outcome:
    """An accepted answer and where it came from."""

    answer: Answer
    reply: ProviderReply
    provider: str
    key: str
    source: str  #: "cache", the provider's name, or "supplied"
    session: str
    round: int
    environments: set[str]
    #: How far the answer was checked (:func:`dace_ai.checking.levels.verification_level`).
    level: str = ""
    reports: list[CheckReport] = field(default_factory=list)


@dataclass
class _Solving:
    """What every round of solving one node shares: its context, provider, prompt, session and answers."""

    ctx: NodeContext
    settings: AISettings
    provider: Provider
    prompt: Prompt
    session: Session
    answers: AnswerSource
    node_json: Any


@dataclass
class _Round:
    """One round: its reply, the answer parsed from it, that answer's checks and verdict, and its session round."""

    reply: ProviderReply
    source: str
    key: str
    answer: Answer
    checked: CheckedAnswer
    verdict: Verdict
    number: int


def solve(ctx: NodeContext, settings: AISettings, *, supplied: str | None = None, node_json: Any = None) -> Outcome:
    """Ask (or replay) until an answer passes its checks; raise when it cannot.

    ``supplied`` is an answer text to use for the first round instead of asking
    (``read_prompt_response``); it is cached like any answer once it passes.

    An answer is cached only after it passes its checks. A check that cannot decide
    (``inconclusive``) gives a warning naming the node and the checker
    (``on_inconclusive=warn``), or refuses the answer at once (``reject``: no repair
    round can fix a missing tool).
    """
    from dace_ai.prompt.render import render_prompt
    from dace_ai.providers.select import select_provider
    from dace_ai.storage.sessions import open_session

    provider = select_provider(settings)
    prompt = render_prompt(ctx, settings)
    live_node = (ctx.live or {}).get("node")
    session = open_session(ctx.sdfg_name, ctx.key, guid=compat.node_guid(live_node), label=ctx.name)
    solving = _Solving(ctx, settings, provider, prompt, session, AnswerSource(provider, settings), node_json)
    history: list[Message] = []
    attempts = 1 + (settings.max_repair_attempts if settings.compile_check else 0)
    for attempt in range(attempts):
        rnd = _round(solving, attempt, history, supplied if attempt == 0 else None)
        if rnd.verdict.accepted:
            return _accepted(solving, rnd)
        from dace_ai.checking.stages import inconclusive_error, repair_message

        if not rnd.verdict.repairable:  # no repair round can fix a check that cannot decide
            raise inconclusive_error(ctx, list(rnd.verdict.inconclusive), session.folder)
        history += [Message("assistant", rnd.reply.text), Message("user", repair_message(rnd.checked.reports))]
    raise _refused(solving, rnd, attempts - 1)


def _round(solving: _Solving, attempt: int, history: list[Message], supplied: str | None) -> _Round:
    """One round: ask for an answer (or replay it, or take the ``supplied`` one), check and judge it, record it."""
    from dace_ai.checking.verdict import judge

    ctx, settings, session = solving.ctx, solving.settings, solving.session
    started = time.time()
    request = request_for(solving.prompt.system, solving.prompt.user, settings, history)
    if supplied is not None:
        key = cache_key(solving.provider.name, request)
        reply, source = ProviderReply(supplied, model="supplied"), "supplied"
    else:
        reply, source, key = solving.answers.reply(request, ctx)
    content = RoundContent(
        node=node_record(ctx),
        system=request.system,
        messages=[(m.role, m.content) for m in request.messages],
        request=request_record(solving.provider.name, request, key),
        reply_text=reply.text,
        source=source,
        node_json=solving.node_json,
        usage=reply.usage,
        started=started,
    )
    try:
        answer = parse_answer(
            reply.text,
            origin=f"{source} answer for node {ctx.name!r} (session {session.folder})",
            max_tokens=request.max_tokens,
        )
    except AnswerError as exc:
        session.record_round(replace(content, status="error", error=str(exc)))
        raise
    checked = check_recorded(answer, ctx, settings, solving.answers.recorded_checks(key, source))
    verdict = judge(checked.reports, settings)
    rnd = session.record_round(
        replace(
            content,
            answer=answer.model_dump(mode="json"),
            reports=checked.reports,
            status="accepted" if verdict.accepted else "rejected",
            reason="expansion" if attempt == 0 else "repair",
            level=verdict.reached,
            extra={"checks_reused": True} if checked.reused else None,
        )
    )
    return _Round(reply, source, key, answer, checked, verdict, rnd.number)


def _accepted(solving: _Solving, rnd: _Round) -> Outcome:
    """Cache the round's accepted answer, warn about checks that could not decide, and say where it came from."""
    reports, level = rnd.checked.reports, rnd.verdict.level
    solving.answers.keep(rnd.key, rnd.reply, rnd.source, reports, level, rnd.checked.record(level))
    rnd.verdict.warn(solving.ctx, solving.session.folder, stacklevel=3)
    return Outcome(
        rnd.answer,
        rnd.reply,
        solving.provider.name,
        rnd.key,
        rnd.source,
        str(solving.session.folder),
        rnd.number,
        rnd.checked.environments,
        level,
        reports,
    )


def _refused(solving: _Solving, last: _Round, repairs: int) -> Exception:
    """The error to raise when no round's answer passed (:class:`NativeKept` when every candidate was too slow)."""
    from dace_ai.checking.stages import failure_error

    error = failure_error(solving.ctx, last.checked.reports, repairs, solving.session.folder)
    if last.verdict.too_slow:
        return NativeKept(
            f"node {solving.ctx.name!r}: every candidate was slower than the native expansion "
            f"(bench=gate, min_speedup {solving.settings.min_speedup}); keeping the native expansion. {error}",
            node=solving.ctx.name,
            session=str(solving.session.folder),
        )
    return error


def generate_tasklet(
    sdfg: Any,
    state: Any,
    node: Any,
    settings: AISettings | dict[str, Any] | None = None,
    *,
    supplied: str | None = None,
) -> Any:
    """The tasklet for ``node`` (not yet placed in the SDFG)."""
    from dace_ai.expansion.tasklet import make_tasklet

    settings = resolve(settings)
    ctx = node_context(sdfg, state, node, settings)
    warn_if_gpu_cannot_build(ctx)
    try:
        node_json = node.to_json(state)
    except Exception:
        node_json = None
    outcome = solve(ctx, settings, supplied=supplied, node_json=node_json)
    provenance = accepted_provenance(
        ctx.name,
        outcome.provider,
        outcome.reply,
        outcome.source,
        outcome.key,
        Path(outcome.session).name,
        outcome.round,
        outcome.reports,
        outcome.level,
    )
    from dace_ai.storage.sessions import Session

    Session(Path(outcome.session)).update_round(
        outcome.round, provenance=provenance.pairs(), environments=sorted(outcome.environments)
    )
    tasklet = make_tasklet(node, outcome.answer, ctx, provenance, outcome.environments, sdfg)
    add_spot_check(tasklet, ctx, node, settings, Origin(str(outcome.session), outcome.round, outcome.key or ""))
    return tasklet


#: Whether this process was told that DaCe cannot build GPU programs here (the first GPU node says it).
_gpu_build_told: set[str] = STATE.register("expansion.pipeline.gpu_build_told", set())


def warn_if_gpu_cannot_build(ctx: NodeContext) -> None:
    """Say once per process, at the first GPU node, when DaCe cannot build GPU programs on this machine."""
    from dace_ai.checking.gpu_build import gpu_build_blocker
    from dace_ai.checking.units import touches_gpu
    from dace_ai.errors import DaceAIWarning

    if not touches_gpu(ctx) or _gpu_build_told:
        return
    blocker = gpu_build_blocker()
    if blocker is not None:
        _gpu_build_told.add(blocker)
        warnings.warn(f"GPU node {ctx.name!r}: {blocker}.", DaceAIWarning, stacklevel=4)


def implement(
    sdfg: Any,
    state: Any,
    node: Any,
    settings: AISettings | dict[str, Any] | None = None,
    *,
    supplied: str | None = None,
) -> Any:
    """Replace ``node`` in ``state`` by a tasklet written from a model's answer; return the tasklet.

    When no answer passes (rounds exhausted, or an undecidable check with
    ``on_inconclusive=reject``), ``on_failure`` decides: ``native`` (the default
    where the node has a native implementation) expands the node natively with a
    warning naming the node and the session and returns None; ``error`` raises
    the :class:`~dace_ai.errors.CheckFailed`. When ``bench=gate`` refused every candidate
    as slower (:class:`~dace_ai.errors.NativeKept`), the native expansion is kept whatever
    ``on_failure`` says: the code works, it is just not faster.
    """
    from dace_ai.errors import CheckFailed
    from dace_ai.expansion.tasklet import place_tasklet

    settings = resolve(settings)
    try:
        tasklet = generate_tasklet(sdfg, state, node, settings, supplied=supplied)
    except CheckFailed as exc:
        from dace_ai.expansion.fallback import expand_natively_or_raise

        if isinstance(exc, NativeKept):
            settings = settings.model_copy(update={"on_failure": "native"})
        expand_natively_or_raise(sdfg, state, node, settings, exc)
        return None
    return place_tasklet(state, node, tasklet)
