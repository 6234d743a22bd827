"""A sandboxed run's failure is data (``result.problem``): the bench stage's run rules read it, never the
message worded for the model, so rewording a message cannot change what is refused and why."""

from __future__ import annotations

from dace_ai.checkers.bench import _refusal
from dace_ai.sandbox.child.records import Case, Problem
from dace_ai.sandbox.harness import case_problem, fault_problem
from dace_ai.sandbox.sandbox_run import SandboxRun

CASE: Case = {
    "seed": 0,
    "sizes": {"N": 13},
    "connectors": [
        {"name": "_a", "container": "A", "direction": "in", "offset": 0, "shape": [13], "strides": [1], "wcr": None},
        {"name": "_out", "container": "B", "direction": "out", "offset": 0, "shape": [13], "strides": [1], "wcr": None},
    ],
}


def _failed(reason: str, problem, message: str = "The code did something.") -> SandboxRun:
    return SandboxRun(mode="bench", status="failed", reason=reason, message=message, problem=problem)


def test_a_childs_problem_names_its_container_and_what_was_wrong():
    mismatch: Problem = {
        "kind": "mismatch",
        "connector": "_out",
        "index": [3],
        "expected": 1.0,
        "got": 2.0,
        "count": 1,
        "elements": 13,
    }
    assert case_problem("mismatch", mismatch, CASE) == {
        "kind": "mismatch",
        "container": "B",
        "connector": "_out",
        "index": [3],
        "expected": 1.0,
        "got": 2.0,
        "access": "",
        "input": False,
    }
    modified: Problem = {"kind": "outside_subset", "container": "A", "element": 4, "count": 1, "input": True}
    assert case_problem("outside_subset", modified, CASE)["input"] is True
    assert (
        case_problem("read_outside", {"kind": "read_outside", "connector": "_out", "index": [0]}, CASE)["access"]
        == "read"
    )
    assert fault_problem("outside_buffer", {"container": "A", "write": False}) == {
        "kind": "outside_buffer",
        "container": "A",
        "access": "read",
    }
    assert fault_problem("timeout", None) == {"kind": "timeout", "container": None, "access": ""}


def test_the_bench_rules_read_the_problem_not_the_words():
    # The words say "it read" and name another container: the problem decides.
    misleading = "The code crashed: it read 8 byte(s) past the end of container Z."
    wrote = _refusal(
        _failed("outside_buffer", {"kind": "outside_buffer", "container": "B", "access": "write"}, misleading)
    )
    assert wrote.status == "failed" and wrote.rule == "deception"
    assert wrote.details["reasons"] == ["it writes outside its connectors' buffers (the bytes around B changed)"]
    read = _refusal(_failed("outside_buffer", {"kind": "outside_buffer", "container": "A", "access": "read"}))
    assert read.details["reasons"] == [
        "it reads outside its connectors' buffers (poison placed around the inputs reached A)"
    ]
    modified = _refusal(_failed("outside_subset", {"kind": "outside_subset", "container": "A", "input": True}))
    assert modified.details["reasons"][0].startswith("it writes to its input data (A)")
    wrong = _refusal(_failed("mismatch", {"kind": "mismatch", "container": "B"}, "Wrong result."))
    assert wrong.rule == "mismatch" and wrong.details == {} and wrong.diagnostics == "Wrong result."
