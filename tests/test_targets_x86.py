"""The x86 target pack: detection from /proc/cpuinfo, -march levels, and the x86-isa checker.

Tests that run or compile for a CPU feature skip with the reason where this host lacks it (``tests/host_cpu.py``);
``DACE_ai_hide_cpu_features=avx512f,avx512bw,avx512dq,avx512vl`` runs them as on an AVX2 machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dace_ai.checking.api import CheckRequest
from dace_ai.checking.levels import verification_level
from dace_ai.checking.stages import run_checks
from dace_ai.config.settings import resolve_settings
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.targets.select import resolve_target
from dace_ai_x86.checker import required_features

from tests.host_cpu import AVX512, host_flags, needs_cpu
from tests.target_support import answer, gemm_node, run_checker, target


def _cpu_flags() -> set[str]:
    """This host's CPU features as /proc/cpuinfo lists them, less those ``hide_cpu_features`` hides."""
    return set(host_flags())


def test_detection_follows_cpuinfo_and_highest_level_wins():
    flags = _cpu_flags()
    targets = get_plugin_manager().targets()
    has_avx512 = {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags
    has_avx2 = {"avx2", "fma"} <= flags
    assert targets["x86-avx512"].detect().matched == has_avx512
    assert targets["x86-avx2"].detect().matched == has_avx2
    chosen, detection, reason = resolve_target(resolve_settings(), kind="cpu")
    expected = "x86-avx512" if has_avx512 else "x86-avx2" if has_avx2 else "host"
    if chosen.name != "sve":  # an SVE machine is not x86
        assert chosen.name == expected, reason
    if not has_avx512:
        assert "lacks avx512f" in targets["x86-avx512"].detect().reason


def test_flags_and_description_match_the_level():
    avx2, avx512 = target("x86-avx2"), target("x86-avx512")
    assert "-march=x86-64-v3" in avx2.flags and not any("avx512" in f or "v4" in f for f in avx2.flags)
    assert "-march=x86-64-v4" in avx512.flags
    assert "256 bits" in avx2.description and "avx512f" not in avx2.description
    assert "512 bits" in avx512.description and "avx512f" in avx512.description
    if Path("/sys/devices/system/cpu/cpu0/cache/index0/size").exists():
        assert "L1d" in avx2.description
    assert "never use _mm512_*" in avx2.guidance and "<immintrin.h>" in avx2.guidance
    assert "__mmask8" in avx512.guidance
    assert avx2.reason.startswith("configured")


def test_scan_names_the_extension_of_each_intrinsic():
    code = (
        "__m256d a = _mm256_loadu_pd(p); // _mm512_add_pd in a comment is ignored\n"
        "a = _mm256_fmadd_pd(a, a, a);\n__m256i m = _mm256_add_epi32(x, y);\n"
        "__m512d z = _mm512_maskz_loadu_pd(k, p); _mm256_mask_storeu_pd(p, k, a);\n"
    )
    found = {name: (feature, line) for name, feature, _, _, line in required_features({"code": code})}
    assert found["_mm256_loadu_pd"] == ("avx", 1)
    assert found["_mm256_fmadd_pd"] == ("fma", 2)
    assert found["_mm256_add_epi32"] == ("avx2", 3)
    assert found["__m512d"] == ("avx512f", 4) and found["_mm512_maskz_loadu_pd"] == ("avx512f", 4)
    assert found["_mm256_mask_storeu_pd"] == ("avx512vl", 4)
    assert "_mm512_add_pd" not in found


@needs_cpu("avx2", "fma", why="the build's -march=native must allow AVX2 and FMA intrinsics")
def test_avx2_gemm_passes_on_the_avx2_target(tmp_path):
    report = run_checker("x86-isa", answer("x86", "avx2_gemm"), gemm_node(target("x86-avx2")), tmp_path)
    assert report.status == "passed", report.diagnostics
    from dace_ai.targets.build_flags import dace_build_command, language_standard

    standard = language_standard(dace_build_command()[1])  # c++14 on DaCe 1.0, c++20 on DaCe 2
    assert f"-std={standard}" in report.details["command"]  # the real build's flags, not the target's
    assert "-march=x86-64-v3" not in report.details["command"]


@pytest.fixture
def build_for_v3():
    """DaCe's build configured for x86-64-v3 (no AVX-512), so the compiler itself refuses AVX-512 intrinsics."""
    import dace

    args = dace.Config.get("compiler", "cpu", "args")
    dace.Config.set("compiler", "cpu", "args", value=args.replace("-march=native", "-march=x86-64-v3"))
    yield
    dace.Config.set("compiler", "cpu", "args", value=args)


def test_avx512_gemm_is_rejected_on_the_avx2_target_by_the_scan(tmp_path):
    report = run_checker("x86-isa", answer("x86", "avx512_gemm"), gemm_node(target("x86-avx2")), tmp_path)
    assert report.status == "failed"
    text = report.diagnostics
    assert "_mm512_loadu_pd (code line 6) needs avx512f" in text and str(tmp_path) not in text
    if "avx512f" not in _cpu_flags():
        assert "does not have avx512f" in text


def test_avx512_gemm_is_rejected_with_the_compiler_diagnostic_when_the_build_lacks_avx512(tmp_path, build_for_v3):
    report = run_checker("x86-isa", answer("x86", "avx512_gemm"), gemm_node(target("x86-avx512")), tmp_path)
    assert report.status == "failed"
    text = report.diagnostics
    assert "_mm512_loadu_pd (code line 6) needs avx512f" in text  # the target allows it, the build does not
    assert "target specific option mismatch" in text  # GCC's own words
    assert "tasklet.cpp" in text and str(tmp_path) not in text


@needs_cpu(*AVX512, why="the build's -march=native must allow AVX-512 intrinsics")
def test_avx512_gemm_passes_when_the_target_is_avx512(tmp_path):
    report = run_checker("x86-isa", answer("x86", "avx512_gemm"), gemm_node(target("x86-avx512")), tmp_path)
    assert report.status == "passed", report.diagnostics
    assert "-march=native" in report.details["command"]


@pytest.fixture
def build_for_v4():
    """DaCe's build configured for x86-64-v4 (AVX-512), whatever this host is: code for another machine."""
    import dace

    args = dace.Config.get("compiler", "cpu", "args")
    dace.Config.set("compiler", "cpu", "args", value=args.replace("-march=native", "-march=x86-64-v4"))
    yield
    dace.Config.set("compiler", "cpu", "args", value=args)


def test_an_avx512_target_on_a_host_without_avx512_is_compiled_and_not_run(tmp_path, monkeypatch, build_for_v4):
    """AVX-512 hidden from the host description: the check compiles the AVX-512 answer as the real build does, and
    says it did not run it, in the report and in the level; no sanitizer or bench stage runs it either."""
    monkeypatch.setenv("DACE_ai_hide_cpu_features", ",".join(AVX512))
    assert not {"avx512f", "avx512vl"} & set(host_flags())
    avx512 = get_plugin_manager().targets()["x86-avx512"]
    detection = avx512.detect()
    assert not detection.matched and "hidden by the setting hide_cpu_features" in detection.reason
    node = gemm_node(target("x86-avx512"))
    settings = resolve_settings({"target": "x86-avx512"})
    reports = run_checks(CheckRequest(answer("x86", "avx512_gemm"), node, settings, tmp_path / "work"))
    by_name = {r.checker: r for r in reports}
    assert by_name["x86-isa"].status == "passed", by_name["x86-isa"].diagnostics
    verify = by_name["verify"]
    assert verify.status == "inconclusive" and verify.compile_only, verify
    assert "compiled for x86-avx512; this host cannot run it" in verify.diagnostics
    assert "lacks avx512f" in verify.diagnostics and verify.seeds == 0
    assert "sanitizers" not in by_name and "bench" not in by_name
    assert verification_level(reports) == "compile-only: compiled for x86-avx512; this host cannot run it"


@needs_cpu(*AVX512, why="the check would run the AVX-512 answer")
def test_the_avx512_target_goes_on_to_run_its_check_where_the_host_has_avx512(tmp_path, build_for_v4):
    """The same check, nothing hidden, on a host with AVX-512: verify goes on to run the candidate (this node
    has no reference, so it says that instead of a host it cannot run on)."""
    node = gemm_node(target("x86-avx512"))
    settings = resolve_settings({"target": "x86-avx512", "checkers": "probe,x86-isa,verify"})
    reports = run_checks(CheckRequest(answer("x86", "avx512_gemm"), node, settings, tmp_path / "work"))
    verify = {r.checker: r for r in reports}["verify"]
    assert not verify.compile_only and "cannot run it" not in verify.diagnostics, verify
    assert "compile-only" not in verification_level(reports)


def test_run_checks_stops_the_avx512_answer_at_the_compile_stage(tmp_path):
    node = gemm_node(target("x86-avx2"))
    settings = resolve_settings({"target": "x86-avx2"})
    reports = run_checks(CheckRequest(answer("x86", "avx512_gemm"), node, settings, tmp_path / "work"))
    by_name = {r.checker: r for r in reports}
    assert by_name["x86-isa"].status == "failed", reports
    assert "avx512f" in by_name["x86-isa"].diagnostics
    assert all(r.stage == "compile" for r in reports)


@pytest.mark.parametrize("name", ["x86-avx2", "x86-avx512"])
def test_checker_only_applies_to_x86_targets(name, tmp_path):
    checker = get_plugin_manager().checkers()["x86-isa"]
    own = CheckRequest(answer("x86", "avx2_gemm"), gemm_node(target(name)), resolve_settings(), tmp_path)
    other = CheckRequest(answer("x86", "avx2_gemm"), gemm_node(target("host")), resolve_settings(), tmp_path)
    assert checker.applies(own) and not checker.applies(other)


def test_hidden_features_leave_the_host_description_and_a_bad_name_is_a_clear_error(monkeypatch):
    from dace_ai import state
    from dace_ai.errors import SettingsError
    from dace_ai.targets.cpu import read_cpu
    from dace_ai.targets.host import cpu_facts

    monkeypatch.delenv("DACE_ai_hide_cpu_features", raising=False)  # the whole CPU, even in a run that hides some
    state.reset()  # the description is read once per process
    real = read_cpu()
    first = sorted(real.flags)[0]  # one the CPU has, and one it has not
    monkeypatch.setenv("DACE_ai_hide_cpu_features", f" {first.upper()}, no_such_feature ")
    state.reset()
    cpu = read_cpu()
    assert first not in cpu.flags and cpu.hidden == {first} and cpu.model == real.model
    assert cpu.flags | cpu.hidden == real.flags and first not in cpu_facts()["flags"]
    with pytest.raises(SettingsError, match=r"hide_cpu_features.*avx-512"):
        resolve_settings({"hide_cpu_features": "avx-512"})
