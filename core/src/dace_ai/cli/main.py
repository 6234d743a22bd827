"""The ``dace-ai`` command: plugins, effective settings, machine check, targets, sessions.

Exit codes follow the usual convention: 0 success, 1 the command ran and found a
problem (a plugin failed to load, a setting is invalid), 2 wrong usage, 130
interrupted (Ctrl-C). A reader that stops early (``dace-ai config | head -3``)
ends the command quietly.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dace_ai.cli.bench import add_parser as add_bench_parser
from dace_ai.cli.cache import add_cache_parser
from dace_ai.cli.generate import add_parser as add_generate
from dace_ai.cli.help import add_example
from dace_ai.cli.optimize import add_parser as add_optimize
from dace_ai.cli.output import print_json
from dace_ai.cli.sessions import add_commands as add_session_commands
from dace_ai.errors import DaceAIError, redact

if TYPE_CHECKING:
    from dace_ai.plugins.manager import PluginManager


def _manager() -> PluginManager:
    from dace_ai.plugins.manager import get_plugin_manager  # local: CLI startup (the plugins load when asked)

    return get_plugin_manager()


def _section_rows(manager) -> dict[str, list[dict[str, Any]]]:
    """Each plugin's prompt sections with their order and the section each replaces, by plugin name."""
    replaced = manager.replaced_sections()
    rows: dict[str, list[dict[str, Any]]] = {}
    for section in manager.prompt_sections():
        plugin = section.provenance.plugin if section.provenance else "unknown"
        original = replaced.get(section.name)
        rows.setdefault(plugin, []).append(
            {
                "name": section.name,
                "order": section.order,
                "title": section.title,
                "replaces": f"{section.name!r} from {original.origin}" if original else None,
            }
        )
    return rows


def cmd_plugins_list(args: argparse.Namespace) -> int:
    manager = _manager()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # failures are listed below, with their errors
        records = manager.records()
    sections = _section_rows(manager)
    if args.json:
        print_json([{**r.as_dict(), "prompt_sections": sections.get(r.name, [])} for r in records])
    else:
        name_w = max((len(r.name) for r in records), default=4)
        dist_w = max((len(f"{r.distribution} {r.version}") for r in records), default=4)
        for r in records:
            what = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in r.registered.items() if names)
            status = r.status + (" (built-in)" if r.builtin else "")
            line = f"{r.name:<{name_w}}  {r.distribution + ' ' + r.version:<{dist_w}}  {status:<19}"
            print((line + what).rstrip())
            if r.error:
                print(f"{'':<{name_w}}  {r.error}")
            for row in sections.get(r.name, []):
                replaces = f", replaces {row['replaces']}" if row["replaces"] else ""
                print(f"{'':<{name_w}}  prompt section {row['name']!r}: order {row['order']}{replaces}")
    return 1 if any(r.status == "failed" for r in records) else 0


def cmd_config(args: argparse.Namespace) -> int:
    from dace_ai.config.settings import (  # local: CLI startup (loaded when the command runs)
        describe_settings,
        resolve_settings,
    )

    rows = describe_settings(resolve_settings())
    for row in rows:
        if isinstance(row["value"], str):
            row["value"] = redact(row["value"])
    if args.json:
        print_json(rows)
    else:
        width = max(len(r["key"]) for r in rows)
        owner = None
        for r in rows:
            if r["owner"] != owner and r["owner"] != "dace-ai":
                print(f"\nOwned by {r['owner']}:")
            owner = r["owner"]
            value = "" if r["value"] is None else r["value"]
            print(f"{r['key']:<{width}}  {value!s:<24} ({r['source']})  {r['description']}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from dace_ai.cli.doctor import run  # local: CLI startup (the machine check loads when it runs)

    return run(args)


def cmd_targets(args: argparse.Namespace) -> int:
    from dace_ai.cli.targets import main as targets_main  # local: CLI startup (loaded when the command runs)

    return targets_main(
        (["--json"] if args.json else [])
        + (["--roofline"] if args.roofline else [])
        + (["--remeasure"] if args.remeasure else [])
    )


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dace-ai", description="Language-model implementations of DaCe nodes.")
    add_example(parser, "dace-ai doctor", "dace-ai sessions prog.sdfg", "dace-ai bench --offline")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    plugins = sub.add_parser("plugins", help="installed plugins", description="Inspect installed plugins.")
    plugins_sub = plugins.add_subparsers(dest="plugins_command", metavar="SUBCOMMAND")
    plugins_sub.required = True
    listing = plugins_sub.add_parser(
        "list",
        help="list plugins, their status and what they register",
        description="List every plugin: name, distribution, version, status "
        "(active/disabled/failed with the error) and registrations.",
    )
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(func=cmd_plugins_list)
    add_example(plugins, "dace-ai plugins list --json")
    add_example(listing, "dace-ai plugins list", "DACE_ai_disable_plugins=mylab dace-ai plugins list --json")

    config = sub.add_parser(
        "config",
        help="effective settings and their sources",
        description="Show every effective setting of the 'ai' category and where it came from.",
    )
    config.add_argument("--json", action="store_true", help="machine-readable output")
    config.set_defaults(func=cmd_config)
    add_example(config, "DACE_ai_provider=manual dace-ai config")

    doctor = sub.add_parser(
        "doctor",
        help="check compilers, emulators, API keys and targets",
        description="Report the compilers and emulators found, which API key variables are "
        "set (never their values) and which targets this machine matches.",
    )
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.set_defaults(func=cmd_doctor)
    add_example(doctor, "dace-ai doctor --json")

    targets = sub.add_parser(
        "targets",
        help="installed hardware targets and what was detected",
        description="List installed targets, what this machine matches and why, and the "
        "target chosen for CPU and GPU code.",
    )
    targets.add_argument("--json", action="store_true", help="machine-readable output")
    targets.add_argument(
        "--roofline",
        action="store_true",
        help="this machine's measured peaks (FLOP/s, bandwidth), measured once (a few seconds) "
        "and stored, beside the CPU target's vendor peaks",
    )
    targets.add_argument("--remeasure", action="store_true", help="with --roofline: measure again")
    targets.set_defaults(func=cmd_targets)
    add_example(targets, "DACE_ai_target=sve dace-ai targets", "dace-ai targets --roofline --json")

    add_session_commands(sub)

    add_cache_parser(sub)
    add_generate(sub)
    add_optimize(sub)

    add_bench_parser(sub)
    return parser


def _quiet_closed_pipe() -> int:
    """The reader went away: send what is still buffered nowhere, and say nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        return _quiet_closed_pipe()
    except KeyboardInterrupt:
        print("dace-ai: interrupted", file=sys.stderr)
        return 130
    except DaceAIError as exc:
        print(f"dace-ai: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
