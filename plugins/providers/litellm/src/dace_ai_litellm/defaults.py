"""The LiteLLM pack's defaults, read by its registration and its client alike."""

from __future__ import annotations

#: The model used when the ``model`` setting is empty (also part of the answer cache key).
DEFAULT_MODEL = "anthropic/claude-opus-4-8"
