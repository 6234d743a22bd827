"""The provider requests for a node, and what a session records about a request and its node.

Every path that asks a provider for a node (the expansion, ``dace_ai.generate``,
``dace_ai.optimize``, the manual exchange, refine and build repairs) builds its request
here, so that the same node and settings give the same request, and so the same cache
key: an answer ``generate`` cached is the one the expansion finds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.errors import redact
from dace_ai.prompt.answer import answer_json_schema
from dace_ai.prompt.render import render_prompt
from dace_ai.providers.api import Message, ProviderRequest


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
    """The request of a rendered prompt (``system``, ``user``) and its ``history``, with the model settings."""
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


def build_request(node_ctx: NodeContext, settings: AISettings, history: Sequence[Any] = ()) -> ProviderRequest:
    """The request for a node: system prompt, the rendered prompt, then ``history``.

    ``settings`` are resolved already (the expansion pass resolves them once per pass:
    :func:`dace_ai.expansion.expansion_pass.resolve`).

    ``history`` holds the previous assistant answers and repair messages
    (:class:`~dace_ai.providers.api.Message` objects or ``(role, text)`` pairs).
    """
    prompt = render_prompt(node_ctx, settings)
    return request_for(prompt.system, prompt.user, settings, history)


def request_record(provider: str, request: ProviderRequest, key: str) -> dict[str, Any]:
    """What a session records about a request (never a key; credentials in the base URL redacted)."""
    return {
        "provider": provider,
        "model": request.model,
        "effort": request.effort,
        "max_tokens": request.max_tokens,
        "base_url": redact(request.base_url) if request.base_url is not None else None,
        "schema_name": request.schema_name,
        "cache_key": key,
    }


def node_record(ctx: NodeContext) -> dict[str, Any]:
    """What a session records about the node a request was for."""
    return {
        "key": ctx.key,
        "name": ctx.name,
        "type": ctx.node_type,
        "library": ctx.library,
        "sdfg": ctx.sdfg_name,
        "state": ctx.state_label,
        "target": ctx.target.name,
    }
