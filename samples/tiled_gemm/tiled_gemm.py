"""Offline demo: a tiled matrix multiply whose tile kernel is written by a model, ``A @ B`` through the
reserved 'ai' implementation, and a fused dense layer ``max(A @ B + bias, 0)`` -- replaying answers
shipped with this sample, and timing each against NumPy and DaCe's OpenBLAS implementation.

Run from anywhere (no provider, no key, no network)::

    python samples/tiled_gemm/tiled_gemm.py

What happens:

1. Three programs are built, with one generated node each:

   * ``tiled_gemm``: a parallel map over the 256x256 tiles of C whose body is ``dace_ai.ai(...)``,
     node ``gemm_tile``: the tile's product over the whole K, which the description asks to block
     over K, pack into buffers local to the call and run through a register-blocked vector FMA
     microkernel. The program's subsets make M and N multiples of 256; K is any size.
   * ``matmul``: ``A @ B`` with ``dace.libraries.blas.default_implementation = 'ai'``, so its Gemm
     (node ``_MatMult_gemm``) goes to dace-ai.
   * ``dense_relu``: ``max(A @ B + bias, 0)`` with a small K as one node, ``dense_relu``, whose
     description asks for the bias and the activation inside the register tile, so the output is
     written once (NumPy runs a matrix product, an add and a maximum: three passes over it; DaCe's
     OpenBLAS implementation runs the Gemm and then its own maps).

2. The prompts are written with the built-in ``manual`` provider's file exchange
   (``dace_ai.generate_prompts``), exactly as a user without API access would.
3. The demo then plays the person answering them: it copies the answers shipped in
   ``answers/<variant>/<node>.json`` to the response paths the prompt files name, and
   ``dace_ai.read_prompt_responses`` expands the nodes through every default check (compile,
   verify against the node's reference on the size ladder with NaN-poisoned outputs, sanitizers,
   bench) and prints each node's verification level.
4. It prints the generated code, compiles, checks every program against NumPy and prints, for each
   node, its time and GFLOP/s beside NumPy's and DaCe's OpenBLAS implementation's on the same
   inputs (interleaved rounds, best of ``--repeat``), and the ratios; ``bench/demo_speed.py`` runs
   more rounds and prints best and median ratios.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import dace
import dace_ai
import numpy as np
from dace_ai.performance import describe_speed_of_light
from dace_ai.plugin import Detection, Target, hookimpl
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.runtime_check.cpp import ident_of
from dace_ai.runtime_check.instrument import strip
from dace_ai.targets.host import cpu_facts

HERE = Path(__file__).resolve().parent
M, N, K = (dace.symbol(s) for s in "MNK")
TILE = 256  #: rows and columns of C per iteration of tiled_gemm's map

GEMM_TILE = (
    f"Tile kernel of a tiled single-precision matrix multiply: write the {TILE}x{TILE} tile "
    f"_out[r][c] = sum over k < K of _a[r][k] * _b[k][c] (r, c < {TILE}). _a is the tile's {TILE} rows of A "
    f"({TILE} x K), _b its {TILE} columns of B (K x {TILE}); K can be any size. Block K; per block copy the "
    "parts of _a and _b into buffers local to the call, laid out so that the inner loop reads them "
    "contiguously, and run a register-blocked microkernel over them with the target's vector FMA "
    "intrinsics (elements of _a broadcast, rows of _b loaded as vectors, the accumulators in registers). "
    "The map over tiles runs in parallel: keep everything local to the call."
)

DENSE_RELU = (
    "Fused dense layer: write _out[i][j] = max(sum over k < K of _a[i][k] * _b[k][j] + _bias[j], 0) "
    "for i < M, j < N (ReLU of the matrix product plus a bias broadcast over the rows). K is small (tens), "
    "so the traffic of _out dominates: compute each register tile of _out starting from the bias, apply "
    "the max in registers and store each element once; never make a second pass over _out. Use the "
    "target's vector FMA intrinsics and OpenMP over blocks of the output. Any M, N, K >= 0."
)


def gemm_tile_reference(a, b):
    """What the tile kernel means, in NumPy: the verify stage compares the answer with it."""
    return a @ b


def dense_relu_reference(a, b, bias):
    """What the fused dense layer means, in NumPy."""
    return np.maximum(a @ b + bias, 0)


@dace.program
def tiled_gemm(A: dace.float32[M, K], B: dace.float32[K, N], C: dace.float32[M, N]):
    for i, j in dace.map[0:M:TILE, 0:N:TILE]:
        C[i : i + TILE, j : j + TILE] = dace_ai.ai(
            GEMM_TILE,
            a=A[i : i + TILE, :],
            b=B[:, j : j + TILE],
            shape=(TILE, TILE),
            name="gemm_tile",
            reference=gemm_tile_reference,
        )


@dace.program
def matmul(A: dace.float32[M, K], B: dace.float32[K, N]):
    return A @ B


@dace.program
def dense_relu(A: dace.float32[M, K], B: dace.float32[K, N], bias: dace.float32[N], C: dace.float32[M, N]):
    dace_ai.ai(DENSE_RELU, a=A, b=B, bias=bias, out=C, name="dense_relu", reference=dense_relu_reference)


@dace.program
def dense_relu_unfused(A: dace.float32[M, K], B: dace.float32[K, N], bias: dace.float32[N], C: dace.float32[M, N]):
    C[:] = np.maximum(A @ B + bias, 0)


VARIANTS = {
    "avx2": (
        "x86-64 CPU with AVX2 and FMA (no AVX-512): 16 vector registers of 256 bits "
        "(8 floats each); two FMA units. Use <immintrin.h> _mm256_* intrinsics.",
        ("-O3", "-mavx2", "-mfma"),
    ),
    "avx512": (
        "x86-64 CPU with AVX-512F: 32 vector registers of 512 bits (16 floats each). "
        "Use <immintrin.h> _mm512_* intrinsics.",
        ("-O3", "-mavx512f", "-mfma"),
    ),
}


#: What each variant's answers need of the CPU (the checks run them only where it has these).
CPU_FEATURES = {"avx2": ("avx2", "fma"), "avx512": ("avx512f", "avx512bw", "avx512dq", "avx512vl")}


class DemoTargets:
    """Machine-independent targets for this demo, so the prompts do not vary between machines."""

    @hookimpl
    def dace_ai_targets(self):
        for variant, (text, flags) in VARIANTS.items():
            yield Target(
                name=f"demo-x86-{variant}",
                kind="cpu",
                priority=-100,
                detect=lambda: Detection(False, "selected by the tiled_gemm demo only"),
                describe=lambda detection, text=text: text,
                compiler=("g++",),
                flags=flags,
                guidance="Write fast, correct code; use unaligned loads and stores.",
                description=f"tiled_gemm demo target ({variant})",
                cpu_features=CPU_FEATURES[variant],
            )


def variant_for_this_cpu() -> str:
    return "avx512" if "avx512f" in cpu_facts()["flags"] else "avx2"


def setup(variant: str) -> None:
    """Pin the demo's target and the manual provider; route BLAS nodes to dace-ai."""
    if not _REGISTERED:
        get_plugin_manager().register(DemoTargets(), "tiled-gemm-demo")
        _REGISTERED.append(True)
    dace.Config.set("ai", "provider", value="manual")
    dace.Config.set("ai", "target", value=f"demo-x86-{variant}")
    from dace.libraries import blas

    blas.default_implementation = "ai"


_REGISTERED: list = []


def tiled_gemm_sdfg() -> dace.SDFG:
    """``tiled_gemm`` with its map over tiles collapsed and handed out dynamically (tiles are equal work,
    but a core shared with another process finishes fewer of them)."""
    sdfg = tiled_gemm.to_sdfg()
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.MapEntry):
            node.map.collapse = len(node.map.params)
            node.map.omp_schedule = dace.dtypes.OMPScheduleType.Dynamic
    return sdfg


def replay_answers(sdfg: dace.SDFG, prompt_dir: Path, variant: str) -> dict:
    """Answer this machine's prompt files with the shipped answers, then expand the nodes; their levels."""
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
    return dict(report.verification)


def generated_code(sdfg: dace.SDFG) -> str:
    parts = []
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.Tasklet) and "// dace-ai:" in node.code.as_string:
            checked = " (and the run-time check's two lines)" if ident_of(node.code.as_string) else ""
            parts.append(
                f"--- tasklet {node.label}: code_global ---\n{strip(node.code_global.as_string).strip()}\n"
                f"--- tasklet {node.label}: code{checked} ---\n{strip(node.code.as_string).strip()}\n"
            )
    return "\n".join(parts)


def build_programs(variant: str, prompt_dir: Path, show_code: bool = True) -> tuple[dict, dict]:
    """Replay the answers into the three programs and compile them: (compiled programs, levels per node)."""
    programs, levels = {}, {}
    for name, make in (("tiled_gemm", tiled_gemm_sdfg), ("matmul", matmul.to_sdfg), ("dense_relu", dense_relu.to_sdfg)):
        sdfg = make()
        print(f"\n[{sdfg.name}]")
        levels.update(replay_answers(sdfg, prompt_dir, variant))
        if show_code:
            print(generated_code(sdfg))
        programs[name] = sdfg.compile()
    return programs, levels


OPENBLAS_LABEL = "DaCe 'OpenBLAS'"


def openblas_programs() -> dict:
    """``matmul`` and ``dense_relu_unfused`` built with DaCe's own OpenBLAS implementation when its
    environment is installed here, else an empty dict."""
    from dace.libraries import blas
    from dace_ai.sandbox.baselines import node_baselines

    available = {b.implementation for b in node_baselines(blas.Gemm("probe")).available}
    if "OpenBLAS" not in available:
        print(
            "\n(DaCe's OpenBLAS implementation is not installed here: no comparison with it; on Debian "
            "apt-get install libopenblas-dev liblapacke-dev)"
        )
        return {}
    previous, blas.default_implementation = blas.default_implementation, "OpenBLAS"
    try:
        built = {}
        for name, program in (("matmul", matmul), ("dense_relu", dense_relu_unfused)):
            sdfg = program.to_sdfg()
            sdfg.name = f"{name}_openblas"
            built[name] = sdfg.compile()
        return built
    except Exception as exc:  # noqa: BLE001 - a baseline that does not build is left out, with the reason
        first = next((line for line in str(exc).splitlines() if "Could NOT find" in line or "error" in line), "")
        print(f"\n(DaCe's OpenBLAS implementation did not build here: no comparison with it. {first.strip()})")
        return {}
    finally:
        blas.default_implementation = previous


@dataclass
class Comparison:
    """One generated node, timed beside its baselines on the same inputs."""

    node: str  #: the generated node
    program: str  #: what runs it
    sizes: str
    flops: float
    nbytes: float  #: bytes every side must at least read and write once (for a speed-of-light figure)
    sides: dict[str, Callable[[], object]] = field(default_factory=dict)  #: label -> call; the node's side first
    seconds: dict[str, list] = field(default_factory=dict)


def comparisons(programs: dict, openblas: dict, size: int, dense: tuple[int, int, int]) -> list[Comparison]:
    """The demo's three nodes with their inputs, checked against NumPy, and their baselines."""
    rng = np.random.default_rng(0)
    n = size
    A = rng.random((n, n), dtype=np.float32) - 0.5
    B = rng.random((n, n), dtype=np.float32) - 0.5
    C = np.zeros((n, n), dtype=np.float32)
    reference = A @ B
    programs["tiled_gemm"](A=A, B=B, C=C, M=n, N=n, K=n)
    check("tiled_gemm", C, reference, n)
    check("matmul", programs["matmul"](A=A, B=B, M=n, N=n, K=n), reference, n)

    dm, dn, dk = dense
    DA = rng.random((dm, dk), dtype=np.float32) - 0.5
    DB = rng.random((dk, dn), dtype=np.float32) - 0.5
    bias = rng.random(dn, dtype=np.float32) - 0.5
    DC = np.zeros((dm, dn), dtype=np.float32)
    NC = np.zeros((dm, dn), dtype=np.float32)
    programs["dense_relu"](A=DA, B=DB, bias=bias, C=DC, M=dm, N=dn, K=dk)
    check("dense_relu", DC, dense_relu_reference(DA, DB, bias), dk)

    def numpy_dense_relu():  # NumPy's best: no temporaries, the matrix product, an add and a maximum in place
        np.matmul(DA, DB, out=NC)
        np.add(NC, bias, out=NC)
        return np.maximum(NC, 0, out=NC)

    gemm_flops, gemm_bytes = 2.0 * n**3, 4.0 * 3 * n * n
    result = [
        Comparison(
            "gemm_tile",
            "tiled_gemm (map over 256x256 tiles)",
            f"{n}x{n}x{n}",
            gemm_flops,
            gemm_bytes,
            {"gemm_tile": lambda: programs["tiled_gemm"](A=A, B=B, C=C, M=n, N=n, K=n)},
        ),
        Comparison(
            "_MatMult_gemm",
            "matmul (A @ B, Gemm via 'ai')",
            f"{n}x{n}x{n}",
            gemm_flops,
            gemm_bytes,
            {"_MatMult_gemm": lambda: programs["matmul"](A=A, B=B, M=n, N=n, K=n)},
        ),
        Comparison(
            "dense_relu",
            "dense_relu (max(A @ B + bias, 0), fused)",
            f"{dm}x{dn}x{dk}",
            2.0 * dm * dn * dk,
            4.0 * (dm * dk + dk * dn + dn + dm * dn),
            {"dense_relu": lambda: programs["dense_relu"](A=DA, B=DB, bias=bias, C=DC, M=dm, N=dn, K=dk)},
        ),
    ]
    for comparison in result[:2]:
        comparison.sides["NumPy"] = lambda: A @ B
    result[2].sides["NumPy"] = numpy_dense_relu
    if openblas:
        check(OPENBLAS_LABEL, openblas["matmul"](A=A, B=B, M=n, N=n, K=n), reference, n)
        DO = np.zeros((dm, dn), dtype=np.float32)
        openblas["dense_relu"](A=DA, B=DB, bias=bias, C=DO, M=dm, N=dn, K=dk)
        check(f"dense_relu, {OPENBLAS_LABEL}", DO, dense_relu_reference(DA, DB, bias), dk)
        for comparison in result[:2]:
            comparison.sides[OPENBLAS_LABEL] = lambda: openblas["matmul"](A=A, B=B, M=n, N=n, K=n)
        result[2].sides[OPENBLAS_LABEL] = lambda: openblas["dense_relu"](A=DA, B=DB, bias=bias, C=DO, M=dm, N=dn, K=dk)
    return result


def check(name: str, value, reference, depth: int) -> None:
    np.testing.assert_allclose(value, reference, rtol=1e-3, atol=1e-5 * depth)
    print(f"{name}: matches NumPy (max abs error {float(np.abs(value - reference).max()):.2e})")


#: Pause before each timed call: worker threads of the side timed before (OpenBLAS's keep spinning for a
#: while after a call, OpenMP's briefly) go idle instead of competing with the next side for the cores.
PAUSE = 0.1


def time_side_by_side(comparison: Comparison, rounds: int, pause: float = PAUSE) -> None:
    """Every side once per round, in turn (after one warm-up call each), so that a busy moment of the
    machine falls on all of them; the seconds of every round are kept."""
    for call in comparison.sides.values():
        call()
    comparison.seconds = {label: [] for label in comparison.sides}
    for _ in range(rounds):
        for label, call in comparison.sides.items():
            time.sleep(pause)
            start = time.perf_counter()
            call()
            comparison.seconds[label].append(time.perf_counter() - start)


def speed_of_light(comparison: Comparison, seconds: float) -> dict | None:
    """The node's figure against this machine's roofline (its ``flops`` and ``nbytes`` at ``seconds`` per call).

    The roofline is the one the bench stage measured while checking the answers (stored
    under the build root, so nothing is measured again here); None where it cannot be
    measured on this machine, and the report then says so."""
    from dace_ai.performance import machine_roofline
    from dace_ai.performance.measure import RooflineError
    from dace_ai.performance.speed_of_light import from_roofline
    from dace_ai.performance.store import all_threads

    try:
        roofline = machine_roofline()
    except RooflineError:
        return None
    figure, _level = from_roofline(roofline, comparison.flops, comparison.nbytes, seconds, "float32", all_threads())
    return figure


def report(comparison: Comparison, pick: Callable[[list], float] = min) -> list:
    """Lines for one node: each side's time and GFLOP/s, then the node against each baseline as ratios."""
    own = comparison.node
    best = {label: pick(values) for label, values in comparison.seconds.items()}
    lines = [
        f"{comparison.node} -- {comparison.program}, {comparison.sizes} float32, {comparison.flops / 1e9:.2f} GFLOP:"
    ]
    for label, seconds in best.items():
        lines.append(f"  {label:18s} {seconds * 1e3:9.3f} ms  {comparison.flops / seconds / 1e9:7.1f} GFLOP/s")
    for label, seconds in best.items():
        if label == own:
            continue
        ratio = seconds / best[own]
        verdict = "" if ratio >= 1 else f"  <- the shipped answer is slower than {label}"
        lines.append(f"  {own}: {ratio:.2f}x vs {label}{verdict}")
    figure = speed_of_light(comparison, best[own])
    sol = describe_speed_of_light(figure) if figure else "no roofline of this machine (speed of light unknown)"
    lines.append(f"  {own}: {sol}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--size", type=int, default=1024, help=f"M = N = K of the matrix products (a multiple of {TILE})"
    )
    parser.add_argument("--dense", default="2048,2048,64", help="M,N,K of the fused dense layer (default 2048,2048,64)")
    parser.add_argument("--repeat", type=int, default=11, help="timed rounds; every side runs once per round")
    parser.add_argument(
        "--variant",
        choices=sorted(VARIANTS),
        default=None,
        help="answers to replay (default: avx512 if the CPU has avx512f, else avx2)",
    )
    parser.add_argument("--quiet-code", action="store_true", help="do not print the generated code")
    args = parser.parse_args(argv)
    if args.size <= 0 or args.size % TILE:
        parser.error(f"--size must be a positive multiple of {TILE}")
    try:
        dense = tuple(int(v) for v in args.dense.split(","))
        assert len(dense) == 3 and min(dense) > 0
    except (ValueError, AssertionError):
        parser.error("--dense takes three positive integers M,N,K")

    variant = args.variant or variant_for_this_cpu()
    print(
        f"dace-ai offline demo: replaying the answers shipped in {HERE / 'answers' / variant} "
        f"(provider 'manual'; no model is called)"
    )
    setup(variant)
    prompt_dir = Path(tempfile.mkdtemp(prefix="dace-ai-demo-prompts-"))
    programs, _ = build_programs(variant, prompt_dir, show_code=not args.quiet_code)
    openblas = openblas_programs()

    print()
    nodes = comparisons(programs, openblas, args.size, dense)
    print("\nRun-time checks inside the programs' own first calls (runtime_check=first):")
    for done in dace_ai.runtime_checks():
        print(f"  {done}")
    print(
        f"\nEach node beside NumPy and {OPENBLAS_LABEL} on the same inputs "
        f"(best of {args.repeat} interleaved rounds, {PAUSE} s pause before each call):"
    )
    for comparison in nodes:
        time_side_by_side(comparison, args.repeat)
        print("\n".join(report(comparison)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
