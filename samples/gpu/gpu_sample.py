"""GPU sample: three GPU nodes implemented from answers shipped with this sample (written by the dace-ai
project, replayed: no provider, no key, no network), checked by dace-ai, built by DaCe with nvcc and,
where this machine has an NVIDIA GPU and CuPy, run, compared with NumPy and timed.

    python samples/gpu/gpu_sample.py [--record FILE]

The programs (float64, data in GPU memory):

* ``axpy_device``: ``o = 2 x + y``, an AINode per element inside a GPU map (a device tasklet);
* ``axpy_launch``: the same over whole GPU arrays, a host tasklet that launches a ``__global__``
  kernel on DaCe's stream (dace-ai moves it into DaCe's CUDA file);
* ``gemm_cublas``: ``C = A @ B``, a host tasklet calling cuBLAS with its handle in a state field
  (needs cuBLAS: the ``cublas`` environment pack finds it in the CUDA toolkit or the
  ``nvidia-cublas`` wheel; skipped, with the reason, where it is missing).

It prints each node's verification level: ``compile-only`` where no GPU runs the checks,
``verified (... on <GPU>)`` where the ``gpu-verify`` checker ran the host tasklets on the GPU.
With a GPU it runs each program on CuPy arrays, compares with NumPy, and times it (CUDA events,
median of 20 calls) beside a fused CuPy kernel for ``2 * x + y`` and CuPy's ``A @ B`` (cuBLAS). Without nvcc, or where
DaCe cannot build GPU programs (DaCe 1.0.2 with CUDA 13), or without a GPU, it says what it could
not do and exits 0. ``--record FILE`` writes what happened as JSON (the GPU, whether CuPy was there, each
node's level, whether it ran, agreed with NumPy, and its time beside its baseline) for
``bench/gpu_lane_check.py``, which fails the GPU lane when the record proves less than it must.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import dace
import dace_ai
import numpy as np
from dace_ai import compat
from dace_ai.compilation.gpu_toolchain import gpu_build_blocker, nvidia_gpu
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.testing import FakeProvider

HERE = Path(__file__).resolve().parent
N, M, K = (dace.symbol(s) for s in "NMK")
GPU = dace.StorageType.GPU_Global


def shipped(name: str) -> str:
    return (HERE / "answers" / f"{name}.json").read_text()


def replay_by_node(request) -> str:
    """The shipped answer for the node the request is about (its name is in the prompt)."""
    text = request.messages[0].content if request.messages else ""
    for name in ("axpy_device", "axpy_launch", "gemm_cublas"):
        if f"`{name}`" in text or f"'{name}'" in text or name in text:
            return shipped(name)
    raise LookupError("no shipped answer for this request")


def axpy(name: str, device: bool) -> dace.SDFG:
    sdfg = dace.SDFG(name)
    sdfg.add_symbol("N", dace.int64)
    for array in "xyo":
        sdfg.add_array(array, [N], dace.float64, storage=GPU)
    state = sdfg.add_state()
    reference = lambda x, y: 2 * x + y  # noqa: E731 - the node's NumPy reference
    if device:
        entry, exit_ = state.add_map("elements", {"i": "0:N"}, schedule=dace.ScheduleType.GPU_Device)
        node = dace_ai.AINode(name, "Write _out = 2 * _x + _y.", inputs={"_x", "_y"}, outputs={"_out"})
        state.add_memlet_path(state.add_read("x"), entry, node, dst_conn="_x", memlet=dace.Memlet("x[i]"))
        state.add_memlet_path(state.add_read("y"), entry, node, dst_conn="_y", memlet=dace.Memlet("y[i]"))
        state.add_memlet_path(node, exit_, state.add_write("o"), src_conn="_out", memlet=dace.Memlet("o[i]"))
    else:
        node = dace_ai.AINode(
            name,
            "Write _out[i] = 2 * _x[i] + _y[i] for i < N.",
            inputs={"_x", "_y"},
            outputs={"_out"},
            reference=reference,
        )
        state.add_edge(state.add_read("x"), None, node, "_x", dace.Memlet("x[0:N]"))
        state.add_edge(state.add_read("y"), None, node, "_y", dace.Memlet("y[0:N]"))
        state.add_edge(node, "_out", state.add_write("o"), None, dace.Memlet("o[0:N]"))
    return sdfg


def gemm() -> dace.SDFG:
    sdfg = dace.SDFG("gemm_cublas")
    for symbol in "MNK":
        sdfg.add_symbol(symbol, dace.int64)
    sdfg.add_array("A", [M, K], dace.float64, storage=GPU)
    sdfg.add_array("B", [K, N], dace.float64, storage=GPU)
    sdfg.add_array("C", [M, N], dace.float64, storage=GPU)
    state = sdfg.add_state()
    node = dace_ai.AINode(
        "gemm_cublas",
        "Write _c = _a @ _b (row-major, _a is M x K, _b is K x N) with cuBLAS.",
        inputs={"_a", "_b"},
        outputs={"_c"},
        reference=lambda a, b: a @ b,
    )
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet("A[0:M, 0:K]"))
    state.add_edge(state.add_read("B"), None, node, "_b", dace.Memlet("B[0:K, 0:N]"))
    state.add_edge(node, "_c", state.add_write("C"), None, dace.Memlet("C[0:M, 0:N]"))
    return sdfg


def level(sdfg: dace.SDFG) -> str:
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.Tasklet) and "verification=" in node.code.as_string:
            return node.code.as_string.split("verification=", 1)[1].split("\n", 1)[0]
    return "(no generated tasklet)"


def timed(cupy, call, repeats: int = 20) -> float:
    """Median seconds of ``call`` on the GPU (CUDA events around each call, after two warm-up calls)."""
    for _ in range(2):
        call()
    samples = []
    for _ in range(repeats):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        call()
        end.record()
        end.synchronize()
        samples.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    return float(np.median(samples))


def main(argv: list[str]) -> int:
    record: dict = {"gpu": None, "cupy": False, "nodes": {}, "said": []}
    path = Path(argv[argv.index("--record") + 1]) if "--record" in argv else None
    try:
        return run(record)
    finally:
        if path is not None:
            path.write_text(json.dumps(record, indent=1))


def run(record: dict) -> int:
    record["gpu"] = nvidia_gpu()
    if shutil.which("nvcc") is None:
        print("No nvcc on this machine: the GPU sample needs the CUDA toolkit to build; nothing to do.")
        record["said"].append("no nvcc")
        return 0
    blocker = gpu_build_blocker()
    if blocker is not None:
        print(f"{blocker}.\nNothing to do.")
        record["said"].append(blocker)
        return 0
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # this environment's CMake
    root = Path(tempfile.mkdtemp(prefix="dace-ai-gpu-sample-"))
    dace.Config.set("default_build_folder", value=str(root))
    provider = FakeProvider([replay_by_node] * 6)
    get_plugin_manager().register(provider.plugin("sample-answers"), "gpu-sample-answers")
    dace.Config.set("ai", "provider", value="sample-answers")
    print("Answers: replayed from samples/gpu/answers (written by the dace-ai project), no model is asked.")
    device = record["gpu"]
    print(f"GPU: {device or 'none on this machine (the checks build the programs; nothing runs)'}")
    programs = {"axpy_device": axpy("axpy_device", True), "axpy_launch": axpy("axpy_launch", False)}
    cublas = get_plugin_manager().environment_generators().get("cublas")
    cublas_found = cublas is not None and cublas.detect().matched
    if cublas_found:
        programs["gemm_cublas"] = gemm()
    else:
        reason = cublas.detect().reason if cublas is not None else "the dace-ai-cublas pack is not installed"
        print(f"gemm_cublas: skipped, cuBLAS {reason}")
        record["said"].append(f"gemm_cublas skipped: cuBLAS {reason}")
    compiled = {}
    for name, sdfg in programs.items():
        sdfg.expand_library_nodes()
        print(f"{name}: {level(sdfg)}")
        record["nodes"][name] = {"level": level(sdfg), "ran": False}
        if device is None:
            sdfg.build_folder = str(root / name)
            compat.compile_without_loading(sdfg)
            print(f"  built by DaCe with nvcc in {root / name} (not run: no GPU)")
        else:
            compiled[name] = sdfg.compile()
    try:
        import cupy
    except ImportError:
        cupy = None
    record["cupy"] = cupy is not None
    if device is None or cupy is None:
        print("No GPU or no CuPy here: the programs were checked and built, not run.")
        return 0
    status = 0
    n = 1 << 24
    rng = np.random.default_rng(0)
    x, y = rng.random(n), rng.random(n)
    gx, gy = cupy.asarray(x), cupy.asarray(y)
    fused = cupy.ElementwiseKernel("float64 x, float64 y", "float64 o", "o = 2 * x + y", "sample_axpy")
    for name in ("axpy_device", "axpy_launch"):
        go = cupy.full(n, np.nan)
        compiled[name](x=gx, y=gy, o=go, N=n)
        ok = np.allclose(cupy.asnumpy(go), 2 * x + y)
        status |= not ok
        seconds = timed(cupy, functools.partial(compiled[name], x=gx, y=gy, o=go, N=n))
        base = timed(cupy, functools.partial(fused, gx, gy, go))
        record["nodes"][name].update(
            ran=True, agrees=bool(ok), seconds=seconds, baseline="CuPy fused 2*x+y kernel", baseline_seconds=base
        )
        print(
            f"{name}: {'matches NumPy' if ok else 'DIFFERS from NumPy'}; {seconds * 1e6:.0f} us per call "
            f"({3 * 8 * n / seconds / 1e9:.0f} GB/s), CuPy's fused 2*x+y kernel {base * 1e6:.0f} us: {base / seconds:.2f}x"
        )
    if "gemm_cublas" in compiled:
        m = k = nn = 2048
        a, b = rng.random((m, k)), rng.random((k, nn))
        ga, gb, gc = cupy.asarray(a), cupy.asarray(b), cupy.full((m, nn), np.nan)
        compiled["gemm_cublas"](A=ga, B=gb, C=gc, M=m, N=nn, K=k)
        ok = np.allclose(cupy.asnumpy(gc), a @ b)
        status |= not ok
        seconds = timed(cupy, lambda: compiled["gemm_cublas"](A=ga, B=gb, C=gc, M=m, N=nn, K=k))
        base = timed(cupy, lambda: cupy.matmul(ga, gb, out=gc))
        record["nodes"]["gemm_cublas"].update(
            ran=True, agrees=bool(ok), seconds=seconds, baseline="CuPy A @ B (cuBLAS)", baseline_seconds=base
        )
        print(
            f"gemm_cublas: {'matches NumPy' if ok else 'DIFFERS from NumPy'}; {seconds * 1e3:.2f} ms per call "
            f"({2 * m * nn * k / seconds / 1e9:.0f} GFLOP/s), CuPy's A @ B (cuBLAS) {base * 1e3:.2f} ms: "
            f"{base / seconds:.2f}x"
        )
    print(json.dumps({"gpu": device, "status": "ok" if status == 0 else "mismatch"}))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
