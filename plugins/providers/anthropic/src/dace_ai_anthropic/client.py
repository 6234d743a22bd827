"""The Anthropic client of dace-ai: one Messages API call per request.

How a :class:`~dace_ai.providers.api.ProviderRequest` maps onto the API:

* ``system`` -> ``system``; ``messages`` -> ``messages``; ``max_tokens``,
  ``model`` (default :data:`DEFAULT_MODEL`), ``timeout`` -> per-call timeout.
* The answer schema -> ``output_config.format`` (``json_schema``), after the
  SDK's own ``anthropic.transform_schema`` (constraints the API does not take
  move into descriptions). SDKs older than structured outputs get the fallback:
  one tool whose ``input_schema`` is the answer schema, forced by
  ``tool_choice``; the tool's input is the answer.
* ``effort`` (low/medium/high/max) -> ``output_config.effort`` together with
  adaptive thinking (``thinking={"type": "adaptive"}``); thinking blocks are
  skipped when reading the answer. Without ``effort`` neither is sent and the
  model's defaults apply. The tool fallback cannot combine with thinking, so it
  ignores ``effort``.
* ``base_url`` -> the SDK's ``base_url`` (gateways, proxies, the test fake).
* ``max_retries`` -> the SDK's ``max_retries``: it retries 408/409/429/5xx
  (529 "overloaded" included), connection errors and timeouts with
  exponential backoff, honouring ``retry-after``/``retry-after-ms``.

Credentials: ``ANTHROPIC_API_KEY`` or whatever the SDK finds itself
(``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_PROFILE``, workload identity, the active
profile on disk). Without any, the client refuses to start and names the
variable. Refusals (``stop_reason == "refusal"``) and answers cut off at
``max_tokens`` raise :class:`~dace_ai.errors.ProviderError`, so nothing is cached.
"""

from __future__ import annotations

import inspect
import json
import threading
from typing import Any

import anthropic
from dace_ai.plugin import ProviderError, ProviderReply, ProviderRequest, Usage, provider_failure

from .defaults import DEFAULT_MODEL, KEY_ENV

NAME = "anthropic"
#: Raised by SDKs with profile/workload-identity credentials when a selected profile is unusable.
_CREDENTIALS_ERRORS: tuple[type[BaseException], ...] = tuple(
    cls for cls in (getattr(anthropic, "CredentialsError", None),) if isinstance(cls, type)
)
TOOL_DESCRIPTION = "Submit the implementation of the node. The tool input is the complete answer."


def supports_output_config() -> bool:
    """Whether the installed SDK sends ``output_config`` (structured outputs) on ``messages.create``."""
    try:
        from anthropic.resources.messages import Messages

        params = inspect.signature(Messages.create).parameters
    except (ImportError, AttributeError, TypeError, ValueError):
        return False
    return "output_config" in params and hasattr(anthropic, "transform_schema")


class AnthropicClient:
    """Answers :class:`ProviderRequest` s through ``anthropic.Anthropic().messages.create`` (thread-safe)."""

    def __init__(self, settings: Any) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._clients: dict[tuple[str | None, int, float], anthropic.Anthropic] = {}
        self.mode = "output_config" if supports_output_config() else "tool"
        # Build the default client now: a missing key fails here, before any node is asked.
        self._client(settings.base_url, settings.max_retries, settings.timeout)

    # ------------------------------------------------------------- SDK clients
    def _client(self, base_url: str | None, max_retries: int, timeout: float) -> anthropic.Anthropic:
        key = (base_url, max_retries, timeout)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                try:
                    client = anthropic.Anthropic(base_url=base_url, max_retries=max_retries, timeout=timeout)
                except _CREDENTIALS_ERRORS as exc:  # a profile was selected but cannot be read
                    raise ProviderError(
                        f"provider {NAME!r}: the Anthropic credentials could not be loaded ({exc}); "
                        f"set {' or '.join(KEY_ENV)}, or fix the profile"
                    ) from exc
                if not (client.api_key or getattr(client, "auth_token", None) or getattr(client, "credentials", None)):
                    raise ProviderError(
                        f"provider {NAME!r} needs an API key: set {' or '.join(KEY_ENV)} "
                        "(or configure an Anthropic profile); none was found"
                    )
                self._clients[key] = client
            return client

    def endpoint(self, request: ProviderRequest) -> str:
        return str(self._client(request.base_url, request.max_retries, request.timeout).base_url)

    # ------------------------------------------------------------------ request
    def build_params(self, request: ProviderRequest) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for ``request``."""
        params: dict[str, Any] = {
            "model": request.model or DEFAULT_MODEL,
            "max_tokens": request.max_tokens,
            "system": request.system,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "timeout": request.timeout,
        }
        if self.mode == "output_config":
            config: dict[str, Any] = {
                "format": {"type": "json_schema", "schema": anthropic.transform_schema(request.schema)}
            }
            if request.effort:
                config["effort"] = request.effort
                params["thinking"] = {"type": "adaptive"}
            params["output_config"] = config
        else:
            params["tools"] = [
                {"name": request.schema_name, "description": TOOL_DESCRIPTION, "input_schema": request.schema}
            ]
            params["tool_choice"] = {"type": "tool", "name": request.schema_name}
        return params

    def complete(self, request: ProviderRequest) -> ProviderReply:
        client = self._client(request.base_url, request.max_retries, request.timeout)
        try:
            message = client.messages.create(**self.build_params(request))
        except ProviderError:
            raise
        except Exception as exc:  # SDK errors, malformed bodies (json errors), connection failures
            raise provider_failure(NAME, exc, request, endpoint=str(client.base_url), key_env=KEY_ENV) from exc
        return self._reply(message, request, str(client.base_url))

    # -------------------------------------------------------------------- reply
    def _reply(self, message: Any, request: ProviderRequest, endpoint: str) -> ProviderReply:
        where = f"provider {NAME!r} (model {request.model or DEFAULT_MODEL} at {endpoint})"
        content = getattr(message, "content", None)
        stop = getattr(message, "stop_reason", None)
        if stop == "refusal":
            details = getattr(message, "stop_details", None)
            category = getattr(details, "category", None)
            explanation = getattr(details, "explanation", None) or _text_of(content or []) or "no explanation given"
            raise ProviderError(
                f"{where} refused to answer" + (f" (category {category})" if category else "") + f": {explanation}"
            )
        if stop == "max_tokens":
            raise ProviderError(
                f"{where}: the answer was cut off at max_tokens={request.max_tokens}; "
                "raise the max_tokens setting (DACE_ai_max_tokens)"
            )
        if stop == "model_context_window_exceeded":
            raise ProviderError(f"{where}: the prompt and answer exceed the model's context window")
        if not isinstance(content, list):
            raise ProviderError(f"{where}: the reply is not a valid Messages API response (no content list)")
        if self.mode == "tool":
            inputs = [b.input for b in content if getattr(b, "type", None) == "tool_use"]
            text = json.dumps(inputs[0]) if inputs else ""
        else:
            text = _text_of(content)
        if not text.strip():
            raise ProviderError(f"{where}: the reply contains no answer text (stop_reason {stop!r})")
        usage = getattr(message, "usage", None)
        input_tokens = None
        if usage is not None and usage.input_tokens is not None:
            input_tokens = (
                usage.input_tokens
                + (getattr(usage, "cache_creation_input_tokens", 0) or 0)
                + (getattr(usage, "cache_read_input_tokens", 0) or 0)
            )
        return ProviderReply(
            text=text,
            usage=Usage(input_tokens=input_tokens, output_tokens=getattr(usage, "output_tokens", None)),
            model=getattr(message, "model", None) or request.model or DEFAULT_MODEL,
            stop_reason=stop,
        )


def _text_of(content: list[Any]) -> str:
    return "".join(getattr(b, "text", "") or "" for b in content if getattr(b, "type", None) == "text")
