"""What a provider client receives and returns.

A provider registration's ``factory(settings)`` returns an object with
``complete(request: ProviderRequest) -> ProviderReply``. The core runs clients
from worker threads for concurrency, so clients must be thread-safe (the
official SDK clients are). Errors are raised as
:class:`~dace_ai.errors.ProviderError` with a message naming the provider.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable


@dataclass(frozen=True)
class Message:
    role: Literal["user", "assistant"]
    content: str


@dataclass(frozen=True)
class ProviderRequest:
    """One conversation to answer, with everything that determines the answer."""

    system: str
    messages: tuple[Message, ...]
    #: JSON schema of the answer (``dace_ai.answer.answer_json_schema()``).
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


@runtime_checkable
class ProviderClient(Protocol):
    def complete(self, request: ProviderRequest) -> ProviderReply: ...
