"""Which hardware target the code is written for, and why.

Detection runs once per process per target (cached); the ``target`` setting
overrides it for code of the same kind (a configured ``cuda`` target decides GPU
code, while host code around it still gets the detected CPU target). Among the targets that match this machine and the node's kind
(``gpu`` inside GPU kernels or over GPU data, else ``cpu``), the highest
``priority`` wins. When none matches, the installed target of that kind with the
highest priority is used (GPU code prepared on a machine without a GPU); the
built-in ``host`` target is the last fallback.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal

from dace_ai.config.settings import AISettings
from dace_ai.errors import PluginError
from dace_ai.plugins.manager import PluginManager, get_plugin_manager
from dace_ai.plugins.registrations import Detection, Target
from dace_ai.state import STATE
from dace_ai.targets.cpu import read_cpu


@dataclass
class TargetInfo:
    """The hardware target the code is written for."""

    name: str
    kind: Literal["cpu", "gpu"]
    description: str
    guidance: str = ""
    compiler: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    reason: str = ""  #: why this target was chosen (detected, configured, fallback)
    language: str = "cpp"
    provenance: str = ""


FALLBACK_TARGET = "host"

_detections: dict[tuple[str, str], Detection] = STATE.register("targets.select.detections", {})
_lock = threading.Lock()


def detect(target: Target) -> Detection:
    """The target's detection on this machine, cached; a crashing detector is reported as no match."""
    key = (target.name, target.origin)
    with _lock:
        if key not in _detections:
            try:
                result = target.detect()
                if not isinstance(result, Detection):
                    raise TypeError(f"detect() returned {type(result).__name__}, not Detection")
            except Exception as exc:
                result = Detection(False, f"detection failed in {target.origin}: {type(exc).__name__}: {exc}")
            _detections[key] = result
        return _detections[key]


def clear_detection_cache() -> None:
    with _lock:
        _detections.clear()


def resolve_target(
    settings: AISettings, *, kind: str = "cpu", manager: PluginManager | None = None
) -> tuple[Target, Detection, str]:
    """(target, detection, reason) for code of ``kind`` ("cpu" or "gpu")."""
    manager = manager or get_plugin_manager()
    targets = manager.targets()
    if settings.target:
        configured = manager.get_as("targets", settings.target, Target)
        if configured.kind == kind:
            return configured, detect(configured), f"configured by {settings.source('target')}"
        # A configured GPU target says nothing about the host code around it, and vice versa.
    of_kind = [(t, detect(t)) for t in targets.values() if t.kind == kind]
    matched = [(t, d) for t, d in of_kind if d.matched]
    if matched:
        target, detection = max(matched, key=lambda td: (td[0].priority, td[0].name))
        return target, detection, f"detected: {detection.reason}"
    if of_kind:  # e.g. GPU code written on a machine without a GPU: the best installed pack still knows it
        target, detection = max(of_kind, key=lambda td: (td[0].priority, td[0].name))
        return (
            target,
            detection,
            (
                f"no installed {kind} target matched this machine ({detection.reason}); "
                f"{target.name} has the highest priority"
            ),
        )
    if FALLBACK_TARGET not in targets:
        raise PluginError(
            f"no {kind} target matches this machine and the built-in {FALLBACK_TARGET!r} "
            "target is not available (blocked?)"
        )
    target = targets[FALLBACK_TARGET]
    return target, detect(target), f"fallback: no installed {kind} target matched this machine"


def cannot_run_here(info: TargetInfo, manager: PluginManager | None = None) -> str:
    """Why this machine cannot run code compiled for ``info`` (this CPU lacks a feature its target's
    ``cpu_features`` names, hidden ones included), or "" when it can. A target no installed plugin
    registers, or one that names no features, is taken as runnable here."""
    registered = (manager or get_plugin_manager()).targets().get(info.name)
    if registered is None or not registered.cpu_features:
        return ""
    cpu = read_cpu()
    lacking = [f for f in registered.cpu_features if f not in cpu.flags]
    if not lacking:
        return ""
    hidden = " (hidden by the setting hide_cpu_features)" if any(f in cpu.hidden for f in lacking) else ""
    return f"this CPU lacks {', '.join(lacking)}{hidden}"


def target_info(target: Target, detection: Detection, reason: str) -> TargetInfo:
    """The prompt- and checker-facing description of a resolved target."""
    return TargetInfo(
        name=target.name,
        kind=target.kind,
        description=target.describe(detection),
        guidance=target.guidance,
        compiler=target.compiler,
        flags=target.resolved_flags(detection),
        reason=reason,
        language=target.language,
        provenance=target.origin,
    )
