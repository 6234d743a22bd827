"""Speed of light: this machine's measured roofline, the work of a node, every bench figure against them.

Real throughout: the roofline microbenchmark is compiled with the build's compiler and flags and run in
a child; NumPy's sgemm and copy are measured in a child of their own; the bench stage times a real
candidate with a real DaCe build of the native reference.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.checking.api import CheckRequest
from dace_ai.checking.stages import check_workdir, run_checks
from dace_ai.config.settings import resolve_settings
from dace_ai.expansion.expansion_pass import node_context
from dace_ai.expansion.pending import pending_nodes
from dace_ai.performance.speed_of_light import KEYS, describe, figure, provenance_field
from dace_ai.performance.work import node_work
from dace_ai.prompt.answer import Answer

M, K, N = (dace.symbol(s) for s in "MKN")

MATMUL = (
    "for (int i = 0; i < M; ++i) for (int j = 0; j < N; ++j) { double acc = 0;"
    " for (int k = 0; k < K; ++k) acc += _a[i * K + k] * _b[k * N + j]; _c[i * N + j] = acc; }"
)

#: NumPy's sgemm and copy on one thread (OpenBLAS's thread count set before it loads; its core type left as
#: the environment says), each the best of several runs by the CPU time of the calling thread, as the
#: roofline is measured: on a machine shared with other work, wall time would measure the neighbours.
NUMPY_FIGURES = textwrap.dedent("""
    import json, sys, time
    import numpy as np

    def best(call, runs):
        times = []
        for _ in range(runs):
            start = time.thread_time()
            call()
            times.append(time.thread_time() - start)
        return min(times)

    n = 1024
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    c = np.empty_like(a)
    np.matmul(a, b, out=c)
    sgemm = 2 * n ** 3 / best(lambda: np.matmul(a, b, out=c), 9) / 1e9
    elements = int(sys.argv[1]) // 16  # source and destination together: the roofline's memory working set
    src = np.ones(elements)
    dst = np.zeros_like(src)
    np.copyto(dst, src)
    copy = 2 * src.nbytes / best(lambda: np.copyto(dst, src), 7) / 1e9
    print(json.dumps({"sgemm_gflops": sgemm, "copy_gbs": copy}))
""")


def _roofline_json(capsys) -> dict:
    from dace_ai.cli.main import main

    assert main(["targets", "--roofline", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.own_builds
def test_the_roofline_is_measured_once_and_numpy_stays_under_it(capsys, _isolated_dace_ai):
    from dace_ai.performance import store
    from dace_ai.sandbox.run_plan import all_cores

    store.clear_memo()
    report = _roofline_json(capsys)
    assert set(report["peak_gflops"]) >= {"float32", "float64"} and report["threads"] == all_cores()
    assert all(isinstance(v, float) and v > 0 for v in report["peak_gflops"].values())
    assert isinstance(report["bandwidth_gbs"], float) and report["bandwidth_gbs"] > 0
    assert report["peak_gflops"]["float32"] > report["peak_gflops"]["float64"]
    assert report["seconds"] < 60 and report["measured_at"].endswith("Z")
    stored = _isolated_dace_ai / "ai-roofline" / f"{report['key']}.json"
    assert report["stored"] == str(stored.resolve()) and stored.is_file()
    # The CPU target chosen here gives its vendor's peaks, if it declares any (the x86 pack: nominal ones).
    from dace_ai.targets.select import resolve_target

    target, detection, _ = resolve_target(resolve_settings(), kind="cpu")
    peaks = target.resolved_peaks(detection)
    assert report["vendor"] == (
        {
            target.name: {
                "peak_gflops": dict(peaks.peak_gflops),
                "bandwidth_gbs": peaks.bandwidth_gbs,
                "threads": peaks.threads,
                "source": peaks.source,
            }
        }
        if peaks
        else {}
    )
    store.clear_memo()
    assert _roofline_json(capsys)["measured_at"] == report["measured_at"]  # read from the store, not measured again
    assert main_text(capsys).startswith("Roofline of this machine")

    from dace_ai.performance import machine_roofline

    roofline = machine_roofline()
    memory = next(level for level in roofline.levels if level.name == "memory")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS",)}
    env["OPENBLAS_NUM_THREADS"] = "1"  # OPENBLAS_CORETYPE, when set, stays as the environment says
    done = subprocess.run(
        [sys.executable, "-c", NUMPY_FIGURES, str(memory.measured_bytes)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    numpy = json.loads(done.stdout)
    peak = roofline.peak("float32", 1)
    bandwidth, level = roofline.bandwidth(1, memory.measured_bytes)
    assert level == "memory"
    print(
        f"NumPy sgemm {numpy['sgemm_gflops']:.1f} GFLOP/s of peak {peak:.1f}; copy {numpy['copy_gbs']:.1f} GB/s "
        f"of {bandwidth:.1f} GB/s (one thread)"
    )
    # The roofline is an upper bound NumPy never beats; how close NumPy comes depends on the BLAS kernel it picks
    # for this CPU (OpenBLAS's Haswell kernel on an AVX-512 machine reaches a fifth of it), so that fraction is a
    # figure bench/roofline.py prints, not an assertion. The lower bound only catches a roofline off by a unit.
    assert peak / 16 < numpy["sgemm_gflops"] < peak
    assert bandwidth / 16 < numpy["copy_gbs"] < bandwidth


def main_text(capsys) -> str:
    from dace_ai.cli.main import main

    assert main(["targets", "--roofline"]) == 0
    return capsys.readouterr().out


@pytest.mark.own_builds
def test_doctor_shows_the_stored_roofline_or_how_to_measure_it_without_measuring(capsys):
    from dace_ai.cli.doctor import doctor_report
    from dace_ai.performance import store

    store.clear_memo()
    before = doctor_report()["roofline"]
    assert before == {"measured": False, "hint": before["hint"]} and "dace-ai targets --roofline" in before["hint"]
    assert not list((store.folder()).glob("*.json"))  # doctor did not measure
    roofline = store.machine_roofline()
    after = doctor_report()["roofline"]
    assert after["measured"] and after["peak_gflops"] == roofline.to_json()["peak_gflops"]
    assert after["threads"] == roofline.threads


def test_a_target_packs_vendor_peaks_are_shown_beside_the_measured_roofline(capsys, register_dace_ai_plugin):
    from dace_ai.plugin import Detection, Target, VendorPeaks, hookimpl

    class LabTarget:
        @hookimpl
        def dace_ai_targets(self):
            yield Target(
                name="lab-cpu",
                kind="cpu",
                priority=10_000,
                detect=lambda: Detection(True, "always"),
                describe=lambda d: "the lab's CPU",
                compiler=("c++",),
                peaks=lambda d: VendorPeaks(
                    {"float32": 4321.0, "float64": 2160.5},
                    bandwidth_gbs=987.6,
                    threads=64,
                    source="the lab's data sheet",
                ),
            )

    register_dace_ai_plugin(LabTarget(), "lab-target")
    report = _roofline_json(capsys)
    assert report["vendor"] == {
        "lab-cpu": {
            "peak_gflops": {"float32": 4321.0, "float64": 2160.5},
            "bandwidth_gbs": 987.6,
            "threads": 64,
            "source": "the lab's data sheet",
        }
    }
    text = main_text(capsys)
    assert "lab-cpu (vendor, 64 threads)" in text and "4321 GFLOP/s" in text and "988 GB/s" in text
    assert "vendor figures: the lab's data sheet" in text
    with pytest.raises(TypeError, match="field 'peaks' must be a VendorPeaks"):
        Target(name="bad", detect=lambda: Detection(True, ""), describe=lambda d: "", peaks={"float32": 1.0})
    with pytest.raises(ValueError, match="peaks must be positive"):
        VendorPeaks({"float32": -1.0})


def test_the_roofline_answers_for_a_working_set_and_a_thread_count():
    from dace_ai.performance.roofline import Level, Roofline

    roofline = Roofline(
        threads=4,
        peak_gflops={1: {"float32": 100.0, "float64": 50.0}, 4: {"float32": 360.0, "float64": 180.0}},
        bandwidth_gbs={
            1: {"L1": 400.0, "L2": 150.0, "L3": 60.0, "memory": 20.0},
            4: {"L1": 1600.0, "L2": 20.0, "L3": 120.0, "memory": 40.0},
        },
        levels=(
            Level("L1", 48 << 10, 1, 24 << 10),
            Level("L2", 2 << 20, 1, 1 << 20),
            Level("L3", 32 << 20, 8, 2 << 20),
            Level("memory", 0, 0, 512 << 20),
        ),
        measured_at="2026-01-01T00:00:00Z",
        seconds=3.0,
        compiler="c++",
        flags=("-O3",),
        cpu="cpu",
        key="k",
    )
    assert roofline.level_for(100 << 10, 4) == "L1" and roofline.level_for(100 << 10, 1) == "L2"
    assert roofline.level_for(40 << 20, 4) == "memory" and roofline.level_for(None) == "memory"
    # The best case: what fits in L1 at L1's bandwidth, the rest at L2's, ...
    kib = 1024
    assert roofline.bandwidth(1, 100 * kib) == (pytest.approx(100 * kib / (48 * kib / 400 + 52 * kib / 150)), "L2")
    assert roofline.bandwidth(1, 24 * kib) == (pytest.approx(400.0), "L1")
    # ... and a faster level never counts as slower than a slower one (L2's 20 GB/s at 4 threads counts as L3's 120)
    assert roofline.bandwidth(4, 4 << 20) == (pytest.approx(4096 * kib / (192 * kib / 1600 + 3904 * kib / 120)), "L2")
    assert roofline.bandwidth(1, 1 << 40)[1] == "memory" and roofline.bandwidth(1, 1 << 40)[0] < 20.01
    assert roofline.peak("float32") == 360.0 and roofline.peak("float32", 2) == 200.0  # one thread's, twice
    assert roofline.peak("float32", 3) == 300.0 and roofline.peak("float64", 8) == 180.0
    assert roofline.peak("int32") is None and roofline.memory_bandwidth == 40.0
    assert Roofline.from_json(json.loads(json.dumps(roofline.to_json()))) == roofline
    with pytest.raises(ValueError, match="not a roofline record"):
        Roofline.from_json({"format": 1})


def test_a_figure_and_its_line():
    compute = figure(52.1e9, 0.9e9, 1.0, "float32", 190.0, 30.0, 2)
    assert tuple(compute) == KEYS and compute["bound"] == "compute"
    assert compute["fraction"] == pytest.approx(52.1 / 190)
    assert dace_ai.performance.describe_speed_of_light(compute) == (
        "52.1 GFLOP/s, 0.9 GB/s: compute-bound, 27% of speed of light (peak 190 GFLOP/s float32, 2 threads)"
    )
    memory = figure(None, 2.5e9, 0.1, "float64", 150.0, 30.0, 1)
    assert memory["bound"] == "memory" and memory["gflops"] is None and memory["fraction"] == pytest.approx(2.5 / 3)
    assert describe(memory) == ("25.0 GB/s: memory-bound (no flops known), 83% of speed of light (30.0 GB/s, 1 thread)")
    assert provenance_field(compute) == "0.274" and provenance_field(None) == ""
    with pytest.raises(ValueError, match="positive time"):
        figure(1.0, 1.0, 0.0, "float64", 1.0, 1.0, 1)


def _context(program, implementation: str | None = "ai"):
    sdfg = program.to_sdfg()
    if implementation:
        for node, _ in sdfg.all_nodes_recursive():
            if isinstance(node, dace.nodes.LibraryNode):
                node.implementation = implementation
    ((parent, state, node),) = pending_nodes(sdfg)
    return node_context(parent, state, node, resolve_settings())


def test_work_of_library_nodes_and_ai_nodes():
    @dace.program
    def matmul(A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]):
        C[:] = A @ B

    @dace.program
    def matvec(A: dace.float32[M, N], x: dace.float32[N], y: dace.float32[M]):
        y[:] = A @ x

    @dace.program
    def rowsum(A: dace.float64[M, N], out: dace.float64[M]):
        out[:] = np.sum(A, axis=1)

    work = node_work(_context(matmul))
    assert work.flops == "2*K*M*N" and work.dtype == "float64" and work.source == "MatMul semantics"
    assert work.at({"M": 3, "K": 5, "N": 7}) == (2 * 3 * 5 * 7, 8 * (3 * 5 + 5 * 7 + 3 * 7))
    work = node_work(_context(matvec))
    assert work.dtype == "float32" and work.at({"M": 10, "N": 20}) == (2 * 10 * 20, 4 * (200 + 20 + 10))
    work = node_work(_context(rowsum))
    assert work.at({"M": 10, "N": 20})[0] == 200

    @dace.program
    def axpy(x: dace.float32[N], y: dace.float32[N]):
        return dace_ai.ai("_out[i] = 2 * _x[i] + _y[i] for every i < N", x=x, y=y, flops=2 * N)

    @dace.program
    def copy(x: dace.float64[N]):
        return dace_ai.ai("_out[i] = _x[i] for every i < N", x=x)

    work = node_work(_context(axpy, None))
    assert (work.flops, work.source) == ("2*N", "flops= of the AI node") and work.at({"N": 100}) == (200, 1200)
    work = node_work(_context(copy, None))
    assert work.flops is None and "memory-bound only" in work.note and work.at({"N": 10}) == (None, 160)
    with pytest.raises(dace_ai.AIUsageError, match="flops '2\\*N\\+' is not an expression"):
        dace_ai.AINode("bad", "copy _x to _out", inputs={"_x"}, outputs={"_out"}, flops="2*N+")


@pytest.mark.own_builds
def test_the_bench_stage_reports_the_speed_of_light_of_its_timing():
    from dace_ai.performance import store

    @dace.program
    def mm(A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]):
        C[:] = A @ B

    sdfg = mm.to_sdfg()
    sizes = {"M": 48, "K": 40, "N": 56}

    def bench(**settings):
        settings = resolve_settings(
            {"checkers": "bench", "bench_sizes": "M=48,K=40,N=56", "bench_repeats": 3, **settings}
        )
        for node, _ in sdfg.all_nodes_recursive():
            if isinstance(node, dace.nodes.LibraryNode):
                node.implementation = "ai"
        ((parent, state, node),) = pending_nodes(sdfg)
        ctx = node_context(parent, state, node, settings)
        request = CheckRequest(Answer(code=MATMUL), ctx, settings, check_workdir(ctx, Answer(code=MATMUL)))
        (report,) = run_checks(request)
        assert report.status == "passed", report.diagnostics
        return report

    store.clear_memo()
    missing = bench(speed_of_light="stored")
    assert missing.speed_of_light is None and missing.bench is not None
    assert "dace-ai targets --roofline" in missing.bench.speed_of_light_missing
    assert "speed_of_light_missing" in missing.record()["details"] and set(missing.details) <= {"origin"}
    assert "of speed of light" not in bench(speed_of_light="off").diagnostics

    report = bench()
    assert report.speed_of_light is not None and report.bench is not None
    sol = report.speed_of_light.record()
    assert tuple(sol) == KEYS  # the agreed shape, exactly
    assert report.record()["details"]["speed_of_light"] == sol  # recorded under the key it always had
    flops = 2 * sizes["M"] * sizes["K"] * sizes["N"]
    nbytes = 8 * (sizes["M"] * sizes["K"] + sizes["K"] * sizes["N"] + sizes["M"] * sizes["N"])
    seconds = report.bench.candidate_median
    assert (sol["flops"], sol["bytes"], sol["dtype"]) == (flops, nbytes, "float64")
    assert sol["gflops"] == pytest.approx(flops / seconds / 1e9) and sol["gbs"] == pytest.approx(nbytes / seconds / 1e9)
    assert sol["threads"] == report.bench.threads and 0 < sol["fraction"]
    roofline = store.machine_roofline()
    assert sol["peak_gflops"] == roofline.peak("float64", sol["threads"])
    assert (sol["bandwidth_gbs"], report.bench.speed_of_light_level) == roofline.bandwidth(sol["threads"], nbytes)
    ideal = max(flops / (sol["peak_gflops"] * 1e9), nbytes / (sol["bandwidth_gbs"] * 1e9))
    assert sol["fraction"] == pytest.approx(ideal / seconds)
    assert sol["bound"] == ("compute" if flops / sol["peak_gflops"] > nbytes / sol["bandwidth_gbs"] else "memory")
    assert dace_ai.performance.describe_speed_of_light(sol) in report.diagnostics
    assert report.bench.work == {
        "flops": "2*K*M*N",
        "bytes": "8*K*M + 8*K*N + 8*M*N",
        "source": "MatMul semantics",
        "note": "",
    }


def test_optimize_puts_the_speed_of_light_in_the_provenance_the_session_and_its_report(fake):
    from dace_ai.solving.provenance import provenance

    def twice(a):
        return 2 * a

    @dace.program
    def prog(A: dace.float64[N]):
        return dace_ai.ai("Write _out[i] = 2 * _a[i] for every i < N.", a=A, name="twice", reference=twice, flops="N")

    fake.queue(json.dumps({"code": "for (int i = 0; i < N; ++i) _out[i] = 2.0 * _a[i];"}))
    sdfg = prog.to_sdfg()
    report = dace_ai.optimize(sdfg, samples=1, rounds=0, sizes={"N": 4096}, settings={"provider": "scripted"})
    winner = report.nodes[0].winner
    assert winner is not None and winner.speed_of_light is not None
    sol = winner.speed_of_light
    assert tuple(sol.record()) == KEYS
    (as_json,) = [c for c in report.to_json()["nodes"][0]["candidates"] if c["winner"]]
    assert as_json["speed_of_light"] == sol.record()  # ``dace-ai optimize --json``: the figure's shape
    assert sol.flops == 4096 and sol.bytes == 2 * 8 * 4096
    assert f"{100 * sol.fraction:.3g}% of speed of light" in str(report)
    (tasklet,) = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet)]
    fields = provenance(tasklet)
    assert fields["sol"] == f"{sol.fraction:.3g}" and " " not in fields["sol"]
    session = report.nodes[0].session
    summary = json.loads((Path(session) / "session.json").read_text())
    (bench_row,) = [c for r in summary["rounds"] for c in r["checks"] if c["checker"] == "bench"]
    assert bench_row["figures"]["speed_of_light"] == sol.record()
