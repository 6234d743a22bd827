"""HIP answers built by DaCe's own HIP build (``compiler.cuda.backend = "hip"``, hipcc) where DaCe can
build HIP programs here, else compiled by hipcc alone with the reason in their level.

DaCe runs the ``cmake`` on PATH; the expansion tests put this environment's ``bin``
first, as an activated virtual environment does.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import dace
import pytest
from dace_ai import compat
from dace_ai.compilation.gpu_toolchain import gpu_build_blocker
from dace_ai.solving.provenance import body

from tests.dace_versions import DACE2
from tests.target_support import answer, gpu_element_node, run_checker, target
from tests.test_gpu_build import axpy_program, tasklets

needs_hipcc = pytest.mark.skipif(shutil.which("hipcc") is None, reason="needs hipcc")
#: DaCe 2's runtime headers include hip/hip_bf16.h, which older HIP releases (Debian's 5.2) do not have.
hip_runs_dace_headers = pytest.mark.skipif(
    DACE2 and not any(Path(root, "hip", "hip_bf16.h").is_file() for root in ("/usr/include", "/opt/rocm/include")),
    reason="DaCe 2's runtime headers need hip/hip_bf16.h, which this HIP installation lacks",
)
DEVICE = "_out[0] = 2.0 * _x[0] + _y[0];"
DEVICE_STATE = "_out[0] = 2.0 * _x[0] + __state->scale;"


def _venv_blocker() -> str | None:
    """Why DaCe cannot build HIP programs with this environment's ``bin`` first on PATH (None: it can)."""
    if shutil.which("hipcc") is None:
        return "hipcc is not on PATH"
    previous = os.environ["PATH"]
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{previous}"
    try:
        return gpu_build_blocker("hip")
    finally:
        os.environ["PATH"] = previous


BLOCKER = _venv_blocker()
needs_dace_hip_build = pytest.mark.skipif(BLOCKER is not None, reason=f"DaCe cannot build HIP here: {BLOCKER}")
dace_cannot_build_hip = pytest.mark.skipif(BLOCKER is None, reason="DaCe can build HIP programs on this machine")


@pytest.fixture
def hip_build(monkeypatch, fake, tmp_path):
    """The HIP target, this environment's bin first on PATH (its CMake), answers from ``fake``."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    dace.Config.set("default_build_folder", value=str(tmp_path / "root"))
    previous = {key: dace.Config.get("ai", key) for key in ("provider", "target")}
    dace.Config.set("ai", "provider", value="scripted")
    dace.Config.set("ai", "target", value="hip")
    yield fake
    for key, value in previous.items():
        dace.Config.set("ai", key, value=value)


def test_the_hip_blocker_names_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu_build_blocker("hip") == "hipcc is not on PATH, so DaCe cannot build HIP programs on this machine"
    fake_hipcc = tmp_path / "hipcc"
    fake_hipcc.write_text("#!/bin/sh\nexit 0\n")
    fake_hipcc.chmod(0o755)
    monkeypatch.setattr("dace_ai.compilation.gpu_toolchain.hip_include_dir", lambda: None)
    assert gpu_build_blocker("hip").startswith("the HIP runtime headers (hip/hip_runtime.h")


@needs_hipcc
def test_a_context_without_its_program_is_compiled_by_hipcc_alone_and_says_why(tmp_path):
    report = run_checker("hip-hipcc", answer("hip", "elem_ok"), gpu_element_node(target("hip")), tmp_path)
    assert report.details["built_by"] == "standalone unit"
    assert report.details["program_builds"] == (
        gpu_build_blocker("hip")
        or "no program holds the node (a context read back from disk), so DaCe has nothing to build"
    )


@needs_hipcc
@dace_cannot_build_hip
@hip_runs_dace_headers
def test_where_dace_cannot_build_hip_the_level_names_why_and_hipcc_compiles_the_unit(hip_build):
    sdfg = axpy_program("hip_unit_axpy", device=True)
    hip_build.queue(json.dumps({"code": DEVICE}))
    sdfg.expand_library_nodes()
    (tasklet,) = tasklets(sdfg)
    assert body(tasklet).strip() == DEVICE
    level = "verification=compile-only: a standalone hipcc unit, not DaCe's build ("
    code = " ".join(tasklet.code.as_string.split())
    assert level in code and BLOCKER[:80] in code


@needs_hipcc
@dace_cannot_build_hip
@hip_runs_dace_headers
def test_the_real_dace_hip_build_stopped_by_cmake_is_recognised_as_the_machine_not_the_code(hip_build, monkeypatch):
    # Past the blocker, DaCe generates the HIP program and runs CMake; CMake's set-up failure is not the answer's.
    monkeypatch.setattr("dace_ai.checkers.gpu_pack.gpu_build_blocker", lambda backend: None)
    monkeypatch.setattr("dace_ai.compilation.gpu_build.gpu_build_blocker", lambda backend: None)
    if "cmake" not in BLOCKER.lower():
        pytest.skip(f"DaCe's HIP build here stops before CMake: {BLOCKER}")
    sdfg = axpy_program("hip_cmake_axpy", device=True)
    hip_build.queue(json.dumps({"code": DEVICE}))
    sdfg.expand_library_nodes()
    (tasklet,) = tasklets(sdfg)
    code = " ".join(tasklet.code.as_string.split())
    assert "verification=compile-only: a standalone hipcc unit, not DaCe's build (CMake " in code
    assert "cannot set up HIP, so DaCe cannot build any HIP program here" in code


@needs_hipcc
@needs_dace_hip_build
def test_a_hip_device_tasklet_is_built_by_dace_hip_build_and_the_program_builds(hip_build, tmp_path):
    sdfg = axpy_program("hip_device_axpy", device=True)
    hip_build.queue(json.dumps({"code": DEVICE}))
    sdfg.expand_library_nodes()
    (tasklet,) = tasklets(sdfg)
    assert body(tasklet).strip() == DEVICE
    assert "verification=compile-only: built by DaCe's own GPU build with its HIP backend" in tasklet.code.as_string
    sdfg.build_folder = str(tmp_path / "user")
    with compat.gpu_backend("hip"):
        compat.compile_without_loading(sdfg)
    generated = "".join(p.read_text() for p in (tmp_path / "user" / "src" / "cuda").rglob("*.*"))
    assert DEVICE in generated and "hip" in generated.lower()


@needs_hipcc
@needs_dace_hip_build
def test_a_broken_hip_device_tasklet_is_refused_in_the_compiler_words_and_repaired(hip_build):
    sdfg = axpy_program("hip_broken_axpy", device=True)
    hip_build.queue(json.dumps({"code": DEVICE_STATE}), json.dumps({"code": DEVICE}))
    sdfg.expand_library_nodes()
    (tasklet,) = tasklets(sdfg)
    assert body(tasklet).strip() == DEVICE
    repair = hip_build.requests[-1]  # the second request carries the first answer's diagnostics
    text = "\n".join(str(getattr(m, "content", m)) for m in repair.messages)
    assert "hip-hipcc" in text and "DaCe's GPU build rejected the code" in text
    assert "__state" in text and "error" in text
