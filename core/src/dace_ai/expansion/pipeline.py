"""Solving a node: from a node in an SDFG to its tasklet, through answers, checks and repair rounds.

:func:`solve` asks (or replays) until an answer passes its checks: the request
(:mod:`~dace_ai.solving.requests`), its answer from the cache or the provider
(:mod:`~dace_ai.solving.answer_source`), the checks (:mod:`~dace_ai.solving.checked_answer`),
:func:`~dace_ai.checking.verdict.judge`, and a repair round with the checks' diagnostics
when they refused it; every round is recorded in the node's session.
:func:`generate_tasklet` turns the accepted answer into a tasklet whose first line says
where it came from (:func:`~dace_ai.solving.rounds.accept`), and
:func:`implement` places it in the SDFG, or falls back to the native expansion.

The node's context comes from the SDFG context collected once per expansion pass
(:mod:`~dace_ai.expansion.expansion_pass`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dace_ai import compat
from dace_ai.checking.stages import failure_error
from dace_ai.compilation.gpu_toolchain import gpu_build_blocker
from dace_ai.compilation.units import touches_gpu
from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.errors import CheckFailed, DaceAIWarning, NativeKept
from dace_ai.expansion.expansion_pass import node_context, resolve
from dace_ai.expansion.fallback import expand_natively_or_raise
from dace_ai.prompt.answer import Answer
from dace_ai.prompt.render import render_prompt
from dace_ai.providers.api import Message, ProviderReply
from dace_ai.providers.select import select_provider
from dace_ai.runtime_check.instrument import add_spot_check
from dace_ai.runtime_check.registry import Origin
from dace_ai.solving.answer_source import AnswerSource
from dace_ai.solving.provenance import Provenance
from dace_ai.solving.requests import node_record, request_for
from dace_ai.solving.rounds import Round, Table, accept, play_round, until_accepted
from dace_ai.solving.tasklet import make_tasklet, place_tasklet
from dace_ai.state import STATE
from dace_ai.storage.session_store import RoundContent, open_session

if TYPE_CHECKING:
    from dace_ai.checking.api import CheckReport


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
    provenance: Provenance  #: the first line of the tasklet holding the answer
    #: How far the answer was checked (:func:`dace_ai.checking.levels.verification_level`).
    level: str = ""
    reports: list[CheckReport] = field(default_factory=list)


def solve(ctx: NodeContext, settings: AISettings, *, supplied: str | None = None, node_json: Any = None) -> Outcome:
    """Ask (or replay) until an answer passes its checks; raise when it cannot.

    ``supplied`` is an answer text to use for the first round instead of asking
    (``read_prompt_response``); it is cached like any answer once it passes.

    An answer is cached only after it passes its checks. A check that cannot decide
    (``inconclusive``) gives a warning naming the node and the checker
    (``on_inconclusive=warn``), or refuses the answer at once (``reject``: no repair
    round can fix a missing tool).
    """
    provider = select_provider(settings)
    prompt = render_prompt(ctx, settings)
    live_node = (ctx.live or {}).get("node")
    session = open_session(ctx.sdfg_name, ctx.key, guid=compat.node_guid(live_node), label=ctx.name)
    table = Table(ctx, settings, provider.name, AnswerSource(provider, settings), session)
    origin = f"answer for node {ctx.name!r} (session {session.folder})"

    def play(attempt: int, history: list[Message]) -> Round:
        content = RoundContent(
            node=node_record(ctx),
            system="",
            messages=[],
            request={},
            node_json=node_json,
            reason="expansion" if attempt == 0 else "repair",
        )
        request = request_for(prompt.system, prompt.user, settings, history)
        return play_round(table, request, content, origin=origin, supplied=supplied if attempt == 0 else None)

    attempts = 1 + (settings.max_repair_attempts if settings.compile_check else 0)
    rnd = until_accepted(table, attempts, play, lambda last: _refused(table, last, attempts - 1))
    return _accepted(table, rnd)


def _accepted(table: Table, rnd: Round) -> Outcome:
    """Cache the round's accepted answer, warn about checks that could not decide, write its provenance, and say
    where it came from."""
    fields = accept(table, rnd, table.ctx.name, stacklevel=3)
    return Outcome(
        rnd.answer,
        rnd.reply,
        table.provider,
        rnd.key,
        rnd.source,
        str(table.recorded_in.folder),
        rnd.number,
        rnd.checked.environments,
        fields,
        rnd.verdict.level,
        rnd.checked.reports,
    )


def _refused(table: Table, last: Round, repairs: int) -> Exception:
    """The error to raise when no round's answer passed (:class:`NativeKept` when every candidate was too slow)."""
    error = failure_error(table.ctx, last.checked.reports, repairs, table.recorded_in.folder)
    if last.verdict.too_slow:
        return NativeKept(
            f"node {table.ctx.name!r}: every candidate was slower than the native expansion "
            f"(bench=gate, min_speedup {table.settings.min_speedup}); keeping the native expansion. {error}",
            node=table.ctx.name,
            session=str(table.recorded_in.folder),
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
    settings = resolve(settings)
    ctx = node_context(sdfg, state, node, settings)
    warn_if_gpu_cannot_build(ctx)
    try:
        node_json = node.to_json(state)
    except Exception:
        node_json = None
    outcome = solve(ctx, settings, supplied=supplied, node_json=node_json)
    tasklet = make_tasklet(node, outcome.answer, ctx, outcome.provenance, outcome.environments, sdfg)
    add_spot_check(tasklet, ctx, node, settings, Origin(str(outcome.session), outcome.round, outcome.key or ""))
    return tasklet


#: Whether this process was told that DaCe cannot build GPU programs here (the first GPU node says it).
_gpu_build_told: set[str] = STATE.register("expansion.pipeline.gpu_build_told", set())


def warn_if_gpu_cannot_build(ctx: NodeContext) -> None:
    """Say once per process, at the first GPU node, when DaCe cannot build GPU programs on this machine."""
    if not touches_gpu(ctx) or _gpu_build_told:
        return
    blocker = gpu_build_blocker("hip" if ctx.target.language == "hip" else "cuda")
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
    settings = resolve(settings)
    try:
        tasklet = generate_tasklet(sdfg, state, node, settings, supplied=supplied)
    except CheckFailed as exc:
        if isinstance(exc, NativeKept):
            settings = settings.model_copy(update={"on_failure": "native"})
        expand_natively_or_raise(sdfg, state, node, settings, exc)
        return None
    return place_tasklet(state, node, tasklet)
