"""The Anthropic pack's defaults, read by its registration and its client alike."""

from __future__ import annotations

#: The model used when the ``model`` setting is empty (also part of the answer cache key).
DEFAULT_MODEL = "claude-opus-4-8"
#: The endpoint used when ``base_url`` is empty, unless ANTHROPIC_BASE_URL is set (the SDK reads it).
DEFAULT_BASE_URL = "https://api.anthropic.com"
BASE_URL_ENV = ("ANTHROPIC_BASE_URL",)
#: Variables holding Anthropic credentials (the SDK also reads profiles; see client.py).
KEY_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
