"""What a generated tasklet says about itself: the ``// dace-ai: key=value ...`` first line.

The comment is part of the tasklet's code, so it survives ``sdfg.save()`` and
``SDFG.from_file()`` in another process and shows in generated C++. Its fields:
``node`` (the library node it replaced), ``provider``, ``model``, ``source``,
``cache_key``, ``session=ai-sessions/<session id>/round-<n>`` (the session and the
round whose answer this is), when set ``pinned=true``, and ``verification``, the
level the checks reached. Values never contain spaces, except the level
(``verified (3 seeds, 5 sizes, ...)``), which is therefore always written last and
read to the end of the line.

:func:`is_pinned` is the one question every code path that changes tasklets
asks first (build repairs, refine, optimize): a pinned tasklet is left alone.
"""

from __future__ import annotations

import re
from typing import Any

_PROVENANCE = re.compile(r"^\s*//\s*dace-ai:(?P<fields>.*)$")
_SESSION = re.compile(r"^ai-sessions/(?P<id>[^/]+)/round-(?P<round>\d+)$")
_TRUE = ("1", "true", "yes")


def _code(tasklet: Any) -> str | None:
    code = getattr(getattr(tasklet, "code", None), "as_string", None)
    return code if isinstance(code, str) else None


def provenance(tasklet: Any) -> dict[str, str] | None:
    """The fields of a generated tasklet's provenance comment, or None for any other node."""
    code = _code(tasklet)
    first_line = code.lstrip().split("\n", 1)[0] if code else ""
    m = _PROVENANCE.match(first_line)
    if not m:
        return None
    text, found, level = m.group("fields").partition(f" {LAST_FIELD}=")
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
    if found:
        fields[LAST_FIELD] = level.strip()
    return fields


#: The one field whose value may contain spaces: written last, read to the end of the line.
LAST_FIELD = "verification"


def comment(fields: dict[str, Any]) -> str:
    """The provenance line for ``fields`` (empty values left out; the level last, see :data:`LAST_FIELD`)."""
    ordered = [(k, v) for k, v in fields.items() if k != LAST_FIELD]
    if LAST_FIELD in fields:
        ordered.append((LAST_FIELD, fields[LAST_FIELD]))
    text = " ".join(f"{k}={v}" for k, v in ordered if v not in (None, ""))
    return f"// dace-ai: {text}\n"


def body(tasklet: Any) -> str:
    """The tasklet's code without its provenance line (what a model or a person wrote)."""
    code = _code(tasklet) or ""
    stripped = code.lstrip()
    if _PROVENANCE.match(stripped.split("\n", 1)[0]):
        return stripped.split("\n", 1)[1] if "\n" in stripped else ""
    return code


def session_round(fields: dict[str, str] | None) -> tuple[str, int] | None:
    """(session id, round) named by the ``session`` field, or None."""
    m = _SESSION.match((fields or {}).get("session", ""))
    if not m or m.group("id") in (".", ".."):  # provenance is text in a tasklet: stay inside the build root
        return None
    return m.group("id"), int(m.group("round"))


def with_fields(tasklet: Any, **changes: Any) -> None:
    """Rewrite the provenance line with ``changes`` (None removes a field); the code below is kept."""
    import dace

    fields: dict[str, Any] = dict(provenance(tasklet) or {})
    for key, value in changes.items():
        if value is None:
            fields.pop(key, None)
        else:
            fields[key] = value
    tasklet.code = dace.properties.CodeBlock(comment(fields) + body(tasklet), dace.Language.CPP)


def is_pinned(tasklet: Any) -> bool:
    """True when the tasklet must be left as it is: ``pinned=true`` in its provenance, or its session pinned.

    Anything that would change a generated tasklet (build repairs, refine, optimize)
    asks this first. Any other node (no provenance) is not pinned.
    """
    fields = provenance(tasklet)
    if fields is None:
        return False
    if fields.get("pinned", "").lower() in _TRUE:
        return True
    found = session_round(fields)
    if found is None:
        return False
    from dace_ai.storage.sessions import session_by_id

    try:
        return session_by_id(found[0]).pinned
    except (OSError, ValueError):
        return False
