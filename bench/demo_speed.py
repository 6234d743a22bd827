"""The offline demo's nodes against NumPy and DaCe's OpenBLAS implementation, side by side.

Builds the demo's three programs (``samples/tiled_gemm``) from the shipped answers of one ISA
variant, through every default check stage, then times each node and its baselines on the same
inputs in interleaved rounds (every side once per round, in turn, after a warm-up call, each call after
a pause of ``--pause`` seconds so that the previous side's worker threads are idle) and prints,
per node, every side's time and GFLOP/s and the node's ratio against each baseline, from the best
round of each side and from the median round:

* ``gemm_tile``: ``tiled_gemm``, a parallel map over 256x256 tiles of C with the generated tile
  kernel, against NumPy's ``A @ B`` and ``A @ B`` built with DaCe's ``OpenBLAS`` implementation;
* ``_MatMult_gemm``: ``A @ B`` through the reserved 'ai' implementation, against the same two;
* ``dense_relu``: ``max(A @ B + bias, 0)`` as one fused node, against NumPy's matrix product, add
  and maximum (in place, into a preallocated output) and the same expression built by DaCe with
  its ``OpenBLAS`` Gemm and its own maps.

    .venv/bin/python bench/demo_speed.py [--variant avx2|avx512] [--rounds 21] [--size 1024] [--dense 2048,2048,64]

Threads: NumPy's OpenBLAS, DaCe's OpenBLAS and the generated OpenMP code all use every core unless
``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` say otherwise. ``--baseline-coretype Haswell`` runs
the whole measurement with ``OPENBLAS_CORETYPE=Haswell``: the AVX2 kernels NumPy and OpenBLAS use
on an AVX2 machine, to judge the AVX2 answers on an AVX-512 one (without it, the baselines use
whatever this machine and ``OPENBLAS_CORETYPE`` select).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "tiled_gemm" / "tiled_gemm.py"


def load_sample():
    spec = importlib.util.spec_from_file_location("tiled_gemm_demo", SAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lines_for(comparison) -> list[str]:
    """Every side's best and median time and GFLOP/s; the node's ratio against each baseline."""
    own = comparison.node
    best = {label: min(values) for label, values in comparison.seconds.items()}
    median = {label: statistics.median(values) for label, values in comparison.seconds.items()}
    rounds = len(comparison.seconds[own])
    out = [
        f"{own} -- {comparison.program}, {comparison.sizes} float32, {comparison.flops / 1e9:.2f} GFLOP "
        f"({rounds} rounds):",
        f"  {'side':18s} {'best ms':>9s} {'GFLOP/s':>8s}   {'median ms':>9s} {'GFLOP/s':>8s}",
    ]
    for label in comparison.seconds:
        out.append(
            f"  {label:18s} {best[label] * 1e3:9.3f} {comparison.flops / best[label] / 1e9:8.1f}   "
            f"{median[label] * 1e3:9.3f} {comparison.flops / median[label] / 1e9:8.1f}"
        )
    for label in comparison.seconds:
        if label != own:
            out.append(
                f"  {own} vs {label}: {best[label] / best[own]:.2f}x (best rounds), "
                f"{median[label] / median[own]:.2f}x (median rounds)"
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=("avx2", "avx512"), help="answers to replay (default: this CPU's)")
    parser.add_argument("--rounds", type=int, default=21, help="interleaved timed rounds (default 21)")
    parser.add_argument("--size", type=int, default=1024, help="M = N = K of the matrix products (default 1024)")
    parser.add_argument("--dense", default="2048,2048,64", help="M,N,K of the dense layer (default 2048,2048,64)")
    parser.add_argument(
        "--pause",
        type=float,
        default=0.1,
        help="seconds of pause before each timed call, so the previous side's threads go idle (0.1)",
    )
    parser.add_argument("--baseline-coretype", help="run with OPENBLAS_CORETYPE set to this (e.g. Haswell)")
    parser.add_argument("--build", type=Path, help="build folder (default: a fresh temporary one)")
    opts = parser.parse_args()
    if opts.baseline_coretype and os.environ.get("OPENBLAS_CORETYPE") != opts.baseline_coretype:
        # OpenBLAS reads the variable when it is loaded: start again with it set.
        env = dict(os.environ, OPENBLAS_CORETYPE=opts.baseline_coretype)
        os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:]], env)

    import dace

    build = opts.build or Path(tempfile.mkdtemp(prefix="dace-ai-demo-speed-"))
    dace.Config.set("default_build_folder", value=str(build / ".dacecache"))
    demo = load_sample()
    variant = opts.variant or demo.variant_for_this_cpu()
    dense = tuple(int(v) for v in opts.dense.split(","))
    demo.setup(variant)
    programs, levels = demo.build_programs(variant, build / "prompts", show_code=False)
    openblas = demo.openblas_programs()
    print()
    nodes = demo.comparisons(programs, openblas, opts.size, dense)
    for comparison in nodes:
        demo.time_side_by_side(comparison, opts.rounds, opts.pause)
    load = os.getloadavg()
    print(
        f"\nanswers: {variant}; load {load[0]:.2f} {load[1]:.2f} on {os.cpu_count()} cores; pause {opts.pause} s; "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}; "
        f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}; build {build}"
    )
    for comparison in nodes:
        print(f"\n{comparison.node}: {levels.get(comparison.node, 'unknown')}")
        print("\n".join(lines_for(comparison)))


if __name__ == "__main__":
    main()
