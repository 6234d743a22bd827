"""Entry point of dace-ai-openai: registers the ``openai`` provider.

Imported whenever dace-ai loads its plugins, so it stays thin: the ``openai``
SDK is imported only inside the factory, when the provider is used.
"""

from __future__ import annotations

import importlib.util
import os

from dace_ai.plugin import Provider, Setting, hookimpl

from .defaults import BASE_URL_ENV, DEFAULT_BASE_URL, DEFAULT_MODEL, KEY_ENV

#: The wire API: the Responses API, or Chat Completions for servers that only speak that.
API_SETTING = Setting(
    "openai_api",
    str,
    "responses",
    "Wire API of the openai provider: the Responses API, or Chat Completions for compatible servers without it",
    choices=("responses", "chat"),
)


def _factory(settings):
    from .client import OpenAIClient  # imports the SDK: paid only when the provider is used

    return OpenAIClient(settings)


def _available() -> bool:
    """Usable without configuration: SDK installed (not imported) and OPENAI_API_KEY set."""
    return importlib.util.find_spec("openai") is not None and bool(os.environ.get("OPENAI_API_KEY"))


@hookimpl
def dace_ai_providers():
    yield Provider(
        name="openai",
        factory=_factory,
        key_env=KEY_ENV,
        sdk="openai",
        auto_rank=50,
        available=_available,
        settings=(API_SETTING,),
        default_model=DEFAULT_MODEL,
        default_base_url=DEFAULT_BASE_URL,
        base_url_env=BASE_URL_ENV,
        description="OpenAI Responses API with a strict JSON schema; base_url for compatible servers",
    )
