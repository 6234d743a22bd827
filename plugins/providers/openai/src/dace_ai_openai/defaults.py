"""The OpenAI pack's defaults, read by its registration and its client alike."""

from __future__ import annotations

#: The model used when the ``model`` setting is empty (also part of the answer cache key).
DEFAULT_MODEL = "gpt-5.5"
#: The endpoint used when ``base_url`` is empty, unless OPENAI_BASE_URL is set (the SDK reads it).
DEFAULT_BASE_URL = "https://api.openai.com/v1"
BASE_URL_ENV = ("OPENAI_BASE_URL",)
KEY_ENV = ("OPENAI_API_KEY",)
