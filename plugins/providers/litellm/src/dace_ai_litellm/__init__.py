"""dace-ai-litellm: every model LiteLLM reaches as a dace-ai provider (see :mod:`.client`)."""

__version__ = "0.1.0"
