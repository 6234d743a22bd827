"""One round of solving a node, and rounds until one is accepted: the engine every path that judges an
answer drives.

A round asks for an answer (or takes the one supplied), parses it, checks it (reusing a
cached answer's recorded checks where nothing they depend on changed), judges it and
records it in the session; an answer that does not parse is recorded as an error and
raised. :func:`until_accepted` plays rounds with the repair diagnostics of the last one
until one is accepted, stops at once on a check that cannot decide, and raises the
driver's refusal when the rounds run out. :func:`keep` is the one place an accepted
answer is written to the answer cache, and :func:`accept` keeps it, warns about checks that
could not decide and writes the answer's provenance into its round.

The drivers:

* ``solve`` (a node's expansion, :mod:`~dace_ai.expansion.pipeline`) and ``revise`` (refine
  and program-build repair, :mod:`~dace_ai.workflows.revision`) play rounds
  (:func:`play_round`, :func:`until_accepted`) and :func:`accept` the winner;
* ``dace_ai.optimize`` (:mod:`~dace_ai.workflows.optimize`) asks for several candidates at
  once: each is asked and parsed (:func:`ask`) in one thread and checked, judged and
  recorded (:func:`check`) in another, on the run's executor (``Table.run``), recorded as
  ``passed`` rather than ``accepted`` (``Table.accepted``), and every one that passed is
  cached without its checks' record (:class:`Keeping`);
* ``dace_ai.generate`` (:mod:`~dace_ai.workflows.generate`) plays one round per distinct
  request without a session, its checks on the executor, and caches what passed with the
  node's name (:class:`Keeping`);
* the bench's attempt (:mod:`~dace_ai.evaluation.attempt`) plays one round of a supplied
  answer without a session or a cache, and keeps its own accounting of the verdict.

What differs between drivers is the first message, what a round records besides the
conversation (:class:`~dace_ai.storage.session_store.RoundContent`), the :class:`Table`'s
parameters and what happens to the accepted answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dace_ai.checking.stages import inconclusive_error, repair_message
from dace_ai.checking.verdict import Verdict, judge
from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.errors import AnswerError
from dace_ai.prompt.answer import Answer, parse_answer
from dace_ai.providers.api import Message, ProviderReply, ProviderRequest
from dace_ai.solving.answer_source import AnswerSource
from dace_ai.solving.checked_answer import CheckedAnswer, CheckRun, check_recorded
from dace_ai.solving.provenance import Provenance, accepted_provenance
from dace_ai.solving.requests import request_record
from dace_ai.storage.cache import cache_key
from dace_ai.storage.session_store import RoundContent, Session


@dataclass(frozen=True)
class Round:
    """One played round: its reply, the answer parsed from it, that answer's checks and verdict, its number."""

    reply: ProviderReply
    source: str  #: "cache", the provider's name, or "supplied"
    key: str  #: the request's answer-cache key
    answer: Answer
    checked: CheckedAnswer
    verdict: Verdict
    number: int  #: the session's round number (0 without a session)


@dataclass(frozen=True)
class Keeping:
    """What the answer cache keeps of an accepted answer besides the reply and its checks' statuses."""

    #: The checks' record, so that a later run may reuse them (:meth:`CheckedAnswer.record`).
    checks: bool = True
    #: Fields written before the others (``dace_ai.generate``: the node's name and ``via``).
    note: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Table:
    """What every round of one driver shares: the node, the settings, where answers come from, the session,
    and the driver's rules for checking, recording and caching."""

    ctx: NodeContext
    settings: AISettings
    provider: str
    answers: AnswerSource | None  #: None: only supplied answers are played (the bench's attempt)
    session: Session | None  #: None: rounds are not recorded (``dace_ai.generate``, the bench's attempt)
    reuse_checks: bool = True  #: reuse a cached answer's recorded checks (a revision checks anew)
    run: CheckRun | None = None  #: runs the checks elsewhere (an executor's dispatcher); None: here
    keeping: Keeping = Keeping()
    accepted: str = "accepted"  #: the status an accepted round is recorded with (``passed``: an optimize candidate)
    #: Held while the provider is asked (a bound on the requests in flight over a whole run).
    asking: AbstractContextManager[Any] | None = None
    #: Rounds of one table are recorded one at a time (optimize records candidates from several threads).
    recording: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def recorded_in(self) -> Session:
        """The session the rounds are recorded in (a driver that plays rounds until one is accepted has one)."""
        assert self.session is not None, "this table records no rounds"
        return self.session


@dataclass(frozen=True)
class Asked:
    """A round asked and parsed (:func:`ask`), to be checked (:func:`check`)."""

    request: ProviderRequest
    reply: ProviderReply
    source: str  #: "cache", the provider's name, or "supplied"
    key: str  #: the request's answer-cache key
    content: RoundContent | None  #: what the round records (with the conversation and the reply)
    answer: Answer | None  #: None when the reply did not parse (``error`` says why)
    error: AnswerError | None = None
    number: int = 0  #: the session's round number of an answer that did not parse


#: How a parse error names the answer: the text after its source, or a function of the source.
Origin = str | Callable[[str], str]


def ask(
    table: Table,
    request: ProviderRequest,
    content: RoundContent | None = None,
    *,
    origin: Origin,
    supplied: str | None = None,
    limit: bool = True,
) -> Asked:
    """Ask for the answer to ``request`` (or take ``supplied``) and parse it.

    An answer that does not parse is recorded as an error round (with a session and
    ``content``) and comes back with its ``error``. ``origin`` names the answer in that
    error: a text said after the answer's source, or ``origin(source)``. ``limit``: refuse
    a reply longer than the request's ``max_tokens`` could produce. The provider's own
    errors are raised.
    """
    started = time.time()
    if supplied is not None:
        key = cache_key(table.provider, request)
        reply, source = ProviderReply(supplied, model="supplied"), "supplied"
    else:
        assert table.answers is not None, "a table without answers plays supplied answers only"
        with table.asking or nullcontext():
            reply, source, key = table.answers.reply(request, table.ctx)
    if content is not None:
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
    named = origin(source) if callable(origin) else f"{source} {origin}"
    try:
        answer = parse_answer(reply.text, origin=named, max_tokens=request.max_tokens if limit else None)
    except AnswerError as exc:
        number = _record(table, content, status="error", error=str(exc))
        return Asked(request, reply, source, key, content, None, exc, number)
    return Asked(request, reply, source, key, content, answer)


def check(table: Table, asked: Asked) -> Round:
    """Check the answer ``asked`` got (on ``table.run`` when set), judge it and record the round."""
    assert asked.answer is not None, "only a parsed answer is checked"
    recorded = (
        table.answers.recorded_checks(asked.key, asked.source)
        if table.reuse_checks and table.answers is not None
        else None
    )
    checked = check_recorded(asked.answer, table.ctx, table.settings, recorded, table.run)
    verdict = judge(checked.reports, table.settings)
    extra = {**((asked.content.extra if asked.content else None) or {})}
    if checked.reused:
        extra["checks_reused"] = True
    number = _record(
        table,
        asked.content,
        answer=asked.answer.model_dump(mode="json"),
        reports=checked.reports,
        status=table.accepted if verdict.accepted else "rejected",
        level=verdict.reached,
        extra=extra or None,
    )
    return Round(asked.reply, asked.source, asked.key, asked.answer, checked, verdict, number)


def _record(table: Table, content: RoundContent | None, **changes: Any) -> int:
    """Record ``content`` with ``changes`` in the table's session; the round's number (0 when not recorded)."""
    if table.session is None or content is None:
        return 0
    with table.recording:
        return table.session.record_round(replace(content, **changes)).number


def play_round(
    table: Table,
    request: ProviderRequest,
    content: RoundContent | None = None,
    *,
    origin: Origin,
    supplied: str | None = None,
    limit: bool = True,
) -> Round:
    """Ask (or take ``supplied``), parse, check, judge and record one round; ``content`` says what it records
    besides the conversation and the reply. An answer that does not parse raises its
    :class:`~dace_ai.errors.AnswerError` (after it is recorded)."""
    asked = ask(table, request, content, origin=origin, supplied=supplied, limit=limit)
    if asked.error is not None:
        raise asked.error
    return check(table, asked)


def keep(table: Table, rnd: Round) -> None:
    """Cache the accepted answer of ``rnd`` with its checks (the one place an answer is written to the cache).

    Only an answer that passed its checks is cached, so a later run asks again after a
    refusal; the table's :class:`Keeping` says what is kept besides the reply.
    """
    assert table.answers is not None, "a table without answers caches nothing"
    level = rnd.verdict.level
    recorded = rnd.checked.record(level) if table.keeping.checks else None
    table.answers.keep(rnd.key, rnd.reply, rnd.source, rnd.checked.reports, level, recorded, table.keeping.note)


def provenance(rnd: Round, node: str, provider: str, session: Session, *, optimize: str | None = None) -> Provenance:
    """The first line of the tasklet holding ``rnd``'s answer (``optimize``: the candidate, ``r<round>s<sample>``)."""
    return accepted_provenance(
        node,
        provider,
        rnd.reply,
        rnd.source,
        rnd.key,
        session.folder.name,
        rnd.number,
        rnd.checked.reports,
        rnd.verdict.level,
        optimize=optimize,
    )


def accept(table: Table, rnd: Round, node: str, *, stacklevel: int = 2) -> Provenance:
    """Cache ``rnd``'s accepted answer, warn about its checks that could not decide, and write its provenance
    (and the environments it resolved to) into its round; return the provenance."""
    session = table.recorded_in
    keep(table, rnd)
    rnd.verdict.warn(table.ctx, session.folder, stacklevel=stacklevel + 1)
    fields = provenance(rnd, node, table.provider, session)
    session.update_round(rnd.number, provenance=fields.pairs(), environments=sorted(rnd.checked.environments))
    return fields


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
    history: list[Message] = []
    rnd: Round | None = None
    for attempt in range(attempts):
        rnd = play(attempt, history)
        if rnd.verdict.accepted:
            return rnd
        if not rnd.verdict.repairable:
            raise inconclusive_error(table.ctx, list(rnd.verdict.inconclusive), Path(table.recorded_in.folder))
        history += [Message("assistant", rnd.reply.text), Message("user", repair_message(rnd.checked.reports))]
    assert rnd is not None, "at least one round"
    raise refused(rnd)
