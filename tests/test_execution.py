"""Executors and bench suites as plugins: the local process pool, a worker that dies, third-party suites."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest
from dace_ai.errors import SettingsError
from dace_ai.evaluation.tasks import load_suite
from dace_ai.execution.jobs import ExecutorOptions, Job
from dace_ai.execution.local import run_jobs
from dace_ai.plugin import BenchSuite, Executor, hookimpl


def square(payload):
    return {"square": payload["x"] ** 2, "pid": os.getpid()}


def fail(payload):
    raise ValueError(f"bad input {payload['x']}")


def die_once(payload):
    """Kills its worker process the first time it runs (the marker file says whether it ran)."""
    marker = Path(payload["marker"])
    if not marker.exists():
        marker.write_text("died")
        os.kill(os.getpid(), signal.SIGKILL)
    return {"survived": True}


def test_local_pool_runs_jobs_and_returns_failures_as_data():
    jobs = [Job(f"j{i}", square, {"x": i}) for i in range(6)] + [Job("bad", fail, {"x": 7})]
    results = run_jobs(jobs, options=ExecutorOptions(workers=2))
    assert [r.id for r in results] == [j.id for j in jobs]
    assert [r.value["square"] for r in results[:6]] == [i * i for i in range(6)]
    assert results[-1].value is None and "ValueError: bad input 7" in results[-1].error
    assert all(r.retries == 0 and r.worker for r in results)
    assert {r.value["pid"] for r in results[:6]} != {os.getpid()}  # ran in worker processes


def test_local_pool_runs_a_job_again_when_its_worker_dies(tmp_path):
    jobs = [Job("dies", die_once, {"marker": str(tmp_path / "marker")})] + [
        Job(f"j{i}", square, {"x": i}) for i in range(3)
    ]
    results = {r.id: r for r in run_jobs(jobs, options=ExecutorOptions(workers=2))}
    assert results["dies"].value == {"survived": True} and results["dies"].retries >= 1
    assert results["dies"].lost_workers
    assert [results[f"j{i}"].value["square"] for i in range(3)] == [0, 1, 4]  # nothing lost


def test_jobs_ask_for_bench_slots_and_target_workers():
    assert Job("a", square, {}, stage="bench").resources() == {"bench": 1}
    assert Job("b", square, {}, stage="check", target="sve").resources() == {"sve": 1}
    assert Job("c", square, {}).resources() == {}


def test_registrations_are_validated():
    with pytest.raises(TypeError, match="factory"):
        Executor(name="x", factory=None)
    with pytest.raises(TypeError, match="module"):
        BenchSuite(name="x", path=".", module="")


def test_third_party_suite_through_the_hook(register_dace_ai_plugin, tmp_path):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "double.toml").write_text(
        'id = "double"\ntitle = "t"\nprogram = "p"\nnode = "double"\nreference = "r"\noutputs = ["y"]\n'
        "sizes = { N = 5 }\n"
    )
    (tmp_path / "tasks" / "broken.toml").write_text('id = "broken"\ntitle = 3\n')

    @hookimpl
    def dace_ai_bench_suites():
        yield BenchSuite(name="lab", path=tmp_path, module="lab_programs")

    register_dace_ai_plugin(SimpleNamespace(dace_ai_bench_suites=dace_ai_bench_suites), "lab-suite")
    load_suite.cache_clear()
    with pytest.raises(SettingsError, match=r"broken\.toml"):
        load_suite("lab")
    (tmp_path / "tasks" / "broken.toml").unlink()
    load_suite.cache_clear()
    (task,) = load_suite("lab")
    assert task.id == "double" and task.kind == "ai" and task.baseline is None
    load_suite.cache_clear()
