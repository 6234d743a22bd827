"""Entry point of dace-ai-openai: registers the ``openai`` provider.

Imported whenever dace-ai loads its plugins, so it stays thin: the ``openai``
SDK is imported only inside the factory, when the provider is used.
"""

from __future__ import annotations

import importlib.util
import os

from dace_ai.plugin import Provider, hookimpl

KEY_ENV = ("OPENAI_API_KEY",)


def _factory(settings):
    from .client import OpenAIClient

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
        description="OpenAI Responses API with a strict JSON schema; base_url for compatible servers",
    )
