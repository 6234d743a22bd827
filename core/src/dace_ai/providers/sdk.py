"""Helpers shared by provider plugins: answer schemas for structured outputs, failure messages.

Schemas. The answer schema (:func:`dace_ai.prompt.answer.answer_json_schema`) is
ordinary pydantic output: optional fields have defaults and are not
``required``. APIs differ in how much of JSON Schema they accept:

* OpenAI's strict mode (Responses ``text.format``, Chat Completions
  ``response_format``, and the gateways that copy it) requires every object to
  list *all* of its properties in ``required`` and to set
  ``additionalProperties: false``, and does not take ``default``.
  :func:`strict_json_schema` makes that transformation. The result still suits
  :func:`~dace_ai.prompt.answer.parse_answer`: a model that must fill every field
  writes the empty value (``""``, ``[]``, ``false``) where the pydantic default
  would have applied.
* Models without structured outputs get :func:`json_only_instruction`: the
  schema in the prompt with the instruction to answer with one JSON object.

Failures. :func:`provider_failure` turns whatever an SDK raised (Anthropic,
OpenAI and LiteLLM exceptions, recognised by their attributes, so no SDK is
imported here) into a :class:`~dace_ai.errors.ProviderError` that says what
happened, whether retries were spent, and which setting or variable to change.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from dace_ai.errors import ProviderError, redact
from dace_ai.providers.api import ProviderReply, ProviderRequest, Usage

#: Keywords strict mode does not accept; dropped (they only describe defaults).
_DROPPED = ("default",)

#: Status codes the SDKs retry by themselves (Stainless SDKs: 408, 409, 429 and every 5xx).
RETRIED_STATUS = frozenset({408, 409, 429})


def strict_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` in the form OpenAI-style strict mode requires.

    Every object (including those in ``$defs``, array items and unions) gets
    ``additionalProperties: false`` and ``required`` listing all of its
    properties; ``default`` values are removed. The input is not modified.
    """
    if not isinstance(schema, dict):
        raise TypeError(f"strict_json_schema: expected a JSON schema object (dict), got {type(schema).__name__}")
    return _strict(copy.deepcopy(schema))


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    for key in _DROPPED:
        node.pop(key, None)
    for key in ("$defs", "definitions", "properties", "patternProperties"):
        if isinstance(node.get(key), dict):
            node[key] = {name: _strict(sub) for name, sub in node[key].items()}
    for key in ("items", "not", "additionalItems"):
        if isinstance(node.get(key), (dict, list)):
            node[key] = _strict(node[key])
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(node.get(key), list):
            node[key] = [_strict(sub) for sub in node[key]]
    if node.get("type") == "object" or "properties" in node:
        node["additionalProperties"] = False
        node["required"] = list(node.get("properties", {}))
    return node


def json_only_instruction(schema: dict[str, Any], name: str = "answer") -> str:
    """Text that asks a model without structured outputs for one JSON object following ``schema``."""
    return (
        f"Respond with exactly one JSON object (the {name}) and nothing else: no prose before or after it, "
        "no Markdown fences. It must validate against this JSON schema:\n"
        + json.dumps(schema, indent=1, sort_keys=True)
    )


# ------------------------------------------------------------------ failures
def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _is_timeout(exc: BaseException) -> bool:
    return any(isinstance(e, TimeoutError) or "timeout" in type(e).__name__.lower() for e in _chain(exc))


def _is_connection(exc: BaseException) -> bool:
    names = (
        "apiconnectionerror",
        "connectionerror",
        "connecterror",
        "remoteprotocolerror",
        "readerror",
        "networkerror",
    )
    return any(isinstance(e, ConnectionError) or type(e).__name__.lower() in names for e in _chain(exc))


def _api_message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            kind = error.get("type")
            return f"{kind}: {error['message']}" if kind else str(error["message"])
    message = getattr(exc, "message", None) or str(exc)
    return " ".join(str(message).split())[:500]


def describe_failure(
    provider: str,
    exc: BaseException,
    request: ProviderRequest,
    *,
    endpoint: str | None = None,
    key_env: Sequence[str] = (),
) -> str:
    """One sentence (or two) saying why ``provider`` could not answer ``request``."""
    where = f"provider {provider!r} (model {request.model or 'default'}"
    where += f" at {endpoint})" if endpoint else ")"
    retries = request.max_retries
    spent = (
        f"after {retries} retr{'y' if retries == 1 else 'ies'} (setting max_retries, DACE_ai_max_retries)"
        if retries
        else "with retries off (setting max_retries=0)"
    )
    if _is_timeout(exc):  # before the status: LiteLLM's Timeout carries status 408
        return (
            f"{where}: no reply within timeout={request.timeout:g} s {spent}; "
            "raise the timeout setting (DACE_ai_timeout) for long generations"
        )
    status = _status_of(exc)
    if status in (401, 403):
        keys = " or ".join(key_env) if key_env else "the provider's API key"
        return f"{where}: the credentials were rejected (HTTP {status}: {_api_message(exc)}); check {keys}"
    if status is not None and (status in RETRIED_STATUS or status >= 500):
        return f"{where}: HTTP {status} ({_api_message(exc)}), still failing {spent}"
    if status is not None:
        return f"{where}: the request was refused with HTTP {status} ({_api_message(exc)}); not retried"
    if _is_connection(exc):
        return f"{where}: could not talk to the server ({_api_message(exc)}), {spent}"
    if isinstance(exc, ValueError) or type(exc).__name__ in ("ValidationError", "APIResponseValidationError"):
        return f"{where}: the reply is not a valid API response ({type(exc).__name__}: {_api_message(exc)})"
    return f"{where}: {type(exc).__name__}: {_api_message(exc)}"


def provider_failure(
    provider: str,
    exc: BaseException,
    request: ProviderRequest,
    *,
    endpoint: str | None = None,
    key_env: Sequence[str] = (),
) -> ProviderError:
    """A :class:`ProviderError` for ``exc`` (raise it ``from exc``); credentials in the text are redacted."""
    return ProviderError(redact(describe_failure(provider, exc, request, endpoint=endpoint, key_env=key_env)))


def cut_off_error(where: str, request: ProviderRequest) -> ProviderError:
    """The error for an answer that stopped at the token limit (never cached, never parsed)."""
    return ProviderError(
        f"{where}: the answer was cut off at max_tokens={request.max_tokens}; "
        "raise the max_tokens setting (DACE_ai_max_tokens)"
    )


def chat_completion_reply(
    response: Any, request: ProviderRequest, where: str, *, default_model: str, cost_usd: float | None = None
) -> ProviderReply:
    """A Chat Completions response (OpenAI's or LiteLLM's) as a reply, or a clear error.

    Refusals, content-filter stops, token-limit stops and empty answers are
    errors naming ``where`` (provider, model, endpoint).
    """
    choices = getattr(response, "choices", None)
    if not choices:
        raise ProviderError(f"{where}: the reply is not a valid Chat Completions response (no choices)")
    choice = choices[0]
    message = getattr(choice, "message", None)
    refusal = getattr(message, "refusal", None)
    if refusal:
        raise ProviderError(f"{where} refused to answer: {refusal}")
    if choice.finish_reason == "length":
        raise cut_off_error(where, request)
    if choice.finish_reason == "content_filter":
        raise ProviderError(f"{where} refused to answer: the content filter stopped the answer")
    text = getattr(message, "content", None) or ""
    if not text.strip():
        raise ProviderError(f"{where}: the reply contains no answer text (finish_reason {choice.finish_reason!r})")
    usage = getattr(response, "usage", None)
    return ProviderReply(
        text=text,
        usage=Usage(
            input_tokens=getattr(usage, "prompt_tokens", None),
            output_tokens=getattr(usage, "completion_tokens", None),
            cost_usd=cost_usd,
        ),
        model=getattr(response, "model", None) or request.model or default_model,
        stop_reason=choice.finish_reason,
    )
