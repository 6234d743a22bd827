"""Entry point of dace-ai-anthropic: registers the ``anthropic`` provider.

This module is imported whenever dace-ai loads its plugins, so it stays thin:
the ``anthropic`` SDK is imported only inside the factory, when the provider is
actually used. The provider ranks highest among the built-in choices, so it is
the default when its SDK is installed and a key is set.
"""

from __future__ import annotations

import importlib.util
import os

from dace_ai.plugin import Provider, hookimpl

#: The model used when the ``model`` setting is empty (also part of the answer cache key).
DEFAULT_MODEL = "claude-opus-4-8"
#: The endpoint used when ``base_url`` is empty, unless ANTHROPIC_BASE_URL is set (the SDK reads it).
DEFAULT_BASE_URL = "https://api.anthropic.com"
BASE_URL_ENV = ("ANTHROPIC_BASE_URL",)

#: Variables holding Anthropic credentials (the SDK also reads profiles; see client.py).
KEY_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def _factory(settings):
    from .client import AnthropicClient

    return AnthropicClient(settings)


def _available() -> bool:
    """Usable without configuration: SDK installed (not imported) and a key in the environment."""
    return importlib.util.find_spec("anthropic") is not None and any(os.environ.get(v) for v in KEY_ENV)


@hookimpl
def dace_ai_providers():
    yield Provider(
        name="anthropic",
        factory=_factory,
        key_env=KEY_ENV,
        sdk="anthropic",
        auto_rank=100,
        available=_available,
        default_model=DEFAULT_MODEL,
        default_base_url=DEFAULT_BASE_URL,
        base_url_env=BASE_URL_ENV,
        description="Anthropic Messages API with the answer schema as structured output",
    )
