"""The ``x86-isa`` checker: intrinsics the target CPU lacks are rejected before anything runs.

Two independent reasons, both reported: a scan names each intrinsic or vector
type whose ISA extension is missing from what the target allows (its level,
narrowed by the ``-march`` of the real build), a clear sentence the model can
act on; and the compiler, run once per candidate with the real build's flags by
the core (:func:`dace_ai.plugin.compile_candidate`, shared with the ``probe``
check), rejects the same code in its own words (GCC: "inlining failed in call
to 'always_inline' ... target specific option mismatch"). The unit is compiled
to an object file because the mismatch surfaces only when the intrinsic is inlined.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dace_ai.plugin import CheckReport, CheckRequest, build_command, compile_candidate, stable_paths

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
    Rule(
        re.compile(r"\b_mm(?:256)?_fn?m(?:add|sub|addsub|subadd)_p[sd]\b|\b_mm_fn?m(?:add|sub)_s[sd]\b"), "fma", "FMA"
    ),
    Rule(
        re.compile(
            r"\b_mm256_(?:add|sub|mullo|mul|cmpeq|cmpgt|max|min|abs|slli|srli|srai|sllv|srlv|and|or|xor|"
            r"hadd|madd|maddubs|packs|packus|unpacklo|unpackhi|shuffle|blend|sad)_epi(?:8|16|32|64|u8|u16|u32)\b"
            r"|\b_mm256_i(?:32|64)gather_\w+|\b_mm256_mask_i(?:32|64)gather_\w+|\b_mm256_permutevar8x32_\w+"
            r"|\b_mm256_permute4x64_\w+|\b_mm256_broadcast[bwdq]_epi\w+|\b_mm256_cvtepu?\d+_epi\d+\b"
        ),
        "avx2",
        "AVX2",
    ),
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


def check_x86(request: CheckRequest) -> CheckReport:
    """Scan for intrinsics beyond what the target and the real build allow; judge the shared compile."""
    answer, node = request.answer, request.node
    target = node.target
    cpu = read_cpu()
    _, build_flags = build_command(target)
    allowed = features_for_flags(list(target.flags), cpu.flags) & features_for_flags(build_flags, cpu.flags)
    sources = {
        "code": answer.code,
        "code_global": answer.code_global,
        "code_init": answer.code_init,
        "code_exit": answer.code_exit,
    }
    missing = [hit for hit in required_features(sources) if hit[1] not in allowed]
    build = compile_candidate(request)
    details = {
        "command": " ".join(stable_paths(a, {str(build.folder) + "/": ""}) for a in build.command),
        "allowed_features": sorted(allowed),
        "missing": [m[:2] for m in missing],
    }
    prefix = ""
    if missing:
        lacking = sorted({hit[1] for hit in missing})
        uses = "; ".join(
            f"{name} ({section} line {line}) needs {feature} ({family})"
            for name, feature, family, section, line in missing
        )
        where = (
            f"this CPU ({cpu.model}) does not have {', '.join(f for f in lacking if f not in cpu.flags)}"
            if any(f not in cpu.flags for f in lacking)
            else "the target's level or the build's flags do not enable them"
        )
        prefix = (
            f"The code uses instructions target {target.name!r} (level {' '.join(target.flags)}; build flags "
            f"{' '.join(build_flags)}) does not allow: {uses}. {where[0].upper() + where[1:]}; it would stop "
            f"with an illegal instruction or not compile. Use only "
            f"{', '.join(sorted(allowed & _VECTOR_FEATURES)) or 'SSE2'} intrinsics (see the target guidance).\n"
        )
    if build.missing_compiler:
        status, text = ("failed", prefix.rstrip()) if missing else ("inconclusive", build.result.output)
        return CheckReport(CHECKER, status, text, 0.0, details)
    if build.ok:
        status = "failed" if missing else "passed"
        return CheckReport(CHECKER, status, prefix.rstrip(), 0.0, details)
    if build.claim_output(CHECKER):
        compiler_text = "Compiler output:\n" + build.diagnostics
    else:
        compiler_text = f"The compiler rejected the unit (its messages are in check {build.reported_by!r})."
    return CheckReport(CHECKER, "failed", prefix + compiler_text, 0.0, details)


_VECTOR_FEATURES = frozenset(
    {
        "sse4_2",
        "avx",
        "avx2",
        "fma",
        "f16c",
        "avx512f",
        "avx512bw",
        "avx512dq",
        "avx512vl",
        "avx512_vnni",
        "avx512_bf16",
        "amx_tile",
    }
)


def applies(request: CheckRequest) -> bool:
    return request.node.target.name in TARGETS
