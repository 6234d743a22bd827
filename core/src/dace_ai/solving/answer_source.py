"""Where a node's answer comes from: the answer cache or the provider, and what is cached once it passes.

A cache hit needs no provider SDK and no key: the provider's client is only built
when a request actually has to be sent. Only an accepted answer is cached, with the
checks it passed, so a later run reuses them instead of checking it again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dace_ai.checking.api import CheckReport
from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.errors import MissingAnswer, ProviderError
from dace_ai.plugins.registrations import Provider
from dace_ai.providers.api import ProviderClient, ProviderReply, ProviderRequest, answering_for
from dace_ai.providers.select import ask, make_client
from dace_ai.storage.cache import AnswerCache, CachedAnswer, cache_key


def ask_for_node(
    provider: Provider,
    client: ProviderClient,
    request: ProviderRequest,
    ctx: NodeContext,
    *,
    cache_can_answer: bool = False,
) -> ProviderReply:
    """Ask ``provider`` on behalf of node ``ctx`` (providers may name files after it).

    ``cache_can_answer``: a missing answer will be served from the cache, so a provider
    that would ask a person need not (:func:`~dace_ai.providers.api.cached_fallback`).
    """
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

    def __init__(self, provider: Provider, settings: AISettings, client: ProviderClient | None = None) -> None:
        self.provider, self.settings = provider, settings
        self.cache = AnswerCache()
        self._client = client  #: built on the first request that needs it, unless given
        self._hits: dict[str, CachedAnswer] = {}

    def recorded_checks(self, key: str, source: str) -> dict[str, Any] | None:
        """The checks the cached answer of ``key`` passed (when ``source`` says the reply is that answer)."""
        hit = self._hits.get(key) if source == "cache" else None
        return hit.checked if hit is not None else None

    def reply(self, request: ProviderRequest, ctx: NodeContext) -> tuple[ProviderReply, str, str]:
        """(reply, source, cache key); ``source`` is ``"cache"`` or the provider's name."""
        key = cache_key(self.provider.name, request)
        hit = self.cache.get(key) if self.settings.cache else None
        if hit is not None:
            self._hits[key] = hit
        if hit is not None and not self.provider.answers_before_cache:
            return ProviderReply.from_record(hit.record), "cache", key
        if self._client is None:
            self._client = make_client(self.provider, self.settings)
        try:
            return (
                ask_for_node(self.provider, self._client, request, ctx, cache_can_answer=hit is not None),
                self.provider.name,
                key,
            )
        except MissingAnswer:
            if hit is None:
                raise
            return ProviderReply.from_record(hit.record), "cache", key  # the response file is gone, its answer is not

    def keep(
        self,
        key: str,
        reply: ProviderReply,
        source: str,
        reports: Sequence[CheckReport] = (),
        level: str = "",
        checked: dict[str, Any] | None = None,
        note: Mapping[str, Any] | None = None,
    ) -> None:
        """Cache an answer that passed its checks, with those checks (``note``: fields written first).

        Called only by :func:`dace_ai.solving.rounds.keep`, once the answer is accepted: a
        refused answer is never cached, so a later run asks again (or reads the edited
        response file). ``checked``
        (:func:`dace_ai.solving.check_reuse.record`) lets a later expansion of the same
        answer reuse its checks; a cached answer checked again here gets it added.
        """
        if not self.settings.cache:
            return
        if source != "cache":
            checks = [{"checker": r.checker, "status": r.status, "stage": r.stage} for r in reports]
            self.cache.put(
                key,
                self.provider.name,
                reply.as_record(),
                extra={
                    **(note or {}),
                    "checks": checks,
                    "verification": level,
                    **({"checked": checked} if checked else {}),
                },
            )
        elif checked and not any(r.details.get("reused") for r in reports):
            self.cache.record_checks(key, checked, level)
