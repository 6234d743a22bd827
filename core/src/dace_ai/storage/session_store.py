"""Sessions: every round of every node's generation, on disk, readable by a person.

Layout::

    <build root>/ai-sessions/<session id>/
        session.json          the record below
        node.json             the library node as it was before expansion (DaCe's JSON)
        round-1/
            prompt.md         system prompt and conversation sent (markdown)
            messages.json     the same conversation as data (continued by refine and repairs)
            request.json      provider, model, effort, limits, cache key (never an API key)
            answer.txt        the raw reply
            answer.json       the parsed answer (when it parsed)
            feedback.md       what the user asked for (refine rounds)
            checks.json       the checkers' whole reports (CheckReport.record: stage, reason, rule,
                              seeds, sizes, details such as bench results);
                              check-<name>.log each checker's diagnostics
        round-2/ ...

Identity. A session id is ``<node label>-<first 12 hex digits of the node's guid>``:
DaCe keeps a node's ``guid`` through ``deepcopy`` (so ``sdfg.compile()``, which expands
a copy, appends to the same session) and through ``sdfg.save()`` / ``SDFG.from_file()``,
while two programs that share a name have different guids, so they never collide.
The generated tasklet names its session and round in its provenance comment
(``// dace-ai: ... session=ai-sessions/<id>/round-<n>``).

``session.json`` (format 1)::

    {"format": 1, "id": "...", "node": {"name", "key", "type", "library", "sdfg", "state",
                                        "target", "guid"},
     "created": <unix time>, "updated": <unix time>,
     "current": <round in use, or null>, "pinned": false,
     "rounds": [{"number", "status": "accepted"|"rejected"|"error", "source", "reason":
                 "expansion"|"repair"|"refine"|"program build repair", "error", "cache_key",
                 "started", "time" (finished), "tokens": {"input", "output"}, "cost_usd",
                 "feedback", "edited_by_hand", "parent" (round continued), "replayed",
                 "checks_reused" (the reports of an earlier run of the same answer, no check ran),
                 "checks": [{"checker", "stage", "status", "seconds", "rule", "figures"}],
                 "verification" (the level its checks reached, accepted or not: ``verified (3 seeds,
                 ...)``, ``unverified: failed verify``), "provenance" ({field: value} of the tasklet),
                 "environments" ([class paths])}, ...],
     "events": [{"action": "rollback"|"pin"|"unpin", "round", "time"}, ...]}

Readers are tolerant: a missing field reads as its default and unknown fields
(written by newer versions or other tools) are kept when the record is
rewritten. A round is what one request produced. Rounds are numbered per
session, so a later compile that asks again appends rather than overwrites; a
replayed cache hit identical to the last round is not recorded twice.
Everything is written atomically under a cross-process lock; nothing here is
needed to compile or run an expanded SDFG.

Sessions never stop a program: a ``session.json`` of the wrong shape is moved aside
(``session.json.bad-<time>``) with a warning naming it, and a folder that cannot be written
is a warning while the answer is still used.
"""

from __future__ import annotations

import json
import os
import re
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dace_ai.errors import DaceAIWarning, redact
from dace_ai.storage.files import atomic_write, atomic_write_json, build_root, lock_for


class SessionWarning(DaceAIWarning):
    """A session could not be read or recorded; the expansion goes on without it."""


FORMAT = 1
#: Keys of a check report's recorded details shown in session.json's rounds (the bench's figures and speed of
#: light, and why a candidate was refused).
_FIGURES = (
    "reasons",
    "speedup",
    "speedup_range",
    "native_median",
    "candidate_median",
    "native_seconds",
    "candidate_seconds",
    "sizes",
    "repeats",
    "bytes",
    "bandwidth",
    "speed_of_light",
    "speed_of_light_level",
)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


def _safe(text: str) -> str:
    return _UNSAFE.sub("_", text).strip("._") or "node"


def session_name(sdfg_name: str, node_key: str) -> str:
    """A positional folder name, used only for nodes without a guid (none in DaCe 1.0.2)."""
    key = node_key if node_key.startswith(f"{sdfg_name}.") or not sdfg_name else f"{sdfg_name}.{node_key}"
    return _safe(key)


def session_id(label: str, guid: str) -> str:
    """The stable, unique id of the session of the node labelled ``label`` with DaCe ``guid``."""
    digits = re.sub(r"[^0-9a-fA-F]", "", guid).lower()[:12]
    return _safe(f"{label}-{digits}" if digits else label)


@dataclass(frozen=True)
class RoundRecord:
    """One recorded round: its number and folder."""

    number: int
    folder: Path


@dataclass(frozen=True)
class RoundContent:
    """What one round records (:meth:`Session.record_round`): the conversation sent, the reply, the
    answer parsed from it with its check reports, and how the round ended.

    A caller fills what it knows before the answer is parsed and adds the rest with
    :func:`dataclasses.replace`, so an answer that does not parse and one that was checked are
    recorded from the same conversation.
    """

    node: dict[str, Any]  #: what the session keeps of the node (name, type, SDFG, state, target)
    system: str
    messages: list[tuple[str, str]]  #: (role, text), the user's prompt first
    request: dict[str, Any]  #: provider, model, endpoint, cache key (never a key)
    reply_text: str | None = None
    answer: dict[str, Any] | None = None  #: the parsed answer (None when it did not parse)
    reports: Sequence[Any] = ()  #: the answer's check reports (``CheckReport``)
    #: ``accepted``, ``rejected`` (refused by its checks), ``passed`` (an optimize candidate) or ``error``
    #: (the answer did not parse).
    status: str = ""
    error: str = ""
    source: str = ""  #: ``cache``, the provider's name, or ``supplied``
    node_json: Any = None  #: the library node as DaCe serialises it (kept once per session)
    usage: Any = None  #: the provider's token counts and cost
    reason: str = ""  #: ``expansion``, ``repair``, ``refine``, ``program build repair``, ...
    feedback: str = ""  #: the user's feedback of a refine round
    started: float | None = None
    extra: dict[str, Any] | None = None  #: more fields of the round's entry (``parent``, ``checks_reused``)
    #: The level its checks reached (``verified (3 seeds)``, ``compile-only``, ``unverified: <reason>``).
    level: str = ""


def _tokens(usage: Any) -> tuple[dict[str, int | None], float | None]:
    if usage is None:
        return {"input": None, "output": None}, None
    get = usage.get if isinstance(usage, dict) else (lambda k: getattr(usage, k, None))
    return {"input": get("input_tokens"), "output": get("output_tokens")}, get("cost_usd")


class Session:
    """The session folder of one node; open with :func:`open_session` or :func:`session_by_id`."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    @property
    def id(self) -> str:
        return self.folder.name

    @property
    def summary_path(self) -> Path:
        return self.folder / "session.json"

    def exists(self) -> bool:
        return self.summary_path.is_file()

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
            data = json.loads(raw)
            unusable = [r for r in data.get("rounds", []) if not _is_round(r)]
            if unusable:  # keep what is usable (and unknown fields); keep the original for inspection
                kept = self._keep_aside(raw)
                _warn(
                    f"session {self.summary_path}: {len(unusable)} round record(s) without a number were dropped"
                    f"{f'; the original is kept as {kept.name}' if kept else ''}"
                )
            return _normalised(data)
        moved = self.summary_path.with_name(f"session.json.bad-{int(time.time() * 1000)}-{os.getpid()}")
        try:
            os.replace(self.summary_path, moved)
            where = f"moved to {moved.name}"
        except OSError:
            where = "left in place"
        _warn(f"session {self.summary_path} is not a valid session ({problem}); {where}; starting afresh")
        return {"rounds": []}

    def _keep_aside(self, raw: bytes) -> Path | None:
        """A copy of an unusable ``session.json`` next to it (``session.json.bad-<time>``), or None."""
        kept = self.summary_path.with_name(f"session.json.bad-{int(time.time() * 1000)}-{os.getpid()}")
        try:
            atomic_write(kept, raw.decode("utf-8", errors="replace"))
            return kept
        except OSError:
            return None

    def rounds(self) -> list[RoundRecord]:
        return [RoundRecord(r["number"], self.folder / f"round-{r['number']}") for r in self.summary()["rounds"]]

    def round_entry(self, number: int) -> dict[str, Any] | None:
        """The record of round ``number`` in ``session.json``, or None."""
        return next((r for r in self.summary()["rounds"] if r["number"] == number), None)

    def round_folder(self, number: int) -> Path:
        return self.folder / f"round-{number}"

    def answer(self, number: int) -> dict[str, Any] | None:
        """The parsed answer of round ``number`` (``answer.json``), or None."""
        try:
            data = json.loads((self.round_folder(number) / "answer.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            return None
        return data if isinstance(data, dict) else None

    def checks(self, number: int) -> list[dict[str, Any]]:
        """The check reports of round ``number`` as recorded (``checks.json`` rows with details); [] when none."""
        try:
            rows = json.loads((self.round_folder(number) / "checks.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            return []
        return [row for row in rows if isinstance(row, dict)] if isinstance(rows, list) else []

    def conversation(self, number: int) -> tuple[str, list[tuple[str, str]]] | None:
        """(system, messages) of round ``number`` with that round's answer appended, or None."""
        folder = self.round_folder(number)
        try:
            data = json.loads((folder / "messages.json").read_text(encoding="utf-8"))
            answer = (folder / "answer.txt").read_text(encoding="utf-8")
            messages = [(str(role), str(text)) for role, text in data["messages"]]
            return str(data["system"]), [*messages, ("assistant", answer)]
        except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError):
            return None

    def _update(self, change: Callable[[dict[str, Any]], Any]) -> Any:
        with lock_for(self.summary_path):
            summary = self.summary()
            summary.setdefault("format", FORMAT)
            summary.setdefault("id", self.id)
            result = change(summary)
            summary["updated"] = time.time()
            atomic_write_json(self.summary_path, summary)
            return result

    def update_round(self, number: int, **fields: Any) -> None:
        """Add or replace fields of round ``number``'s record (e.g. the tasklet's provenance).

        Record keeping only: a folder that cannot be written is a :class:`SessionWarning`.
        """

        def change(summary: dict[str, Any]) -> None:
            for entry in summary["rounds"]:
                if entry["number"] == number:
                    entry.update(fields)

        try:
            self._update(change)
        except OSError as exc:
            _warn(f"session {self.folder}: cannot update round {number} ({exc}); the tasklet is used as it is")

    def set_current(self, number: int, action: str = "rollback") -> None:
        """Make round ``number`` the one in use and log ``action``."""

        def change(summary: dict[str, Any]) -> None:
            summary["current"] = number
            summary.setdefault("events", []).append({"action": action, "round": number, "time": time.time()})

        self._update(change)

    def set_pinned(self, pinned: bool) -> None:
        def change(summary: dict[str, Any]) -> None:
            summary["pinned"] = pinned
            summary.setdefault("events", []).append(
                {"action": "pin" if pinned else "unpin", "round": summary.get("current"), "time": time.time()}
            )

        self._update(change)

    @property
    def pinned(self) -> bool:
        return bool(self.summary().get("pinned"))

    def record_round(self, content: RoundContent) -> RoundRecord:
        """Append one round (prompt, answer, checks) and update ``session.json``.

        ``content.status`` is ``accepted``, ``rejected`` (failed its checks), ``passed``
        (an optimize candidate) or ``error`` (the answer did not parse); ``content.level``
        the level its checks reached. A cache replay identical to the last round only
        bumps that round's ``replayed`` count. A folder that cannot be written is a
        :class:`SessionWarning` and a round numbered 0: the answer is still used.
        """
        if not content.status:
            raise ValueError("a session round needs a status (accepted, rejected, passed or error)")
        try:
            return self._record_round(replace(content, error=redact(content.error)))
        except OSError as exc:
            _warn(f"session {self.folder}: cannot record the round ({exc}); the answer is used without a record")
            return RoundRecord(0, self.folder)

    def _record_round(self, c: RoundContent) -> RoundRecord:
        with lock_for(self.summary_path):
            summary = self.summary()
            summary.setdefault("format", FORMAT)
            summary.setdefault("id", self.id)
            summary.setdefault("created", time.time())
            last = summary["rounds"][-1] if summary["rounds"] else None
            if (
                c.source == "cache"
                and last is not None
                and last.get("cache_key") == c.request.get("cache_key")
                and last.get("status") == c.status
                and not c.feedback
            ):
                return self._count_replay(summary, last, c.status, c.level)
            number = max((r["number"] for r in summary["rounds"]), default=0) + 1
            folder = self.round_folder(number)
            _write_round_files(folder, c)
            report_rows = _write_checks(folder, c.reports)
            if c.node_json is not None and not (self.folder / "node.json").exists():
                atomic_write_json(self.folder / "node.json", c.node_json)
            tokens, cost = _tokens(c.usage)
            now = time.time()
            summary["node"] = {**(summary.get("node") or {}), **c.node}
            summary["updated"] = now
            entry = {
                "number": number,
                "status": c.status,
                "source": c.source,
                "error": c.error,
                "cache_key": c.request.get("cache_key"),
                "started": c.started or now,
                "time": now,
                "tokens": tokens,
                "cost_usd": cost,
                "reason": c.reason or "expansion",
                "checks": report_rows,
                "verification": c.level,
            }
            if c.feedback:
                entry["feedback"] = c.feedback
            entry.update(c.extra or {})
            summary["rounds"].append(entry)
            if c.status == "accepted":
                summary["current"] = number
                summary["verification"] = c.level
                summary.pop("fallback", None)
            atomic_write_json(self.summary_path, summary)
            return RoundRecord(number, folder)

    def _count_replay(self, summary: dict[str, Any], last: dict[str, Any], status: str, level: str) -> RoundRecord:
        """A cache replay identical to the ``last`` round: count it there instead of recording a new round."""
        last["replayed"] = last.get("replayed", 0) + 1
        if status == "accepted":
            summary["current"] = last["number"]
        if level:
            last["verification"] = level
        if level and status == "accepted":
            summary["verification"] = level
        summary["updated"] = time.time()
        atomic_write_json(self.summary_path, summary)
        return RoundRecord(last["number"], self.round_folder(last["number"]))

    def record_fallback(self, implementation: str, reason: str) -> None:
        """Note that the node was expanded natively (``implementation``) because no answer passed."""
        self.update_summary(
            fallback={"implementation": implementation, "reason": reason, "time": time.time()},
            verification=f"native fallback ({implementation})",
        )

    def update_summary(self, **fields: Any) -> None:
        """Set top-level fields of ``session.json`` (e.g. ``current``, an ``optimize`` summary)."""
        self._update(lambda summary: summary.update(fields))


def _write_round_files(folder: Path, c: RoundContent) -> None:
    """Write a new round's conversation, request, answer and feedback into its ``folder``."""
    atomic_write(folder / "prompt.md", render_conversation(c.system, c.messages))
    atomic_write_json(folder / "messages.json", {"system": c.system, "messages": [list(m) for m in c.messages]})
    atomic_write_json(folder / "request.json", c.request)
    if c.reply_text is not None:
        atomic_write(folder / "answer.txt", c.reply_text)
    if c.answer is not None:
        atomic_write_json(folder / "answer.json", c.answer)
    if c.feedback:
        atomic_write(folder / "feedback.md", c.feedback.rstrip() + "\n")


def _write_checks(folder: Path, reports: Sequence[Any]) -> list[dict[str, Any]]:
    """Write a new round's check logs and reports into its ``folder``; return their rows for ``session.json``."""
    report_rows = []
    records = [report.record() for report in reports]  # the typed results under their JSON keys
    for report, record in zip(reports, records, strict=True):
        row = {
            "checker": report.checker,
            "status": report.status,
            "seconds": round(report.seconds, 3),
            "stage": report.stage,
        }
        if report.rule:
            row["rule"] = report.rule
        figures = {k: v for k, v in record["details"].items() if k in _FIGURES}
        if figures:
            row["figures"] = figures
        report_rows.append(row)
        atomic_write(folder / f"check-{_safe(report.checker)}.log", report.diagnostics or "")
    # checks.json keeps each whole report (seeds, sizes, reasons, bench timings, ...)
    atomic_write_json(folder / "checks.json", records)
    return report_rows


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


def open_session(
    sdfg_name: str, node_key: str, root: Path | None = None, *, guid: str | None = None, label: str | None = None
) -> Session:
    """The session of one node (created on first write): by guid when known, else by position."""
    if guid:
        name = session_id(label or node_key.rsplit("/", 1)[-1], guid)
    else:
        name = session_name(sdfg_name, node_key)
    return Session((root or build_root()) / "ai-sessions" / name)


def session_by_id(identifier: str, root: Path | None = None) -> Session:
    """The session folder named ``identifier`` (``ai-sessions/<id>`` or just ``<id>``)."""
    name = identifier.removeprefix("ai-sessions/").strip("/")
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"not a session id: {identifier!r}")
    return Session((root or build_root()) / "ai-sessions" / name)


def list_sessions(root: Path | None = None) -> list[dict[str, Any]]:
    """Every session under the build root: name, folder, node, rounds, the round in use, pinned."""
    folder = (root or build_root()) / "ai-sessions"
    if not folder.is_dir():
        return []
    result = []
    for path in sorted(p for p in folder.iterdir() if p.is_dir()):
        summary = Session(path).summary()
        result.append(
            {
                "name": path.name,
                "folder": str(path),
                "node": summary.get("node", {}),
                "rounds": len(summary["rounds"]),
                "current": summary.get("current"),
                "pinned": bool(summary.get("pinned")),
                "verification": summary.get("verification", ""),
            }
        )
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


def _is_round(item: object) -> bool:
    return isinstance(item, dict) and isinstance(item.get("number"), int) and not isinstance(item["number"], bool)


def _normalised(data: object) -> dict[str, Any]:
    """A summary with a ``rounds`` list of numbered rounds (anything else in a round list is dropped)."""
    if not isinstance(data, dict):
        data = {}
    if not isinstance(data.get("rounds"), list):
        data["rounds"] = []
    data["rounds"] = [r for r in data["rounds"] if _is_round(r)]
    return data
