"""The answer cache (``<build root>/ai-cache``).

An answer is keyed by everything that determines it: provider, endpoint,
model, effort, token limit, response schema and the whole conversation. A hit
needs no provider SDK and no key. Only answers that parsed, validated and
passed their checks are stored (with those checks and the verification level
they reached), so a refused reply is never replayed. Entries are written atomically; two
processes writing the same key write the same content.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dace_ai.storage.files import ai_folder, atomic_write_json


def cache_key(provider_name: str, request: Any) -> str:
    """A hex digest of everything that determines the answer (never an API key).

    ``request`` is a :class:`~dace_ai.providers.api.ProviderRequest` (read by attribute, so
    storage does not depend on the providers package).
    """
    material = {
        "provider": provider_name,
        "endpoint": request.base_url or "",
        "model": request.model or "",
        "effort": request.effort or "",
        "max_tokens": request.max_tokens,
        "schema": request.schema,
        "schema_name": request.schema_name,
        "system": request.system,
        "messages": [[m.role, m.content] for m in request.messages],
    }
    blob = json.dumps(material, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


@dataclass(frozen=True)
class CachedAnswer:
    """One stored answer: the reply as a record (see ``ProviderReply.from_record``) and where it came from."""

    key: str
    record: dict[str, Any]
    provider: str
    created: float
    #: The verification level the answer reached when it was accepted and cached.
    verification: str = ""


class AnswerCache:
    """Answers on disk under ``ai-cache/<key[:2]>/<key>.json``."""

    def __init__(self, root: Path | None = None) -> None:
        self._root = root

    @property
    def folder(self) -> Path:
        return ai_folder("ai-cache", self._root)

    def path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> CachedAnswer | None:
        path = self.path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return None
        record = {field: data.get(field) for field in ("text", "usage", "model", "stop_reason")}
        return CachedAnswer(key, record, data.get("provider", ""), data.get("created", 0.0),
                            str(data.get("verification") or ""))

    def put(self, key: str, provider_name: str, reply: dict[str, Any], extra: dict[str, Any] | None = None) -> Path:
        """Store a reply record (``ProviderReply.as_record()``) under ``key``."""
        record = {"key": key, "provider": provider_name, **reply, "created": time.time(), **(extra or {})}
        return atomic_write_json(self.path(key), record)
