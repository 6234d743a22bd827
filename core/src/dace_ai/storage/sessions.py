"""Sessions: every round of every node's generation, on disk.

Layout::

    <build root>/ai-sessions/<sdfg>.<node key>/
        session.json          node, rounds, outcome, the round in use
        node.json             the library node as it was before expansion (to restore it later)
        round-1/
            prompt.md         system prompt and conversation sent
            request.json      provider, model, effort, limits, cache key (never an API key)
            answer.txt        the raw reply
            answer.json       the parsed answer (when it parsed)
            checks.json       the checkers' reports; check-<name>.log each checker's diagnostics
        round-2/ ...

A round is what one request produced. Rounds are numbered per node across
expansions, so a later compile that asks again appends rather than overwrites;
a replayed cache hit identical to the last round is not recorded twice.
Everything is written atomically; nothing here is needed to compile or run an
expanded SDFG. So sessions never stop a program: a ``session.json`` of the
wrong shape is moved aside (``session.json.bad-<time>``) with a warning naming
it, and a folder that cannot be written is a warning while the answer is still used.
"""

from __future__ import annotations

import json
import os
import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dace_ai.errors import DaceAIWarning, redact
from dace_ai.storage.files import atomic_write, atomic_write_json, build_root, lock_for


class SessionWarning(DaceAIWarning):
    """A session could not be read or recorded; the expansion goes on without it."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


def _safe(text: str) -> str:
    return _UNSAFE.sub("_", text).strip("._") or "node"


def session_name(sdfg_name: str, node_key: str) -> str:
    """The folder name of a node's session (file-system safe)."""
    key = node_key if node_key.startswith(f"{sdfg_name}.") or not sdfg_name else f"{sdfg_name}.{node_key}"
    return _safe(key)


@dataclass(frozen=True)
class RoundRecord:
    """One recorded round: its number and folder."""

    number: int
    folder: Path


class Session:
    """The session folder of one node; open with :func:`open_session`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @property
    def summary_path(self) -> Path:
        return self.folder / "session.json"

    def summary(self) -> dict[str, Any]:
        """``session.json``, or a fresh summary when there is none or it is unusable (moved aside, warned)."""
        try:
            raw = self.summary_path.read_bytes()
        except FileNotFoundError:
            return {"rounds": []}
        except OSError as exc:
            _warn(f"session {self.folder}: cannot read session.json ({exc}); starting afresh")
            return {"rounds": []}
        problem = _summary_problem(raw)
        if problem is None:
            return json.loads(raw)
        moved = self.summary_path.with_name(f"session.json.bad-{int(time.time() * 1000)}-{os.getpid()}")
        try:
            os.replace(self.summary_path, moved)
            where = f"moved to {moved.name}"
        except OSError:
            where = "left in place"
        _warn(f"session {self.summary_path} is not a valid session ({problem}); {where}; starting afresh")
        return {"rounds": []}

    def rounds(self) -> list[RoundRecord]:
        return [RoundRecord(r["number"], self.folder / f"round-{r['number']}") for r in self.summary()["rounds"]]

    def record_round(self, *, node: dict[str, Any], system: str, messages: list[tuple[str, str]],
                     request: dict[str, Any], reply_text: str | None, answer: dict[str, Any] | None,
                     reports: list[Any], status: str, error: str = "", source: str = "",
                     node_json: Any = None) -> RoundRecord:
        """Append one round (prompt, answer, checks) and update ``session.json``.

        ``status`` is ``accepted``, ``rejected`` (failed its checks) or ``error``
        (the answer did not parse). A cache replay identical to the last round
        only bumps that round's ``replayed`` count. A folder that cannot be written
        is a :class:`SessionWarning` and a round numbered 0: the answer is still used.
        """
        try:
            return self._record_round(node=node, system=system, messages=messages, request=request,
                                      reply_text=reply_text, answer=answer, reports=reports, status=status,
                                      error=redact(error), source=source, node_json=node_json)
        except OSError as exc:
            _warn(f"session {self.folder}: cannot record the round ({exc}); the answer is used without a record")
            return RoundRecord(0, self.folder)

    def _record_round(self, *, node: dict[str, Any], system: str, messages: list[tuple[str, str]],
                      request: dict[str, Any], reply_text: str | None, answer: dict[str, Any] | None,
                      reports: list[Any], status: str, error: str, source: str, node_json: Any) -> RoundRecord:
        with lock_for(self.summary_path):
            summary = self.summary()
            summary.setdefault("rounds", [])
            last = summary["rounds"][-1] if summary["rounds"] else None
            if (source == "cache" and last is not None and last.get("cache_key") == request.get("cache_key")
                    and last.get("status") == status):
                last["replayed"] = last.get("replayed", 0) + 1
                summary["updated"] = time.time()
                atomic_write_json(self.summary_path, summary)
                return RoundRecord(last["number"], self.folder / f"round-{last['number']}")
            number = (last["number"] + 1) if last else 1
            folder = self.folder / f"round-{number}"
            atomic_write(folder / "prompt.md", render_conversation(system, messages))
            atomic_write_json(folder / "messages.json", {"system": system, "messages": [list(m) for m in messages]})
            atomic_write_json(folder / "request.json", request)
            if reply_text is not None:
                atomic_write(folder / "answer.txt", reply_text)
            if answer is not None:
                atomic_write_json(folder / "answer.json", answer)
            report_rows = []
            for report in reports:
                row = {"checker": report.checker, "status": report.status, "seconds": round(report.seconds, 3),
                       "stage": report.details.get("stage", "")}
                report_rows.append(row)
                atomic_write(folder / f"check-{_safe(report.checker)}.log", report.diagnostics or "")
            atomic_write_json(folder / "checks.json", report_rows)
            if node_json is not None and not (self.folder / "node.json").exists():
                atomic_write_json(self.folder / "node.json", node_json)
            summary.update({"node": node, "updated": time.time()})
            summary["rounds"].append({"number": number, "status": status, "source": source, "error": error,
                                      "cache_key": request.get("cache_key"), "time": time.time()})
            if status == "accepted":
                summary["current"] = number
            atomic_write_json(self.summary_path, summary)
            return RoundRecord(number, folder)


def _summary_problem(raw: bytes) -> str | None:
    """Why ``session.json`` bytes are not a usable summary, or None."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        return f"not JSON: {type(exc).__name__}"
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    rounds = data.get("rounds", [])
    if not isinstance(rounds, list):
        return "'rounds' is not a list"
    for item in rounds:
        if not isinstance(item, dict) or not isinstance(item.get("number"), int) or isinstance(item["number"], bool):
            return "a round without a number"
    if not isinstance(data.get("node", {}), dict):
        return "'node' is not an object"
    if "current" in data and not (data["current"] is None or isinstance(data["current"], int)):
        return "'current' is not a round number"
    return None


def _warn(message: str) -> None:
    warnings.warn(redact(message), SessionWarning, stacklevel=3)


def render_conversation(system: str, messages: list[tuple[str, str]]) -> str:
    parts = ["# System\n", system.rstrip() + "\n"]
    for role, content in messages:
        parts += [f"\n# {role.capitalize()}\n", content.rstrip() + "\n"]
    return "".join(parts)


def open_session(sdfg_name: str, node_key: str, root: Path | None = None) -> Session:
    """The session of one node (created on first write)."""
    return Session((root or build_root()) / "ai-sessions" / session_name(sdfg_name, node_key))


def list_sessions(root: Path | None = None) -> list[dict[str, Any]]:
    """Every session under the build root: name, folder, node, rounds and the round in use."""
    folder = (root or build_root()) / "ai-sessions"
    if not folder.is_dir():
        return []
    result = []
    for path in sorted(p for p in folder.iterdir() if p.is_dir()):
        summary = Session(path).summary()
        result.append({"name": path.name, "folder": str(path), "node": summary.get("node", {}),
                       "rounds": len(summary.get("rounds", [])), "current": summary.get("current")})
    return result


ERROR_LOG = "errors.log"


def log_error(text: str, root: Path | None = None) -> Path | None:
    """Append a full traceback (redacted) to ``ai-sessions/errors.log``; None when it cannot be written."""
    try:
        path = (root or build_root()) / "ai-sessions" / ERROR_LOG
        path.parent.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        with lock_for(path), open(path, "a", encoding="utf-8", errors="replace") as f:
            f.write(f"--- {stamp} (pid {os.getpid()})\n{redact(text).rstrip()}\n")
        return path
    except OSError:
        return None
