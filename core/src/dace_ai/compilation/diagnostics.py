"""Compiler output parsed into located records.

Repairs must be aimed: :mod:`dace_ai.workflows.build` blames the generated tasklet that
produced each diagnosed line, and checkers send the model only the errors (with
their source excerpts and notes) instead of pages of build-system noise. GCC and
Clang print ``file:line[:col]: error: message`` followed by an excerpt; nvcc
(EDG front end) prints ``file(line): error: message``; the linker prints
``file:(.text+0x..): undefined reference ...`` without a line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_GNU = re.compile(
    r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+)(?::(?P<col>\d+))?: "
    r"(?P<sev>fatal error|error|warning|note|remark): (?P<msg>.*)$"
)
_NVCC = re.compile(
    r"^(?P<file>[^\s(][^(]*?)\((?P<line>\d+)\): "
    r"(?P<sev>catastrophic error|error|warning|remark|note)(?: #[\w-]+(?:-D)?)?: (?P<msg>.*)$"
)
_LINKER = re.compile(r"^(?P<file>[^\s:][^:]*?):\(\.[\w.]+\+0x[0-9a-f]+\): (?P<msg>.*)$")
_LINKER_ERROR = re.compile(r"^(?:.*/)?(?:ld(?:\.\w+)?|collect2|lld): (?:error: )?(?P<msg>.*)$")
#: Lines that open a new block of context for the next diagnostic ("In function ...").
_PREAMBLE = re.compile(
    r"^(?:In file included from |\s+from |.*: (?:In |At global scope|In instantiation)"
    r"|.*: required from )"
)
#: Build-system chatter that is never part of a diagnostic.
_NOISE = re.compile(
    r"^(?:g?make(?:\[\d+\])?: |\[\s*\d+%\]|-- |CMake |\d+ errors? (?:detected|generated)"
    r"|\d+ warnings? generated|Compiler failure)"
)


@dataclass
class Diagnostic:
    """One compiler message with where it points and the lines printed with it."""

    file: str
    line: int  #: 1-based; 0 when the message has no line (linker)
    column: int | None
    severity: str  #: ``error``, ``fatal error``, ``warning``, ``note``, ``remark``, ``catastrophic error``
    message: str
    #: The message line, the source excerpt and caret lines printed after it.
    lines: list[str] = field(default_factory=list)
    #: "In function ..." / "In file included from ..." lines printed before it.
    preamble: list[str] = field(default_factory=list)

    @property
    def is_error(self) -> bool:
        return "error" in self.severity

    @property
    def text(self) -> str:
        return "\n".join([*self.preamble, *self.lines])


def parse_diagnostics(output: str) -> list[Diagnostic]:
    """Every diagnostic in GCC, Clang, nvcc or linker output, in order of appearance."""
    found: list[Diagnostic] = []
    preamble: list[str] = []
    current: Diagnostic | None = None
    for raw in output.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        if _NOISE.match(line.strip()):
            current = None
            continue
        diag = _match(line)
        if diag is not None:
            diag.preamble, preamble = preamble, []
            found.append(diag)
            current = diag
        elif _PREAMBLE.match(line):
            preamble.append(line)
            current = None
        elif current is not None:
            current.lines.append(line)
    return found


def _match(line: str) -> Diagnostic | None:
    for pattern in (_GNU, _NVCC):
        m = pattern.match(line)
        if m:
            col = m.group("col") if "col" in pattern.groupindex else None
            return Diagnostic(
                m.group("file"), int(m.group("line")), int(col) if col else None, m.group("sev"), m.group("msg"), [line]
            )
    m = _LINKER.match(line)
    if m:
        return Diagnostic(m.group("file"), 0, None, "error", m.group("msg"), [line])
    m = _LINKER_ERROR.match(line)
    if m and "ld returned" not in line:
        return Diagnostic("", 0, None, "error", m.group("msg"), [line])
    return None


def errors_with_notes(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Errors plus the notes that follow them (notes explain errors: "previous definition here")."""
    kept: list[Diagnostic] = []
    in_error = False
    for diag in diagnostics:
        if diag.is_error:
            in_error = True
            kept.append(diag)
        elif diag.severity == "note" and in_error:
            kept.append(diag)
        else:
            in_error = False
    return kept


def format_diagnostics(diagnostics: Iterable[Diagnostic], *, max_lines: int = 200) -> str:
    """The diagnostics as the compiler printed them, capped at ``max_lines`` lines."""
    lines: list[str] = []
    for diag in diagnostics:
        lines.extend(diag.preamble)
        lines.extend(diag.lines)
    if len(lines) > max_lines:
        dropped = len(lines) - max_lines
        lines = lines[:max_lines] + [f"... ({dropped} more lines)"]
    return "\n".join(lines)


def summarize_output(output: str, *, max_lines: int = 200) -> str:
    """The errors of a compiler run (with notes and excerpts), or its tail when nothing parses."""
    diags = errors_with_notes(parse_diagnostics(output))
    if diags:
        return format_diagnostics(diags, max_lines=max_lines)
    tail = [line for line in output.strip().splitlines() if line.strip()]
    return "\n".join(tail[-max_lines:])
