"""The compiler's own word on the candidate's loops: which were vectorised, which were not, and why.

A CPU without hardware counters to read still has a witness to where the time goes:
the optimiser. The candidate's one compile (:func:`dace_ai.compilation.compile.compile_candidate`)
asks the compiler for its vectoriser remarks, which changes no generated code and costs
no second compile:

* GCC: ``-fopt-info-vec-all-internals=<file>``. The internals, not ``-fopt-info-vec-missed``:
  at ``-O2`` (what DaCe's default build type leaves in force) GCC retries a failed loop
  with narrower vector modes and its short remark names only the last, meaningless
  failure ("no vectype for stmt"), while the internals say the real one ("would need a
  runtime alias check", "some scalar iterations would need to be peeled").
* Clang: ``-Rpass=loop-vectorize -Rpass-missed=loop-vectorize -Rpass-analysis=loop-vectorize``
  (remarks among its diagnostics).

:func:`candidate_remarks` keeps only loops on the answer's own lines (mapped with
:func:`~dace_ai.compilation.units.unit_place`, like every diagnostic sent to the model),
one line per loop, deduplicated (inlining repeats a loop's analysis) and capped. The
probe report carries them in ``details["remarks"]``; the feedback to the model
(:mod:`dace_ai.prompt.feedback`) quotes them. Remark text is the compiler's, quoted,
never evaluated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from dace_ai.compilation.units import UNIT_FILE, unit_place
from dace_ai.targets.build_flags import compiler_identity

#: File the GCC remarks go to, next to the unit.
REMARKS_FILE = "remarks.txt"
#: Loops quoted to the model at most (one line each).
MAX_REMARKS = 20
#: Reasons quoted per loop at most.
MAX_REASONS = 3
#: Bytes of GCC's remarks file read at most (the internals of a large unit run to megabytes).
MAX_BYTES = 16 << 20

_LOC = re.compile(r"^" + re.escape(UNIT_FILE) + r":(\d+):(\d+): (missed|optimized|note|remark): ?(.*)$")
#: GCC reasons that name GIMPLE internals or a retried vector mode, not the code: left out.
_GCC_NOISE = re.compile(
    r"no vectype for stmt|not consecutive access|Build SLP failed|misalignment|^\*{5}|"
    r"^couldn't vectorize loop|^===|unsupported data-type|no grouped stores|"
    r"can't determine dependence between|Unknown alignment|"
    r"^not vectorized: loop nest containing two or more"
)
#: From the first GIMPLE name on (``_41``, ``*_11``, ``a_34``, ``.omp_data_i``) the text means nothing to a reader.
_GIMPLE = re.compile(r"[:,]?\s+\S*(?:\b_\d+\b|\w_\d+\b|\.omp_data).*$")
_NOT_VECTORIZED = re.compile(r"^not vectorized[:,]\s*")
_GCC_VERSION = re.compile(r"^\S*(?:g\+\+|gcc|c\+\+)(?:-[\d.]+)? \(")
_CLANG_REMARK = re.compile(r"^" + re.escape(UNIT_FILE) + r":(\d+):(\d+): remark: (.*?)(?: \[-R[\w=-]+\])?$")


@dataclass
class LoopRemark:
    """What the vectoriser said about one loop of the unit."""

    line: int  #: line of the unit (tasklet.cpp)
    column: int
    vectorized: bool = False
    reasons: list[str] = field(default_factory=list)  #: why not (missed), or the vector width (vectorized)

    def add(self, reason: str) -> None:
        if reason and reason not in self.reasons:
            self.reasons.append(reason)


def remark_kind(executable: str) -> str | None:
    """``"gcc"``, ``"clang"`` or None (a compiler whose remarks we cannot read: none are asked for).

    Read from the first line of ``--version`` as :func:`~dace_ai.targets.build_flags.compiler_identity`
    keeps it (one run per compiler); a compiler that did not answer is named by itself there, and gets None.
    """
    first = compiler_identity(executable)
    if first == executable:
        return None
    if "clang" in first.lower():
        return "clang"
    if _GCC_VERSION.search(first):  # "g++ (GCC) 13.2.1", "c++ (Debian 12.2.0-14) 12.2.0", "aarch64-linux-gnu-g++ (...)"
        return "gcc"
    return None  # a wrapper (ccache) or another compiler: its flags are unknown, so none are added


def remark_flags(compiler: list[str], folder: Path) -> list[str]:
    """Arguments that make the compile write its vectoriser remarks (GCC appends: the old file is removed)."""
    kind = remark_kind(compiler[0]) if compiler else None
    if kind == "gcc":
        (folder / REMARKS_FILE).unlink(missing_ok=True)
        return [f"-fopt-info-vec-all-internals={REMARKS_FILE}"]
    if kind == "clang":
        return ["-Rpass=loop-vectorize", "-Rpass-missed=loop-vectorize", "-Rpass-analysis=loop-vectorize"]
    return []


def parse_gcc(text: str) -> list[LoopRemark]:
    """Loops of the unit from GCC's ``-fopt-info-vec-all-internals`` output, in order of first analysis.

    Each loop's analysis opens with ``=== analyze_loop_nest ===`` at its place and ends
    with ``couldn't vectorize loop`` or ``loop vectorized``; the ``missed`` lines in
    between are its reasons.
    """
    loops: dict[tuple[int, int], LoopRemark] = {}
    pending: list[str] = []
    for raw in text.splitlines():
        m = _LOC.match(raw)
        if not m:
            continue
        line, col, kind, message = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4).strip()
        if kind == "note" and message.startswith("=== analyze_loop_nest"):
            pending = []
        elif kind == "missed" and message == "couldn't vectorize loop":
            loop = loops.setdefault((line, col), LoopRemark(line, col))
            if not loop.vectorized:
                for reason in pending:
                    loop.add(reason)
            pending = []
        elif kind == "optimized" and message.startswith("loop vectorized"):
            loop = loops.setdefault((line, col), LoopRemark(line, col))
            if not loop.vectorized:
                loop.vectorized, loop.reasons = True, []
            loop.add(message.replace("loop vectorized ", ""))
            pending = []
        elif kind == "missed" and not _GCC_NOISE.search(message):
            reason = _NOT_VECTORIZED.sub("", _GIMPLE.sub("", message)).strip().rstrip(".")
            if reason and reason not in pending:
                pending.append(reason)
    return list(loops.values())


def parse_clang(output: str) -> list[LoopRemark]:
    """Loops of the unit from Clang's ``-Rpass*=loop-vectorize`` remarks."""
    loops: dict[int, LoopRemark] = {}
    for raw in output.splitlines():
        m = _CLANG_REMARK.match(raw.rstrip())
        if not m:
            continue
        line, col, message = int(m.group(1)), int(m.group(2)), m.group(3).strip()
        loop = loops.setdefault(line, LoopRemark(line, col))
        if message.startswith("vectorized loop"):
            loop.vectorized, loop.reasons = True, []
            loop.add(message.replace("vectorized loop", "").strip(" ()"))
        elif message.startswith("loop not vectorized") and not loop.vectorized:
            loop.add(message.replace("loop not vectorized", "").lstrip(": ").strip())
    return list(loops.values())


_PLACE = re.compile(r"^[^:]+:\d+: (`.*`)(?: \((line \d+ of your [\w ]+)\))?$")


def describe(loop: LoopRemark, unit: str, answer_lines: int) -> str | None:
    """``line 3 of your code, column 5 `for (...)`: not vectorized: <why>``; None for a loop outside the answer."""
    words, in_answer = unit_place(unit, loop.line, answer_lines)
    if not in_answer:
        return None
    m = _PLACE.match(words)  # the unit's own file and line mean nothing to the model: its own line does
    text, where = (m.group(1), m.group(2) or "") if m else (words, "")
    at = f"{where}, column {loop.column} {text}" if where else f"column {loop.column} {text}"
    if loop.vectorized:
        return f"{at}: vectorized" + (f" ({'; '.join(loop.reasons)})" if loop.reasons else "")
    why = "; ".join(loop.reasons[:MAX_REASONS]) or "no reason given"
    return f"{at}: not vectorized: {why}"


def candidate_remarks(kind: str | None, folder: Path, output: str, unit: str, answer_lines: int) -> list[str]:
    """The remarks on the answer's own loops, one line per loop, at most :data:`MAX_REMARKS`.

    ``kind`` is :func:`remark_kind` of the compiler; ``output`` its diagnostics (Clang's
    remarks are there); GCC's are read from ``folder``/:data:`REMARKS_FILE`.
    """
    if kind == "gcc":
        path = folder / REMARKS_FILE
        if not path.is_file():
            return []
        with path.open("r", encoding="utf-8", errors="replace") as f:
            loops = parse_gcc(f.read(MAX_BYTES))
    elif kind == "clang":
        loops = parse_clang(output)
    else:
        return []
    lines = [text for text in (describe(loop, unit, answer_lines) for loop in loops) if text]
    lines = list(dict.fromkeys(lines))
    if len(lines) > MAX_REMARKS:
        lines = lines[:MAX_REMARKS] + [f"... ({len(lines) - MAX_REMARKS} more loops)"]
    return lines


#: GCC reasons of its cheap cost model (``-O2``: ``-fvect-cost-model=very-cheap``), which ``omp simd`` overrides.
_CHEAP_COST_MODEL = ("would need to be peeled", "Loop costings not worthwhile", "runtime alias check")


def cost_model_note(kind: str | None, flags: list[str], lines: list[str]) -> str:
    """A sentence for GCC at ``-O2`` turning down loops on cost (not on correctness), or "".

    At ``-O2`` GCC 12+ vectorises a loop only when that costs no remainder or peeling loop
    and no runtime alias check; a loop marked ``#pragma omp simd`` (the build has
    ``-fopenmp``) is vectorised regardless. A model reading only "Loop costings not
    worthwhile" would not know the remedy.
    """
    levels = [f for f in flags if re.fullmatch(r"-O\w*", f)]
    if kind != "gcc" or not levels or levels[-1] != "-O2" or "-fopenmp" not in flags:
        return ""
    if not any(reason in line for line in lines for reason in _CHEAP_COST_MODEL):
        return ""
    return (
        "At -O2 GCC vectorises a loop only when that needs no remainder loop, no peeling and no runtime alias "
        "check; `#pragma omp simd` on the loop (the build has -fopenmp) asks for vectorisation regardless."
    )
