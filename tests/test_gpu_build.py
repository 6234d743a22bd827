"""GPU tasklets checked by DaCe's own GPU build, and the user's program built the same way (nvcc, no GPU).

Each pattern the CUDA target's guidance teaches is placed by the expansion and the
user's whole program is then built by DaCe with nvcc, so a check that passes means
``sdfg.compile()`` builds. DaCe runs the ``cmake`` on PATH; the tests put this
environment's ``bin`` first, as an activated virtual environment does (the
requirements install a CMake that can set up CUDA 13).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import warnings
from pathlib import Path

import dace
import dace_ai
import pytest
from dace_ai import compat
from dace_ai.compilation.gpu_toolchain import gpu_build_blocker, nvcc_version
from dace_ai.environments.generated import _headers
from dace_ai.errors import DaceAIWarning
from dace_ai.solving.provenance import body

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit)")

KERNEL = (
    "__global__ void k_axpy(const double* x, const double* y, double* o, long long n) {\n"
    "    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "    if (i < n) o[i] = 2.0 * x[i] + y[i];\n"
    "}"
)
LAUNCH = "k_axpy<<<(N + 255) / 256, 256, 0, __dace_current_stream>>>(_x, _y, _out, N);"
DEVICE = "_out[0] = 2.0 * _x[0] + _y[0];"


@pytest.fixture
def gpu_build(monkeypatch, fake, tmp_path):
    """This environment's bin first on PATH (its CMake), answers from ``fake``, a fresh build root."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    dace.Config.set("default_build_folder", value=str(tmp_path / "root"))
    previous = dace.Config.get("ai", "provider")
    dace.Config.set("ai", "provider", value="scripted")
    yield fake
    dace.Config.set("ai", "provider", value=previous)


needs_dace_gpu_build = pytest.mark.skipif(
    shutil.which("nvcc") is not None and gpu_build_blocker() is not None,
    reason=f"DaCe cannot build GPU programs here: {gpu_build_blocker() if shutil.which('nvcc') else ''}",
)


def axpy_program(name: str, device: bool) -> dace.SDFG:
    """``o = 2 x + y`` on GPU arrays: an AINode per element inside a GPU map, or one host node over the arrays."""
    n = dace.symbol("N")
    sdfg = dace.SDFG(name)
    sdfg.add_symbol("N", dace.int64)
    for array in "xyo":
        sdfg.add_array(array, [n], dace.float64, storage=dace.StorageType.GPU_Global)
    state = sdfg.add_state()
    if device:
        entry, exit_ = state.add_map("m", {"i": "0:N"}, schedule=dace.ScheduleType.GPU_Device)
        node = dace_ai.AINode("axpy", "Write _out = 2 * _x + _y.", inputs={"_x", "_y"}, outputs={"_out"})
        state.add_memlet_path(state.add_read("x"), entry, node, dst_conn="_x", memlet=dace.Memlet("x[i]"))
        state.add_memlet_path(state.add_read("y"), entry, node, dst_conn="_y", memlet=dace.Memlet("y[i]"))
        state.add_memlet_path(node, exit_, state.add_write("o"), src_conn="_out", memlet=dace.Memlet("o[i]"))
    else:
        node = dace_ai.AINode(
            "axpy",
            "Write _out[i] = 2 * _x[i] + _y[i].",
            inputs={"_x", "_y"},
            outputs={"_out"},
            reference=lambda x, y: 2 * x + y,  # run by gpu-verify where a GPU is present
        )
        state.add_edge(state.add_read("x"), None, node, "_x", dace.Memlet("x[0:N]"))
        state.add_edge(state.add_read("y"), None, node, "_y", dace.Memlet("y[0:N]"))
        state.add_edge(node, "_out", state.add_write("o"), None, dace.Memlet("o[0:N]"))
    return sdfg


def tasklets(sdfg: dace.SDFG) -> list[dace.nodes.Tasklet]:
    return [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet)]


def build_user_program(sdfg: dace.SDFG, folder: Path) -> None:
    """The user's ``sdfg.compile()`` without loading the library (this machine may have no GPU)."""
    sdfg.build_folder = str(folder)
    compat.compile_without_loading(sdfg)


@needs_dace_gpu_build
def test_device_tasklet_in_a_gpu_map_passes_dace_gpu_build_and_the_program_builds(gpu_build, tmp_path):
    sdfg = axpy_program("gpu_device_axpy", device=True)
    gpu_build.queue(json.dumps({"code": DEVICE}))
    sdfg.expand_library_nodes()
    (tasklet,) = tasklets(sdfg)
    assert body(tasklet).strip() == DEVICE
    assert "verification=compile-only: built by DaCe's own GPU build" in tasklet.code.as_string
    build_user_program(sdfg, tmp_path / "user")
    generated = next((tmp_path / "user" / "src" / "cuda").glob("*.cu")).read_text()
    assert DEVICE in generated  # the tasklet is device code in DaCe's CUDA file


@needs_dace_gpu_build
def test_host_tasklet_launching_a_kernel_is_routed_into_the_gpu_file_and_the_program_builds(gpu_build, tmp_path):
    sdfg = axpy_program("gpu_launch_axpy", device=False)
    gpu_build.queue(json.dumps({"code": LAUNCH, "code_global": KERNEL}))
    sdfg.expand_library_nodes()
    (tasklet,) = tasklets(sdfg)
    assert body(tasklet).strip() == LAUNCH  # sessions see exactly what the model wrote
    gpu_code = sdfg.global_code["cuda"].as_string
    assert KERNEL in gpu_code and LAUNCH in gpu_code and "__dace_current_stream" in gpu_code
    build_user_program(sdfg, tmp_path / "user")
    cpp = next((tmp_path / "user" / "src" / "cpu").glob("*.cpp")).read_text()
    cu = next((tmp_path / "user" / "src" / "cuda").glob("*.cu")).read_text()
    assert "<<<" not in cpp.replace(LAUNCH, "") and KERNEL in cu


@needs_dace_gpu_build
def test_a_kernel_launch_with_wrong_arguments_is_refused_in_nvcc_words_and_repaired(gpu_build, tmp_path):
    sdfg = axpy_program("gpu_broken_axpy", device=False)
    broken = LAUNCH.replace("(_x, _y, _out, N)", "(_x, 1, _out, N)")
    gpu_build.queue(
        json.dumps({"code": broken, "code_global": KERNEL}), json.dumps({"code": LAUNCH, "code_global": KERNEL})
    )
    sdfg.expand_library_nodes()
    (tasklet,) = tasklets(sdfg)
    assert body(tasklet).strip() == LAUNCH
    repair = gpu_build.requests[-1]  # the second request carries the first answer's diagnostics
    text = "\n".join(str(getattr(m, "content", m)) for m in repair.messages)
    assert "cuda-nvcc" in text and "DaCe's GPU build rejected the code" in text
    assert 'argument of type "int" is incompatible' in text  # nvcc's words


@pytest.mark.skipif(
    not (dace.__version__.startswith("1.") and (nvcc_version() or (0,))[0] >= 13), reason="DaCe 1 with CUDA 13 only"
)
def test_dace1_with_cuda13_says_in_one_sentence_that_gpu_programs_cannot_build(gpu_build, tmp_path):
    blocker = gpu_build_blocker()
    assert blocker is not None and "cannot build GPU programs with CUDA 13" in blocker and "DaCe 2" in blocker
    sdfg = axpy_program("gpu_dace1_axpy", device=True)
    gpu_build.queue(json.dumps({"code": DEVICE}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sdfg.expand_library_nodes()
    told = [str(w.message) for w in caught if issubclass(w.category, DaceAIWarning)]
    assert any("GPU node 'axpy'" in m and "cannot build GPU programs" in m for m in told), told
    (tasklet,) = tasklets(sdfg)  # the standalone nvcc unit accepts the correct device tasklet
    assert body(tasklet).strip() == DEVICE


def test_doctor_says_whether_dace_can_build_gpu_programs_here():
    from dace_ai.cli.doctor import doctor_report

    gpu = doctor_report()["gpu_build"]
    assert gpu["nvcc"] == ".".join(map(str, nvcc_version()))
    assert gpu["can_build"] == (gpu_build_blocker() is None)
    assert gpu["reason"] == (gpu_build_blocker() or "")


def test_a_gpu_library_environment_puts_its_headers_in_the_gpu_file_too():
    class CUDA:  # DaCe's CUDA runtime environment, by name
        pass

    assert _headers(["cublas_v2.h"], [CUDA]) == {"frame": ["cublas_v2.h"], "cuda": ["cublas_v2.h"]}
    assert _headers(["fftw3.h"], []) == ["fftw3.h"]


def live_request(sdfg: dace.SDFG, answer_fields: dict, workdir: Path):
    """The check request the expansion makes for the program's one AINode."""
    from dace_ai.checking.api import CheckRequest
    from dace_ai.config.settings import resolve_settings
    from dace_ai.expansion.expansion_pass import node_context
    from dace_ai.prompt.answer import parse_answer
    from dace_ai.solving.tasklet import tasklet_factory

    (state,) = list(sdfg.states())
    node = next(n for n in state.nodes() if isinstance(n, dace_ai.AINode))
    settings = resolve_settings({})
    ctx = node_context(sdfg, state, node, settings)
    answer = parse_answer(json.dumps(answer_fields), origin="test")
    return CheckRequest(answer, ctx, settings, workdir, make_tasklet=tasklet_factory(answer, ctx))


@needs_dace_gpu_build
def test_the_device_program_copies_host_twins_in_runs_the_node_waits_and_copies_outputs_out(gpu_build, tmp_path):
    from dace_ai.sandbox.device_program import HOST_SUFFIX, build_device_program

    sdfg = axpy_program("gpu_verify_axpy", device=False)
    request = live_request(sdfg, {"code": LAUNCH, "code_global": KERNEL}, tmp_path / "w")
    library, spec = build_device_program(request)
    assert library.is_file() and spec["kind"] == "program"
    assert [name for name, kind in spec["args"] if kind == "array"] == ["o", "x", "y"]  # host twins, by name
    cu = next((tmp_path / "w" / "device" / "src" / "cuda").glob("*.cu")).read_text()
    cpp = next((tmp_path / "w" / "device" / "src" / "cpu").glob("*.cpp")).read_text()
    assert KERNEL in cu and "cudaDeviceSynchronize();" in cpp
    assert f"x{HOST_SUFFIX}" in cpp and "cudaMemcpy" in cu + cpp


def test_gpu_verify_applies_only_where_a_gpu_runs_it(gpu_build, tmp_path, monkeypatch):
    from dace_ai.sandbox import device_program

    sdfg = axpy_program("gpu_verify_applies", device=False)
    request = live_request(sdfg, {"code": LAUNCH, "code_global": KERNEL}, tmp_path / "w")
    monkeypatch.setattr(device_program, "nvidia_gpu", lambda: None)
    assert not device_program.runs_on_gpu(request)  # no GPU: the answer stays compile-only
    monkeypatch.setattr(device_program, "nvidia_gpu", lambda: "NVIDIA H200 sm_90")
    assert device_program.runs_on_gpu(request) == (gpu_build_blocker() is None)
    device = axpy_program("gpu_verify_device", device=True)
    assert not device_program.runs_on_gpu(live_request(device, {"code": DEVICE}, tmp_path / "d"))  # per map point


def test_a_level_verified_on_the_gpu_names_the_device():
    from dace_ai.checking.api import CheckReport
    from dace_ai.checking.levels import verification_level

    report = CheckReport(
        "gpu-verify", "passed", stage="verify", seeds=3, sizes=[{"N": 13}], details={"device": "NVIDIA H200 sm_90"}
    )
    assert (
        verification_level([CheckReport("cuda-nvcc", "passed"), report])
        == "verified (3 seeds, 1 size, on NVIDIA H200 sm_90)"
    )


CUBLAS = {
    "code": "cublasSetStream(__state->handle, __dace_current_stream);\n"
    "const double two = 2.0;\n"
    "cudaMemcpyAsync(_out, _y, N * sizeof(double), cudaMemcpyDeviceToDevice, __dace_current_stream);\n"
    "cublasDaxpy(__state->handle, N, &two, _x, 1, _out, 1);",
    "state_fields": ["cublasHandle_t handle;"],
    "code_init": "cublasCreate(&__state->handle);",
    "code_exit": "cublasDestroy(__state->handle);",
    "environments": [{"name": "cublas", "generator": "cublas"}],
}


def cublas_found() -> bool:
    from dace_ai.plugins.manager import get_plugin_manager

    generator = get_plugin_manager().environment_generators().get("cublas")
    return generator is not None and generator.detect().matched


@needs_dace_gpu_build
@pytest.mark.skipif(not cublas_found(), reason="needs cuBLAS (the CUDA toolkit's or the nvidia-cublas wheel)")
def test_a_cublas_handle_in_a_state_field_builds_in_both_of_dace_files(gpu_build, tmp_path):
    sdfg = axpy_program("gpu_cublas_axpy", device=False)
    gpu_build.queue(json.dumps(CUBLAS))
    sdfg.expand_library_nodes()
    (tasklet,) = tasklets(sdfg)
    assert "cublasDaxpy" in body(tasklet) and "verification=compile-only" in tasklet.code.as_string
    build_user_program(sdfg, tmp_path / "user")
    cu = next((tmp_path / "user" / "src" / "cuda").glob("*.cu")).read_text()
    assert "cublas_v2.h" in cu and "cublasHandle_t handle;" in cu  # the state struct and its header


def test_switching_the_gpu_check_off_gives_the_same_level_in_generate_and_in_the_expansion(gpu_build, monkeypatch):
    settings = {"provider": "scripted", "checkers": "-cuda-nvcc"}
    generated = axpy_program("gpu_off_generate", device=False)
    gpu_build.queue(json.dumps({"code": LAUNCH, "code_global": KERNEL}))
    (node,) = dace_ai.generate(generated, settings=settings).nodes
    assert node.status == "generated" and node.verification == "unverified: checks are off", node.error
    expanded = axpy_program("gpu_off_expand", device=False)
    gpu_build.queue(json.dumps({"code": LAUNCH, "code_global": KERNEL}))
    monkeypatch.setenv("DACE_ai_checkers", "-cuda-nvcc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expanded.expand_library_nodes()
    (tasklet,) = tasklets(expanded)
    assert "verification=unverified: checks are off" in tasklet.code.as_string
