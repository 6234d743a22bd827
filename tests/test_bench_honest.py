"""Honest bench figures: baselines named, fast_p against the strongest baseline, one verdict per attempt,
skipped is not failed, and no traceback without matplotlib.

The report tests recompute every figure from ``results.json`` records alone; the slow ones run real
attempts (real compiles, the sandboxed task run) on a few small tasks.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from dace_ai.evaluation.report import fast_p, render_markdown, summary

from tests.dace_versions import DACE2

CONFIG = "offline/recorded"


def _attempt(task: str, **fields) -> dict:
    base = {
        "id": f"{task}-s0",
        "configuration": CONFIG,
        "task": task,
        "sample": 0,
        "compile": "passed",
        "verify": "passed",
        "bench": "passed",
        "task_run": "passed",
        "compiled": True,
        "correct": True,
        "skipped": None,
        "speedup": None,
        "speedup_native": None,
        "strongest": None,
        "native_baseline": None,
        "input_tokens": None,
        "output_tokens": None,
        "cost_usd": None,
    }
    base.update(fields)
    return base


def _results() -> dict:
    return {
        "version": 1,
        "suite": "core",
        "attempts": [
            _attempt(
                "gemm",
                speedup=0.65,
                speedup_native=61.0,
                strongest="OpenBLAS (DaCe 'OpenBLAS')",
                native_baseline="DaCe pure",
                verdict="correct, 0.65x vs OpenBLAS (DaCe 'OpenBLAS')",
            ),
            _attempt("sum_all", speedup=1.4, speedup_native=17.3, strongest="NumPy", native_baseline="DaCe pure"),
            _attempt(
                "relu",
                speedup=2.5,
                speedup_native=2.5,
                strongest="DaCe native program",
                native_baseline="DaCe native program",
            ),
            # refused by the bench stage: not correct, no figure (one verdict per attempt)
            _attempt(
                "dot",
                bench="failed",
                task_run="not run",
                correct=False,
                refused_by="bench",
                refusal="Refused: its timing is implausible: 1.4 µs per call",
            ),
            _attempt("scan", task_run="failed", correct=False, error="output 'out': 3 of 9 elements wrong"),
            _attempt(
                "fft",
                compile="not run",
                verify="not run",
                bench="not run",
                task_run="not run",
                compiled=False,
                correct=False,
                skipped="needs the fftw library, not found on this machine (fftw3.h not found)",
            ),
        ],
    }


def _table(md: str, header_start: str) -> list[list[str]]:
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| " + header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _geomean(values):
    return f"{math.exp(sum(map(math.log, values)) / len(values)):.2f}x"


def check_report(data: dict, md: str) -> None:
    """Recompute the summary and every row of ``md`` from ``data`` (results.json) alone."""
    attempts = data["attempts"]
    for configuration in sorted({a["configuration"] for a in attempts}):
        mine = [a for a in attempts if a["configuration"] == configuration]
        scored = [a for a in mine if not a.get("skipped")]
        n = len(scored)
        correct = [a for a in scored if a["correct"]]
        strongest = [a["speedup"] for a in correct if a.get("speedup")]
        native = [a["speedup_native"] for a in correct if a.get("speedup_native")]
        sols = [a["speed_of_light"]["fraction"] for a in correct if a.get("speed_of_light")]
        row = next(r for r in _table(md, "configuration") if r[0] == configuration)
        assert row[:14] == [
            configuration,
            str(n),
            str(len(mine) - n),
            _pct(sum(a["compiled"] for a in scored) / n),
            _pct(len(correct) / n),
            *(_pct(sum(1 for s in strongest if s > p) / n) for p in (0, 1, 2)),
            _geomean(strongest) if strongest else "n/a",
            _pct(sum(1 for s in native if s > 1) / n),
            _geomean(native) if native else "n/a",
            _pct(math.exp(sum(map(math.log, sols)) / len(sols))) if sols else "n/a",
            "n/a",
            "n/a",
        ]
    rows = {(r[0], r[1]): r for r in _table(md, "task")}
    for a in attempts:
        r = rows[(a["task"], str(a["sample"]))]
        if a.get("skipped"):
            assert r[6] == "skipped" and r[10].startswith("skipped: ")
        else:
            assert r[6] == ("yes" if a["correct"] else "no")
        # one verdict: a figure only for a correct attempt, each naming its baseline
        if a["correct"] and a.get("speedup"):
            assert r[7] == f"{a['speedup']:.2f}x vs {a['strongest']}"
            assert r[8] == f"{a['speedup_native']:.2f}x vs {a['native_baseline']}"
        else:
            assert r[7] == r[8] == "-"
        # the speed of light: the fraction of the ideal time and the bound, for a correct attempt only
        sol = a.get("speed_of_light")
        if a["correct"] and sol:
            percent = 100 * sol["fraction"]
            assert r[9] == (f"{percent:.0f}%" if percent >= 1 else f"{percent:.2g}%") + f" ({sol['bound']})"
        else:
            assert r[9] == "-"
        if a.get("refused_by"):
            assert r[6] == "no" and r[10].startswith(f"refused by the {a['refused_by']} stage")


def test_report_is_recomputed_from_results_with_fast_p_against_the_strongest_baseline():
    data = _results()
    md = render_markdown(data)
    check_report(data, md)
    s = summary(data["attempts"], CONFIG)
    # 5 scored (fft skipped): gemm is slower than OpenBLAS, so it is fast against native but not the strongest
    assert s["attempts"] == 5 and s["skipped"] == 1
    assert s["fast_1"] == pytest.approx(2 / 5) and s["fast_1_native"] == pytest.approx(3 / 5)
    assert "0.65x vs OpenBLAS (DaCe 'OpenBLAS')" in md and "61.00x vs DaCe pure" in md
    assert "- `fft`: needs the fftw library" in md


def test_a_refused_attempt_counts_as_neither_correct_nor_fast():
    from dace_ai.evaluation.attempt import finish_verdict

    out = {
        "compile": "passed",
        "verify": "passed",
        "bench": "failed",
        "task_run": "passed",
        "compiled": True,
        "correct": True,
        "speedup": 17.27,
        "speedup_native": 17.27,
        "strongest": "DaCe pure",
        "skipped": None,
        "refused_by": "bench",
        "refusal": "Refused: its timing is implausible",
    }
    finish_verdict(out, 0.0)
    assert out["correct"] is False and out["speedup"] is None and out["speedup_native"] is None
    assert out["verdict"].startswith("refused by the bench stage: Refused: its timing is implausible")
    assert fast_p([{**out, "configuration": CONFIG}], 0.0) == 0.0


def test_a_task_whose_library_is_not_detected_is_skipped_with_the_reason(register_dace_ai_plugin, monkeypatch):
    from dace_ai.evaluation import attempt, tasks
    from dace_ai.plugin import Detection, EnvironmentGenerator, hookimpl

    class Absent:
        @hookimpl
        def dace_ai_environment_generators(self):
            yield EnvironmentGenerator(
                name="t-absent-lib",
                offer=lambda ctx: None,
                generate=lambda request: None,
                detect=lambda: Detection(False, "absent.h not found"),
            )

    register_dace_ai_plugin(Absent(), "absent-lib")
    task = tasks.find_task("core", "relu").model_copy(update={"requires": ["t-absent-lib", "t-never-installed"]})
    missing = tasks.missing_requirements(task)
    assert missing[0] == "the t-absent-lib library, not found on this machine (absent.h not found)"
    assert "'t-never-installed', not installed here" in missing[1]
    monkeypatch.setattr(tasks, "find_task", lambda suite, task_id: task)
    out = attempt.evaluate_attempt({"suite": "core", "task": "relu", "answer_text": "{}", "build_root": "build"})
    assert out["skipped"].startswith("needs the t-absent-lib library") and out["compile"] == "not run"
    assert not out["correct"] and out["speedup"] is None


def test_the_suite_is_grown_and_its_answers_are_labelled_as_the_projects():
    from dace_ai.evaluation.campaign import shipped_answers
    from dace_ai.evaluation.tasks import load_suite, suite_member

    suite = load_suite("core")
    assert len(suite) >= 40
    ids = {t.id for t in suite}
    assert {
        "mm2",
        "mm3",
        "atax",
        "bicg",
        "mvt",
        "gesummv",
        "syrk",
        "syr2k",
        "doitgen",
        "heat3d",
        "batched_softmax",
        "attention",
    } <= ids
    for task in suite:
        data = json.loads((shipped_answers("core") / f"{task.id}.json").read_text())
        assert data["recorded_by"] == "dace-ai project (hand-written)"
        assert all(s["model"] == "hand-written" for s in data["samples"])
        assert callable(suite_member("core", task.reference))
        if task.kind == "ai":
            assert task.baseline and callable(suite_member("core", task.baseline))
            # sizes that are not multiples of vector widths (a 2-element tail at least for doubles)
            assert any(v % 8 for v in task.sizes.values()), task.id


BLOCKER = textwrap.dedent("""
    import importlib.abc, sys

    class _Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "matplotlib" or name.startswith("matplotlib."):
                raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")
            return None

    sys.meta_path.insert(0, _Block())
""")


def _without_matplotlib(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter where importing matplotlib fails (a sitecustomize blocker)."""
    blocker = tmp_path / "no-matplotlib"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False
    )


def test_without_matplotlib_the_report_is_written_and_one_line_says_how_to_get_the_plot(tmp_path):
    """A finished run (resumed from results.json: nothing left to run) ends in report.md, a hint, exit 0."""
    from dace_ai.evaluation.campaign import Configuration, attempt_id, shipped_answers

    out = tmp_path / "out"
    out.mkdir()
    config = Configuration("offline", "recorded", None, str(shipped_answers("core").resolve()))
    data = _results()
    for a in data["attempts"]:
        a["id"] = attempt_id(config, "core", a["task"], 0)
    (out / "results.json").write_text(json.dumps(data))
    tasks = ",".join(a["task"] for a in data["attempts"])
    proc = _without_matplotlib(tmp_path, "import sys, matplotlib")
    assert proc.returncode != 0 and "No module named 'matplotlib'" in proc.stderr  # the blocker works
    proc = _without_matplotlib(
        tmp_path,
        f"import sys; from dace_ai.cli.main import main; "
        f"sys.exit(main(['bench', '--offline', '--tasks', '{tasks}', "
        f"'--out', {str(out)!r}, '--quiet']))",
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "plot: report.png not written: matplotlib is not installed (pip install 'dace-ai[bench]')" in proc.stdout
    assert not (out / "report.png").exists()
    check_report(json.loads((out / "results.json").read_text()), (out / "report.md").read_text())


def test_a_harness_that_cannot_run_exits_non_zero_with_a_short_message(tmp_path, capsys):
    from dace_ai.cli.main import main

    assert main(["bench", "--offline", "--tasks", "no-such-task", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("dace-ai: error: --tasks names unknown task(s) ['no-such-task']") and "Traceback" not in err


def test_a_gated_attempt_is_refused_once_and_its_row_says_why(tmp_path, monkeypatch):
    """bench=gate against the strongest baseline with an unreachable min_speedup: the bench stage refuses the
    (correct) Dot answer, and the attempt is not correct, has no figure, and its row names the refusal."""
    from dace_ai.cli.main import main

    monkeypatch.setenv("DACE_ai_bench", "gate")
    monkeypatch.setenv("DACE_ai_gate_baseline", "strongest")
    monkeypatch.setenv("DACE_ai_min_speedup", "1000")
    out = tmp_path / "gated"
    assert main(["bench", "--offline", "--tasks", "dot", "--out", str(out), "--workers", "1", "--quiet"]) == 0
    data = json.loads((out / "results.json").read_text())
    (a,) = data["attempts"]
    assert a["bench"] == "failed" and a["refused_by"] == "bench" and a["verify"] == "passed"
    assert not a["correct"] and a["speedup"] is None and a["task_run"] == "not run"
    bench = next(c for c in a["checks"] if c["stage"] == "bench")
    assert "over the strongest baseline" in bench["diagnostics"] and bench["strongest"] in bench["baselines"]
    assert "OpenBLAS (DaCe 'OpenBLAS')" in bench["baselines"] or "OpenBLAS" in bench["baselines_left_out"]
    check_report(data, (out / "report.md").read_text())


def test_node_baselines_list_dace_implementations_whose_environments_are_installed():
    import dace.library  # noqa: F401
    from dace.libraries.blas import Gemm
    from dace.libraries.blas.environments.openblas import OpenBLAS
    from dace.libraries.standard import Reduce
    from dace_ai.sandbox.baselines import compare_times, node_baselines

    gemm = node_baselines(Gemm("g"))
    assert gemm.native.label == "DaCe pure" and gemm.native.native
    labels = {b.name: b.label for b in gemm.others}
    left_out = {u.name: u.reason for u in gemm.unavailable}
    if OpenBLAS.is_installed():
        assert labels["OpenBLAS"] == "OpenBLAS (DaCe 'OpenBLAS')"
        assert gemm.others[0].environments == (OpenBLAS.full_class_path(),)
    else:
        assert left_out["OpenBLAS"].startswith("environment not installed (OpenBLAS: is_installed() returned False")
    assert left_out["cuBLAS"] == "not for cpu code"
    assert DACE2 or "FPGA1DSystolic" in left_out  # DaCe 2's Gemm has no FPGA implementation to leave out
    reduce = node_baselines(Reduce("r", "lambda a, b: a + b"))
    assert {b.label for b in reduce.others} >= {"DaCe 'OpenMP'", "DaCe 'pure-seq'"}

    comparison = compare_times(1.0, {"DaCe pure": 61.0, "OpenBLAS (DaCe 'OpenBLAS')": 0.8, "NumPy": 0.9}, "DaCe pure")
    assert comparison.strongest.text() == "0.80x vs OpenBLAS (DaCe 'OpenBLAS')"
    assert comparison.native.text() == "61.00x vs DaCe pure"
    assert comparison.text().startswith("0.80x vs OpenBLAS (DaCe 'OpenBLAS') (strongest); 61.00x vs DaCe pure")


def test_a_compile_stage_that_cannot_run_here_skips_the_attempt_and_a_failing_one_does_not():
    from dace_ai.checking.api import CheckReport
    from dace_ai.evaluation.attempt import _machine_missing

    missing = [CheckReport("probe", "inconclusive", "compiler 'g++' not found on PATH", details={"stage": "compile"})]
    out = {"compile": "inconclusive"}
    assert _machine_missing(missing, out) == "cannot be built on this machine: compiler 'g++' not found on PATH"
    failing = [*missing, CheckReport("verify", "failed", "wrong", details={"stage": "verify"})]
    assert _machine_missing(failing, out) is None  # a refusal is a verdict on the code, not on the machine
    assert (
        _machine_missing([CheckReport("probe", "passed", "", details={"stage": "compile"})], {"compile": "passed"})
        is None
    )
