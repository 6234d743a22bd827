"""dace-ai-openai: the OpenAI Responses API (and compatible servers) as a dace-ai provider (see :mod:`.client`)."""

__version__ = "0.1.0"
