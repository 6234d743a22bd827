"""The ``dace-ai`` command: plugins, effective settings, machine check, targets.

Exit codes follow the usual convention: 0 success, 1 the command ran and found a
problem (a plugin failed to load, a setting is invalid), 2 wrong usage.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from dace_ai.errors import DaceAIError

#: Tools the checks of the target packs use, by what they are for.
TOOLS: tuple[tuple[str, str], ...] = (
    ("nvcc", "CUDA checks"),
    ("hipcc", "HIP checks"),
    ("aarch64-linux-gnu-g++", "ARM SVE cross compilation"),
    ("qemu-aarch64", "running SVE code at several vector lengths"),
    ("clang++", "alternative compile checker"),
)


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def _manager():
    from dace_ai.plugins.manager import get_plugin_manager

    return get_plugin_manager()


def cmd_plugins_list(args: argparse.Namespace) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # failures are listed below, with their errors
        records = _manager().records()
    if args.json:
        _print_json([r.as_dict() for r in records])
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
    return 1 if any(r.status == "failed" for r in records) else 0


def cmd_config(args: argparse.Namespace) -> int:
    from dace_ai.config.settings import describe_settings, resolve_settings

    rows = describe_settings(resolve_settings())
    if args.json:
        _print_json(rows)
    else:
        width = max(len(r["key"]) for r in rows)
        for r in rows:
            value = "" if r["value"] is None else r["value"]
            print(f"{r['key']:<{width}}  {value!s:<24} ({r['source']})")
    return 0


def _tool_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unusable: {exc}"
    lines = [line.strip() for line in (out.stdout or out.stderr).splitlines() if line.strip()]
    versioned = [line for line in lines if "version" in line.lower() or "release" in line.lower()]
    return (versioned or lines or [""])[0]


def doctor_report() -> dict[str, Any]:
    """What this machine offers dace-ai, without printing any secret."""
    from dace_ai.targets.host import host_compiler
    from dace_ai.targets.select import detect

    manager = _manager()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        records = manager.records()
    compiler = host_compiler()[0][0]
    tools = {"host compiler": {"command": compiler, "path": shutil.which(compiler), "for": "host code"}}
    for command, purpose in TOOLS:
        tools[command] = {"command": command, "path": shutil.which(command), "for": purpose}
    for info in tools.values():
        info["version"] = _tool_version(info["path"]) if info["path"] else None
    key_vars = sorted({var for p in manager.providers().values() for var in p.key_env}
                      | {"ANTHROPIC_API_KEY", "OPENAI_API_KEY"})
    keys = {var: bool(os.environ.get(var)) for var in key_vars}
    targets = {name: {"matched": d.matched, "reason": d.reason}
               for name, d in ((n, detect(t)) for n, t in manager.targets().items())}
    failed = [r.as_dict() for r in records if r.status == "failed"]
    return {"tools": tools, "api_keys_set": keys, "targets": targets, "failed_plugins": failed}


def cmd_doctor(args: argparse.Namespace) -> int:
    report = doctor_report()
    if args.json:
        _print_json(report)
    else:
        print("Tools:")
        for name, info in report["tools"].items():
            state = f"found at {info['path']} ({info['version']})" if info["path"] else "not found"
            print(f"  {name:<22} {state}  [{info['for']}]")
        print("API keys (values never shown):")
        for var, present in report["api_keys_set"].items():
            print(f"  {var:<22} {'set' if present else 'not set'}")
        print("Targets:")
        for name, t in report["targets"].items():
            print(f"  {name:<22} {'detected' if t['matched'] else 'not detected'}: {t['reason']}")
        for failed in report["failed_plugins"]:
            print(f"Plugin {failed['name']} ({failed['distribution']} {failed['version']}) failed: {failed['error']}")
    return 1 if report["failed_plugins"] else 0


def cmd_targets(args: argparse.Namespace) -> int:
    from dace_ai.cli.targets import main as targets_main

    return targets_main(["--json"] if args.json else [])


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dace-ai", description="Language-model implementations of DaCe nodes.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    plugins = sub.add_parser("plugins", help="installed plugins", description="Inspect installed plugins.")
    plugins_sub = plugins.add_subparsers(dest="plugins_command", metavar="SUBCOMMAND")
    plugins_sub.required = True
    listing = plugins_sub.add_parser("list", help="list plugins, their status and what they register",
                                     description="List every plugin: name, distribution, version, status "
                                                 "(active/disabled/failed with the error) and registrations.")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(func=cmd_plugins_list)

    config = sub.add_parser("config", help="effective settings and their sources",
                            description="Show every effective setting of the 'ai' category and where it came from.")
    config.add_argument("--json", action="store_true", help="machine-readable output")
    config.set_defaults(func=cmd_config)

    doctor = sub.add_parser("doctor", help="check compilers, emulators, API keys and targets",
                            description="Report the compilers and emulators found, which API key variables are "
                                        "set (never their values) and which targets this machine matches.")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.set_defaults(func=cmd_doctor)

    targets = sub.add_parser("targets", help="installed hardware targets and what was detected",
                             description="List installed targets, what this machine matches and why, and the "
                                         "target chosen for CPU and GPU code.")
    targets.add_argument("--json", action="store_true", help="machine-readable output")
    targets.set_defaults(func=cmd_targets)

    from dace_ai.cli.optimize import add_parser as add_optimize

    add_optimize(sub)

    from dace_ai.cli.bench import add_parser as add_bench_parser

    add_bench_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except DaceAIError as exc:
        print(f"dace-ai: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
