"""The size ladder and the wrong answers it exists to stop.

Each answer below is written the way models get kernels wrong: right at the small
odd sizes, wrong at a vector multiple, past the first tile, away from the first
point of a map, or on a strided view. Every one is refused with a message naming
the size (its rung) or the map point, for library nodes expanded with ``'ai'`` and
for ``dace_ai.ai(..., reference=fn)`` nodes, with ``bench=off`` and with the
default stages; the correct answers of the same shapes are kept. The first part
checks the ladder itself without compiling anything.
"""

import json
import math

import dace
import dace_ai
import numpy as np
import pytest
from dace.libraries import blas
from dace_ai.checking.api import CheckRequest
from dace_ai.checking.stages import check_workdir, run_checks
from dace_ai.config.settings import resolve_settings
from dace_ai.errors import NativeFallbackWarning
from dace_ai.expansion.expansion_pass import node_context
from dace_ai.expansion.pending import pending_nodes
from dace_ai.prompt.answer import Answer
from dace_ai.sandbox.cases import size_cases
from dace_ai.sandbox.harness import run_against_reference
from dace_ai.sandbox.ladder import (
    WORK_BUDGET,
    SkippedSize,
    bench_sizes,
    build_ladder,
    vector_bytes,
    vector_unit,
)
from dace_ai.targets.select import TargetInfo

from tests.check_support import link_shared_artefacts
from tests.dace_versions import DACE2, only_dace1

N, M, K, L = (dace.symbol(s) for s in "NMKL")


# ----------------------------------------------------------------------------- programs
def total(a):
    return np.sum(a)


def row_total(a):
    return np.sum(a)


def column_sums(a):
    return a.sum(axis=0)


def neighbour(a):
    return a


@dace.program
def ladder_matmul(A: dace.float64[N, K], B: dace.float64[K, M], C: dace.float64[N, M]):
    C[:] = A @ B


@dace.program
def ladder_sum(A: dace.float64[N]):
    return dace_ai.ai("The sum of the N elements of _a.", a=A, reference=total, shape=[1])


@dace.program
def ladder_rows(A: dace.float64[M, N], B: dace.float64[M]):
    for i in dace.map[0:M]:
        B[i] = dace_ai.ai("The sum of the N elements of the row _a.", a=A[i, :], reference=row_total, shape=[1])


@dace.program
def ladder_columns(A: dace.float64[M, L], B: dace.float64[K]):
    B[:] = dace_ai.ai("The sums of the K columns of _a.", a=A[:, 0:K], reference=column_sums, shape=[K])


@dace.program
def ladder_shifted(A: dace.float64[N], B: dace.float64[N]):
    for i in dace.map[0:N]:
        B[i] = dace_ai.ai("Copy the element.", A[i + 1], reference=neighbour, shape=[1])


def tile_product(a, b):
    return a @ b


def increment(a):
    return a + 1


@dace.program
def ladder_tiles(A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]):
    for j, i in dace.map[0:N:16, 0:M:8]:
        C[i : i + 8, j : j + 16] = dace_ai.ai(
            "An 8x16 tile of A @ B.", a=A[i : i + 8, :], b=B[:, j : j + 16], shape=(8, 16), reference=tile_product
        )


@dace.program
def ladder_loop(A: dace.float64[L, N]):
    for t in range(1, L, 2):
        A[t] = dace_ai.ai("Add one to every element of _a.", a=A[t - 1], reference=increment)


def ladder_row_dots() -> dace.SDFG:
    """``y[i] = dot(A[i, :], x)`` for every row: a BLAS Dot inside a map (the frontend would nest it)."""
    sdfg = dace.SDFG("ladder_row_dots")
    sdfg.add_array("A", ["M", "N"], dace.float64)
    sdfg.add_array("x", ["N"], dace.float64)
    sdfg.add_array("y", ["M"], dace.float64)
    state = sdfg.add_state()
    entry, exit_ = state.add_map("rows", {"i": "0:M"})
    dot = blas.Dot("dot")
    A, x, y = state.add_read("A"), state.add_read("x"), state.add_write("y")
    state.add_memlet_path(A, entry, dot, dst_conn="_x", memlet=dace.Memlet("A[i, 0:N]"))
    state.add_memlet_path(x, entry, dot, dst_conn="_y", memlet=dace.Memlet("x[0:N]"))
    state.add_memlet_path(dot, exit_, y, src_conn="_result", memlet=dace.Memlet("y[i]"))
    return sdfg


def _sdfg(program) -> dace.SDFG:
    return program() if callable(program) and not hasattr(program, "to_sdfg") else program.to_sdfg()


def request(program, code: str = "/* not run */;", **settings) -> CheckRequest:
    """A check request for the program's one pending node ('ai' on library nodes) and ``code``."""
    sdfg = _sdfg(program)
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.LibraryNode) and type(node).__name__ != "AINode":
            node.implementation = "ai"
    settings = resolve_settings(settings)
    ((parent, state, node),) = pending_nodes(sdfg)
    ctx = node_context(parent, state, node, settings)
    answer = Answer(code=code)
    return CheckRequest(answer, ctx, settings, check_workdir(ctx, answer))


# ----------------------------------------------------------------------------- the ladder itself
def test_vector_node_climbs_small_odd_vector_multi_tile_and_bench_sizes():
    ladder = build_ladder(request(ladder_sum))
    assert [(r.name, r.sizes["N"], len(r.seeds)) for r in ladder.rungs] == [
        ("small", 13, 3),
        ("odd", 67, 3),
        ("vector", 64, 2),
        ("multi-tile", 520, 1),
        ("bench", 65536, 1),
    ]
    assert not ladder.skipped
    assert size_cases(request(ladder_sum)) == [{"N": 13}, {"N": 67}, {"N": 64}, {"N": 520}, {"N": 65536}]
    assert size_cases(request(ladder_sum), bench_sizes="N=1000")[-1] == {"N": 1000}


def test_matrix_product_is_beyond_its_tiles_in_every_dimension_within_the_work_budget():
    ladder = build_ladder(request(ladder_matmul))
    names = ["K", "M", "N"]
    assert [r.name for r in ladder.rungs] == [
        "small",
        "odd",
        "vector",
        "multi-tile",
        "multi-tile",
        "multi-tile",
        "bench",
    ]
    small, odd, vector = (ladder.rungs[i].sizes for i in range(3))
    assert all(v % 2 for v in [*small.values(), *odd.values()]) and len(set(small.values())) == 3
    assert all(v % 64 == 0 for v in vector.values()) and len(set(vector.values())) == 3
    tiles = [r for r in ladder.rungs if r.name == "multi-tile"]
    for name, rung in zip(names, tiles):  # one dimension at a time: all three at once is over budget
        assert rung.sizes[name] > 512 and math.prod(rung.sizes.values()) <= WORK_BUDGET
        assert "would need" in rung.note and "budget" in rung.note
    assert ladder.rungs[-1].sizes == {"K": 256, "M": 256, "N": 256}


@pytest.mark.parametrize(
    "name, flags, kind, element, unit",
    [
        ("x86-avx512", ("-O3", "-march=x86-64-v4"), "cpu", 8, 64),
        ("x86-avx2", ("-O3", "-march=x86-64-v3"), "cpu", 4, 64),
        ("sve", ("-march=armv8-a+sve",), "cpu", 8, 64),
        ("sve", ("-march=armv8-a+sve",), "cpu", 1, 256),  # 2048-bit vectors of bytes
        ("cuda", (), "gpu", 4, 64),
    ],
    ids=["avx512-double", "avx2-float", "sve-double", "sve-byte", "gpu-float"],
)
def test_vector_multiple_covers_every_vector_width_and_line_of_the_target(name, flags, kind, element, unit):
    target = TargetInfo(name=name, kind=kind, description="", flags=flags)
    assert vector_unit(target, [element]) == unit
    assert unit * element % vector_bytes(target) == 0 and unit * element % 64 == 0


def test_column_slice_sizes_keep_the_view_inside_its_array():
    ladder = build_ladder(request(ladder_columns))
    assert len(ladder.rungs) == 5 and not ladder.skipped
    assert all(r.sizes["L"] >= r.sizes["K"] for r in ladder.rungs)  # A[:, 0:K] of an M x L array
    assert ladder.rungs[0].sizes["L"] > ladder.rungs[0].sizes["K"]  # raised past K: the view stays strided
    assert "L raised from 11 to 15" in ladder.rungs[0].note and "A[0:M, 0:K]" in ladder.rungs[0].note
    given = build_ladder(request(ladder_columns), [{"K": 13, "L": 11}, {"K": 100}])
    assert [r.sizes for r in given.rungs] == [{"K": 100, "L": 100, "M": 71}]  # the free L follows K...
    (skipped,) = given.skipped  # ... but a pair the user gave cannot be changed
    assert isinstance(skipped, SkippedSize) and skipped.sizes["L"] == 11 and skipped.rung == "given"
    assert "A[0:M, 0:K] reaches past dimension 1 of A (M x L)" in skipped.reason


def test_map_is_checked_at_its_first_last_and_points_between():
    ladder = build_ladder(request(ladder_rows))
    small = ladder.rungs[0]
    assert small.sizes == {"M": 13, "N": 11} and small.points == ({"i": 0}, {"i": 4}, {"i": 8}, {"i": 12})
    cases = [c for c in ladder.cases() if c.rung == "small"]
    assert [(c.seed, c.point["i"]) for c in cases] == [(0, 0), (1, 4), (2, 8), (0, 12)]
    assert cases[1].point_words == "map point i=4"
    assert all(r.points[-1]["i"] == r.sizes["M"] - 1 for r in ladder.rungs)  # every rung reaches the last row


def test_stepped_map_over_tiles_gets_sizes_its_tiles_fit():
    """A map ``0:M:8`` over ``A[i:i + 8]`` fits only multiples of 8: sizes are raised to the next one."""
    ladder = build_ladder(request(ladder_tiles))
    assert not ladder.skipped
    assert all(r.sizes["M"] % 8 == 0 and r.sizes["N"] % 16 == 0 for r in ladder.rungs)
    small = ladder.rungs[0]
    assert small.sizes == {"K": 13, "M": 16, "N": 32} and small.points == ({"j": 0, "i": 0}, {"j": 16, "i": 8})
    assert "M raised from 11 to 16" in small.note and "A[i:i + 8, 0:K] reaches past dimension 0 of A" in small.note


def test_loop_is_checked_at_points_of_its_range():
    ladder = build_ladder(request(ladder_loop))
    small = ladder.rungs[0]
    assert small.sizes == {"L": 13, "N": 11} and small.points == ({"t": 1}, {"t": 3}, {"t": 7}, {"t": 11})
    assert [c.point_words for c in ladder.cases()][:2] == ["loop point t=1", "loop point t=3"]


@only_dace1(
    "the frontend copies A[i + 1] into a transient scalar inside the map, so the node's own connector "
    "never reaches outside its container"
)
def test_sizes_the_program_never_allows_are_skipped_and_said(tmp_path):
    req = request(ladder_shifted)
    ladder = build_ladder(req)
    assert not ladder.rungs and len(ladder.skipped) == 5
    assert all("A[i + 1] reaches past dimension 0 of A (N)" in s.reason for s in ladder.skipped)
    result = run_against_reference(req)  # decided before anything is compiled
    assert result.status == "inconclusive" and result.reason == "sizes"
    assert "allows none of the sizes tried" in result.message and "the small odd size N=13" in result.message


def test_bench_sizes_are_the_ladders_bench_rung_repaired_like_every_rung():
    req = request(ladder_columns)
    assert bench_sizes(req) == {"K": 256, "L": 256, "M": 256} == build_ladder(req).rungs[-1].sizes
    assert bench_sizes(req, "K=4096") == {"K": 4096, "L": 4096, "M": 256}  # L >= K follows the given K
    with pytest.raises(ValueError, match="reaches past dimension 1 of A"):
        bench_sizes(req, {"K": 300, "L": 200})


def test_verify_sizes_still_override_the_ladder():
    ladder = build_ladder(request(ladder_sum), {"N": [5, 9]}, seeds=2)
    assert [(r.name, r.sizes, r.seeds) for r in ladder.rungs] == [
        ("given", {"N": 5}, (0, 1)),
        ("given", {"N": 9}, (0, 1)),
    ]


# ----------------------------------------------------------------------------- wrong answers
MATMUL = (
    "for (int i = 0; i < N; ++i) for (int j = 0; j < M; ++j) { double acc = 0;"
    " for (int k = 0; k < K; ++k) acc += _a[i * K + k] * _b[k * M + j]; _c[i * M + j] = acc; }"
)
#: Four columns per step; the main loop stops one vector early (j + 4 < M), which the tail loop
#: (from M - M % 4) only makes up for when M is not a multiple of 4: right at 13 and 67, wrong at 64.
MATMUL_TAIL = (
    "for (int i = 0; i < N; ++i) { int j = 0;"
    " for (; j + 4 < M; j += 4) for (int v = 0; v < 4; ++v) { double acc = 0;"
    "   for (int k = 0; k < K; ++k) acc += _a[i * K + k] * _b[k * M + j + v]; _c[i * M + j + v] = acc; }"
    " for (j = M - M % 4; j < M; ++j) { double acc = 0;"
    "   for (int k = 0; k < K; ++k) acc += _a[i * K + k] * _b[k * M + j]; _c[i * M + j] = acc; } }"
)
#: The reduction covers only its first tile of 128.
MATMUL_FIRST_TILE = MATMUL.replace("k < K;", "k < (K < 128 ? K : 128);")
DOT = "double s = 0; for (int k = 0; k < N; ++k) s += _x[k] * _y[k]; _result = s;"
#: Indexes the row as if _x pointed at A itself: right only at the map's first point (i = 0).
DOT_POINT = "double s = 0; for (int k = 0; k < N; ++k) s += _x[i * N + k] * _y[k]; _result = s;"
SUM = "double s = 0; for (int i = 0; i < N; ++i) s += _a[i]; _out = s;"
SUM_TAIL = (
    "double s0 = 0, s1 = 0, s2 = 0, s3 = 0; int i = 0;"
    " for (; i + 4 < N; i += 4) { s0 += _a[i]; s1 += _a[i + 1]; s2 += _a[i + 2]; s3 += _a[i + 3]; }"
    " double s = s0 + s1 + s2 + s3; for (i = N - N % 4; i < N; ++i) s += _a[i]; _out = s;"
)
SUM_FIRST_TILE = SUM.replace("i < N;", "i < (N < 128 ? N : 128);")
ROW_SUM = "double s = 0; for (int k = 0; k < N; ++k) s += _a[k]; _out = s;"
ROW_SUM_POINT = "double s = 0; for (int k = 0; k < N; ++k) s += _a[i * N + k]; _out = s;"
COLUMNS = "for (int j = 0; j < K; ++j) { double s = 0; for (int r = 0; r < M; ++r) s += _a[r * L + j]; _out[j] = s; }"
#: Treats the column slice as contiguous (row stride K instead of L): right only when L == K.
COLUMNS_CONTIGUOUS = COLUMNS.replace("r * L + j", "r * K + j")

BENCH = {"bench off": {"bench": "off"}, "default stages": {}}

WRONG = [
    (ladder_matmul, MATMUL_TAIL, "(the vector-multiple size)", "K=64, M=128, N=192"),
    (ladder_matmul, MATMUL_FIRST_TILE, "(the multi-tile size)", "K=520"),
    (ladder_row_dots, DOT_POINT, "at map point i=4", "M=13, N=11"),
    (ladder_sum, SUM_TAIL, "(the vector-multiple size)", "N=64"),
    (ladder_sum, SUM_FIRST_TILE, "(the multi-tile size)", "N=520"),
    (ladder_rows, ROW_SUM_POINT, "at map point i=4", "M=13, N=11"),
    (ladder_columns, COLUMNS_CONTIGUOUS, "(the small odd size)", "K=13, L=15, M=17"),
]
RIGHT = [
    (ladder_matmul, MATMUL),
    (ladder_row_dots, DOT),
    (ladder_sum, SUM),
    (ladder_rows, ROW_SUM),
    (ladder_columns, COLUMNS),
]


@pytest.fixture
def shared_root(_isolated_dace_ai, tmp_path_factory, shared_artefacts):
    """One build root for this module: each node's native reference and precompiled header are built once."""
    root = tmp_path_factory.getbasetemp() / "ladder-root"
    link_shared_artefacts(root, shared_artefacts)  # and those of the other workers and modules
    dace.Config.set("default_build_folder", value=str(root))
    return root


@pytest.mark.parametrize("stages", list(BENCH), ids=list(BENCH))
@pytest.mark.parametrize(
    "program, code, rung, sizes",
    WRONG,
    ids=[
        "gemm-tail",
        "gemm-first-tile",
        "dot-map-point",
        "sum-tail",
        "sum-first-tile",
        "rows-map-point",
        "column-slice-contiguous",
    ],
)
def test_wrong_answer_is_refused_naming_the_size_or_map_point(shared_root, program, code, rung, sizes, stages):
    reports = run_checks(request(program, code, **BENCH[stages]))
    (failed,) = [r for r in reports if r.status == "failed"]
    assert failed.checker == "verify", failed.diagnostics
    assert rung in failed.diagnostics and f"sizes {sizes}" in failed.diagnostics, failed.diagnostics
    # DaCe 2 passes a row A[i, :] as a view of its own N elements: reading past it faults at the guard page.
    assert failed.reason in ("mismatch", "unwritten") + (("outside_buffer",) if DACE2 else ())
    assert not [r for r in reports if r.checker == "bench"]  # nothing timed after a refusal


@pytest.mark.parametrize("program, code", RIGHT, ids=["gemm", "dot-in-map", "sum", "rows", "column-slice"])
def test_correct_answers_of_the_same_shapes_are_kept(shared_root, program, code):
    (report,) = run_checks(request(program, code, checkers="verify"))
    assert report.status == "passed", report.diagnostics
    assert not report.details["skipped"]
    assert [r["rung"] for r in report.details["ladder"]][-1] == "bench"
    if program is ladder_columns:  # no false refusal, and never a view outside its array
        assert all(s["L"] >= s["K"] for s in report.sizes)


def test_correct_column_slice_is_kept_with_the_default_stages(shared_root):
    reports = run_checks(request(ladder_columns, COLUMNS))
    assert {r.checker: r.status for r in reports}["verify"] == "passed"
    assert not [r for r in reports if r.status == "failed"], [r.diagnostics for r in reports]


def test_refused_tail_answer_goes_back_to_the_model_then_runs_natively(fake, shared_root):
    """The whole path a user runs: the repair round hears the size, the program falls back with a warning."""
    fake.queue(*[json.dumps({"code": MATMUL_TAIL})] * 2)
    dace.Config.set("ai", "provider", value="scripted")
    dace.Config.set("ai", "max_repair_attempts", value=1)
    try:
        sdfg = ladder_matmul.to_sdfg()
        for node, _ in sdfg.all_nodes_recursive():
            if isinstance(node, dace.nodes.LibraryNode):
                node.implementation = "ai"
        with pytest.warns(NativeFallbackWarning):
            compiled = sdfg.compile()
    finally:
        dace.Config.set("ai", "provider", value="")
        dace.Config.set("ai", "max_repair_attempts", value=2)
    repair = fake.requests[1].messages[-1].content
    assert "(the vector-multiple size)" in repair and "sizes K=64, M=128, N=192" in repair
    A, B, C = np.random.rand(8, 4), np.random.rand(4, 8), np.zeros((8, 8))
    compiled(A=A, B=B, C=C, N=8, M=8, K=4)  # a multiple of 4: where the refused answer was wrong
    np.testing.assert_allclose(C, A @ B)
