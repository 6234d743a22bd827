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
expanded SDFG.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dace_ai.storage.files import ai_folder, atomic_write, atomic_write_json, lock_for

#: Details of a check report kept in checks.json (the bench's figures and why a candidate was refused).
_FIGURES = ("rule", "reasons", "speedup", "speedup_range", "native_median", "candidate_median", "native_seconds",
            "candidate_seconds", "sizes", "repeats", "bytes", "bandwidth")
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
        try:
            return json.loads(self.summary_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
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
        only bumps that round's ``replayed`` count.
        """
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
                figures = {k: v for k, v in report.details.items() if k in _FIGURES}
                if figures:
                    row["figures"] = figures
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


    def update_summary(self, **fields: Any) -> None:
        """Set top-level fields of ``session.json`` (e.g. ``current``, an ``optimize`` summary)."""
        with lock_for(self.summary_path):
            summary = self.summary()
            summary.update(fields, updated=time.time())
            atomic_write_json(self.summary_path, summary)


def render_conversation(system: str, messages: list[tuple[str, str]]) -> str:
    parts = ["# System\n", system.rstrip() + "\n"]
    for role, content in messages:
        parts += [f"\n# {role.capitalize()}\n", content.rstrip() + "\n"]
    return "".join(parts)


def open_session(sdfg_name: str, node_key: str, root: Path | None = None) -> Session:
    """The session of one node (created on first write)."""
    return Session(ai_folder("ai-sessions", root) / session_name(sdfg_name, node_key))


def list_sessions(root: Path | None = None) -> list[dict[str, Any]]:
    """Every session under the build root: name, folder, node, rounds and the round in use."""
    folder = ai_folder("ai-sessions", root)
    result = []
    for path in sorted(p for p in folder.iterdir() if p.is_dir()):
        summary = Session(path).summary()
        result.append({"name": path.name, "folder": str(path), "node": summary.get("node", {}),
                       "rounds": len(summary.get("rounds", [])), "current": summary.get("current")})
    return result
