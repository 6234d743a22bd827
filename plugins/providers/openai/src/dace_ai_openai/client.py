"""The OpenAI client of dace-ai: the Responses API with a strict JSON schema.

How a :class:`~dace_ai.providers.api.ProviderRequest` maps onto the API
(``client.responses.create``):

* ``system`` -> ``instructions``; ``messages`` -> ``input`` (role/content
  items); ``max_tokens`` -> ``max_output_tokens``; ``model`` (default
  :data:`DEFAULT_MODEL`); ``effort`` -> ``reasoning.effort``; ``timeout`` ->
  per-call timeout; ``store=False`` (answers are kept in dace-ai's own cache,
  not on the server).
* The answer schema -> ``text.format = {"type": "json_schema", "strict": true,
  ...}``. Strict mode requires every object to list all of its properties in
  ``required`` and to set ``additionalProperties: false``;
  :func:`dace_ai.providers.sdk.strict_json_schema` transforms the pydantic
  schema accordingly (optional fields become required; the model writes their
  empty value, which the answer parser accepts).
* ``base_url`` -> the SDK's ``base_url``, for gateways and compatible servers
  (vLLM, llama.cpp server, Ollama's ``/v1``). Servers that only implement Chat
  Completions are reached with the plugin's own setting ``openai_api = "chat"``
  (``DACE_ai_openai_api=chat``, DaCe config or ``[tool.dace-ai]``): then
  ``chat.completions.create`` is called with ``response_format`` json_schema
  (strict), ``max_completion_tokens`` and ``reasoning_effort``.
* ``max_retries`` -> the SDK's ``max_retries`` (retries 408/409/429/5xx,
  connection errors and timeouts with backoff, honouring ``retry-after``).

The key comes from ``OPENAI_API_KEY``. Without it the client refuses to start
and names the variable, unless a ``base_url`` is set: local compatible servers
usually need no key, so the placeholder ``no-key`` is sent. Refusals and
answers cut off at the token limit raise :class:`~dace_ai.errors.ProviderError`.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import openai
from dace_ai.plugin import (
    ProviderError,
    ProviderReply,
    ProviderRequest,
    Usage,
    chat_completion_reply,
    cut_off_error,
    provider_failure,
    strict_json_schema,
)

from .defaults import DEFAULT_MODEL, KEY_ENV

NAME = "openai"
PLACEHOLDER_KEY = "no-key"


class OpenAIClient:
    """Answers :class:`ProviderRequest` s through the OpenAI SDK (thread-safe)."""

    def __init__(self, settings: Any) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._clients: dict[tuple[str | None, int, float], openai.OpenAI] = {}
        #: "responses" or "chat": the plugin-owned setting ``openai_api`` (validated by the core).
        self.api: str = settings.openai_api
        self._client(settings.base_url, settings.max_retries, settings.timeout)

    def _client(self, base_url: str | None, max_retries: int, timeout: float) -> openai.OpenAI:
        key = (base_url, max_retries, timeout)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                api_key = os.environ.get("OPENAI_API_KEY")
                if not api_key:
                    if not (base_url or os.environ.get("OPENAI_BASE_URL")):
                        raise ProviderError(f"provider {NAME!r} needs an API key: set {' or '.join(KEY_ENV)}")
                    api_key = PLACEHOLDER_KEY
                client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout)
                self._clients[key] = client
            return client

    # ------------------------------------------------------------------ request
    def build_params(self, request: ProviderRequest) -> dict[str, Any]:
        """Keyword arguments of ``responses.create`` (or ``chat.completions.create``) for ``request``."""
        schema = strict_json_schema(request.schema)
        model = request.model or DEFAULT_MODEL
        if self.api == "chat":
            params: dict[str, Any] = {
                "model": model,
                "messages": [{"role": "system", "content": request.system}]
                + [{"role": m.role, "content": m.content} for m in request.messages],
                "max_completion_tokens": request.max_tokens,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": request.schema_name, "schema": schema, "strict": True},
                },
                "timeout": request.timeout,
            }
            if request.effort:
                params["reasoning_effort"] = request.effort
            return params
        params = {
            "model": model,
            "instructions": request.system,
            "input": [{"role": m.role, "content": m.content} for m in request.messages],
            "max_output_tokens": request.max_tokens,
            "text": {"format": {"type": "json_schema", "name": request.schema_name, "schema": schema, "strict": True}},
            "store": False,
            "timeout": request.timeout,
        }
        if request.effort:
            params["reasoning"] = {"effort": request.effort}
        return params

    def complete(self, request: ProviderRequest) -> ProviderReply:
        client = self._client(request.base_url, request.max_retries, request.timeout)
        endpoint = str(client.base_url)
        try:
            if self.api == "chat":
                response = client.chat.completions.create(**self.build_params(request))
            else:
                response = client.responses.create(**self.build_params(request))
        except ProviderError:
            raise
        except Exception as exc:  # SDK errors, malformed bodies, connection failures
            raise provider_failure(NAME, exc, request, endpoint=endpoint, key_env=KEY_ENV) from exc
        where = f"provider {NAME!r} (model {request.model or DEFAULT_MODEL} at {endpoint})"
        if self.api == "chat":
            return chat_completion_reply(response, request, where, default_model=DEFAULT_MODEL)
        return _responses_reply(response, request, where)


def _responses_reply(response: Any, request: ProviderRequest, where: str) -> ProviderReply:
    error = getattr(response, "error", None)
    if error is not None:
        raise ProviderError(
            f"{where}: the response failed: {getattr(error, 'code', '')} {getattr(error, 'message', error)}"
        )
    output = getattr(response, "output", None)
    if not isinstance(output, list):
        raise ProviderError(f"{where}: the reply is not a valid Responses API response (no output list)")
    refusals = [
        c.refusal
        for item in output
        if getattr(item, "type", None) == "message"
        for c in (getattr(item, "content", None) or [])
        if getattr(c, "type", None) == "refusal"
    ]
    if refusals:
        raise ProviderError(f"{where} refused to answer: {' '.join(refusals)}")
    if getattr(response, "status", None) == "incomplete":
        reason = getattr(getattr(response, "incomplete_details", None), "reason", None)
        if reason == "max_output_tokens":
            raise cut_off_error(where, request)
        raise ProviderError(f"{where}: the response is incomplete ({reason or 'no reason given'})")
    text = response.output_text
    if not text.strip():
        raise ProviderError(f"{where}: the reply contains no answer text (status {response.status!r})")
    usage = getattr(response, "usage", None)
    return ProviderReply(
        text=text,
        usage=Usage(
            input_tokens=getattr(usage, "input_tokens", None), output_tokens=getattr(usage, "output_tokens", None)
        ),
        model=getattr(response, "model", None) or request.model or DEFAULT_MODEL,
        stop_reason=getattr(response, "status", None),
    )
