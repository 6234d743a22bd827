"""The answer cache (``<build root>/ai-cache``).

An answer is keyed by everything that determines it: provider, the endpoint and
model the request actually goes to (the provider's defaults applied, so a new
default model or base URL never replays old answers), effort, token limit,
response schema and the whole conversation. A hit needs no provider SDK and no
key. Only answers that parsed, validated and passed their checks are stored (with
those checks and the verification level they reached), so a refused reply is never
replayed.

The cache is an optimisation, never a reason to fail: entries are written
atomically (two processes writing the same key write the same content, a killed
process leaves no half entry), an entry of the wrong shape is moved aside to
``ai-cache/quarantine/`` with a warning naming it (and the node is asked again),
and a folder that cannot be written is a warning while the answer is still used.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dace_ai.errors import DaceAIWarning, redact
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.storage.files import ai_folder, atomic_write_json, build_root

if TYPE_CHECKING:
    from dace_ai.plugins.registrations import Provider
    from dace_ai.providers.api import ProviderRequest

#: Fields every cache entry has, with the types they must have.
_FIELDS: dict[str, type | tuple[type, ...]] = {"text": str, "provider": str}
_OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "usage": (dict, type(None)),
    "model": (str, type(None)),
    "stop_reason": (str, type(None)),
    "created": (int, float),
    "key": str,
}
_USAGE_FIELDS = ("input_tokens", "output_tokens", "cost_usd")
QUARANTINE = "quarantine"


class CacheWarning(DaceAIWarning):
    """The answer cache could not be read or written; the answer is asked for (or used) anyway."""


def _provider_registration(provider_name: str) -> Any:
    """The provider's registration (for its default model and endpoint), or None when unknown."""
    try:
        return get_plugin_manager().providers().get(provider_name)
    except Exception:  # noqa: BLE001 - the key is still complete for what the request says
        return None


def key_material(provider_name: str, request: ProviderRequest, provider: Provider | None = None) -> dict[str, Any]:
    """What the key hashes: the request with the provider's defaults applied, credentials removed."""
    provider = provider if provider is not None else _provider_registration(provider_name)
    model = provider.effective_model(request.model) if provider is not None else (request.model or "")
    endpoint = provider.effective_base_url(request.base_url) if provider is not None else (request.base_url or "")
    return {
        "provider": provider_name,
        "endpoint": redact(endpoint or ""),
        "model": model or "",
        "effort": request.effort or "",
        "max_tokens": request.max_tokens,
        "schema": request.schema,
        "schema_name": request.schema_name,
        "system": request.system,
        "messages": [[m.role, m.content] for m in request.messages],
    }


def cache_key(provider_name: str, request: ProviderRequest, provider: Provider | None = None) -> str:
    """A hex digest of everything that determines the answer (never an API key).

    ``request`` is a :class:`~dace_ai.providers.api.ProviderRequest` (read by attribute, so
    storage does not depend on the providers package); ``provider`` is its registration
    (looked up by name when omitted) whose default model and endpoint fill empty settings.
    """
    blob = json.dumps(
        key_material(provider_name, request, provider), sort_keys=True, separators=(",", ":"), ensure_ascii=True
    ).encode()
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
    #: The checks it passed and the fingerprint of what they depended on
    #: (:func:`dace_ai.solving.check_reuse.record`); None when not recorded. Never trusted
    #: as it is: :func:`dace_ai.solving.check_reuse.reuse` validates it.
    checked: dict[str, Any] | None = None


class BadEntry(ValueError):
    """A cache file that is not an entry: the reason names what is wrong."""


def parse_entry(key: str, raw: bytes) -> CachedAnswer:
    """A cache entry from its bytes, or :class:`BadEntry` saying what is wrong (any input, never another error)."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadEntry(f"not UTF-8 (byte offset {exc.start})") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise BadEntry(f"not JSON ({getattr(exc, 'msg', 'nested too deeply')})") from None
    if not isinstance(data, dict):
        raise BadEntry(f"a JSON {type(data).__name__}, not an object")
    for name, kind in _FIELDS.items():
        if not isinstance(data.get(name), kind):
            raise BadEntry(f"field {name!r} is missing or not {getattr(kind, '__name__', kind)}")
    for name, kinds in _OPTIONAL.items():
        if name in data and not isinstance(data[name], kinds):
            raise BadEntry(f"field {name!r} has the wrong type ({type(data[name]).__name__})")
    if data.get("key", key) != key:
        raise BadEntry(f"it holds the entry of another key ({str(data['key'])[:16]}...)")
    usage = data.get("usage") or {}
    if set(usage) - set(_USAGE_FIELDS) or any(
        not (v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))) for v in usage.values()
    ):
        raise BadEntry("field 'usage' is not a usage record")
    record = {
        "text": data["text"],
        "usage": {k: usage.get(k) for k in _USAGE_FIELDS},
        "model": data.get("model"),
        "stop_reason": data.get("stop_reason"),
    }
    checked = data.get("checked")
    return CachedAnswer(
        key,
        record,
        data["provider"],
        float(data.get("created", 0.0)),
        str(data.get("verification") or ""),
        checked if isinstance(checked, dict) else None,
    )


@dataclass(frozen=True)
class EntryInfo:
    """One file in the cache folder, for ``dace-ai cache list/verify``."""

    key: str
    path: Path
    size: int
    modified: float
    provider: str = ""
    model: str = ""
    node: str = ""
    problem: str = ""  #: why the entry is unusable ("" when it is fine)


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
        """The entry for ``key``; None when there is none, it cannot be read, or it is malformed.

        A malformed entry is moved to ``quarantine/`` (with a warning naming it), so the
        node is asked again and the file is kept for inspection.
        """
        try:
            path = self.path(key)
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            _warn(f"answer cache: cannot read the entry for key {key[:16]}... ({exc}); asking again")
            return None
        try:
            return parse_entry(key, raw)
        except BadEntry as exc:
            moved = self.quarantine(path)
            _warn(
                f"answer cache: {path} is not a valid entry ({exc}); "
                + (f"moved to {moved}" if moved else "it could not be moved aside")
                + "; the node is asked again"
            )
            return None

    def put(
        self, key: str, provider_name: str, reply: dict[str, Any], extra: dict[str, Any] | None = None
    ) -> Path | None:
        """Store a reply record (``ProviderReply.as_record()``) under ``key``; None (and a warning) when it cannot."""
        record = {"key": key, "provider": provider_name, **reply, "created": time.time(), **(extra or {})}
        try:
            return atomic_write_json(self.path(key), record)
        except OSError as exc:
            _warn(
                f"answer cache: cannot write the entry for key {key[:16]}... under "
                f"{_folder_hint(self._root)} ({exc}); the answer is used but not cached"
            )
            return None

    def record_checks(self, key: str, checked: dict[str, Any], verification: str) -> None:
        """Keep ``checked`` (and the level) in the existing entry of ``key``: the checks its answer passed again."""
        try:
            data = json.loads(self.path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return  # no entry (or a bad one, quarantined on its next read): nothing to add to
        if isinstance(data, dict):
            self.put(
                key,
                str(data.get("provider", "")),
                {k: v for k, v in data.items() if k not in ("key", "provider", "created")},
                extra={"created": data.get("created", time.time()), "checked": checked, "verification": verification},
            )

    def quarantine(self, path: Path) -> Path | None:
        """Move a bad entry to ``quarantine/`` (keeping it for inspection); None when that fails."""
        target = self.folder / QUARANTINE / f"{path.name}.{int(time.time() * 1000)}.{os.getpid()}"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
            return target
        except OSError:
            try:
                path.unlink()
            except OSError:
                pass
            return None

    # --------------------------------------------------------------- for the CLI
    def entries(self) -> Iterator[EntryInfo]:
        """Every entry file (quarantined ones and temporary files excluded), checked."""
        for path in sorted(self.folder.glob("??/*.json")):
            try:
                stat = path.stat()
                raw = path.read_bytes()
            except OSError as exc:
                yield EntryInfo(path.stem, path, 0, 0.0, problem=f"unreadable ({exc})")
                continue
            info = EntryInfo(path.stem, path, stat.st_size, stat.st_mtime)
            try:
                entry = parse_entry(path.stem, raw)
                data = json.loads(raw)
                yield EntryInfo(
                    path.stem,
                    path,
                    stat.st_size,
                    stat.st_mtime,
                    entry.provider,
                    str(entry.record.get("model") or ""),
                    str(data.get("node") or ""),
                )
            except BadEntry as exc:
                yield EntryInfo(info.key, path, info.size, info.modified, problem=str(exc))

    def leftovers(self) -> list[Path]:
        """Temporary files of writes that never finished (a killed process) and stale lock files."""
        return sorted(p for p in self.folder.rglob(".*.tmp") if p.is_file())

    def quarantined(self) -> list[Path]:
        folder = self.folder / QUARANTINE
        return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []


def _folder_hint(root: Path | None) -> str:
    try:
        return str((root or build_root()) / "ai-cache")
    except Exception:  # noqa: BLE001
        return "ai-cache"


def _warn(message: str) -> None:
    warnings.warn(redact(message), CacheWarning, stacklevel=3)
