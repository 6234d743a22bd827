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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dace_ai import compat
from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.errors import AnswerError, NativeKept
from dace_ai.expansion.answer_source import AnswerSource
from dace_ai.expansion.checked_answer import check_recorded
from dace_ai.expansion.expansion_pass import node_context, resolve
from dace_ai.expansion.provenance import accepted_provenance
from dace_ai.expansion.requests import node_record, request_for, request_record
from dace_ai.prompt.answer import Answer, parse_answer
from dace_ai.providers.api import Message, ProviderReply
from dace_ai.storage.cache import cache_key


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
    reports: list[Any] = field(default_factory=list)


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
    answers = AnswerSource(provider, settings)
    history: list[Message] = []
    attempts = 1 + (settings.max_repair_attempts if settings.compile_check else 0)
    reports: list[Any] = []
    for attempt in range(attempts):
        started = time.time()
        request = request_for(prompt.system, prompt.user, settings, history)
        if supplied is not None and attempt == 0:
            key = cache_key(provider.name, request)
            reply, source = ProviderReply(supplied, model="supplied"), "supplied"
        else:
            reply, source, key = answers.reply(request, ctx)
        record = request_record(provider.name, request, key)
        conversation = [(m.role, m.content) for m in request.messages]
        try:
            answer = parse_answer(
                reply.text,
                origin=f"{source} answer for node {ctx.name!r} (session {session.folder})",
                max_tokens=request.max_tokens,
            )
        except AnswerError as exc:
            session.record_round(
                node=node_record(ctx),
                system=request.system,
                messages=conversation,
                request=record,
                reply_text=reply.text,
                answer=None,
                reports=[],
                status="error",
                error=str(exc),
                source=source,
                node_json=node_json,
                usage=reply.usage,
                started=started,
            )
            raise
        checked = check_recorded(answer, ctx, settings, answers.recorded_checks(key, source))
        reports, environments = checked.reports, checked.environments
        from dace_ai.checking.stages import failure_error, inconclusive_error, repair_message
        from dace_ai.checking.verdict import judge

        verdict = judge(reports, settings)
        if not verdict.accepted:
            environments = set()
        rnd = session.record_round(
            node=node_record(ctx),
            system=request.system,
            messages=conversation,
            request=record,
            reply_text=reply.text,
            answer=answer.model_dump(mode="json"),
            reports=reports,
            status="accepted" if verdict.accepted else "rejected",
            source=source,
            node_json=node_json,
            usage=reply.usage,
            started=started,
            reason="expansion" if attempt == 0 else "repair",
            level=verdict.reached,
            extra={"checks_reused": True} if checked.reused else None,
        )
        if verdict.accepted:
            answers.keep(key, reply, source, reports, verdict.level, checked.record(verdict.level))
            verdict.warn(ctx, session.folder, stacklevel=2)
            return Outcome(
                answer,
                reply,
                provider.name,
                key,
                source,
                str(session.folder),
                rnd.number,
                environments,
                verdict.level,
                reports,
            )
        if not verdict.repairable:  # no repair round can fix a check that cannot decide
            raise inconclusive_error(ctx, list(verdict.inconclusive), session.folder)
        history += [Message("assistant", reply.text), Message("user", repair_message(reports))]
    error = failure_error(ctx, reports, attempts - 1, session.folder)
    if verdict.too_slow:
        raise NativeKept(
            f"node {ctx.name!r}: every candidate was slower than the native expansion "
            f"(bench=gate, min_speedup {settings.min_speedup}); keeping the native expansion. {error}",
            node=ctx.name,
            session=str(session.folder),
        )
    raise error


def generate_tasklet(sdfg: Any, state: Any, node: Any, settings: Any = None, *, supplied: str | None = None) -> Any:
    """The tasklet for ``node`` (not yet placed in the SDFG)."""
    from dace_ai.expansion.tasklet import make_tasklet

    settings = resolve(settings)
    ctx = node_context(sdfg, state, node, settings)
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
    return make_tasklet(node, outcome.answer, ctx, provenance, outcome.environments)


def implement(sdfg: Any, state: Any, node: Any, settings: Any = None, *, supplied: str | None = None) -> Any:
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
