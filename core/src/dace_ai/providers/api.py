"""What a provider client receives and returns.

A provider registration's ``factory(settings)`` returns an object with
``complete(request: ProviderRequest) -> ProviderReply``. The core runs clients
from worker threads for concurrency, so clients must be thread-safe (the
official SDK clients are). Errors are raised as
:class:`~dace_ai.errors.ProviderError` with a message naming the provider.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from dace_ai.context.types import NodeContext


@dataclass(frozen=True)
class Message:
    role: Literal["user", "assistant"]
    content: str


@dataclass(frozen=True)
class ProviderRequest:
    """One conversation to answer, with everything that determines the answer."""

    system: str
    messages: tuple[Message, ...]
    #: JSON schema of the answer (``dace_ai.prompt.answer.answer_json_schema()``).
    schema: dict[str, Any]
    schema_name: str = "tasklet_answer"
    model: str | None = None
    effort: str | None = None
    max_tokens: int = 16000
    timeout: float = 600.0
    max_retries: int = 2
    base_url: str | None = None


@dataclass(frozen=True)
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "cost_usd": self.cost_usd}


@dataclass(frozen=True)
class ProviderReply:
    """The raw text of an answer (JSON expected) and what it cost."""

    text: str
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    stop_reason: str | None = None

    def as_record(self) -> dict[str, Any]:
        """Plain data for storage (the cache, session rounds)."""
        return {"text": self.text, "usage": self.usage.as_dict(), "model": self.model, "stop_reason": self.stop_reason}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ProviderReply:
        return cls(
            text=record["text"],
            usage=Usage(**(record.get("usage") or {})),
            model=record.get("model"),
            stop_reason=record.get("stop_reason"),
        )


@runtime_checkable
class ProviderClient(Protocol):
    def complete(self, request: ProviderRequest) -> ProviderReply: ...


# While the pipeline asks a provider, it says for which node and whether the cache could answer instead.
_current_node: ContextVar["NodeContext | None"] = ContextVar("dace_ai_current_node", default=None)
_cached_fallback: ContextVar[bool] = ContextVar("dace_ai_cached_fallback", default=False)


def current_node() -> NodeContext | None:
    """The node whose request is being answered (for providers that name files after it)."""
    return _current_node.get()


def cached_fallback() -> bool:
    """True while asking a provider whose missing answer would be served from the cache.

    A provider that asks a person (the manual exchange on a terminal) should then not
    ask: the cached answer will do.
    """
    return _cached_fallback.get()


@contextlib.contextmanager
def answering_for(node: NodeContext | None, *, cache_can_answer: bool = False) -> Iterator[None]:
    """While the block runs, :func:`current_node` is ``node`` and :func:`cached_fallback` is ``cache_can_answer``.

    The one way a caller that asks a provider says on whose behalf (the variables stay private to this module).
    """
    node_token = _current_node.set(node)
    cache_token = _cached_fallback.set(cache_can_answer)
    try:
        yield
    finally:
        _cached_fallback.reset(cache_token)
        _current_node.reset(node_token)
