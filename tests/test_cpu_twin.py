"""Device tasklets verified on their CPU twin: the same code at the same map points, run on the host.

Real programs with a GPU map, real compiles with the host compiler and the sandbox child; no GPU and no
nvcc needed (the twin is built by the host compiler alone). The tests that run the whole check cascade
(:func:`run_checks`) also run the ``cuda-nvcc`` compile check first: with nvcc it compiles the tasklet for the
GPU (DaCe's own GPU build, or a standalone nvcc unit where DaCe cannot build GPU programs here), without
nvcc it is inconclusive and the twin still runs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.checking.levels import verification_level
from dace_ai.checking.stages import run_checks
from dace_ai.compilation.cpu_twin import TWIN_HEADER, twin_blockers, twin_node
from dace_ai.config.settings import resolve_settings
from dace_ai.expansion.expansion_pass import node_context
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.prompt.answer import parse_answer
from dace_ai.solving.tasklet import tasklet_factory

TWIN_LEVEL = "verified on the CPU twin (3 seeds, 5 sizes, 6 distributions; not run on a GPU)"


def gpu_map_program(
    name: str,
    inputs: dict[str, str],
    output: str,
    map_range: str,
    reference: Callable[..., Any] | None,
    dtype: Any = dace.float64,
    description: str = "",
) -> dace.SDFG:
    """An AINode inside a GPU_Device map over ``i``: ``inputs`` (connector -> memlet), one output ``_out``."""
    n = dace.symbol("N")
    sdfg = dace.SDFG(name)
    sdfg.add_symbol("N", dace.int64)
    for memlet in [*inputs.values(), output]:
        array = memlet.split("[")[0]
        if array not in sdfg.arrays:
            sdfg.add_array(array, [n], dtype, storage=dace.StorageType.GPU_Global)
    state = sdfg.add_state()
    entry, exit_ = state.add_map("m", {"i": map_range}, schedule=dace.ScheduleType.GPU_Device)
    node = dace_ai.AINode(name, description or name, inputs=set(inputs), outputs={"_out"}, reference=reference)
    for conn, memlet in inputs.items():
        array = memlet.split("[")[0]
        state.add_memlet_path(state.add_read(array), entry, node, dst_conn=conn, memlet=dace.Memlet(memlet))
    state.add_memlet_path(
        node, exit_, state.add_write(output.split("[")[0]), src_conn="_out", memlet=dace.Memlet(output)
    )
    return sdfg


def stencil() -> dace.SDFG:
    """``o[i] = x[i-1] + 2 x[i] + x[i+1]`` for the inner points: the neighbours through a 3-element view."""
    return gpu_map_program("twin_stencil", {"_x": "x[i-1:i+2]"}, "o[i]", "1:N-1", lambda x: x[0] + 2 * x[1] + x[2])


def boundary() -> dace.SDFG:
    """``o[i] = x[i-1] + x[i] + x[i+1]`` with zeros past either end: every point, the whole array in view."""

    def reference(x: np.ndarray, i: int) -> np.ndarray:
        left = x[i - 1] if i > 0 else 0.0
        right = x[i + 1] if i < len(x) - 1 else 0.0
        return np.array(left + x[i] + right)

    return gpu_map_program("twin_boundary", {"_x": "x[0:N]"}, "o[i]", "0:N", reference)


def axpy() -> dace.SDFG:
    """``o[i] = 2 x[i] + y[i]``."""
    return gpu_map_program("twin_axpy", {"_x": "x[i]", "_y": "y[i]"}, "o[i]", "0:N", lambda x, y: 2 * x + y)


#: (program, the right device tasklet, a wrong one): an off-by-one neighbour, a missed boundary, a wrong constant.
CASES = {
    "off-by-one neighbour": (
        stencil,
        "_out[0] = _x[0] + 2.0 * _x[1] + _x[2];",
        "_out[0] = _x[1] + 2.0 * _x[1] + _x[2];",
    ),
    "missed boundary": (
        boundary,
        "double left = i > 0 ? _x[i - 1] : 0.0;\n"
        "double right = i < N - 1 ? _x[i + 1] : 0.0;\n"
        "_out[0] = left + _x[i] + right;",
        "double left = i > 0 ? _x[i - 1] : 0.0;\n_out[0] = left + _x[i] + _x[i + 1];",
    ),
    "wrong constant": (axpy, "_out[0] = 2.0 * _x[0] + _y[0];", "_out[0] = 3.0 * _x[0] + _y[0];"),
}


def request_for(sdfg: dace.SDFG, code: str, workdir: Path, pack: str = "cuda", **fields: Any) -> CheckRequest:
    """The check request the expansion makes for the program's one AINode, answered for ``pack`` with ``code``."""
    (state,) = list(sdfg.states())
    node = next(n for n in state.nodes() if isinstance(n, dace_ai.AINode))
    settings = resolve_settings({"target": pack})
    ctx = node_context(sdfg, state, node, settings)
    answer = parse_answer(json.dumps({"code": code, "language": pack, **fields}), origin="test")
    return CheckRequest(answer, ctx, settings, workdir, make_tasklet=tasklet_factory(answer, ctx))


def twin_report(sdfg: dace.SDFG, code: str, workdir: Path, pack: str = "cuda", **fields: Any) -> CheckReport:
    """The pack's CPU twin checker's report (``cuda-cpu-twin``), after asserting it applies."""
    checker = get_plugin_manager().checkers()[f"{pack}-cpu-twin"]
    request = request_for(sdfg, code, workdir, pack, **fields)
    assert request.node.in_gpu_kernel and checker.applies is not None and checker.applies(request)
    return checker.check(request)


def test_the_twin_is_the_same_node_on_the_host():
    sdfg = stencil()
    request = request_for(sdfg, CASES["off-by-one neighbour"][1], Path("."))
    twin = twin_node(request.node)
    assert not twin.in_gpu_kernel and twin.target.kind == "cpu" and twin.target.language == "cpp"
    assert [c.storage for c in twin.connectors] == ["CPU_Heap", "CPU_Heap"]
    assert [c.storage for c in request.node.connectors] == ["GPU_Global", "GPU_Global"]
    assert [(s.params, s.ranges, s.schedule) for s in twin.scopes] == [(("i",), ("1:N - 1",), "Sequential")]
    assert [(c.subset, c.ctype) for c in twin.connectors] == [(c.subset, c.ctype) for c in request.node.connectors]
    assert twin.live["sdfg"] is sdfg  # the reference is built from the user's program


@pytest.mark.parametrize("mistake", list(CASES))
def test_a_wrong_device_tasklet_is_refused_by_the_twin_naming_the_element(mistake, tmp_path):
    program, _, wrong = CASES[mistake]
    report = twin_report(program(), wrong, tmp_path)
    assert report.status == "failed", report.diagnostics
    assert report.stage == "verify" and report.diagnostics.startswith("On the CPU twin")
    assert "output _out at index [0]" in report.diagnostics and "at map point i=" in report.diagnostics
    assert verification_level([CheckReport("cuda-nvcc", "passed"), report]) == "unverified: failed cuda-cpu-twin"


@pytest.mark.parametrize("mistake", list(CASES))
def test_the_right_device_tasklet_is_verified_on_the_twin(mistake, tmp_path):
    program, right, _ = CASES[mistake]
    report = twin_report(program(), right, tmp_path)
    assert report.status == "passed", report.diagnostics
    assert report.coverage is not None and report.coverage.twin
    assert verification_level([CheckReport("cuda-nvcc", "passed"), report]) == TWIN_LEVEL


def test_hip_device_tasklets_share_the_twin(tmp_path):
    program, right, wrong = CASES["off-by-one neighbour"]
    refused = twin_report(program(), wrong, tmp_path / "wrong", pack="hip")
    assert refused.checker == "hip-cpu-twin" and refused.failed and "at map point i=" in refused.diagnostics
    kept = twin_report(program(), right, tmp_path / "right", pack="hip")
    assert verification_level([CheckReport("hip-hipcc", "passed"), kept]) == TWIN_LEVEL
    request = request_for(program(), right, tmp_path, "hip")
    assert not get_plugin_manager().checkers()["cuda-cpu-twin"].applies(request)  # one twin per pack


def test_device_intrinsics_ldg_fast_math_and_atomics_run_on_the_twin(tmp_path):
    sdfg = gpu_map_program(
        "twin_intrinsics",
        {"_x": "x[i]"},
        "o[i]",
        "0:N",
        lambda x: (2 * x + 1).astype(np.float32),
        dtype=dace.float32,
    )
    code = (
        "float v = __ldg(&_x[0]);\n"
        "_out[0] = 0.0f;\n"
        "atomicAdd(&_out[0], __fmaf_rn(2.0f, v, __expf(0.0f)));\n"
        "atomicMax(&_out[0], __fmul_rn(2.0f, v) + rsqrtf(1.0f) - 1.0f);\n"
        "float2 pair = make_float2(_out[0], 0.0f);\n"
        "_out[0] = fminf(pair.x, pair.x + __saturatef(2.0f) - 1.0f);"
    )
    report = twin_report(sdfg, code, tmp_path)
    assert report.status == "passed", report.diagnostics
    assert verification_level([CheckReport("cuda-nvcc", "passed"), report]) == TWIN_LEVEL


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (
            "__syncthreads();\n_out[0] = 2.0 * _x[0] + _y[0];",
            "compile-only: uses __syncthreads (a barrier), which the CPU twin cannot run",
        ),
        (
            "double v = __shfl_down_sync(0xffffffff, _x[0], 1);\n_out[0] = 2.0 * v + _y[0];",
            "compile-only: uses __shfl_down_sync (a warp shuffle), which the CPU twin cannot run",
        ),
    ],
)
def test_code_the_twin_cannot_run_stays_compile_only_with_the_reason(code, reason, tmp_path):
    report = twin_report(axpy(), code, tmp_path)
    assert report.status == "inconclusive" and report.compile_only
    assert verification_level([CheckReport("cuda-nvcc", "passed"), report]) == reason
    assert not (tmp_path / "cpu-twin").exists()  # nothing was built
    unit = CheckReport("cuda-nvcc", "passed", details={"built_by": "standalone unit", "compiler": "nvcc"})
    assert verification_level([unit, report]) == reason + "; a standalone nvcc unit, not DaCe's build"
    no_nvcc = CheckReport("cuda-nvcc", "inconclusive", "nvcc not found on PATH; CUDA code was not checked")
    assert (
        verification_level([no_nvcc, report])
        == "unverified: cuda-nvcc: nvcc not found on PATH; CUDA code was not checked"
    )


def test_the_blockers_are_read_off_the_code_and_not_its_comments():
    def blockers(code: str, code_global: str = "") -> list[str]:
        return twin_blockers(parse_answer(json.dumps({"code": code, "code_global": code_global}), origin="test"))

    assert blockers("// no __syncthreads() here\n_out[0] = _x[0];") == []
    assert blockers('printf("threadIdx");\n_out[0] = _x[0];') == []
    assert blockers("_out[0] = _x[threadIdx.x];") == ["uses threadIdx (thread and block indices)"]
    assert blockers("_out[0] = 1;", "__shared__ double tile[32];") == ["uses __shared__ (shared memory)"]
    assert blockers('asm("mov.u32 %0, %%laneid;" : "=r"(l));') == ["uses asm (inline assembly (PTX))"]
    assert "__syncthreads" not in TWIN_HEADER  # the header gives no CPU meaning to what the twin cannot run


def test_a_device_tasklet_without_a_reference_is_left_to_its_gpu_build(tmp_path):
    sdfg = gpu_map_program("twin_no_reference", {"_x": "x[i]"}, "o[i]", "0:N", None)
    request = request_for(sdfg, "_out[0] = _x[0];", tmp_path)
    assert not get_plugin_manager().checkers()["cuda-cpu-twin"].applies(request)  # nothing to compare with


def test_an_accumulating_output_with_a_reference_function_stays_compile_only(tmp_path):
    """Device code adds into an output with write-conflict resolution (atomicAdd), while a reference function
    gives one map point's value: the twin does not compare the two rather than refuse a right answer."""
    n = dace.symbol("N")
    sdfg = dace.SDFG("twin_accumulate")
    sdfg.add_symbol("N", dace.int64)
    sdfg.add_array("x", [n], dace.float32, storage=dace.StorageType.GPU_Global)
    sdfg.add_array("s", [1], dace.float32, storage=dace.StorageType.GPU_Global)
    state = sdfg.add_state()
    entry, exit_ = state.add_map("m", {"i": "0:N"}, schedule=dace.ScheduleType.GPU_Device)
    node = dace_ai.AINode("acc", "Add _x into _out.", inputs={"_x"}, outputs={"_out"}, reference=lambda x: x)
    state.add_memlet_path(state.add_read("x"), entry, node, dst_conn="_x", memlet=dace.Memlet("x[i]"))
    memlet = dace.Memlet("s[0]", wcr="lambda a, b: a + b")
    state.add_memlet_path(node, exit_, state.add_write("s"), src_conn="_out", memlet=memlet)
    report = twin_report(sdfg, "atomicAdd(_out, _x[0]);", tmp_path)
    assert report.status == "inconclusive" and report.compile_only
    assert report.reason.startswith("compile-only: output _out accumulates (write-conflict resolution)")


def test_a_cuda_name_the_twin_has_no_meaning_for_stays_compile_only(tmp_path):
    report = twin_report(axpy(), "_out[0] = __half2float(__float2half(2.0f)) * _x[0] + _y[0];", tmp_path)
    assert report.status == "inconclusive" and report.compile_only, report.diagnostics
    level = verification_level([CheckReport("cuda-nvcc", "passed"), report])
    assert level.startswith("compile-only: the CPU twin cannot build it with the host compiler (")
    assert "__float2half" in level


@pytest.fixture
def venv_path(monkeypatch):
    """This environment's ``bin`` first on PATH, as an activated virtual environment has it: DaCe's GPU build
    runs the ``cmake`` on PATH, and the requirements install one that can set up CUDA 13."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def test_the_cascade_refuses_a_wrong_device_tasklet_and_keeps_the_right_one_on_the_twin(venv_path, tmp_path):
    """The whole check cascade, as the expansion runs it: the GPU compile check, then the twin."""
    program, right, wrong = CASES["wrong constant"]
    sdfg = program()
    refused = run_checks(request_for(sdfg, wrong, tmp_path / "wrong"))
    twin = next(r for r in refused if r.checker == "cuda-cpu-twin")
    assert twin.failed and "output _out at index [0]" in twin.diagnostics
    compiled = next(r for r in refused if r.checker == "cuda-nvcc")
    assert compiled.status == ("inconclusive" if shutil.which("nvcc") is None else "passed"), compiled.diagnostics
    kept = run_checks(request_for(sdfg, right, tmp_path / "right"))
    level = verification_level(kept)
    assert level.startswith(TWIN_LEVEL[:-1] + "; "), [(r.checker, r.status, r.diagnostics[:200]) for r in kept]
    built_by = next(r for r in kept if r.checker == "cuda-nvcc").details.get("built_by")
    assert level.endswith(
        {
            "DaCe": "; built by DaCe's own GPU build)",
            "standalone unit": "; a standalone nvcc unit, not DaCe's build)",
            None: "; not compiled for a GPU here)",
        }[built_by]
    )


def test_the_expansion_feeds_the_twin_failure_back_and_keeps_the_repaired_answer(fake, venv_path, tmp_path):
    program, right, wrong = CASES["off-by-one neighbour"]
    sdfg = program()
    previous = dace.Config.get("ai", "provider")
    dace.Config.set("ai", "provider", value="scripted")
    try:
        fake.queue(json.dumps({"code": wrong, "language": "cuda"}), json.dumps({"code": right, "language": "cuda"}))
        sdfg.expand_library_nodes()
    finally:
        dace.Config.set("ai", "provider", value=previous)
    (tasklet,) = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet)]
    assert right in tasklet.code.as_string
    assert f"verification={TWIN_LEVEL[:-1]}; " in tasklet.code.as_string  # then the GPU build that compiled it
    repair = fake.requests[-1].messages[-1].content
    assert "cuda-cpu-twin" in repair and "On the CPU twin" in repair and "at map point i=" in repair
