"""The CUDA and HIP target packs: device and host tasklets compiled in standalone units."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dace_ai.checking.api import CheckRequest
from dace_ai.checking.levels import verification_level
from dace_ai.checking.stages import run_checks
from dace_ai.compilation.units import device_unit
from dace_ai.config.settings import resolve_settings

from tests.dace_versions import DACE2
from tests.target_support import answer, gemm_node, gpu_element_node, gpu_host_node, run_checker, target

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
needs_hipcc = pytest.mark.skipif(shutil.which("hipcc") is None, reason="needs hipcc")
NO_GPU = shutil.which("nvidia-smi") is None
#: DaCe 2's runtime headers include hip/hip_bf16.h, which older HIP releases (Debian's 5.2) do not have.
hip_runs_dace_headers = pytest.mark.skipif(
    DACE2 and not any(Path(root, "hip", "hip_bf16.h").is_file() for root in ("/usr/include", "/opt/rocm/include")),
    reason="DaCe 2's runtime headers need hip/hip_bf16.h, which this HIP installation lacks",
)


def test_gpu_targets_describe_themselves_and_are_chosen_by_setting():
    cuda, hip = target("cuda"), target("hip")
    assert cuda.kind == hip.kind == "gpu"
    assert cuda.language == "cuda" and hip.language == "hip"
    assert "__dace_current_stream" in cuda.guidance and "no __state" in cuda.guidance
    assert "hipLaunchKernelGGL" in hip.guidance and "warpSize" in hip.guidance
    assert any(f.startswith("-arch=sm_") for f in cuda.flags)
    assert any(f.startswith("--offload-arch=gfx") for f in hip.flags)
    if NO_GPU:
        assert "none on this machine" in cuda.description and "-arch=sm_80" in cuda.flags


def test_device_unit_maps_the_gpu_map_parameter_to_thread_indices():
    source = device_unit(answer("cuda", "elem_ok"), gpu_element_node(target("cuda")))
    assert "__global__ void dace_ai_tasklet_kernel(int N, double _x, double _y)" in source
    assert "int i = (int)(blockIdx.x * blockDim.x + threadIdx.x) + (0);" in source
    assert "__state" not in source.split("// tasklet code")[0]


@needs_nvcc
def test_cuda_device_tasklet_passes_for_the_configured_arch(tmp_path):
    report = run_checker(
        "cuda-nvcc", answer("cuda", "elem_ok"), gpu_element_node(target("cuda")), tmp_path, cuda_arch="90"
    )
    assert report.status == "passed", report.diagnostics
    assert report.details["arch"] == "sm_90" and "-arch=sm_90" in report.details["command"]
    assert "setting cuda_arch" in report.details["arch_source"]
    # DaCe 1.0.2 with CUDA 13, or a context without its program: the level says the build was a unit, and why
    level = verification_level([report])
    assert level.startswith("compile-only: a standalone nvcc unit, not DaCe's build (")
    assert " ".join(report.details["program_builds"].split())[:60] in level


@needs_nvcc
def test_cuda_device_tasklet_using_state_is_rejected_by_nvcc(tmp_path):
    report = run_checker("cuda-nvcc", answer("cuda", "elem_state"), gpu_element_node(target("cuda")), tmp_path)
    assert report.status == "failed"
    assert 'identifier "__state" is undefined' in report.diagnostics  # nvcc's words
    assert "Device code cannot use __state" in report.diagnostics
    if NO_GPU:
        assert report.details["arch"] == "sm_80" and "no GPU found" in report.details["arch_source"]


@needs_nvcc
def test_cuda_host_tasklet_launching_on_the_dace_stream_passes(tmp_path):
    report = run_checker("cuda-nvcc", answer("cuda", "host_ok"), gpu_host_node(target("cuda")), tmp_path)
    assert report.status == "passed", report.diagnostics
    assert report.details["unit"] == "host code over GPU data"


@needs_nvcc
def test_cuda_host_tasklet_with_wrong_kernel_arguments_is_rejected_through_run_checks(tmp_path):
    node = gpu_host_node(target("cuda"))
    request = CheckRequest(answer("cuda", "host_broken"), node, resolve_settings({"target": "cuda"}), tmp_path / "w")
    reports = {r.checker: r for r in run_checks(request) if not r.details.get("static")}
    assert set(reports) == {"cuda-nvcc"}  # the CPU and HIP checkers do not apply to CUDA host code
    assert reports["cuda-nvcc"].status == "failed"
    diagnostics = reports["cuda-nvcc"].diagnostics
    assert 'argument of type "int" is incompatible with parameter of type "double *"' in diagnostics


def test_cuda_checker_ignores_cpu_nodes(tmp_path):
    from dace_ai.plugins.manager import get_plugin_manager

    checker = get_plugin_manager().checkers()["cuda-nvcc"]
    request = CheckRequest(answer("x86", "avx2_gemm"), gemm_node(target("cuda")), resolve_settings(), tmp_path)
    assert not checker.applies(request)


@needs_hipcc
@hip_runs_dace_headers
def test_hip_device_tasklet_passes_and_one_using_state_is_rejected(tmp_path):
    node = gpu_element_node(target("hip"))
    ok = run_checker("hip-hipcc", answer("hip", "elem_ok"), node, tmp_path / "ok")
    assert ok.status == "passed", ok.diagnostics
    assert verification_level([ok]).startswith("compile-only: a standalone hipcc unit, not DaCe's build (")
    assert "--offload-arch=gfx90a" in ok.details["command"]
    bad = run_checker("hip-hipcc", answer("hip", "elem_state"), node, tmp_path / "bad")
    assert bad.status == "failed"
    assert "use of undeclared identifier '__state'" in bad.diagnostics  # clang's words


@needs_hipcc
@hip_runs_dace_headers
def test_hip_host_tasklet_passes_for_the_configured_arch(tmp_path):
    report = run_checker(
        "hip-hipcc", answer("hip", "host_ok"), gpu_host_node(target("hip")), tmp_path, hip_arch="gfx908"
    )
    assert report.status == "passed", report.diagnostics
    assert "--offload-arch=gfx908" in report.details["command"]


def test_hip_check_is_inconclusive_without_hipcc(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    report = run_checker("hip-hipcc", answer("hip", "elem_ok"), gpu_element_node(target("hip")), tmp_path)
    assert report.status == "inconclusive"
    assert "hipcc not found on PATH" in report.diagnostics


def _pack(find_gpu):
    from dace_ai.plugin import GpuPack

    return GpuPack(
        name="vgpu",
        language="vgpu",
        checker_name="vgpu-cc",
        vendor="V GPU",
        found_by="vsmi",
        find_gpu=find_gpu,
        missing="no V GPU (vsmi reports none)",
        compiler="vcc",
        arch_flag="--arch={arch}",
        stream_type="vStream_t",
        suffix=".v",
        arch_setting="cuda_arch",
        default_arch="v1",
        spell_arch=lambda a: "v" + a,
        limits="Language: V C++.",
        guidance="- use v intrinsics",
        priority=7,
        description="V GPUs",
        checker_description="compiles V code",
    )


def test_one_gpu_pack_base_gives_the_target_detection_architecture_and_checker():
    found, absent = _pack(lambda: ("V100x", "v9")), _pack(lambda: None)
    detection = found.detect()
    assert detection.matched and detection.reason == "vsmi reports V100x (v9)"
    assert found.describe(detection) == "V GPU: V100x, architecture v9.\nLanguage: V C++."
    assert found.flags(detection) == ("-O3", "--arch=v9")
    missing = absent.detect()
    assert not missing.matched and missing.reason == "no V GPU (vsmi reports none)"
    assert "none on this machine" in absent.describe(missing) and absent.flags(missing) == ("-O3", "--arch=v1")
    # The setting wins over the machine's GPU, which wins over the default; each says where it came from.
    assert found.resolve_arch(resolve_settings({"cuda_arch": "7"}, environ={})) == (
        "v7",
        "setting cuda_arch (argument)",
    )
    assert found.resolve_arch(resolve_settings(environ={})) == ("v9", "vsmi (V100x)")
    assert absent.resolve_arch(resolve_settings(environ={})) == (
        "v1",
        "default v1 (no GPU found by vsmi and no cuda_arch setting)",
    )
    registration, checker = found.target(), found.checker(lambda request: None)
    assert (registration.name, registration.kind, registration.priority, registration.checkers) == (
        "vgpu",
        "gpu",
        7,
        ("vgpu-cc", "vgpu-cpu-twin"),
    )
    assert registration.compiler == ("vcc",) and registration.language == "vgpu"
    assert (checker.name, checker.stage, checker.applies) == ("vgpu-cc", "compile", found.applies)
    twin = found.twin_checker()  # device tasklets of every pack run on their CPU twin, the same way
    assert (twin.name, twin.stage, twin.applies) == ("vgpu-cpu-twin", "verify", found.runs_on_twin)
