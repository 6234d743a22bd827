"""The GPU lane's verdict (bench/gpu_lane_check.py) on recorded results: it fails when the lane compared nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHECK = Path(__file__).resolve().parents[1] / "bench" / "gpu_lane_check.py"
GPU = "NVIDIA H100 80GB HBM3 sm_90"
JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_gpu_verify_device" name="test_a_right_kernel_is_verified_on_the_gpu_and_the_level_names_it"/>
<testcase classname="tests.test_gpu_verify_device" name="test_a_kernel_that_skips_the_last_element_is_refused_on_the_gpu"{refusal}
</testsuite></testsuites>"""


def _node(level: str, ran: bool = True) -> dict:
    timed = {"seconds": 1e-4, "baseline": "CuPy", "baseline_seconds": 9e-5} if ran else {}
    return {"level": level, "ran": ran, "agrees": ran, **timed}


def _lane(tmp_path: Path, record: dict, refusal: str = "/>") -> subprocess.CompletedProcess:
    (tmp_path / "r.json").write_text(json.dumps(record))
    (tmp_path / "t.xml").write_text(JUNIT.format(refusal=refusal))
    return subprocess.run(
        [
            sys.executable,
            str(CHECK),
            str(tmp_path / "r.json"),
            str(tmp_path / "t.xml"),
            "--table",
            str(tmp_path / "t.md"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )


VERIFIED = f"verified (3 seeds, 5 sizes, 6 distributions, on {GPU}, sanitizers)"


def test_a_lane_without_cupy_compared_nothing_and_fails(tmp_path):
    record = {
        "gpu": GPU,
        "cupy": False,
        "nodes": {n: _node(VERIFIED, ran=False) for n in ("axpy_device", "axpy_launch", "gemm_cublas")},
    }
    lane = _lane(tmp_path, record)
    assert lane.returncode == 1, lane.stdout
    assert "CuPy was missing" in lane.stdout and "axpy_launch: did not run" in lane.stdout
    assert "gpu lane check: FAIL" in lane.stdout and (tmp_path / "t.md").read_text().startswith("| what |")


def test_a_lane_that_proved_everything_passes_and_writes_its_table(tmp_path):
    record = {
        "gpu": GPU,
        "cupy": True,
        "nodes": {n: _node(VERIFIED) for n in ("axpy_device", "axpy_launch", "gemm_cublas")},
    }
    lane = _lane(tmp_path, record)
    assert lane.returncode == 0, lane.stdout
    table = (tmp_path / "t.md").read_text()
    assert f"| sample gemm_cublas | {GPU} | {VERIFIED} | agrees | 100 us | CuPy: 90 us (0.90x) |" in table


def test_a_compile_only_node_a_skipped_refusal_or_no_gpu_fails_the_lane(tmp_path):
    nodes = {n: _node(VERIFIED) for n in ("axpy_device", "axpy_launch", "gemm_cublas")}
    nodes["axpy_device"] = _node("compile-only: built by DaCe's own GPU build")
    lane = _lane(
        tmp_path, {"gpu": GPU, "cupy": True, "nodes": nodes}, refusal='><skipped message="no GPU"/></testcase>'
    )
    assert lane.returncode == 1
    assert 'axpy_device: level is "compile-only' in lane.stdout or "axpy_device: level is 'compile-only" in lane.stdout
    assert "test_a_kernel_that_skips_the_last_element_is_refused_on_the_gpu: skipped" in lane.stdout
    lane = _lane(tmp_path, {"gpu": None, "cupy": True, "nodes": {}})
    assert lane.returncode == 1 and "no GPU ran the sample" in lane.stdout
