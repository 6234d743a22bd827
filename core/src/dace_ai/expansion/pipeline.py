"""From a node in an SDFG to a tasklet: context -> prompt -> cache -> provider -> answer
-> checks and repair rounds -> tasklet -> session.

The context of an SDFG is collected once per expansion pass (types, schedules
and storage inferred on one copy), not once per node: every outermost
``SDFG.expand_library_nodes`` (which ``sdfg.compile()`` runs) and every
:func:`generate_prompts`-style loop runs inside :func:`expansion_pass`, which
keeps the collected contexts for its duration. Outside a pass each call collects
afresh, so edits between calls are always seen.

A cache hit needs no provider SDK and no key: the provider's client is only
built when a request actually has to be sent.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dace_ai import compat
from dace_ai.config.settings import AISettings, resolve_settings
from dace_ai.context.types import NodeContext
from dace_ai.errors import AnswerError, MissingAnswer, NativeKept, ProviderError
from dace_ai.expansion.implementation import IMPLEMENTATION
from dace_ai.expansion.provenance import Provenance
from dace_ai.prompt.answer import Answer, answer_json_schema, parse_answer
from dace_ai.providers.api import Message, ProviderReply, ProviderRequest, answering_for
from dace_ai.storage.cache import AnswerCache, cache_key

_pass = threading.local()
@contextlib.contextmanager
def expansion_pass() -> Iterator[None]:
    """Keep collected SDFG contexts (and resolved settings) until the outermost pass ends."""
    outer = getattr(_pass, "contexts", None) is None
    if outer:
        _pass.contexts = {}
        _pass.settings = None
    try:
        yield
    finally:
        if outer:
            _pass.contexts = None
            _pass.settings = None


def resolve(settings: AISettings | dict[str, Any] | None) -> AISettings:
    """Settings from an object, a dict of overrides, or the usual sources (once per pass)."""
    if isinstance(settings, AISettings):
        return settings
    if settings:
        return resolve_settings(settings)
    if getattr(_pass, "contexts", None) is not None:
        if _pass.settings is None:
            _pass.settings = resolve_settings()
        return _pass.settings
    return resolve_settings()


def node_context(sdfg: Any, state: Any, node: Any, settings: AISettings) -> NodeContext:
    """The node's context, from the SDFG context collected once per pass."""
    from dace_ai.context.collect import collect_sdfg_context

    contexts: dict[tuple[int, int], Any] | None = getattr(_pass, "contexts", None)
    root = sdfg
    while root.parent_sdfg is not None:  # one context per SDFG tree (nested SDFGs share it)
        root = root.parent_sdfg
    key = (id(root), id(settings))
    if contexts is not None and key in contexts:
        try:
            return contexts[key][1].node_context(state, node)
        except (KeyError, LookupError, ValueError):
            pass  # the SDFG changed under the pass: collect it again below

    for _, nstate, pending in pending_nodes(root):
        compat.name_unnamed_connectors(nstate, pending)
    compat.name_unnamed_connectors(state, node)
    sdfg_ctx = collect_sdfg_context(sdfg, settings)
    if contexts is not None:
        contexts[key] = (root, sdfg_ctx)  # keep the SDFG alive so its id is not reused
    return sdfg_ctx.node_context(state, node)


def pending_nodes(sdfg: Any) -> list[tuple[Any, Any, Any]]:
    """``(sdfg, state, node)`` for every library node that would expand with 'ai' (nested SDFGs included)."""
    from dace.sdfg import nodes

    found = []
    for node, parent in sdfg.all_nodes_recursive():
        if isinstance(node, nodes.LibraryNode) and compat.resolved_implementation(node) == IMPLEMENTATION:
            found.append((parent.sdfg, parent, node))
    return found


def expand_other_nodes(sdfg: Any) -> int:
    """Expand every library node whose implementation is not 'ai', until none is left; return how many.

    Compiling does this anyway; doing it first reveals the nodes such expansions
    create (``A @ B`` is a ``MatMul`` that becomes a ``Gemm``, which 'ai' implements).
    """
    from dace.sdfg import nodes

    count = 0
    while True:
        others = [(parent, node) for node, parent in sdfg.all_nodes_recursive()
                  if isinstance(node, nodes.LibraryNode) and compat.resolved_implementation(node) != IMPLEMENTATION]
        if not others:
            return count
        for state, node in others:
            node.expand(state.sdfg, state)
            count += 1


def expand_nodes_leading_to_ai(sdfg: Any) -> int:
    """Expand the library nodes whose expansion creates 'ai' nodes, until none is left; return how many.

    ``A @ B`` with ``dace.libraries.blas.default_implementation = 'ai'`` is a ``MatMul``
    (implemented natively) that expands to a ``Gemm``, which 'ai' implements: without
    this, :func:`dace_ai.generate` and :func:`dace_ai.optimize` would find no node and the
    request would happen later inside ``compile()``. Each candidate is tried on a copy of
    the SDFG first, so nodes that lead to no 'ai' node stay as they are.
    """
    count = 0
    while True:
        for node, parent in _other_library_nodes(sdfg):
            if _leads_to_ai(sdfg, node):
                node.expand(parent.sdfg, parent)
                count += 1
                break
        else:
            return count


def _other_library_nodes(sdfg: Any) -> list[tuple[Any, Any]]:
    from dace.sdfg import nodes

    return [(node, parent) for node, parent in sdfg.all_nodes_recursive()
            if isinstance(node, nodes.LibraryNode) and compat.resolved_implementation(node) != IMPLEMENTATION]


def _leads_to_ai(sdfg: Any, node: Any) -> bool:
    """Expand ``node`` on a copy of ``sdfg`` (and what it creates): does an 'ai' node appear?"""
    import copy

    trial = copy.deepcopy(sdfg)
    before = {n.guid for n, _ in trial.all_nodes_recursive()}
    found = [(n, p) for n, p in _other_library_nodes(trial) if n.guid == node.guid]
    if not found:
        return False
    try:
        found[0][0].expand(found[0][1].sdfg, found[0][1])
        for _ in range(16):  # nested expansions (a node that expands to another library node)
            created = [(n, p) for n, p in _other_library_nodes(trial) if n.guid not in before]
            if not created:
                break
            for n, p in created:
                n.expand(p.sdfg, p)
    except Exception:  # noqa: BLE001 - a node that cannot expand here is left to the compiler
        return False
    return any(n.guid not in before for _, _, n in pending_nodes(trial))


def _messages(history: Sequence[Any]) -> tuple[Message, ...]:
    result = []
    for item in history:
        if isinstance(item, Message):
            result.append(item)
        else:
            role, content = item
            result.append(Message(role, content))
    return tuple(result)


def request_for(system: str, user: str, settings: AISettings, history: Sequence[Any] = ()) -> ProviderRequest:
    return ProviderRequest(
        system=system,
        messages=(Message("user", user), *_messages(history)),
        schema=answer_json_schema(),
        model=settings.model,
        effort=settings.effort,
        max_tokens=settings.max_tokens,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
        base_url=settings.base_url,
    )


def build_request(node_ctx: NodeContext, settings: AISettings | None = None,
                  history: Sequence[Any] = ()) -> ProviderRequest:
    """The request for a node: system prompt, the rendered prompt, then ``history``.

    ``history`` holds the previous assistant answers and repair messages
    (:class:`~dace_ai.providers.api.Message` objects or ``(role, text)`` pairs).
    """
    from dace_ai.prompt.render import render_prompt

    settings = resolve(settings)
    prompt = render_prompt(node_ctx, settings)
    return request_for(prompt.system, prompt.user, settings, history)


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


def request_record(provider: str, request: ProviderRequest, key: str) -> dict[str, Any]:
    """What a session records about a request (never a key; credentials in the base URL redacted)."""
    from dace_ai.errors import redact

    return {"provider": provider, "model": request.model, "effort": request.effort, "max_tokens": request.max_tokens,
            "base_url": redact(request.base_url), "schema_name": request.schema_name, "cache_key": key}


def node_record(ctx: NodeContext) -> dict[str, Any]:
    return {"key": ctx.key, "name": ctx.name, "type": ctx.node_type, "library": ctx.library, "sdfg": ctx.sdfg_name,
            "state": ctx.state_label, "target": ctx.target.name}


def ask_for_node(provider: Any, client: Any, request: ProviderRequest, ctx: NodeContext, *,
                 cache_can_answer: bool = False) -> ProviderReply:
    """Ask ``provider`` on behalf of node ``ctx`` (providers may name files after it).

    ``cache_can_answer``: a missing answer will be served from the cache, so a provider
    that would ask a person need not (:func:`~dace_ai.providers.api.cached_fallback`).
    """
    from dace_ai.providers.select import ask

    try:
        with answering_for(ctx, cache_can_answer=cache_can_answer):
            return ask(provider, client, request)
    except ProviderError as exc:
        if isinstance(exc.__cause__, MissingAnswer):
            raise exc.__cause__ from None
        raise


class AnswerSource:
    """Replies to one provider's requests, from the answer cache or from the provider.

    The cache comes first (a hit needs no SDK and no key), except for providers whose
    own answers are authoritative (``answers_before_cache``: response files a person
    may have edited), which are asked first and fall back to the cache when they have
    nothing. The provider's client is built on the first request that needs it.
    """

    def __init__(self, provider: Any, settings: AISettings) -> None:
        self.provider, self.settings = provider, settings
        self.cache = AnswerCache()
        self._client: Any = None
        self._hits: dict[str, Any] = {}

    def recorded_checks(self, key: str, source: str) -> dict[str, Any] | None:
        """The checks the cached answer of ``key`` passed (when ``source`` says the reply is that answer)."""
        hit = self._hits.get(key) if source == "cache" else None
        return hit.checked if hit is not None else None

    def reply(self, request: ProviderRequest, ctx: NodeContext) -> tuple[ProviderReply, str, str]:
        """(reply, source, cache key); ``source`` is ``"cache"`` or the provider's name."""
        from dace_ai.providers.select import make_client

        key = cache_key(self.provider.name, request)
        hit = self.cache.get(key) if self.settings.cache else None
        if hit is not None:
            self._hits[key] = hit
        if hit is not None and not self.provider.answers_before_cache:
            return ProviderReply.from_record(hit.record), "cache", key
        if self._client is None:
            self._client = make_client(self.provider, self.settings)
        try:
            return (ask_for_node(self.provider, self._client, request, ctx, cache_can_answer=hit is not None),
                    self.provider.name, key)
        except MissingAnswer:
            if hit is None:
                raise
            return ProviderReply.from_record(hit.record), "cache", key  # the response file is gone, its answer is not

    def keep(self, key: str, reply: ProviderReply, source: str, reports: Sequence[Any] = (),
             level: str = "", checked: dict[str, Any] | None = None) -> None:
        """Cache an answer that passed its checks, with those checks.

        Called only once the answer is accepted: a refused answer is never cached, so a
        later run asks again (or reads the edited response file). ``checked``
        (:func:`dace_ai.expansion.check_reuse.record`) lets a later expansion of the same
        answer reuse its checks; a cached answer checked again here gets it added.
        """
        if not self.settings.cache:
            return
        if source != "cache":
            checks = [{"checker": r.checker, "status": r.status, "stage": r.stage} for r in reports]
            self.cache.put(key, self.provider.name, reply.as_record(),
                           extra={"checks": checks, "verification": level,
                                  **({"checked": checked} if checked else {})})
        elif checked and not any(r.details.get("reused") for r in reports):
            self.cache.record_checks(key, checked, level)


def solve(ctx: NodeContext, settings: AISettings, *, supplied: str | None = None,
          node_json: Any = None) -> Outcome:
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
            answer = parse_answer(reply.text, origin=f"{source} answer for node {ctx.name!r} (session {session.folder})",
                                  max_tokens=request.max_tokens)
        except AnswerError as exc:
            session.record_round(node=node_record(ctx), system=request.system, messages=conversation,
                                 request=record, reply_text=reply.text, answer=None, reports=[], status="error",
                                 error=str(exc), source=source, node_json=node_json, usage=reply.usage,
                                 started=started)
            raise
        checked = check_recorded(answer, ctx, settings, answers.recorded_checks(key, source))
        reports, environments = checked.reports, checked.environments
        from dace_ai.checking.stages import failure_error, inconclusive_error, repair_message
        from dace_ai.checking.verdict import judge

        verdict = judge(reports, settings)
        if not verdict.accepted:
            environments = set()
        rnd = session.record_round(node=node_record(ctx), system=request.system, messages=conversation,
                                   request=record, reply_text=reply.text, answer=answer.model_dump(mode="json"),
                                   reports=reports, status="accepted" if verdict.accepted else "rejected",
                                   source=source, node_json=node_json, usage=reply.usage, started=started,
                                   reason="expansion" if attempt == 0 else "repair", level=verdict.reached,
                                   extra={"checks_reused": True} if checked.reused else None)
        if verdict.accepted:
            answers.keep(key, reply, source, reports, verdict.level, checked.record(verdict.level))
            verdict.warn(ctx, session.folder, stacklevel=2)
            return Outcome(answer, reply, provider.name, key, source, str(session.folder), rnd.number, environments,
                           verdict.level, reports)
        if not verdict.repairable:  # no repair round can fix a check that cannot decide
            raise inconclusive_error(ctx, list(verdict.inconclusive), session.folder)
        history += [Message("assistant", reply.text), Message("user", repair_message(reports))]
    error = failure_error(ctx, reports, attempts - 1, session.folder)
    if verdict.too_slow:
        raise NativeKept(f"node {ctx.name!r}: every candidate was slower than the native expansion "
                         f"(bench=gate, min_speedup {settings.min_speedup}); keeping the native expansion. {error}",
                         node=ctx.name, session=str(session.folder))
    raise error


def bench_figures(reports: list[Any]) -> dict[str, Any] | None:
    """The bench checker's figures among ``reports`` (None when nothing was timed)."""
    for report in reports:
        if report.stage == "bench" and ("speedup" in report.details
                                        or "candidate_median" in report.details):
            return report.details
    return None


def bench_provenance(figures: dict[str, Any] | None) -> str:
    """Short provenance text: ``1.84x(1.71-1.95)_vs_native`` or the candidate's own time."""
    if not figures:
        return ""
    if "speedup" in figures:
        low, high = figures.get("speedup_range") or (figures["speedup"], figures["speedup"])
        return f"{figures['speedup']:.2f}x({low:.2f}-{high:.2f})_vs_native"
    return f"{figures['candidate_median'] * 1e6:.1f}us_per_call"


def sol_provenance(figures: dict[str, Any] | None) -> str:
    """The provenance's ``sol`` field: the fraction of speed of light of the bench (``0.33``), or ""."""
    from dace_ai.performance.speed_of_light import provenance_field

    return provenance_field((figures or {}).get("speed_of_light"))


def accepted_provenance(node: str, provider: str, reply: ProviderReply, source: str, key: str, session_id: str,
                        round_number: int, reports: Sequence[Any], level: str) -> Provenance:
    """The first line of a tasklet holding an accepted answer: where it came from, what its checks measured and
    the level they reached (:class:`~dace_ai.expansion.provenance.Provenance`).

    The expansion, ``refine`` and build repairs write it from the answer's own reports, so a
    tasklet never carries the level or the figures of code it no longer holds.
    """
    figures = bench_figures(list(reports))
    return Provenance.from_fields({
        "node": node, "provider": provider, "model": reply.model or "", "source": source, "cache_key": key[:16],
        "session": f"ai-sessions/{session_id}/round-{round_number}", "bench": bench_provenance(figures),
        "sol": sol_provenance(figures), "verification": level})


@dataclass
class CheckedAnswer:
    """An answer's check reports, the environments it resolved to, and what a later run may reuse."""

    answer: Answer
    ctx: NodeContext
    settings: AISettings
    reports: list[Any]
    environments: set[str]
    #: The reports were recorded by an earlier run under the same fingerprint (no check ran now).
    reused: bool = False
    fingerprint: str = ""

    def record(self, level: str) -> dict[str, Any] | None:
        """What the cache keeps so that a later run may reuse these checks (None when checks are off)."""
        if not self.settings.compile_check or not self.settings.cache:
            return None
        from dace_ai.expansion.check_reuse import fingerprint, record

        if not self.fingerprint:
            self.fingerprint = fingerprint(self.answer, self.ctx, self.settings, self.environments)
        return record(self.fingerprint, self.reports, level)


def check_recorded(answer: Answer, ctx: NodeContext, settings: AISettings, recorded: dict[str, Any] | None = None,
                   run: Any = None) -> CheckedAnswer:
    """:func:`check_answer`, reusing the ``recorded`` checks of a cached answer when nothing they depend on
    changed (:mod:`dace_ai.expansion.check_reuse`)."""
    digest = ""
    if recorded and settings.compile_check:
        from dace_ai.expansion.check_reuse import fingerprint, reuse

        resolution = answer_environments(answer, ctx)
        if not resolution.problems:
            environments = set(resolution.paths)
            digest = fingerprint(answer, ctx, settings, environments)
            reports = reuse(recorded, digest)
            if reports is not None:
                return CheckedAnswer(answer, ctx, settings, reports, environments, True, digest)
    reports, environments = check_answer(answer, ctx, settings, run)
    return CheckedAnswer(answer, ctx, settings, reports, environments, fingerprint=digest)


def check_answer(answer: Answer, ctx: NodeContext, settings: AISettings,
                 run: Any = None) -> tuple[list[Any], set[str]]:
    """The check reports of ``answer`` and, when it passed, the environment class paths it resolved to.

    Refused environment requests go back to the model like a failed check. ``run``
    (``run(answer, ctx, settings, environments) -> reports``) runs the checks elsewhere,
    e.g. :meth:`dace_ai.expansion.dispatch.CheckDispatcher.check` on an executor; the
    environments are resolved here either way.
    """
    from dace_ai.checking.stages import failed

    resolution = answer_environments(answer, ctx)
    if resolution.problems:
        from dace_ai.checking.api import CheckReport

        return [CheckReport("environments", "failed", "\n".join(resolution.problems), stage="compile")], set()
    if run is not None and settings.compile_check:
        reports = run(answer, ctx, settings, set(resolution.paths))
    else:
        from dace_ai.checking.candidate_checks import check_candidate
        from dace_ai.expansion.tasklet import tasklet_factory

        reports = check_candidate(answer, ctx, settings, resolution.paths, tasklet_factory(answer, ctx))
    return reports, (set() if failed(reports) else set(resolution.paths))


def answer_environments(answer: Answer, ctx: NodeContext) -> Any:
    """The environments the answer uses (registered ones by name, requested ones generated), or refusals."""
    from dace_ai.environments.resolve import Resolution, resolve_environments

    if not answer.environments and not answer.use_environments:
        return Resolution()
    return resolve_environments(answer, ctx)


def generate_tasklet(sdfg: Any, state: Any, node: Any, settings: Any = None, *,
                     supplied: str | None = None) -> Any:
    """The tasklet for ``node`` (not yet placed in the SDFG)."""
    from dace_ai.expansion.tasklet import make_tasklet

    settings = resolve(settings)
    ctx = node_context(sdfg, state, node, settings)
    try:
        node_json = node.to_json(state)
    except Exception:
        node_json = None
    outcome = solve(ctx, settings, supplied=supplied, node_json=node_json)
    provenance = accepted_provenance(ctx.name, outcome.provider, outcome.reply, outcome.source, outcome.key,
                                     Path(outcome.session).name, outcome.round, outcome.reports, outcome.level)
    from dace_ai.storage.sessions import Session

    Session(Path(outcome.session)).update_round(outcome.round, provenance=provenance.pairs(),
                                                environments=sorted(outcome.environments))
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
