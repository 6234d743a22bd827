"""The SVE target pack: cross compile check and runs under qemu at 128, 512 and 2048 bits."""

from __future__ import annotations

import platform
import shutil

import pytest
from dace_ai.checking.api import CheckRequest
from dace_ai.checking.stages import run_checks
from dace_ai.config.settings import resolve_settings
from dace_ai_sve.harness import first_difference, harness_source, parse_outputs

from tests.dace_versions import cross_headers_problem
from tests.target_support import answer, axpy_node, gemm_node, run_checker, target

_HEADERS = cross_headers_problem()
needs_cross = pytest.mark.skipif(
    shutil.which("aarch64-linux-gnu-g++") is None or shutil.which("qemu-aarch64") is None or _HEADERS is not None,
    reason="needs g++-aarch64-linux-gnu and qemu-user"
    if _HEADERS is None
    else f"DaCe 2's runtime headers do not compile with this aarch64-linux-gnu-g++: {_HEADERS}",
)


def test_target_is_chosen_by_setting_and_describes_vector_length_agnostic_code():
    info = target("sve")
    assert info.reason.startswith("configured")
    assert "-march=armv8-a+sve" in info.flags
    assert "svwhilelt_b64" in info.guidance and "svcntd()" in info.guidance
    assert "128" in info.description and "2048" in info.description
    if platform.machine() != "aarch64":
        assert info.compiler == ("aarch64-linux-gnu-g++",)
        assert "not an aarch64 machine" in info.reason or info.reason.startswith("configured")


def test_harness_fills_every_connector_and_prints_outputs():
    source = harness_source(answer("sve", "gemm_vla"), gemm_node(target("sve")), "")
    assert "dace_ai_tasklet(__state, M, N, K, dace_ai_buf_0, dace_ai_buf_1, dace_ai_buf_2);" in source
    # C is M x N with row stride N: 41 * 43 elements with M=41, N=43 (K=37)
    assert "new double[1763]" in source and "OUT _c 1763" in source
    assert parse_outputs("noise\nOUT _c 2\n0x1p+0\n-0x1.8p+1\n") == {"_c": [1.0, -3.0]}
    assert first_difference([1.0, 2.0], [1.0, 2.0]) is None and first_difference([1.0, 2.0], [1.0, 2.5]) == 1


@needs_cross
def test_broken_answer_is_rejected_with_the_cross_compiler_diagnostic(tmp_path):
    report = run_checker("sve-compile", answer("sve", "axpy_broken"), axpy_node(target("sve")), tmp_path)
    assert report.status == "failed"
    assert "too few arguments to function" in report.diagnostics and "svmla_n_f64_x" in report.diagnostics
    assert "aarch64-linux-gnu-g++" in report.details["command"] or platform.machine() == "aarch64"


@needs_cross
def test_vector_length_agnostic_answer_passes_compile_and_every_length(tmp_path):
    node = axpy_node(target("sve"))
    compiled = run_checker("sve-compile", answer("sve", "axpy_vla"), node, tmp_path / "c")
    assert compiled.status == "passed", compiled.diagnostics
    ran = run_checker("sve-vector-lengths", answer("sve", "axpy_vla"), node, tmp_path / "v")
    assert ran.status == "passed", ran.diagnostics
    assert "128, 512, 2048 bits" in ran.diagnostics


@needs_cross
def test_answer_assuming_512_bit_vectors_fails_naming_128_bits(tmp_path):
    ran = run_checker("sve-vector-lengths", answer("sve", "axpy_fixed8"), axpy_node(target("sve")), tmp_path)
    assert ran.status == "failed"
    assert "Wrong result at SVE vector length 128 bits" in ran.diagnostics
    assert "differs from the result at 512 bits and 2048 bits" in ran.diagnostics
    assert "svcntd()" in ran.diagnostics


@needs_cross
def test_run_checks_runs_compile_then_vector_lengths_for_a_gemm(tmp_path):
    node = gemm_node(target("sve"))
    # Default selection: the host probe stays out of cross-compiled code, the pack's checkers run.
    settings = resolve_settings({"target": "sve"})
    reports = run_checks(CheckRequest(answer("sve", "gemm_vla"), node, settings, tmp_path / "work"))
    assert [r.checker for r in reports if not r.details.get("static")] == ["sve-compile", "sve-vector-lengths"]
    by_name = {r.checker: r for r in reports}
    assert by_name["sve-compile"].status == "passed", by_name["sve-compile"].diagnostics
    assert by_name["sve-vector-lengths"].status == "passed", by_name["sve-vector-lengths"].diagnostics
    assert by_name["sve-vector-lengths"].stage == "verify"
    assert by_name["sve-vector-lengths"].details["symbols"] == {"K": 37, "M": 41, "N": 43}


@needs_cross
def test_run_checks_stops_the_fixed_length_answer_at_the_verify_stage(tmp_path):
    settings = resolve_settings({"target": "sve"})
    request = CheckRequest(answer("sve", "axpy_fixed8"), axpy_node(target("sve")), settings, tmp_path / "work")
    reports = {r.checker: r for r in run_checks(request)}
    assert reports["sve-compile"].status == "passed"
    assert reports["sve-vector-lengths"].status == "failed"
    assert "128 bits" in reports["sve-vector-lengths"].diagnostics
