"""``dace-ai targets``: which hardware targets are installed, which match this machine, which are chosen.

A target pack is useful only if users can see that it is installed, whether it
recognised their machine (and why not), and which target the code for CPU and
for GPU nodes will be written for; this command answers the three questions,
as a table or as JSON for scripts and CI.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dace_ai.cli.help import add_example
from dace_ai.config.settings import resolve_settings
from dace_ai.errors import DaceAIError
from dace_ai.plugins.manager import PluginManager, get_plugin_manager
from dace_ai.targets.select import detect, resolve_target


def collect(manager: PluginManager | None = None, settings: Any = None) -> dict[str, Any]:
    """Installed targets with their detection, and the target chosen for cpu and gpu code."""
    manager = manager or get_plugin_manager()
    settings = settings or resolve_settings()
    rows = []
    for name, target in sorted(manager.targets().items(), key=lambda item: (-item[1].priority, item[0])):
        detection = detect(target)
        provenance = target.provenance
        rows.append({
            "name": name, "kind": target.kind, "priority": target.priority, "language": target.language,
            "distribution": provenance.distribution if provenance else "unregistered",
            "version": provenance.version if provenance else "",
            "plugin": provenance.plugin if provenance else "",
            "description": target.description,
            "detected": detection.matched, "reason": detection.reason,
            "compiler": list(target.compiler), "flags": list(target.resolved_flags(detection)),
            "checkers": list(target.checkers),
        })
    chosen = {}
    for kind in ("cpu", "gpu"):
        target, _, reason = resolve_target(settings, kind=kind, manager=manager)
        chosen[kind] = {"name": target.name, "reason": reason}
    return {"targets": rows, "chosen": chosen}


def _print_table(report: dict[str, Any]) -> None:
    print("Installed targets (highest priority first):")
    for row in report["targets"]:
        mark = "detected" if row["detected"] else "not detected"
        print(f"  {row['name']:<14} {row['kind']:<3} priority {row['priority']:>5}  "
              f"{row['distribution']} {row['version']}")
        print(f"  {'':<14} {mark}: {row['reason']}")
        if row["flags"] or row["compiler"]:
            print(f"  {'':<14} compiler: {' '.join(row['compiler'] + row['flags'])}")
    print("Chosen:")
    for kind, choice in report["chosen"].items():
        print(f"  {kind} code -> {choice['name']} ({choice['reason']})")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``dace-ai targets [--json]``; 0 on success, 2 on a settings or plugin error."""
    parser = argparse.ArgumentParser(prog="dace-ai targets", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_example(parser, "DACE_ai_target=sve dace-ai targets --json")
    args = parser.parse_args(argv)
    try:
        report = collect()
    except DaceAIError as exc:
        print(f"dace-ai targets: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        _print_table(report)
    return 0
