"""The GPU lane's verdict: fails unless the lane proved what it must, and writes the table the note quotes.

    python bench/gpu_lane_check.py RECORD JUNIT [--table FILE]

RECORD is what ``samples/gpu/gpu_sample.py --record`` wrote; JUNIT is pytest's ``--junitxml`` report of
the GPU tests. The lane passes only when: a GPU ran the sample and CuPy was there; every node of the
sample (``axpy_device``, ``axpy_launch``, ``gemm_cublas``) ran, agrees with NumPy, and its level says
it was verified on that GPU; every GPU test that refuses a wrong answer (``tests/test_gpu_verify_device.py``)
ran and passed (a skip is a failure here); and each node's time beside its baseline was measured. It prints a
table of what ran where (and writes it to ``--table``) and one line per unmet condition; exit status 1 when
any condition is unmet.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

#: The sample's nodes, each a right answer that must be verified on the GPU.
NODES = ("axpy_device", "axpy_launch", "gemm_cublas")
#: The GPU tests that must run and pass (not skip) for the lane to count.
DEVICE_TESTS = "tests/test_gpu_verify_device.py"


def device_tests(junit: Path) -> dict[str, str]:
    """name -> ``passed``, ``failed`` or ``skipped`` for every test of :data:`DEVICE_TESTS` in the report."""
    outcomes: dict[str, str] = {}
    if not junit.is_file():
        return outcomes
    for case in ET.parse(junit).getroot().iter("testcase"):
        if not case.get("classname", "").startswith("tests.test_gpu_verify_device"):
            continue
        tags = {child.tag for child in case}
        outcome = "failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags else "passed"
        outcomes[case.get("name", "?")] = outcome
    return outcomes


def unmet(record: dict, tests: dict[str, str]) -> list[str]:
    """Every condition of the module docstring the lane did not meet, in words."""
    problems = []
    gpu = record.get("gpu")
    if not gpu:
        problems.append("no GPU ran the sample")
    if not record.get("cupy"):
        problems.append("CuPy was missing: nothing ran and nothing was compared with NumPy")
    nodes = record.get("nodes") or {}
    for name in NODES:
        node = nodes.get(name)
        if node is None:
            problems.append(
                f"{name}: not in the sample's record ({'; '.join(record.get('said') or []) or 'not built'})"
            )
            continue
        level = str(node.get("level", ""))
        if not (level.startswith("verified (") and gpu and f"on {gpu}" in level):
            problems.append(f"{name}: level is {level!r}, not verified on {gpu or 'a GPU'}")
        if not node.get("ran"):
            problems.append(f"{name}: did not run")
        elif not node.get("agrees"):
            problems.append(f"{name}: differs from NumPy")
        if node.get("ran") and not (node.get("seconds") and node.get("baseline_seconds")):
            problems.append(f"{name}: no time beside its baseline")
    if not tests:
        problems.append(f"{DEVICE_TESTS}: no results (the GPU tests did not run)")
    for test, outcome in sorted(tests.items()):
        if outcome != "passed":
            problems.append(f"{DEVICE_TESTS}::{test}: {outcome}")
    return problems


def table(record: dict, tests: dict[str, str]) -> str:
    """What ran where, as a Markdown table."""
    gpu = record.get("gpu") or "no GPU"
    rows = ["| what | where | level or outcome | NumPy | time | baseline |", "|---|---|---|---|---|---|"]
    for name in NODES:
        node = (record.get("nodes") or {}).get(name) or {}
        seconds, base = node.get("seconds"), node.get("baseline_seconds")
        time = f"{seconds * 1e6:.0f} us" if seconds else "-"
        versus = f"{node.get('baseline')}: {base * 1e6:.0f} us ({base / seconds:.2f}x)" if seconds and base else "-"
        agrees = "-" if not node.get("ran") else "agrees" if node.get("agrees") else "DIFFERS"
        rows.append(f"| sample {name} | {gpu} | {node.get('level', 'not built')} | {agrees} | {time} | {versus} |")
    for test, outcome in sorted(tests.items()):
        rows.append(f"| {test} | {gpu} | {outcome} | - | - | - |")
    return "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    record_path, junit = Path(argv[0]), Path(argv[1])
    record = json.loads(record_path.read_text()) if record_path.is_file() else {"said": [f"no record at {record_path}"]}
    tests = device_tests(junit)
    text = table(record, tests)
    print(text)
    if "--table" in argv:
        Path(argv[argv.index("--table") + 1]).write_text(text)
    problems = unmet(record, tests)
    for problem in problems:
        print(f"gpu lane: {problem}")
    print(f"gpu lane check: {'FAIL' if problems else 'PASS'} ({len(problems)} condition(s) unmet)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
