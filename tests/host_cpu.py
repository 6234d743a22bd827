"""What this host's CPU can run, for tests that need a CPU feature: they skip with the reason where it lacks one.

Read from ``/proc/cpuinfo`` here, not through dace-ai, so a test of dace-ai's own CPU description does not
grade itself; features the ``hide_cpu_features`` setting hides count as missing, as they do for dace-ai
(``DACE_ai_hide_cpu_features=avx512f,avx512bw,avx512dq,avx512vl`` runs the suite as on an AVX2 machine).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

#: The variable of the ``hide_cpu_features`` setting, which the test fixtures keep (it describes the machine).
HIDE_VARIABLE = "DACE_ai_hide_cpu_features"

#: The features of an ``x86-64-v4`` CPU (AVX-512 F, BW, DQ, VL): what the ``x86-avx512`` target needs.
AVX512 = ("avx512f", "avx512bw", "avx512dq", "avx512vl")


@functools.cache
def _cpuinfo_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            return frozenset(value.split())
    return frozenset()


def hidden_features() -> frozenset[str]:
    """What the ``hide_cpu_features`` setting hides (from any of its sources)."""
    from dace_ai.config.settings import early_setting

    value, _ = early_setting("hide_cpu_features")
    return frozenset(name for name in str(value or "").split(",") if name)


def host_flags() -> frozenset[str]:
    """This host's CPU features, less the hidden ones."""
    return _cpuinfo_flags() - hidden_features()


def lacking(*features: str) -> list[str]:
    """Which of ``features`` this host lacks (or hides)."""
    flags = host_flags()
    return [f for f in features if f not in flags]


def lacking_reason(*features: str, why: str = "") -> str:
    """Why a test needing ``features`` cannot run here ("this host's CPU lacks avx512f: ..."), or ""."""
    missing = lacking(*features)
    if not missing:
        return ""
    hidden = " (hidden by hide_cpu_features)" if set(missing) <= hidden_features() else ""
    return f"this host's CPU lacks {', '.join(missing)}{hidden}" + (f": {why}" if why else "")


def needs_cpu(*features: str, why: str = "") -> pytest.MarkDecorator:
    """Mark a test to skip with :func:`lacking_reason` where this host lacks (or hides) one of ``features``."""
    reason = lacking_reason(*features, why=why)
    return pytest.mark.skipif(bool(reason), reason=reason or "the CPU has them")
