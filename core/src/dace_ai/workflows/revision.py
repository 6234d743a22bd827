"""A new answer for a generated tasklet, placed only once it passes the checks.

Two things continue a tasklet's recorded conversation: ``refine`` (the user's
feedback) and ``build``/``repair`` (the whole program's compiler errors that blame
the tasklet). Both ask the same provider in the same conversation, and both must
hold the new answer to the same standard as the first one: the checks of the
node's context (compile like the real build, verify against the node it replaced,
bench), repair rounds with their diagnostics, and :func:`~dace_ai.checking.verdict.judge`.
Only an accepted answer changes the tasklet, and its first line then carries the
level *this* answer reached, never the level of the code it replaced. A refused
one leaves the tasklet and the SDFG as they were (the rounds are recorded in the
session) and raises :class:`~dace_ai.errors.CheckFailed`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dace_ai import compat
from dace_ai.checking.stages import failure_error
from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.errors import CheckFailed
from dace_ai.expansion.expansion_pass import node_context
from dace_ai.providers.api import Message
from dace_ai.providers.select import select_provider
from dace_ai.solving.answer_source import AnswerSource
from dace_ai.solving.requests import request_for
from dace_ai.solving.rounds import Keeping, Round, Table, accept, play_round, until_accepted
from dace_ai.solving.tasklet import update_tasklet
from dace_ai.storage.session_store import RoundContent, Session
from dace_ai.workflows.generated import Generated, replaced_node, session_of


@dataclass(frozen=True)
class Revision:
    """What asks for the new answer: the first message, and how its rounds are recorded."""

    message: str  #: the user message that continues the conversation (feedback, compiler errors, ...)
    reason: str  #: the first round's reason in the session ("refine", "program build repair")
    feedback: str = ""  #: the user's feedback, recorded with the first round
    edited_by_hand: bool = False  #: the tasklet's code differed from its round's answer


def revise(sdfg: Any, g: Generated, revision: Revision, settings: AISettings) -> Any:
    """Continue ``g``'s conversation with ``revision.message``; place the first accepted answer; return the tasklet.

    ``sdfg`` is the program whose build folder is discarded after the change, so the
    next ``compile()`` builds the new code. ``g`` must have a session
    (:func:`~dace_ai.workflows.generated.session_of` says what is wrong when it has not).
    """
    session = session_of(g)
    system, messages = _recorded_conversation(g, session)
    provider = select_provider(settings)
    ctx = _checked_context(g, session, settings)
    node = {**(session.summary().get("node") or {}), "tasklet": g.tasklet.label}
    answers = AnswerSource(provider, settings)
    # A revision checks anew, and caches the answer without a record of its checks to reuse.
    table = Table(ctx, settings, provider.name, answers, session, reuse_checks=False, keeping=Keeping(checks=False))
    opening = [*messages[1:], ("user", revision.message)]

    def play(attempt: int, history: list[Message]) -> Round:
        content = RoundContent(
            node=node,
            system="",
            messages=[],
            request={"reason": revision.reason},
            reason=revision.reason if attempt == 0 else "repair",
            feedback=revision.feedback if attempt == 0 else "",
            extra={"parent": g.round, "edited_by_hand": revision.edited_by_hand},
        )
        request = request_for(system, messages[0][1], settings, [*opening, *history])
        return play_round(table, request, content, origin=f"answer revising {g.name!r} ({revision.reason})")

    attempts = 1 + (settings.max_repair_attempts if settings.compile_check else 0)
    rnd = until_accepted(
        table, attempts, play, lambda last: failure_error(ctx, last.checked.reports, attempts - 1, session.folder)
    )
    fields = accept(table, rnd, g.name, stacklevel=3)  # only an answer that passed is cached

    update_tasklet(g.tasklet, rnd.answer, fields, rnd.checked.environments, sdfg=g.sdfg, ctx=ctx)
    compat.discard_build_folder(sdfg)
    return g.tasklet


def _recorded_conversation(g: Generated, session: Session) -> tuple[str, list[tuple[str, str]]]:
    """(system, messages) of ``g``'s round with its answer, to be continued; raise when they cannot be read."""
    conversation = session.conversation(g.round) if g.round is not None else None
    if conversation is None:
        raise CheckFailed(
            f"{g.describe()}: the recorded conversation of round {g.round} cannot be read "
            f"(messages.json and answer.txt in {session.round_folder(g.round or 0)}), so it cannot "
            "be continued",
            node=g.name,
            session=str(session.folder),
        )
    return conversation


def _checked_context(g: Generated, session: Session, settings: AISettings) -> NodeContext:
    """The tasklet's context, with the library node it replaced as the checks' reference."""
    ctx = node_context(g.sdfg, g.state, g.tasklet, settings)
    replaced = replaced_node(session, g)
    if replaced is not None:
        ctx.live = {**(ctx.live or {}), "reference_node": replaced}
    return ctx
