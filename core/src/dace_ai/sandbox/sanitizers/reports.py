"""A sanitizer's report read back: the class, the container, the answer's line."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dace_ai.compilation.units import UNIT_FILE
from dace_ai.sandbox.sanitizers.runs import SanitizerRun
from dace_ai.sandbox.sanitizers.tools import AT_ONCE_MARK

if TYPE_CHECKING:
    from dace_ai.sandbox.child.records import Case


# ----------------------------------------------------------------------------- reading a report
_FRAME = re.compile(
    r"^\s*#(\d+) .*?(?:^|[\s/(])(" + re.escape(UNIT_FILE) + r"|[\w.+-]+\.(?:cpp|cc|cxx|c|h|hpp)):"
    r"(\d+)(?::\d+)?",
    re.MULTILINE,
)
_BUFFER = re.compile(r"^dace-ai-buffer (\d+) (0x[0-9a-fA-F]+|\(nil\)) (\d+)$", re.MULTILINE)
_HEX = re.compile(r"\s*\b0x[0-9a-fA-F]{4,}\b")


@dataclass
class Finding:
    """The first report of a run, read: its class, where in the unit, and the words for the model."""

    sanitizer: str  #: "address", "undefined", "thread"
    kind: str  #: heap-buffer-overflow, signed integer overflow, data race, ...
    text: str  #: the sentence without place and case
    line: int | None  #: line of the unit (tasklet.cpp) of the first frame there
    hint: str = ""
    #: False for reports that say nothing certain about the code (a TSan "thread leak" of the OpenMP runtime).
    judged: bool = True
    #: The global or static variable a race is on, as TSan names it (``scratch`` of ``f(int)::scratch``), else None.
    variable: str | None = None


def buffers_of(output: str) -> list[tuple[int, int, int]]:
    """(container index, start address, bytes) of each buffer the driver allocated."""
    found = []
    for m in _BUFFER.finditer(output):
        start = 0 if m.group(2) == "(nil)" else int(m.group(2), 16)
        found.append((int(m.group(1)), start, int(m.group(3))))
    return found


def first_unit_line(report: str) -> int | None:
    """The unit's line in the first stack frame that is in the unit (inlined frames included)."""
    for m in _FRAME.finditer(report):
        if m.group(2) == UNIT_FILE:
            return int(m.group(3))
    return None


def _container_words(case: Case, index: int) -> str:
    name = case["containers"][index]["name"]
    conns = [c["name"] for c in case["connectors"] if c["container"] == name]
    return f"container {name}" + (f" (connector {', '.join(conns)})" if conns else "")


def _container_at(case: Case, buffers: list[tuple[int, int, int]], start: int) -> str | None:
    for index, begin, _ in buffers:
        if begin == start and index < len(case["containers"]):
            return _container_words(case, index)
    return None


def no_addresses(text: str) -> str:
    return re.sub(r"\s+", " ", _HEX.sub("", text)).strip()


_UB_HINTS = (
    (
        "signed integer overflow",
        "compute in a wider type (long long) or in unsigned arithmetic where wrapping is meant",
    ),
    ("shift exponent", "a shift count must be below the width of the shifted type"),
    ("left shift of", "shift an unsigned value (a left shift of a negative or overflowing signed value is undefined)"),
    (
        "misaligned address",
        ("load through memcpy or unaligned intrinsics (_mm256_loadu_pd) where the address is not aligned for the type"),
    ),
    ("division by zero", "guard the divisor"),
    ("out of bounds", "index inside the array's bounds"),
    ("is outside the range of representable values", "clamp before converting a floating-point value to an integer"),
)


def _read_address(report: str, case: Case, buffers: list[tuple[int, int, int]]) -> Finding:
    head = re.search(r"ERROR: AddressSanitizer: ([\w-]+)", report)
    kind = head.group(1) if head else "error"
    access = re.search(r"^(READ|WRITE) of size (\d+)", report, re.MULTILINE)
    what = f"{access.group(1)} of {access.group(2)} byte{'s' if access.group(2) != '1' else ''}" if access else ""
    region = re.search(
        r"is located (\d+) bytes (to the right of|after|to the left of|before|inside of) "
        r"(\d+)-byte region \[(0x[0-9a-fA-F]+),",
        report,
    )
    place = ""
    if region:
        distance, side = int(region.group(1)), region.group(2)
        container = _container_at(case, buffers, int(region.group(4), 16))
        if container is None:
            container = f"a {region.group(3)}-byte block the code allocated itself"
        if side in ("to the right of", "after"):
            # ASan names the first bad byte of a small access, the last one of a wide (vector) access.
            place = (
                f"right after the end of {container}"
                if distance == 0
                else f"past the end of {container}, up to byte {distance} after its end"
            )
        elif side in ("to the left of", "before"):
            place = f"{distance} bytes before the start of {container}"
        else:
            place = f"inside {container}, which was already freed" if "use-after-free" in kind else f"in {container}"
    elif var := re.search(
        r"\[\d+, \d+\) '([^']+)'[^\n]*<== Memory access at offset \d+ (\w+(?: \w+)?) this variable", report
    ):
        place = f"{var.group(2)} the local variable '{var.group(1)}'"
    elif glob := re.search(r"is located (\d+) bytes (?:to the right of|after) global variable '([^']+)'", report):
        place = f"{glob.group(1)} bytes past the end of the global '{glob.group(2)}'"
    elif kind == "SEGV":
        cause = re.search(r"The signal is caused by a (READ|WRITE) memory access", report)
        zero = "zero page" in report
        what = f"a {cause.group(1)}" if cause else "an access"
        place = "of a null (or near-null) pointer" if zero else "of an address outside every buffer"
    text = f"AddressSanitizer: {kind}" + (f": {what}" if what else "") + (f" {place}" if place else "")
    hint = ""
    if "overflow" in kind:
        hint = (
            "every access must stay inside the data its connector covers, also when the value read is not used "
            "(a vector load of the last partial chunk, a[i + 1] at the last i)"
        )
    elif "after-free" in kind or "after-return" in kind or "after-scope" in kind:
        hint = "memory must not be used after it is freed or its variable went out of scope"
    return Finding("address", kind, text, first_unit_line(report), hint)


def _read_undefined(report: str) -> Finding:
    head = re.search(r"(?:^|/)(\S+?):(\d+):\d+: runtime error: ([^\n]+)", report)
    message = no_addresses(head.group(3)) if head else "undefined behavior"
    hint = next((h for key, h in _UB_HINTS if key in message), "")
    kind = message.split(":")[0]
    line = first_unit_line(report)  # the stack (print_stacktrace=1); else the report's own place
    if line is None and head and os.path.basename(head.group(1)) == UNIT_FILE:
        line = int(head.group(2))
    return Finding("undefined", kind, f"UndefinedBehaviorSanitizer: {message}", line, hint)


def _read_thread(report: str, case: Case, buffers: list[tuple[int, int, int]]) -> Finding:
    head = re.search(r"WARNING: ThreadSanitizer: ([^\n(]+)", report)
    kind = head.group(1).strip() if head else "error"
    # Which thread TSan catches first, and so which access it names first, depends on the schedule; the words
    # must not (they become part of a cache key): no access kinds, the lowest line of the code among the accesses.
    blocks = re.split(
        r"^\s*(?:Previous )?(?:atomic )?(?:read|write) of size \d+ at ", report, flags=re.MULTILINE | re.IGNORECASE
    )[1:]
    lines = [line for line in (first_unit_line(block.split("\n\n")[0]) for block in blocks) if line is not None]
    words = " (unsynchronised accesses by different threads, at least one a write)" if len(blocks) >= 2 else ""
    where = ""
    variable = None
    if "Location is stack of" in report:
        where = " on a local variable of the calling thread that the threads share"
    elif heap := re.search(r"Location is heap block of size (\d+) at (0x[0-9a-fA-F]+)", report):
        where = " on " + (_container_at(case, buffers, int(heap.group(2), 16)) or "memory the code allocated itself")
    elif glob := re.search(r"Location is global '([^']+)'", report):
        where = f" on the global '{glob.group(1)}'"
        variable = glob.group(1).rsplit("::", 1)[-1]
    text = f"ThreadSanitizer: {kind} between threads{words}{where}"
    hint = (
        "use a reduction clause (reduction(+:s)), atomics, or per-thread partial results combined after the loop"
        if "race" in kind
        else ""
    )
    judged = "race" in kind or "after-free" in kind
    line = min(lines) if lines else first_unit_line(report)
    return Finding("thread", kind, text, line, hint, judged, variable)


def in_calls_at_once(output: str) -> bool:
    """Whether a run's first ThreadSanitizer report came during the driver's calls at once (after its mark)."""
    mark, report = output.find(AT_ONCE_MARK), output.find("WARNING: ThreadSanitizer:")
    return 0 <= mark < report


def read_report(run: SanitizerRun, case: Case) -> Finding | None:
    """The first sanitizer report of a run, or None when there is none."""
    out = run.output
    buffers = buffers_of(out)
    starts = [
        m.start()
        for m in (
            re.search(p, out) for p in (r"ERROR: AddressSanitizer:", r"runtime error:", r"WARNING: ThreadSanitizer:")
        )
        if m
    ]
    if not starts:
        return None
    first = min(starts)
    line_start = out.rfind("\n", 0, first) + 1
    report = out[line_start:]
    end = report.find("SUMMARY:")
    report = report[:end] if end > 0 else report
    if report[first - line_start :].startswith("ERROR: AddressSanitizer"):
        return _read_address(report, case, buffers)
    if "runtime error:" in report.splitlines()[0]:
        return _read_undefined(report)
    return _read_thread(report, case, buffers)
