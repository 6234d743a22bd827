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
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from dace_ai.cli.help import add_example
from dace_ai.config.settings import resolve_settings
from dace_ai.errors import DaceAIError
from dace_ai.performance import machine_roofline
from dace_ai.performance.measure import RooflineError
from dace_ai.performance.store import folder
from dace_ai.plugins.manager import PluginManager, get_plugin_manager
from dace_ai.targets.select import detect, resolve_target

if TYPE_CHECKING:
    from dace_ai.config.settings import AISettings


def collect(manager: PluginManager | None = None, settings: AISettings | None = None) -> dict[str, Any]:
    """Installed targets with their detection, and the target chosen for cpu and gpu code."""
    manager = manager or get_plugin_manager()
    settings = settings or resolve_settings()
    rows = []
    for name, target in sorted(manager.targets().items(), key=lambda item: (-item[1].priority, item[0])):
        detection = detect(target)
        provenance = target.provenance
        rows.append(
            {
                "name": name,
                "kind": target.kind,
                "priority": target.priority,
                "language": target.language,
                "distribution": provenance.distribution if provenance else "unregistered",
                "version": provenance.version if provenance else "",
                "plugin": provenance.plugin if provenance else "",
                "description": target.description,
                "detected": detection.matched,
                "reason": detection.reason,
                "compiler": list(target.compiler),
                "flags": list(target.resolved_flags(detection)),
                "checkers": list(target.checkers),
            }
        )
    chosen = {}
    for kind in ("cpu", "gpu"):
        target, _, reason = resolve_target(settings, kind=kind, manager=manager)
        chosen[kind] = {"name": target.name, "reason": reason}
    return {"targets": rows, "chosen": chosen}


def _print_table(report: dict[str, Any]) -> None:
    print("Installed targets (highest priority first):")
    for row in report["targets"]:
        mark = "detected" if row["detected"] else "not detected"
        print(
            f"  {row['name']:<14} {row['kind']:<3} priority {row['priority']:>5}  "
            f"{row['distribution']} {row['version']}"
        )
        print(f"  {'':<14} {mark}: {row['reason']}")
        if row["flags"] or row["compiler"]:
            print(f"  {'':<14} compiler: {' '.join(row['compiler'] + row['flags'])}")
    print("Chosen:")
    for kind, choice in report["chosen"].items():
        print(f"  {kind} code -> {choice['name']} ({choice['reason']})")


def roofline_report(
    remeasure: bool = False, manager: PluginManager | None = None, settings: AISettings | None = None
) -> dict[str, Any]:
    """This machine's roofline (measured once and stored; again with ``remeasure``) and the vendor's peaks.

    The JSON form: ``{"peak_gflops": {"float32": ..., "float64": ...}, "bandwidth_gbs": ..., "threads": ...,
    ...details, "vendor": {target name: its VendorPeaks, for the CPU target chosen}}``.
    """
    manager = manager or get_plugin_manager()
    settings = settings or resolve_settings()
    roofline = machine_roofline(remeasure=remeasure)
    report = roofline.to_json()
    report["stored"] = str(folder() / f"{roofline.key}.json")
    target, detection, _ = resolve_target(settings, kind="cpu", manager=manager)
    peaks = target.resolved_peaks(detection)
    report["vendor"] = {target.name: {**asdict(peaks), "peak_gflops": dict(peaks.peak_gflops)}} if peaks else {}
    return report


def _rate(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} {unit}" if value >= 100 else f"{value:.1f} {unit}"


def _print_roofline(report: dict[str, Any]) -> None:
    print(f"Roofline of this machine ({report['cpu']}), measured {report['measured_at']} in {report['seconds']:.1f} s")
    print(f"  with: {report['compiler']} {' '.join(report['flags'])}")
    print(f"  stored: {report['stored']}")
    vendor = next(iter(report["vendor"].items()), None)
    header = f"  {'':<22} {'measured, ' + str(report['threads']) + ' threads':<24}"
    if vendor:
        header += f" {vendor[0]} (vendor, {vendor[1]['threads'] or 'all'} threads)"
    print(header)
    for dtype in ("float32", "float64"):
        row = f"  {dtype + ' peak':<22} {_rate(report['peak_gflops'][dtype], 'GFLOP/s'):<24}"
        if vendor:
            row += f" {_rate(vendor[1]['peak_gflops'].get(dtype), 'GFLOP/s')}"
        print(row)
    row = f"  {'bandwidth (memory)':<22} {_rate(report['bandwidth_gbs'], 'GB/s'):<24}"
    if vendor:
        row += f" {_rate(vendor[1]['bandwidth_gbs'], 'GB/s')}"
    print(row)
    if vendor and vendor[1]["source"]:
        print(f"  vendor figures: {vendor[1]['source']}")
    for threads, levels in report["bandwidth_gbs_by_threads"].items():
        peaks = report["peak_gflops_by_threads"][threads]
        print(
            f"  {threads} thread(s): float32 {_rate(peaks['float32'], 'GFLOP/s')}, float64 "
            f"{_rate(peaks['float64'], 'GFLOP/s')}; "
            + ", ".join(f"{name} {_rate(v, 'GB/s')}" for name, v in levels.items())
        )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``dace-ai targets [--json] [--roofline [--remeasure]]``; 0 on success, 2 on an error."""
    parser = argparse.ArgumentParser(prog="dace-ai targets", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--roofline",
        action="store_true",
        help="this machine's measured peaks (FLOP/s per element type, bandwidth per memory level), "
        "measured once (a few seconds) and stored, beside the target's vendor peaks",
    )
    parser.add_argument("--remeasure", action="store_true", help="with --roofline: measure again")
    add_example(parser, "DACE_ai_target=sve dace-ai targets --json", "dace-ai targets --roofline --json")
    args = parser.parse_args(argv)
    try:
        report = roofline_report(args.remeasure) if args.roofline else collect()
    except (DaceAIError, RooflineError) as exc:
        print(f"dace-ai targets: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    elif args.roofline:
        _print_roofline(report)
    else:
        _print_table(report)
    return 0
