"""The ``dace-ai`` command: plugins, effective settings, machine check, targets, sessions.

Exit codes follow the usual convention: 0 success, 1 the command ran and found a
problem (a plugin failed to load, a setting is invalid), 2 wrong usage, 130
interrupted (Ctrl-C). A reader that stops early (``dace-ai config | head -3``)
ends the command quietly.
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
from typing import TYPE_CHECKING, Any

from dace_ai import compat
from dace_ai.cli.help import add_example
from dace_ai.errors import DaceAIError, redact
from dace_ai.expansion.charge import CHARGE

if TYPE_CHECKING:
    from dace_ai.plugins.manager import PluginManager


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def _manager():
    from dace_ai.plugins.manager import get_plugin_manager  # local: CLI startup (loaded when the command runs)

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
        _print_json([{**r.as_dict(), "prompt_sections": sections.get(r.name, [])} for r in records])
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
        _print_json(rows)
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


def _tool_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unusable: {exc}"
    lines = [line.strip() for line in (out.stdout or out.stderr).splitlines() if line.strip()]
    versioned = [line for line in lines if "version" in line.lower() or "release" in line.lower()]
    return (versioned or lines or [""])[0]


def declared_tools(manager) -> dict[str, list[str]]:
    """The commands installed packs declare (targets' compilers, any registration's ``tools``), with who uses each."""
    from dace_ai.plugins.manager import iter_registrations  # local: CLI startup (loaded when the command runs)
    from dace_ai.plugins.registrations import Target  # local: CLI startup (loaded when the command runs)

    found: dict[str, list[str]] = {}
    for kind, reg in iter_registrations(manager):
        commands = [*((reg.compiler[0],) if isinstance(reg, Target) and reg.compiler else ()), *reg.tools]
        for command in commands:
            found.setdefault(command, []).append(f"{kind[:-1].replace('_', ' ')} {reg.name!r}")
    return dict(sorted(found.items()))


def gpu_build_report() -> dict[str, Any]:
    """Whether DaCe can build GPU programs with this machine's nvcc and CMake, and if not, why."""
    from dace_ai.compilation.gpu_toolchain import (  # local: CLI startup (loaded when the command runs)
        cmake_version,
        gpu_build_blocker,
        nvcc_version,
    )

    nvcc = nvcc_version()
    blocker = gpu_build_blocker() if nvcc is not None else None
    return {
        "nvcc": ".".join(map(str, nvcc)) if nvcc else None,
        "cmake": cmake_version(),
        "can_build": nvcc is not None and blocker is None,
        "reason": blocker or ("no nvcc on PATH" if nvcc is None else ""),
        "cmake_note": cmake_note(nvcc, cmake_version()),
    }


def hip_build_report() -> dict[str, Any]:
    """Whether DaCe can build HIP programs here (hipcc, HIP headers, CMake's HIP set-up), and if not, why."""
    from dace_ai.compilation.gpu_toolchain import gpu_build_blocker  # local: CLI startup (loaded when the command runs)

    hipcc = shutil.which("hipcc")
    blocker = gpu_build_blocker("hip") if hipcc is not None else None
    return {
        "hipcc": hipcc,
        "can_build": hipcc is not None and blocker is None,
        "reason": blocker or ("" if hipcc is not None else "no hipcc on PATH"),
    }


def cmake_note(nvcc: tuple[int, int] | None, cmake: str) -> str:
    """What is known of this CMake with this nvcc: CMake 3.x (3.25 seen) cannot set up CUDA 13, CMake 4 can."""
    if nvcc is None or nvcc[0] < 13 or not cmake[:1].isdigit() or int(cmake.split(".")[0]) >= 4:
        return ""
    return f"CMake {cmake} could not set up CUDA {nvcc[0]} where tried (3.25); CMake 4 can: pip install cmake"


def doctor_report() -> dict[str, Any]:
    """What this machine offers dace-ai, without printing any secret."""
    from dace_ai.targets.host import host_compiler  # local: CLI startup (loaded when the command runs)
    from dace_ai.targets.select import detect  # local: CLI startup (loaded when the command runs)

    manager = _manager()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        records = manager.records()
    compiler = host_compiler()[0][0]
    tools = {"host compiler": {"command": compiler, "path": shutil.which(compiler), "for": "host code"}}
    for command, users in declared_tools(manager).items():
        tools[command] = {"command": command, "path": shutil.which(command), "for": "; ".join(users)}
    for info in tools.values():
        info["version"] = _tool_version(info["path"]) if info["path"] else None
    key_vars = sorted(
        {var for p in manager.providers().values() for var in p.key_env} | {"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}
    )
    keys = {var: bool(os.environ.get(var)) for var in key_vars}
    targets = {
        name: {"matched": d.matched, "reason": d.reason}
        for name, d in ((n, detect(t)) for n, t in manager.targets().items())
    }
    failed = [r.as_dict() for r in records if r.status == "failed"]
    return {
        "dace": dace_report(),
        "gpu_build": gpu_build_report(),
        "hip_build": hip_build_report(),
        "tools": tools,
        "api_keys_set": keys,
        "targets": targets,
        "roofline": roofline_summary(),
        "environments": environment_report(manager),
        "failed_plugins": failed,
    }


#: What doctor says when no roofline is stored (it never measures: that takes seconds).
ROOFLINE_HINT = "not measured yet for this compiler and flags: `dace-ai targets --roofline` measures it (a few seconds)"


def roofline_summary() -> dict[str, Any]:
    """The stored roofline's headline figures, or how to measure it (never measures here)."""
    from dace_ai.performance import cached_roofline  # local: CLI startup (loaded when the command runs)

    try:
        found = cached_roofline()
    except Exception as exc:  # noqa: BLE001 - doctor reports, it does not fail
        return {"measured": False, "hint": f"cannot tell: {type(exc).__name__}: {exc}"}
    if found is None:
        return {"measured": False, "hint": ROOFLINE_HINT}
    data = found.to_json()
    return {"measured": True, **{k: data[k] for k in ("peak_gflops", "bandwidth_gbs", "threads", "measured_at")}}


def dace_report() -> dict[str, Any]:
    """The DaCe in use and who implements its 'ai' (dace-ai or DaCe's own AI library), with the reason."""
    return {
        "version": compat.DACE_VERSION,
        "builtin_ai_library": CHARGE.builtin,
        "builtin": CHARGE.mode,
        "builtin_source": CHARGE.source,
        "in_charge": "dace-ai" if CHARGE.dace_ai_in_charge else "dace",
        "implementation": CHARGE.implementation,
        "reason": CHARGE.describe(),
        "replaced": compat.replaced(),
    }


def environment_report(manager: PluginManager) -> dict[str, list[dict[str, Any]]]:
    """Every environment: registered in DaCe, offered by packs (generators), stored by earlier runs."""
    from dace_ai.environments.generated import (
        HOME_MODULE,
        StoredEnvironmentError,
        class_path,
        load_generated,
        stored_specs,
    )  # local: CLI startup (loaded when the command runs)
    from dace_ai.environments.installed import (  # local: CLI startup (loaded when the command runs)
        check_environment,
        environment_infos,
    )
    from dace_ai.environments.resolve import detect_generator  # local: CLI startup (loaded when the command runs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        load_generated()
        registered = [
            {"name": e.name, "installed": e.available, "reason": e.reason, "gpu": e.gpu}
            for e in environment_infos()
            if not e.name.startswith(HOME_MODULE + ".")
        ]
    packs = []
    for name, generator in manager.environment_generators().items():
        detection = detect_generator(generator)
        packs.append(
            {
                "name": name,
                "installed": detection.matched,
                "reason": detection.reason,
                "from": str(generator.provenance or ""),
            }
        )
    generated = []
    for path, spec in stored_specs():
        if isinstance(spec, StoredEnvironmentError):
            generated.append(
                {"name": path.name, "installed": False, "reason": f"not usable: {spec}", "file": str(path)}
            )
            continue
        env = compat.registered_environment(class_path(spec))
        info = check_environment(class_path(spec), env) if env is not None else None
        generated.append(
            {
                "name": class_path(spec),
                "installed": bool(info and info.available),
                "reason": info.reason if info else "not registered",
                "file": str(path),
                "generator": spec.generator,
            }
        )
    return {"registered": registered, "packs": packs, "generated": generated}


def cmd_doctor(args: argparse.Namespace) -> int:
    report = doctor_report()
    if args.json:
        _print_json(report)
    else:
        dace_info = report["dace"]
        print(f"DaCe {dace_info['version']}: {dace_info['in_charge']} implements 'ai'")
        print(f"  {dace_info['reason']}")
        gpu = report["gpu_build"]
        if gpu["nvcc"] is not None:
            state = "DaCe can build GPU programs" if gpu["can_build"] else gpu["reason"]
            if gpu["can_build"] and gpu["cmake_note"]:
                state += f" where CMake can set up CUDA ({gpu['cmake_note']})"
            print(f"GPU build (nvcc {gpu['nvcc']}, CMake {gpu['cmake']}): {state}")
        hip = report["hip_build"]
        if hip["hipcc"] is not None:
            print(
                f"HIP build (hipcc at {hip['hipcc']}): {'DaCe can build HIP programs' if hip['can_build'] else hip['reason']}"
            )
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
        roof = report["roofline"]
        if roof["measured"]:
            peaks = roof["peak_gflops"]
            print(
                f"Roofline: float32 {peaks['float32']:.0f} GFLOP/s, float64 {peaks['float64']:.0f} GFLOP/s, "
                f"memory {roof['bandwidth_gbs']:.1f} GB/s with {roof['threads']} threads "
                f"(measured {roof['measured_at']}; dace-ai targets --roofline)"
            )
        else:
            print(f"Roofline: {roof['hint']}")
        titles = {
            "registered": "DaCe environments (registered)",
            "packs": "Environment packs (generators)",
            "generated": "Stored environments (generated)",
        }
        for kind, title in titles.items():
            print(f"{title}:")
            for env in report["environments"][kind] or [{"name": "(none)", "installed": None, "reason": ""}]:
                state = {True: "installed", False: "not installed", None: ""}[env["installed"]]
                print(f"  {env['name']:<22} {state}{': ' + env['reason'] if env['reason'] else ''}")
        for failed in report["failed_plugins"]:
            print(f"Plugin {failed['name']} ({failed['distribution']} {failed['version']}) failed: {failed['error']}")
    return 1 if report["failed_plugins"] else 0


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

    from dace_ai.cli.sessions import (
        add_commands as add_session_commands,  # local: CLI startup (loaded when the command runs)
    )

    add_session_commands(sub)

    from dace_ai.cli.cache import add_cache_parser  # local: CLI startup (loaded when the command runs)

    add_cache_parser(sub)
    from dace_ai.cli.generate import add_parser as add_generate  # local: CLI startup (loaded when the command runs)
    from dace_ai.cli.optimize import add_parser as add_optimize  # local: CLI startup (loaded when the command runs)

    add_generate(sub)
    add_optimize(sub)

    from dace_ai.cli.bench import add_parser as add_bench_parser  # local: CLI startup (loaded when the command runs)

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
