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

from .defaults import BASE_URL_ENV, DEFAULT_BASE_URL, DEFAULT_MODEL, KEY_ENV


def _factory(settings):
    from .client import AnthropicClient  # imports the SDK: paid only when the provider is used

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
