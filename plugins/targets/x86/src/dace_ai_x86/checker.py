"""The ``x86-isa`` checker: intrinsics the target CPU lacks are rejected before anything runs.

Two independent reasons, both reported: a scan names each intrinsic or vector
type whose ISA extension is missing from the target's level (a clear sentence
the model can act on), and the compiler, run with the target's ``-march``
flags, rejects the same code in its own words (GCC: "inlining failed in call to
'always_inline' ... target specific option mismatch"). A compile check with
``-fsyntax-only`` would not catch it: the mismatch surfaces only when the
intrinsic is inlined, so the unit is compiled to an object file.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass

from dace_ai.plugin import (
    CheckReport,
    CheckRequest,
    dace_include_dir,
    environment_flags,
    host_unit,
    report_from_tool,
    run_tool,
)

from .cpu import features_for_flags, read_cpu

CHECKER = "x86-isa"
TARGETS = ("x86-avx2", "x86-avx512")


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    feature: str  #: /proc/cpuinfo spelling
    family: str  #: what to call it in a message


#: Most specific first: the first rule that matches a name decides its feature.
RULES: tuple[Rule, ...] = (
    Rule(re.compile(r"\b_tile_\w+|\b__tile1024i\b"), "amx_tile", "AMX"),
    Rule(re.compile(r"\b_mm(?:512|256)?_\w*(?:bf16|pbh)\w*|\b__m(?:512|256|128)bh\b"), "avx512_bf16", "AVX-512 BF16"),
    Rule(re.compile(r"\b_mm512_dpbusds?_epi32\b|\b_mm512_dpwssds?_epi32\b"), "avx512_vnni", "AVX-512 VNNI"),
    Rule(re.compile(r"\b_mm(?:256)?_maskz?_\w+|\b_mm(?:256)?_\w+_mask\b"), "avx512vl", "AVX-512 VL"),
    Rule(re.compile(r"\b_mm512_\w+|\b__m512[dih]?\b|\b__mmask(?:8|16|32|64)\b"), "avx512f", "AVX-512"),
    Rule(re.compile(r"\b_mm(?:256)?_fn?m(?:add|sub|addsub|subadd)_p[sd]\b|\b_mm_fn?m(?:add|sub)_s[sd]\b"),
         "fma", "FMA"),
    Rule(re.compile(r"\b_mm256_(?:add|sub|mullo|mul|cmpeq|cmpgt|max|min|abs|slli|srli|srai|sllv|srlv|and|or|xor|"
                    r"hadd|madd|maddubs|packs|packus|unpacklo|unpackhi|shuffle|blend|sad)_epi(?:8|16|32|64|u8|u16|u32)\b"
                    r"|\b_mm256_i(?:32|64)gather_\w+|\b_mm256_mask_i(?:32|64)gather_\w+|\b_mm256_permutevar8x32_\w+"
                    r"|\b_mm256_permute4x64_\w+|\b_mm256_broadcast[bwdq]_epi\w+|\b_mm256_cvtepu?\d+_epi\d+\b"),
         "avx2", "AVX2"),
    Rule(re.compile(r"\b_mm256_\w+|\b__m256[dih]?\b"), "avx", "AVX"),
)

_NAME = re.compile(r"\b_(?:mm\d*|tile)_\w+|\b__m(?:512|256|128)\w*|\b__mmask\d+\b|\b__tile1024i\b")


def required_features(sources: dict[str, str]) -> list[tuple[str, str, str, str, int]]:
    """(name, feature, family, section, line) for the first use of every intrinsic name, in order."""
    found: dict[str, tuple[str, str, str, str, int]] = {}
    for section, text in sources.items():
        for lineno, line in enumerate(text.splitlines(), start=1):
            code = line.split("//", 1)[0]
            for match in _NAME.finditer(code):
                name = match.group(0)
                if name in found:
                    continue
                for rule in RULES:
                    if rule.pattern.fullmatch(name):
                        found[name] = (name, rule.feature, rule.family, section, lineno)
                        break
    return list(found.values())


def _prelude() -> str:
    return "// what DaCe includes in every generated file\n#include <dace/dace.h>\n"


def check_x86(request: CheckRequest) -> CheckReport:
    """Scan for intrinsics beyond the target's ISA level, then compile with the target's flags."""
    answer, node = request.answer, request.node
    target = node.target
    cpu = read_cpu()
    allowed = features_for_flags(list(target.flags), cpu.flags)
    sources = {"code": answer.code, "code_global": answer.code_global, "code_init": answer.code_init,
               "code_exit": answer.code_exit}
    missing = [hit for hit in required_features(sources) if hit[1] not in allowed]

    compiler = target.compiler[0] if target.compiler else "g++"
    if shutil.which(compiler) is None:
        compiler = "g++"
    workdir = request.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    unit = workdir / "candidate.cpp"
    unit.write_text(host_unit(answer, node, prelude=_prelude(), environments=request.environments))
    argv = [compiler, "-std=c++17", "-c", "-O0", "-fPIC", "-Wno-psabi", "-I", str(dace_include_dir()),
            *environment_flags(request.environments), *target.flags, unit.name, "-o", "candidate.o"]
    result = run_tool(argv, cwd=workdir, timeout=120)
    prefix = ""
    if missing:
        lacking = sorted({hit[1] for hit in missing})
        uses = "; ".join(f"{name} ({section} line {line}) needs {feature} ({family})"
                         for name, feature, family, section, line in missing)
        where = (f"this CPU ({cpu.model}) does not have {', '.join(f for f in lacking if f not in cpu.flags)}"
                 if any(f not in cpu.flags for f in lacking) else "the target's flags do not enable them")
        prefix = (f"The code uses instructions target {target.name!r} (flags {' '.join(target.flags)}) does not "
                  f"allow: {uses}. {where[0].upper() + where[1:]}; it would stop with an illegal instruction "
                  f"or not compile. Use only {', '.join(sorted(allowed & _VECTOR_FEATURES)) or 'SSE2'} "
                  "intrinsics (see the target guidance).\n")
    report = report_from_tool(CHECKER, result, workdir, names={str(unit): "candidate.cpp"},
                              failure_prefix=prefix + ("Compiler output:\n" if prefix else ""),
                              details={"allowed_features": sorted(allowed), "missing": [m[:2] for m in missing]})
    if missing and report.status != "failed":
        # The compiler accepted it (e.g. only a type was named): the scan alone decides.
        report.status = "failed"
        report.diagnostics = prefix.rstrip() + ("\n" + report.diagnostics if report.diagnostics else "")
    return report


_VECTOR_FEATURES = frozenset({"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl",
                              "avx512_vnni", "avx512_bf16", "amx_tile"})


def applies(request: CheckRequest) -> bool:
    return request.node.target.name in TARGETS
