"""The client: one Chat Completions request per :class:`ProviderRequest`, over plain HTTP.

The gateway speaks the Chat Completions wire format, so the answer schema is sent
as a strict ``json_schema`` response format and the reply is read with the same
helper the shipped OpenAI and LiteLLM providers use. The client holds no state
between requests, so it is safe to call from the core's worker threads.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from types import SimpleNamespace

from dace_ai.plugin import (
    AISettings,
    ProviderError,
    ProviderReply,
    ProviderRequest,
    chat_completion_reply,
    strict_json_schema,
)

from .plugin import TOKEN_ENV

DEFAULT_MODEL = "lab-coder"


class GatewayClient:
    """Answers requests through the gateway at the ``base_url`` setting."""

    def __init__(self, settings: AISettings) -> None:
        if not settings.base_url:
            raise ProviderError(
                "provider 'labgateway' needs the gateway's address: set base_url "
                "(DACE_ai_base_url or [tool.dace-ai] base_url)"
            )
        self.url = settings.base_url.rstrip("/") + "/chat/completions"
        self.temperature: float = settings.labgateway_temperature  # the plugin-owned setting

    def body(self, request: ProviderRequest) -> dict:
        """The JSON body for ``request``."""
        return {
            "model": request.model or DEFAULT_MODEL,
            "messages": [{"role": "system", "content": request.system}]
            + [{"role": m.role, "content": m.content} for m in request.messages],
            "max_completion_tokens": request.max_tokens,
            "temperature": self.temperature,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema_name,
                    "schema": strict_json_schema(request.schema),
                    "strict": True,
                },
            },
        }

    def complete(self, request: ProviderRequest) -> ProviderReply:
        where = f"provider 'labgateway' (model {request.model or DEFAULT_MODEL} at {self.url})"
        headers = {"Content-Type": "application/json"}
        if os.environ.get(TOKEN_ENV):
            headers["Authorization"] = "Bearer " + os.environ[TOKEN_ENV]
        http = urllib.request.Request(self.url, data=json.dumps(self.body(request)).encode(), headers=headers)
        try:
            with urllib.request.urlopen(http, timeout=request.timeout) as reply:
                # Attribute access, as the SDK objects chat_completion_reply was written for offer.
                response = json.loads(reply.read(), object_hook=lambda d: SimpleNamespace(**d))
        except urllib.error.HTTPError as exc:
            raise ProviderError(f"{where}: HTTP {exc.code}: {exc.read()[:300].decode(errors='replace')}") from exc
        except (urllib.error.URLError, TimeoutError, ValueError) as exc:
            raise ProviderError(f"{where}: {type(exc).__name__}: {exc}") from exc
        return chat_completion_reply(response, request, where, default_model=DEFAULT_MODEL)
