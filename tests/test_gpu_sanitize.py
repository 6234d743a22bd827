"""The GPU rung of the sanitizers (``gpu-sanitizers``): compute-sanitizer's reports read back, and the
sandbox child run under a tool. The rung itself runs only where a GPU and compute-sanitizer are
(tests/test_gpu_verify_device.py on the device); what the CPU allows is tested here."""

import os
import stat

import pytest
from dace_ai.checkers import gpu_sanitize
from dace_ai.checkers.gpu_sanitize import read_report
from dace_ai.checking.levels import verification_level

from tests.test_verify import MATMUL, matmul, request_for

OUT_OF_BOUNDS = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 8 bytes
=========     at scale_kernel(const double *, double *, int)+0x70 in /tmp/x/cuda/scale.cu:12
=========     by thread (31,0,0) in block (3,0,0)
=========     Address 0x7f2a4c000320 is out of bounds
=========     and is 8 bytes after the nearest allocation at 0x7f2a4c000000 of size 800 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========
========= ERROR SUMMARY: 32 errors
"""
MISALIGNED = """========= Invalid __global__ read of size 16 bytes
=========     at void load_pairs<double2>(const double *, double *, int)+0x40
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f00000008 is misaligned
=========
========= ERROR SUMMARY: 1 error
"""
RACE = """========= Error: Race reported between Write access at block_sum(const double *, double *, int)+0x90 in sum.cu:21
=========     and Read access at block_sum(const double *, double *, int)+0xb0 in sum.cu:24 [8 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
UNINITIALISED = """========= Uninitialized __global__ memory read of size 8 bytes
=========     at scale_kernel(const double *, double *, int)+0x50 in scale.cu:11
=========     by thread (5,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 4 errors
"""
BARRIER = """========= Barrier error detected. Divergent thread(s) in block
=========     at reduce(double *, int)+0x210 in reduce.cu:30
=========     by thread (7,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
"""
CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"


@pytest.mark.parametrize(
    "tool, text, words",
    [
        (
            "memcheck",
            OUT_OF_BOUNDS,
            "compute-sanitizer memcheck: Invalid __global__ write of size 8 bytes in kernel scale_kernel(const double *,"
            " double *, int) (/tmp/x/cuda/scale.cu:12) by thread (31,0,0) of block (3,0,0): the address is out of"
            " bounds (32 errors in all)",
        ),
        ("memcheck", MISALIGNED, "Invalid __global__ read of size 16 bytes in kernel void load_pairs<double2>("),
        ("racecheck", RACE, "compute-sanitizer racecheck: Error: Race reported between Write access at block_sum("),
        ("initcheck", UNINITIALISED, "Uninitialized __global__ memory read of size 8 bytes in kernel scale_kernel("),
        ("synccheck", BARRIER, "Barrier error detected. Divergent thread(s) in block in kernel reduce(double *, int)"),
    ],
    ids=["out-of-bounds", "misaligned", "race", "uninitialised", "barrier"],
)
def test_each_tools_first_error_is_one_message(tool, text, words):
    finding = read_report(tool, text)
    assert finding is not None and words in finding.words(), finding
    if tool == "memcheck" and "misaligned" in text:
        assert finding.detail == "is misaligned"


def test_a_clean_report_and_a_summary_without_details():
    assert read_report("memcheck", CLEAN) is None
    finding = read_report("initcheck", "========= ERROR SUMMARY: 3 errors\n")
    assert finding is not None and finding.errors == 3 and "3 error(s) reported" in finding.words()


def test_the_rung_does_not_apply_to_cpu_nodes_and_is_inconclusive_without_compute_sanitizer(monkeypatch):
    req = request_for(matmul.to_sdfg(), MATMUL)
    assert not gpu_sanitize.applies(req)  # a CPU node
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    assert gpu_sanitize.compute_sanitizer() is None
    report = gpu_sanitize.gpu_sanitizers_check(req)
    assert report.status == "inconclusive" and report.reason == "compute-sanitizer missing"
    assert verification_level([*_passed_verify(), report]).endswith(", no sanitizers: compute-sanitizer missing)")


def _passed_verify():
    from dace_ai.checking.api import CheckReport

    return [
        CheckReport(
            "gpu-verify", "passed", "", stage="verify", seeds=3, sizes=[{"N": 13}], details={"device": "X sm_90"}
        )
    ]


def test_the_sandbox_child_runs_under_a_tool_that_writes_its_own_log(tmp_path):
    """What the rung does with compute-sanitizer, with a stand-in tool: it starts the child, writes its
    report to --log-file, and the child's verdict still comes back."""
    from dace_ai.sandbox.harness import run_against_reference

    tool = tmp_path / "fake-sanitizer"
    tool.write_text(
        "#!/bin/sh\n"
        'log=""; while [ "$1" != "${1#--}" ]; do if [ "$1" = --log-file ]; then log="$2"; fi; shift 2; done\n'
        'echo "========= ERROR SUMMARY: 0 errors" > "$log"; exec "$@"\n'
    )
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "memcheck.log"
    wrapper = [str(tool), "--tool", "memcheck", "--log-file", str(log), "--print-limit", "5"]
    result = run_against_reference(
        request_for(matmul.to_sdfg(), MATMUL), seeds=[0], sizes=[{"N": 13, "M": 11, "K": 7}], wrapper=wrapper
    )
    assert result.status == "passed", result.message
    assert read_report("memcheck", log.read_text()) is None and os.path.getsize(log) > 0


@pytest.mark.parametrize(
    "text, status, reason, expected",
    [
        ("", "passed", None, "memcheck wrote no report"),
        (
            "========= COMPUTE-SANITIZER\n========= Internal Sanitizer Error: The Sanitizer Error 7\n"
            "========= ERROR SUMMARY: 0 errors\n",
            "passed",
            None,
            "memcheck failed",
        ),
        (CLEAN, "failed", "crash", "memcheck run ended without a verdict"),
        (CLEAN, "inconclusive", "timeout", "memcheck run ended without a verdict"),
        ("========= COMPUTE-SANITIZER\n", "passed", None, "memcheck report has no summary"),
        (
            "========= COMPUTE-SANITIZER\n========= Error: process didn't terminate successfully\n"
            "========= ERROR SUMMARY: 0 errors\n",
            "passed",
            None,
            "memcheck failed",
        ),
    ],
    ids=["no-report", "internal-error", "crashed", "killed", "no-summary", "did-not-terminate"],
)
def test_a_tool_run_is_clean_only_on_positive_evidence(text, status, reason, expected):
    judged = gpu_sanitize.judge_tool_run("memcheck", text, status, reason, "the child said so")
    assert isinstance(judged, tuple) and judged[0] == expected, judged


def test_a_clean_report_of_a_passed_run_is_clean_and_an_error_is_a_finding_whatever_the_run():
    assert gpu_sanitize.judge_tool_run("memcheck", CLEAN, "passed", None, "") is None
    finding = gpu_sanitize.judge_tool_run("memcheck", OUT_OF_BOUNDS, "failed", "crash", "killed")
    assert isinstance(finding, gpu_sanitize.GpuFinding) and finding.errors == 32
