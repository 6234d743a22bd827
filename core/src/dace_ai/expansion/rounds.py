"""One round of solving a node, and rounds until one is accepted: the engine ``solve`` (a node's
expansion) and ``revise`` (refine, a program build's repair) drive.

A round asks for an answer (or takes the one supplied), parses it, checks it (reusing a
cached answer's recorded checks where nothing they depend on changed), judges it and
records it in the session; an answer that does not parse is recorded as an error and
raised. :func:`until_accepted` plays rounds with the repair diagnostics of the last one
until one is accepted, stops at once on a check that cannot decide, and raises the
driver's refusal when the rounds run out. What differs between drivers is the first
message, what a round records besides the conversation (:class:`~dace_ai.storage.sessions.RoundContent`)
and what happens to the accepted answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from dace_ai.checking.verdict import Verdict, judge
from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.errors import AnswerError
from dace_ai.expansion.answer_source import AnswerSource
from dace_ai.expansion.checked_answer import CheckedAnswer, check_recorded
from dace_ai.expansion.requests import request_record
from dace_ai.prompt.answer import Answer, parse_answer
from dace_ai.providers.api import Message, ProviderReply, ProviderRequest
from dace_ai.storage.cache import cache_key
from dace_ai.storage.sessions import RoundContent, Session


@dataclass(frozen=True)
class Round:
    """One played round: its reply, the answer parsed from it, that answer's checks and verdict, its number."""

    reply: ProviderReply
    source: str  #: "cache", the provider's name, or "supplied"
    key: str  #: the request's answer-cache key
    answer: Answer
    checked: CheckedAnswer
    verdict: Verdict
    number: int  #: the session's round number


@dataclass(frozen=True)
class Table:
    """What every round of one driver shares: the node, the settings, where answers come from, the session."""

    ctx: NodeContext
    settings: AISettings
    provider: str
    answers: AnswerSource
    session: Session
    reuse_checks: bool = True  #: reuse a cached answer's recorded checks (a revision checks anew)


def play_round(
    table: Table, request: ProviderRequest, content: RoundContent, *, origin: str, supplied: str | None = None
) -> Round:
    """Ask (or take ``supplied``), parse, check, judge and record one round; ``content`` says what it records
    besides the conversation and the reply. ``origin`` names the answer in a parse error."""
    started = time.time()
    if supplied is not None:
        key = cache_key(table.provider, request)
        reply, source = ProviderReply(supplied, model="supplied"), "supplied"
    else:
        reply, source, key = table.answers.reply(request, table.ctx)
    content = replace(
        content,
        system=request.system,
        messages=[(m.role, m.content) for m in request.messages],
        request={**request_record(table.provider, request, key), **content.request},
        reply_text=reply.text,
        source=source,
        usage=reply.usage,
        started=content.started or started,
    )
    try:
        answer = parse_answer(reply.text, origin=f"{source} {origin}", max_tokens=request.max_tokens)
    except AnswerError as exc:
        table.session.record_round(replace(content, status="error", error=str(exc)))
        raise
    recorded = table.answers.recorded_checks(key, source) if table.reuse_checks else None
    checked = check_recorded(answer, table.ctx, table.settings, recorded)
    verdict = judge(checked.reports, table.settings)
    extra = {**(content.extra or {}), **({"checks_reused": True} if checked.reused else {})}
    rnd = table.session.record_round(
        replace(
            content,
            answer=answer.model_dump(mode="json"),
            reports=checked.reports,
            status="accepted" if verdict.accepted else "rejected",
            level=verdict.reached,
            extra=extra or None,
        )
    )
    return Round(reply, source, key, answer, checked, verdict, rnd.number)


def until_accepted(
    table: Table,
    attempts: int,
    play: Callable[[int, list[Message]], Round],
    refused: Callable[[Round], Exception],
) -> Round:
    """Play rounds (``play(attempt, history)``) until one is accepted and return it.

    After a refused round the next one hears its repair diagnostics; a check that cannot
    decide ends the rounds at once (no repair can fix a missing tool); ``refused(last)`` is
    raised when ``attempts`` rounds were refused.
    """
    from dace_ai.checking.stages import inconclusive_error, repair_message

    history: list[Message] = []
    rnd: Round | None = None
    for attempt in range(attempts):
        rnd = play(attempt, history)
        if rnd.verdict.accepted:
            return rnd
        if not rnd.verdict.repairable:
            raise inconclusive_error(table.ctx, list(rnd.verdict.inconclusive), Path(table.session.folder))
        history += [Message("assistant", rnd.reply.text), Message("user", repair_message(rnd.checked.reports))]
    assert rnd is not None, "at least one round"
    raise refused(rnd)
