"""Offline demo: a tiled matrix multiply whose 8x16 microkernel is written by a model, plus ``A @ B``
through the reserved 'ai' implementation -- replaying answers shipped with this sample.

Run from anywhere (no provider, no key, no network)::

    python samples/tiled_gemm/tiled_gemm.py

What happens:

1. Two programs are built: ``tiled_gemm`` (a map over 8x16 tiles of C whose body is
   ``dace_ai.ai(...)``, the microkernel) and ``matmul`` (``A @ B`` with
   ``dace.libraries.blas.default_implementation = 'ai'``, so its Gemm goes to dace-ai).
2. The prompts are written with the built-in ``manual`` provider's file exchange
   (``dace_ai.generate_prompts``), exactly as a user without API access would.
3. The demo then plays the person answering them: it copies the answers shipped in
   ``answers/<variant>/<node>.json`` to the response paths the prompt files name, and
   ``dace_ai.read_prompt_responses`` expands the nodes (with the usual compile checks).
4. It prints the generated code, compiles, checks against NumPy and prints timings.

Why it works on any x86-64 machine with AVX2: prompts contain machine details (CPU
model, caches, core count), so their hash -- which names the response files -- differs
between machines. Shipped answers are therefore keyed machine-independently, by node
name and ISA variant, and matched to this machine's prompt files at run time. The
prompt's target is pinned to a demo target (``demo-x86-avx2`` or ``demo-x86-avx512``)
whose text does not depend on the machine, so the answer always fits what its prompt
asked for. The AVX-512 answers are used when the CPU has ``avx512f``, the AVX2+FMA
answers otherwise; both mark their functions with ``__attribute__((target(...)))`` and
do not depend on ``-march`` flags.
"""


import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import dace
import dace_ai
import numpy as np
from dace_ai.plugin import Detection, Target, hookimpl
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.targets.host import cpu_facts

HERE = Path(__file__).resolve().parent
M, N, K = (dace.symbol(s) for s in "MNK")

MICROKERNEL = (
    "Microkernel of a tiled single-precision matrix multiply: write the 8x16 tile "
    "_out[r][c] = sum over k < K of _a[r][k] * _b[k][c] (r < 8, c < 16). _a is an 8xK block of rows of A, "
    "_b a Kx16 block of columns of B. Use the target's vector FMA intrinsics with register accumulators."
)


def microkernel_reference(a, b):
    """What the microkernel means, in NumPy: the verify stage compares the answer with it."""
    return a @ b


@dace.program
def tiled_gemm(A: dace.float32[M, K], B: dace.float32[K, N], C: dace.float32[M, N]):
    for j, i in dace.map[0:N:16, 0:M:8]:  # i innermost: a 16-column panel of B is reused from cache
        C[i:i + 8, j:j + 16] = dace_ai.ai(MICROKERNEL, a=A[i:i + 8, :], b=B[:, j:j + 16], shape=(8, 16),
                                          name="microkernel", reference=microkernel_reference)


@dace.program
def matmul(A: dace.float32[M, K], B: dace.float32[K, N]):
    return A @ B


VARIANTS = {
    "avx2": ("x86-64 CPU with AVX2 and FMA (no AVX-512): 16 vector registers of 256 bits "
             "(8 floats each); two FMA units. Use <immintrin.h> _mm256_* intrinsics.",
             ("-O3", "-mavx2", "-mfma")),
    "avx512": ("x86-64 CPU with AVX-512F: 32 vector registers of 512 bits (16 floats each). "
               "Use <immintrin.h> _mm512_* intrinsics.",
               ("-O3", "-mavx512f", "-mfma")),
}


class DemoTargets:
    """Machine-independent targets for this demo, so the prompts do not vary between machines."""

    @hookimpl
    def dace_ai_targets(self):
        for variant, (text, flags) in VARIANTS.items():
            yield Target(name=f"demo-x86-{variant}", kind="cpu", priority=-100,
                         detect=lambda: Detection(False, "selected by the tiled_gemm demo only"),
                         describe=lambda detection, text=text: text, compiler=("g++",), flags=flags,
                         guidance="Write fast, correct code; use unaligned loads and stores.",
                         description=f"tiled_gemm demo target ({variant})")


def variant_for_this_cpu() -> str:
    return "avx512" if "avx512f" in cpu_facts()["flags"] else "avx2"


def replay_answers(sdfg: dace.SDFG, prompt_dir: Path, variant: str) -> None:
    """Answer this machine's prompt files with the shipped answers, then expand the nodes."""
    for files in dace_ai.generate_prompts(sdfg, prompt_dir):
        shipped = HERE / "answers" / variant / f"{files.node}.json"
        if not shipped.is_file():
            sys.exit(f"no shipped answer for node {files.node!r} ({shipped}); its prompt is {files.prompt}")
        shutil.copyfile(shipped, files.response)
        print(f"  {files.node}: prompt {files.prompt.name} -> shipped answer {shipped.relative_to(HERE)}")
    report = dace_ai.read_prompt_responses(sdfg, prompt_dir)
    if report.missing or report.failed:
        sys.exit(f"unanswered or refused prompts remain:\n{report}")
    for node, level in report.verification.items():
        print(f"  {node}: {level}")


def generated_code(sdfg: dace.SDFG) -> str:
    parts = []
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.Tasklet) and "// dace-ai:" in node.code.as_string:
            parts.append(f"--- tasklet {node.label}: code_global ---\n{node.code_global.as_string.strip()}\n"
                         f"--- tasklet {node.label}: code ---\n{node.code.as_string.strip()}\n")
    return "\n".join(parts)


def best_time(func, repeat: int) -> float:
    func()  # warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1024, help="M = N = K (a multiple of 16)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--variant", choices=sorted(VARIANTS), default=None,
                        help="answers to replay (default: avx512 if the CPU has avx512f, else avx2)")
    parser.add_argument("--quiet-code", action="store_true", help="do not print the generated code")
    args = parser.parse_args(argv)
    if args.size % 16:
        parser.error("--size must be a multiple of 16")

    variant = args.variant or variant_for_this_cpu()
    print(f"dace-ai offline demo: replaying the answers shipped in {HERE / 'answers' / variant} "
          f"(provider 'manual'; no model is called)")
    get_plugin_manager().register(DemoTargets(), "tiled-gemm-demo")
    dace.Config.set("ai", "provider", value="manual")
    dace.Config.set("ai", "target", value=f"demo-x86-{variant}")
    from dace.libraries import blas

    blas.default_implementation = "ai"

    prompt_dir = Path(tempfile.mkdtemp(prefix="dace-ai-demo-prompts-"))
    programs = {}
    for program in (tiled_gemm, matmul):
        sdfg = program.to_sdfg()
        print(f"\n[{sdfg.name}]")
        replay_answers(sdfg, prompt_dir, variant)
        if not args.quiet_code:
            print(generated_code(sdfg))
        programs[sdfg.name] = sdfg.compile()

    openblas = openblas_matmul()

    n = args.size
    rng = np.random.default_rng(0)
    A = rng.random((n, n), dtype=np.float32)
    B = rng.random((n, n), dtype=np.float32)
    C = np.zeros((n, n), dtype=np.float32)
    reference = A @ B
    flops = 2.0 * n ** 3

    programs["tiled_gemm"](A=A, B=B, C=C, M=n, N=n, K=n)
    result = programs["matmul"](A=A, B=B, M=n, N=n, K=n)
    for name, value in (("tiled_gemm", C), ("matmul", result)):
        np.testing.assert_allclose(value, reference, rtol=1e-3, atol=1e-3 * n)
        print(f"{name}: matches NumPy (max abs error {float(np.abs(value - reference).max()):.2e})")

    timings = {
        "tiled_gemm (AI microkernel)": best_time(lambda: programs["tiled_gemm"](A=A, B=B, C=C, M=n, N=n, K=n),
                                                 args.repeat),
        "matmul (A @ B, Gemm via 'ai')": best_time(lambda: programs["matmul"](A=A, B=B, M=n, N=n, K=n),
                                                   args.repeat),
        "NumPy A @ B": best_time(lambda: A @ B, args.repeat),
    }
    if openblas is not None:
        np.testing.assert_allclose(openblas(A=A, B=B, M=n, N=n, K=n), reference, rtol=1e-3, atol=1e-3 * n)
        timings[OPENBLAS] = best_time(lambda: openblas(A=A, B=B, M=n, N=n, K=n), args.repeat)
    print(f"\nTimes for {n}x{n} float32 (best of {args.repeat}):")
    for name, seconds in timings.items():
        print(f"  {name:32s} {seconds * 1e3:9.2f} ms  {flops / seconds / 1e9:7.1f} GFLOP/s")
    print()
    for line in against_baselines(timings["matmul (A @ B, Gemm via 'ai')"], timings):
        print(line)
    return 0


OPENBLAS = "A @ B, DaCe 'OpenBLAS'"


def openblas_matmul():
    """``matmul`` built with DaCe's own OpenBLAS implementation when its environment is installed, else None."""
    from dace.libraries import blas
    from dace_ai.checking.baselines import node_baselines

    available = {b.implementation for b in node_baselines(blas.Gemm("probe")).available}
    if "OpenBLAS" not in available:
        print("\n(DaCe's OpenBLAS implementation is not installed here: no comparison with it; on Debian "
              "apt-get install libopenblas-dev liblapacke-dev)")
        return None
    previous, blas.default_implementation = blas.default_implementation, "OpenBLAS"
    try:
        sdfg = matmul.to_sdfg()
        sdfg.name = "matmul_openblas"
        return sdfg.compile()
    finally:
        blas.default_implementation = previous


def against_baselines(ai_seconds: float, timings: dict) -> list:
    """The 'ai' A @ B against NumPy and DaCe's OpenBLAS, each figure naming its baseline; says when it is slower."""
    lines = []
    for name, label in (("NumPy A @ B", "NumPy"), (OPENBLAS, "OpenBLAS (DaCe 'OpenBLAS')")):
        if name not in timings:
            continue
        ratio = timings[name] / ai_seconds
        verdict = "" if ratio >= 1 else f"  <- the shipped answer is slower than {label}"
        lines.append(f"A @ B via 'ai': {ratio:.2f}x vs {label}{verdict}")
    return lines


if __name__ == "__main__":
    sys.exit(main())
