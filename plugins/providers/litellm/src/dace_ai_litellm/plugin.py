"""Entry point of dace-ai-litellm: registers the ``litellm`` provider.

Imported whenever dace-ai loads its plugins, so it stays thin: ``litellm``
(slow to import) is imported only inside the factory, when the provider is used.

LiteLLM reaches hundreds of services, each with its own credentials, so it is
never guessed: choose it by name (``DACE_ai_provider=litellm``) together with a
model such as ``ollama/qwen2.5-coder``, ``bedrock/...`` or ``vertex_ai/...``.
"""

from __future__ import annotations

from dace_ai.plugin import Provider, hookimpl

from .defaults import DEFAULT_MODEL


def _factory(settings):
    from .client import LiteLLMClient  # imports the SDK: paid only when the provider is used

    return LiteLLMClient(settings)


def _available() -> bool:
    """Never chosen automatically: which key and model to use depends on the route."""
    return False


@hookimpl
def dace_ai_providers():
    yield Provider(
        name="litellm",
        factory=_factory,
        key_env=(),
        sdk="litellm",
        auto_rank=10,
        available=_available,
        default_model=DEFAULT_MODEL,
        description="Any model LiteLLM routes to (Ollama, Bedrock, Vertex AI, gateways), with cost per request",
    )
