"""The LiteLLM client of dace-ai: ``litellm.completion`` for any routed model.

How a :class:`~dace_ai.providers.api.ProviderRequest` maps onto LiteLLM:

* ``model`` (default :data:`DEFAULT_MODEL`) is a LiteLLM route, e.g.
  ``ollama/qwen2.5-coder``, ``bedrock/...``, ``vertex_ai/...``, ``openai/...``.
* ``system`` + ``messages`` -> OpenAI-style ``messages``; ``max_tokens``;
  ``timeout``; ``effort`` -> ``reasoning_effort`` (with ``drop_params`` so a
  model without reasoning controls ignores it); ``base_url`` -> ``api_base``.
* The answer schema -> ``response_format`` ``json_schema`` (strict form, see
  :func:`dace_ai.providers.sdk.strict_json_schema`) when
  ``litellm.supports_response_schema(model)`` says the model takes it;
  otherwise the system prompt gets a JSON-only instruction with the schema
  (:func:`dace_ai.providers.sdk.json_only_instruction`).
* ``max_retries`` -> LiteLLM's ``max_retries``, which it hands to the
  underlying SDK client (for OpenAI-compatible routes: retries on 429/5xx,
  connection errors and timeouts with backoff, honouring ``retry-after``).
* Cost: ``litellm.completion_cost`` from LiteLLM's price tables, when the
  model is in them (otherwise ``cost_usd`` stays unknown).

Credentials are LiteLLM's (per route: ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``,
AWS/GCP credentials, ...). Without a ``base_url``, missing variables reported by
``litellm.validate_environment`` raise :class:`~dace_ai.errors.ProviderError`
naming them; with a ``base_url`` (a local server) the placeholder key ``no-key``
is sent instead.

LiteLLM fetches its price table from the internet when imported unless
``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set; set it on machines without network.
"""

from __future__ import annotations

import threading
from typing import Any

import litellm
from dace_ai.plugin import (
    ProviderError,
    ProviderReply,
    ProviderRequest,
    chat_completion_reply,
    json_only_instruction,
    provider_failure,
    strict_json_schema,
)

from .defaults import DEFAULT_MODEL

NAME = "litellm"
PLACEHOLDER_KEY = "no-key"

# LiteLLM prints "Give Feedback / Get Help" banners on every exception; the error we raise says enough.
litellm.suppress_debug_info = True


def supports_schema(model: str) -> bool:
    """Whether LiteLLM knows ``model`` to accept a ``response_format`` JSON schema."""
    try:
        return bool(litellm.supports_response_schema(model=model))
    except Exception:  # noqa: BLE001 - an unknown route simply gets the JSON-only instruction
        return False


class LiteLLMClient:
    """Answers :class:`ProviderRequest` s through ``litellm.completion`` (thread-safe)."""

    def __init__(self, settings: Any) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._missing: dict[tuple[str, str | None], list[str]] = {}
        self._credentials(settings.model or DEFAULT_MODEL, settings.base_url)

    def _credentials(self, model: str, base_url: str | None) -> str | None:
        """The api_key to pass (None: LiteLLM finds it), or a ProviderError naming what to set."""
        key = (model, base_url)
        with self._lock:
            if key not in self._missing:
                try:
                    found = litellm.validate_environment(model=model, api_base=base_url)
                    self._missing[key] = list(found.get("missing_keys") or [])
                except Exception:  # noqa: BLE001 - no verdict: let LiteLLM report what is missing
                    self._missing[key] = []
            missing = self._missing[key]
        if not missing:
            return None
        if base_url:
            return PLACEHOLDER_KEY
        raise ProviderError(
            f"provider {NAME!r} (model {model}) needs credentials: set {' and '.join(missing)} "
            "(or set base_url for a local server)"
        )

    def build_params(self, request: ProviderRequest) -> dict[str, Any]:
        """Keyword arguments of ``litellm.completion`` for ``request``."""
        model = request.model or DEFAULT_MODEL
        system = request.system
        params: dict[str, Any] = {
            "model": model,
            "max_tokens": request.max_tokens,
            "timeout": request.timeout,
            "max_retries": request.max_retries,
        }
        if supports_schema(model):
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema_name,
                    "schema": strict_json_schema(request.schema),
                    "strict": True,
                },
            }
        else:
            system = f"{system}\n\n{json_only_instruction(request.schema, request.schema_name)}"
        params["messages"] = [{"role": "system", "content": system}] + [
            {"role": m.role, "content": m.content} for m in request.messages
        ]
        if request.effort:
            params["reasoning_effort"] = request.effort
            params["drop_params"] = True
        if request.base_url:
            params["api_base"] = request.base_url
        return params

    def complete(self, request: ProviderRequest) -> ProviderReply:
        model = request.model or DEFAULT_MODEL
        params = self.build_params(request)
        api_key = self._credentials(model, request.base_url)
        if api_key:
            params["api_key"] = api_key
        try:
            response = litellm.completion(**params)
        except ProviderError:
            raise
        except Exception as exc:
            raise provider_failure(NAME, exc, request, endpoint=request.base_url) from exc
        where = f"provider {NAME!r} (model {model}" + (f" at {request.base_url})" if request.base_url else ")")
        return chat_completion_reply(response, request, where, default_model=model, cost_usd=_cost(response))


def _cost(response: Any) -> float | None:
    """The request's cost in USD from LiteLLM's price tables, or None when the model is not priced."""
    try:
        cost = litellm.completion_cost(completion_response=response)
    except Exception:  # noqa: BLE001 - LiteLLM raises for models missing from its price table
        return None
    return float(cost) if cost else None
