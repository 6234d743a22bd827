""".ci/check_skips.py, fed pytest JUnit reports recorded from real runs: one with the extras installed and AVX-512
hidden (tests/data/ci/extras.xml), one under .ci/bare (tests/data/ci/bare.xml, its clang tests skipped)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "check_skips.py"
ALLOWED = ROOT / ".ci" / "allowed_skips.txt"
DATA = ROOT / "tests" / "data" / "ci"


def check(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def test_skips_on_the_list_for_the_run_pass_and_are_counted():
    done = check(DATA / "extras.xml", "--run", "dace1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dace1: 10 tests, 5 skipped" in done.stdout
    assert "[2] DaCe 1.0 has no AI library of its own (dace.libraries.ai)" in done.stdout
    assert "[1] root ignores permission bits" in done.stdout


def test_a_skip_listed_for_another_run_only_fails_naming_the_test():
    done = check(DATA / "extras.xml", "--run", "dace2")  # the DaCe 1.0 skips are not allowed on DaCe 2
    assert done.returncode == 1
    assert "2 test(s) skipped for a reason not on" in done.stderr
    assert "tests/test_dace2.py::test_saved_sdfg_keeps_each_ainode_kind: DaCe 1.0 has no AI library" in done.stderr
    assert "root ignores" not in done.stderr  # allowed for every run


def test_a_tool_missing_with_the_extras_installed_fails():
    done = check(DATA / "bare.xml", "--run", "dace1")
    assert done.returncode == 1
    assert "3 test(s) skipped for a reason not on" in done.stderr
    assert "clang++ is not installed (Debian package clang)" in done.stderr
    assert "[vector-chunk]: clang++ is not installed" in done.stderr


def test_the_bare_run_must_have_skipped_its_clang_tests():
    required = r"^clang\+\+ is not installed"
    assert check(DATA / "bare.xml", "--require", required).returncode == 0
    done = check(DATA / "extras.xml", "--require", required)  # nothing hidden: no clang test skipped
    assert done.returncode == 1 and "no test skipped for a reason matching" in done.stderr


def test_a_missing_or_empty_report_and_a_bad_list_are_errors(tmp_path):
    done = check(tmp_path / "none.xml", "--run", "dace1")
    assert done.returncode == 2 and "none.xml: not a readable JUnit XML report" in done.stderr
    empty = tmp_path / "empty.xml"
    empty.write_text('<testsuites><testsuite name="pytest" tests="0"/></testsuites>')
    done = check(empty, "--run", "dace1")
    assert done.returncode == 2 and "holds no tests" in done.stderr
    bad = tmp_path / "allowed.txt"
    bad.write_text("# fine\nall: ^needs\ndace1 needs a colon\n")
    done = check(DATA / "extras.xml", "--run", "dace1", "--allowed", bad)
    assert done.returncode == 2 and "allowed.txt:3: expected '<run>: <regex>'" in done.stderr
    assert check(DATA / "extras.xml").returncode == 2  # nothing to check is a usage error


def test_the_allowed_list_reads_and_says_why_for_every_entry():
    lines = ALLOWED.read_text().splitlines()
    entries = [i for i, line in enumerate(lines) if line.strip() and not line.startswith("#")]
    assert entries
    for index in entries:
        above = lines[index - 1]
        assert above.startswith("#") or lines[index - 1] in (lines[e] for e in entries), lines[index]
    done = check(DATA / "extras.xml", "--run", "dace1", "--allowed", ALLOWED)
    assert done.returncode == 0, done.stderr
