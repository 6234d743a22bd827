#!/usr/bin/env python3
"""Fails a test run that skipped a test for a reason not on the declared list, so CI cannot pass by skipping.

.ci/run runs the README's test command with ``--junitxml=REPORT`` (pytest's JUnit XML, which keeps every
skip reason whole) and then checks the report:

    python3 .ci/check_skips.py REPORT --run dace1              # every skip is on .ci/allowed_skips.txt
    python3 .ci/check_skips.py REPORT --require 'clang\\+\\+'    # at least one skip reason matches (the bare run)

``--run NAME``: each skip reason must match an entry of the allowed list for ``all`` or ``NAME``
(``--allowed FILE`` reads another list). ``--require REGEX`` (repeatable): some skip reason matches it.
It prints every reason with its count; exit 1 names what failed, exit 2 a report or list it cannot read.
The list's lines are ``<run>: <regex>`` (``re.search`` on the reason), each after comment lines saying why
that skip is expected.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ALLOWED = Path(__file__).with_name("allowed_skips.txt")
_ENTRY = re.compile(r"(?P<run>[\w.-]+):\s+(?P<pattern>\S.*)")


class Unreadable(Exception):
    """A report or allowed list that cannot be read (exit 2)."""


@dataclass(frozen=True)
class Skip:
    test: str  #: ``tests/test_x.py::test_y`` as far as the report says
    reason: str


@dataclass(frozen=True)
class Allowed:
    run: str  #: ``all`` or a run's name
    pattern: re.Pattern[str]
    line: int


def read_skips(report: Path) -> tuple[int, list[Skip]]:
    """(tests in the report, its skips); xfails are not skips. Raises :class:`Unreadable`."""
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError) as exc:
        raise Unreadable(
            f"{report}: not a readable JUnit XML report ({exc}); did pytest run with --junitxml?"
        ) from None
    cases = list(root.iter("testcase"))
    skips = []
    for case in cases:
        for skipped in case.findall("skipped"):
            if skipped.get("type") == "pytest.xfail":
                continue
            module = (case.get("classname") or "").replace(".", "/")
            test = f"{module}.py::{case.get('name')}" if module else str(case.get("name"))
            skips.append(Skip(test, (skipped.get("message") or skipped.text or "").strip()))
    return len(cases), skips


def read_allowed(path: Path) -> list[Allowed]:
    """The entries of an allowed list; raises :class:`Unreadable` naming the line of a bad one."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise Unreadable(f"{path}: {exc.strerror or exc}") from None
    entries = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        match = _ENTRY.fullmatch(text)
        if match is None:
            raise Unreadable(f"{path}:{number}: expected '<run>: <regex>', got {text!r}")
        try:
            pattern = re.compile(match["pattern"])
        except re.error as exc:
            raise Unreadable(f"{path}:{number}: bad regular expression {match['pattern']!r}: {exc}") from None
        entries.append(Allowed(match["run"], pattern, number))
    return entries


def not_allowed(skips: list[Skip], allowed: list[Allowed], run: str) -> list[Skip]:
    """The skips whose reason matches no entry for ``all`` or ``run``."""
    mine = [a for a in allowed if a.run in ("all", run)]
    return [s for s in skips if not any(a.pattern.search(s.reason) for a in mine)]


def unmet(skips: list[Skip], required: list[str]) -> list[str]:
    """The required patterns no skip reason matches."""
    return [r for r in required if not any(re.search(r, s.reason) for s in skips)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="pytest's JUnit XML report (--junitxml)")
    parser.add_argument("--run", help="check every skip against the allowed list's entries for 'all' and this run")
    parser.add_argument("--allowed", type=Path, default=ALLOWED, help=f"the allowed list (default {ALLOWED.name})")
    parser.add_argument("--require", action="append", default=[], metavar="REGEX", help="some skip reason matches")
    args = parser.parse_args(argv)
    if args.run is None and not args.require:
        parser.error("nothing to check: give --run NAME, --require REGEX or both")
    try:
        total, skips = read_skips(args.report)
        allowed = read_allowed(args.allowed) if args.run is not None else []
    except Unreadable as exc:
        print(f"check_skips: {exc}", file=sys.stderr)
        return 2
    if total == 0:
        print(f"check_skips: {args.report} holds no tests; did the run stop before collecting them?", file=sys.stderr)
        return 2
    label = args.run or args.report.name
    print(f"{label}: {total} tests, {len(skips)} skipped")
    for reason, count in sorted(Counter(s.reason for s in skips).items()):
        print(f"  [{count}] {reason}")
    failed = False
    if args.run is not None:
        bad = not_allowed(skips, allowed, args.run)
        if bad:
            failed = True
            print(f"{label}: {len(bad)} test(s) skipped for a reason not on {args.allowed}:", file=sys.stderr)
            for skip in bad:
                print(f"  {skip.test}: {skip.reason}", file=sys.stderr)
    for pattern in unmet(skips, args.require):
        failed = True
        print(f"{label}: no test skipped for a reason matching {pattern!r}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
