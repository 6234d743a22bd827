"""dace-ai-anthropic: the Anthropic Messages API as a dace-ai provider (see :mod:`.client`)."""

__version__ = "0.1.0"
