"""Built-in plugin: the ``host`` target, the fallback when no target pack matches.

It describes this machine as plainly as it can (CPU model, ISA flags the
compiler would care about, DaCe's configured host compiler and flags) and gives
no vendor guidance; target packs such as ``dace-ai-x86`` do better.
"""

from __future__ import annotations

import shlex

from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Detection, Target
from dace_ai.targets.build_flags import dace_compiler
from dace_ai.targets.cpu import read_cpu

#: ISA flags worth telling a model about, in /proc/cpuinfo spelling.
_INTERESTING_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "amx_tile",
    "neon",
    "asimd",
    "sve",
    "sve2",
)


def cpu_facts() -> dict[str, object]:
    """CPU model, machine and ISA flags (see :func:`dace_ai.targets.cpu.read_cpu`)."""
    cpu = read_cpu()
    return {"model": cpu.model, "machine": cpu.machine, "flags": sorted(cpu.flags)}


def host_compiler() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """DaCe's configured host compiler and its flags."""
    from dace.config import Config

    executable = dace_compiler()
    args = tuple(shlex.split(Config.get("compiler", "cpu", "args") or ""))
    return (executable,), args


def _detect() -> Detection:
    facts = cpu_facts()
    return Detection(True, f"this machine ({facts['machine']})", facts)


def _describe(detection: Detection) -> str:
    facts = detection.details
    isa = [f for f in _INTERESTING_FLAGS if f in facts.get("flags", ())]
    compiler, flags = host_compiler()
    return (
        f"CPU: {facts.get('model')} ({facts.get('machine')}); ISA extensions: {', '.join(isa) or 'baseline'}.\n"
        f"Compiler: {' '.join(compiler)} {' '.join(flags)}"
    )


@hookimpl
def dace_ai_targets():
    compiler, flags = host_compiler()
    yield Target(
        name="host",
        kind="cpu",
        priority=-1000,
        detect=_detect,
        describe=_describe,
        guidance="Write portable C++ (the standard named in the flags); the flags above decide which instructions are allowed.",
        compiler=compiler,
        flags=flags,
        description="This machine's CPU with DaCe's configured host compiler (fallback)",
    )
