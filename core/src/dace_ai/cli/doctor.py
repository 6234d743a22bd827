"""``dace-ai doctor``: what this machine offers dace-ai (DaCe and who implements 'ai', the GPU and HIP
builds, tools, API key variables (never their values), targets, the roofline, environments, plugins that
failed). Loaded when the command runs."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import warnings
from typing import Any

from dace_ai import compat
from dace_ai.cli.output import print_json
from dace_ai.compilation.gpu_toolchain import cmake_version, gpu_build_blocker, nvcc_version
from dace_ai.environments.generated import HOME_MODULE, StoredEnvironmentError, class_path, load_generated, stored_specs
from dace_ai.environments.installed import check_environment, environment_infos
from dace_ai.environments.resolve import detect_generator
from dace_ai.expansion.charge import CHARGE
from dace_ai.performance import cached_roofline
from dace_ai.plugins.manager import PluginManager, get_plugin_manager, iter_registrations
from dace_ai.plugins.registrations import Target
from dace_ai.targets.host import host_compiler
from dace_ai.targets.select import detect


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

    found: dict[str, list[str]] = {}
    for kind, reg in iter_registrations(manager):
        commands = [*((reg.compiler[0],) if isinstance(reg, Target) and reg.compiler else ()), *reg.tools]
        for command in commands:
            found.setdefault(command, []).append(f"{kind[:-1].replace('_', ' ')} {reg.name!r}")
    return dict(sorted(found.items()))


def gpu_build_report() -> dict[str, Any]:
    """Whether DaCe can build GPU programs with this machine's nvcc and CMake, and if not, why."""

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

    manager = get_plugin_manager()
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


def run(args: argparse.Namespace) -> int:
    report = doctor_report()
    if args.json:
        print_json(report)
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
