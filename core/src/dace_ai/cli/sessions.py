"""``dace-ai sessions|show|history|refine|rollback|pin|unpin FILE [NODE]``: sessions of a saved SDFG.

The same operations as ``dace_ai.sessions`` & co., on an SDFG file: read it,
act, and (for refine, rollback, pin, unpin) write it back atomically, so a
reader never sees half a file and a failed refine leaves it byte-identical.
Listings are rich tables on a terminal, plain text when piped, and JSON with
``--json``. NODE is the library node's name, the tasklet's label or a session
id, and may be left out when the SDFG has one generated tasklet.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from dace_ai import compat
from dace_ai.cli.help import add_example
from dace_ai.errors import AIUsageError

COLUMNS = ("name", "session", "round", "rounds", "pinned", "edited", "verification", "tokens")
HISTORY_COLUMNS = ("number", "status", "reason", "source", "verification", "tokens", "in_use", "feedback")


def _load(path: str) -> Any:
    file = Path(path)
    if not file.is_file():
        raise AIUsageError(f"{path}: no such SDFG file")
    try:
        return compat.load_sdfg(file)
    except Exception as exc:  # DaCe raises many kinds on a bad file
        raise AIUsageError(f"{path}: not a readable SDFG file ({type(exc).__name__}: {exc})") from exc


def _save(sdfg: Any, path: str) -> None:
    from dace_ai.storage.files import atomic_write_with  # local: CLI startup (loaded when the command runs)

    file = Path(path)
    compressed = file.read_bytes()[:2] == b"\x1f\x8b"
    atomic_write_with(file, lambda tmp: compat.save_sdfg(sdfg, tmp, compress=compressed))


def _cell(key: str, value: Any) -> str:
    if key == "tokens" and isinstance(value, dict):
        value = value.get("total", (value.get("input") or 0) + (value.get("output") or 0))
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return ""
    return str(value).replace("\n", " ")


def _table(rows: list[dict[str, Any]], columns: tuple[str, ...], title: str) -> None:
    """A rich table on a terminal, tab-free aligned plain text when piped."""
    cells = [[_cell(c, row.get(c)) for c in columns] for row in rows]
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title)
        for column in columns:
            table.add_column(column)
        for line in cells:
            table.add_row(*line)
        Console().print(table)
        return
    widths = [max([len(c)] + [len(line[i]) for line in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    for line in cells:
        print("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip())


def _emit(data: Any, args: argparse.Namespace, text: Any) -> None:
    if args.json:
        json.dump(data, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        text()


def _workflow() -> ModuleType:
    """The session workflows (:mod:`dace_ai.workflows.sessions`), loaded when a session command runs."""
    from dace_ai.workflows import sessions  # local: CLI startup (the session workflows load the pipeline)

    return sessions


def cmd_sessions(args: argparse.Namespace) -> int:
    rows = _workflow().sessions(_load(args.file))
    _emit(rows, args, lambda: _table(rows, COLUMNS, f"Generated tasklets of {args.file}"))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    info = _workflow().show(_load(args.file), args.node)

    def text() -> None:
        for key in COLUMNS + ("provider", "model", "folder"):
            print(f"{key + ':':<14}{_cell(key, info.get(key))}")
        for key in ("code_global", "code"):
            if info[key].strip():
                print(f"\n{key}:\n{info[key].rstrip()}")
        if info.get("notes"):
            print(f"\nnotes: {info['notes']}")

    _emit(info, args, text)
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    rounds = _workflow().history(_load(args.file), args.node)
    _emit(rounds, args, lambda: _table(rounds, HISTORY_COLUMNS, f"Rounds of {args.node or 'the tasklet'}"))
    return 0


def _change(args: argparse.Namespace, action: Any, verb: str) -> int:
    sdfg = _load(args.file)
    action(sdfg)
    _save(sdfg, args.file)
    workflow = _workflow()
    info = workflow.show(sdfg, workflow.select(sdfg, args.node).tasklet)
    _emit(
        info,
        args,
        lambda: print(
            f"{verb} {info['name']}: round {info['round']} of session {info['session']}"
            f"{' (pinned)' if info['pinned'] else ''}; {args.file} rewritten"
        ),
    )
    return 0


def cmd_refine(args: argparse.Namespace) -> int:
    return _change(args, lambda sdfg: _workflow().refine(sdfg, args.node, args.feedback), "refined")


def cmd_rollback(args: argparse.Namespace) -> int:
    return _change(args, lambda sdfg: _workflow().rollback(sdfg, args.node, round=args.round), "rolled back")


def cmd_pin(args: argparse.Namespace) -> int:
    return _change(args, lambda sdfg: _workflow().pin(sdfg, args.node), "pinned")


def cmd_unpin(args: argparse.Namespace) -> int:
    return _change(args, lambda sdfg: _workflow().unpin(sdfg, args.node), "unpinned")


def add_commands(sub: Any) -> None:
    """Register the session commands on the ``dace-ai`` subparsers."""

    def command(name: str, func: Any, help_text: str, node: bool = True) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, help=help_text, description=help_text)
        parser.add_argument("file", metavar="FILE", help="SDFG file (.sdfg or .sdfgz)")
        if node:
            parser.add_argument(
                "node",
                metavar="NODE",
                nargs="?",
                default=None,
                help="node name, tasklet label or session id (optional with one generated tasklet)",
            )
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        parser.set_defaults(func=func)
        return parser

    add_example(
        command("sessions", cmd_sessions, "list the generated tasklets of an SDFG file and their sessions", node=False),
        "dace-ai sessions prog.sdfg --json",
    )
    add_example(
        command("show", cmd_show, "show a generated tasklet: its code, session, round, pinned, edited by hand"),
        "dace-ai show prog.sdfg twice",
    )
    add_example(
        command("history", cmd_history, "list every round of a generated tasklet's session"),
        "dace-ai history prog.sdfg twice",
    )
    refine = command(
        "refine", cmd_refine, "ask for a new round with feedback (checked; the file changes only when it passes)"
    )
    refine.add_argument("--feedback", required=True, metavar="TEXT", help="what the model should improve")
    add_example(refine, 'dace-ai refine prog.sdfg twice --feedback "Unroll by four"')
    rollback = command("rollback", cmd_rollback, "put an earlier accepted round back (no model is asked)")
    rollback.add_argument("--round", type=int, required=True, metavar="K", help="the round to restore")
    add_example(rollback, "dace-ai rollback prog.sdfg twice --round 1")
    add_example(
        command("pin", cmd_pin, "pin a generated tasklet: refine, repairs and optimize leave it alone"),
        "dace-ai pin prog.sdfg twice",
    )
    add_example(command("unpin", cmd_unpin, "unpin a generated tasklet"), "dace-ai unpin prog.sdfg twice")
