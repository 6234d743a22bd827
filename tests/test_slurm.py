"""Batch executors (``slurm``, ``pbs``, ``lsf`` of dace-ai-dask, through dask-jobqueue): the job scripts they
write from the settings and the command line, keys kept out of them, and a real single-node SLURM
(``.ci/slurm-up`` starts one; the test is skipped, with the reason, where none answers)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time

import dace_ai
import pytest
from dace_ai.cli.main import main

from tests.inc_program import GOOD
from tests.test_cluster import VERIFIED, inc_program

SECRET = "sk-batch-test-0123456789abcdef"


def dry_run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["generate", *argv, "--dry-run"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_slurm_job_script_comes_from_the_command_line(capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # in this environment, never in a script
    code, script, _ = dry_run(
        capsys,
        "--executor",
        "slurm",
        "--queue",
        "a64fx",
        "--account",
        "proj42",
        "--walltime",
        "00:30:00",
        "--cores",
        "48",
        "--memory",
        "32GB",
        "--prologue",
        "module load gcc/12",
        "--prologue",
        "source ~/venv/bin/activate",
        "--directive=--exclusive",
        "--targets",
        "sve",
    )
    assert code == 0
    lines = script.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    for directive in ("-J dace-ai-worker", "-p a64fx", "-A proj42", "-t 00:30:00", "--cpus-per-task=48", "--exclusive"):
        assert f"#SBATCH {directive}" in lines, script
    worker = lines[-1]
    assert lines[-3:-1] == ["module load gcc/12", "source ~/venv/bin/activate"]  # the prologue, then the worker
    assert "distributed.cli.dask_worker tcp://SCHEDULER:8786" in worker and "--nthreads 48" in worker
    assert worker.endswith("--resources bench=1,cores=48,sve=48")  # one argument, even unquoted
    assert SECRET not in script


def test_batch_settings_come_from_the_environment_and_the_command_line_wins(capsys, monkeypatch):
    monkeypatch.setenv("DACE_ai_executor", "dask")
    monkeypatch.setenv("DACE_ai_cluster", "pbs")
    monkeypatch.setenv("DACE_ai_cluster_queue", "workq")
    monkeypatch.setenv("DACE_ai_cluster_walltime", "04:00:00")
    code, script, _ = dry_run(capsys, "--walltime", "00:20:00")
    assert code == 0 and "#PBS -q workq" in script and "#PBS -l walltime=00:20:00" in script
    code, script, _ = dry_run(capsys, "--executor", "lsf", "--account", "p7", "--interface", "lo")
    assert code == 0 and '#BSUB -P "p7"' in script and "#BSUB -q workq" in script and "--interface lo" in script


def test_batch_settings_come_from_dace_configuration(capsys):
    """``.dace.conf`` (DaCe's configuration, category ai) holds them like any other setting."""
    import dace

    dace.Config.set("ai", "cluster_account", value="from-dace-conf")
    try:
        code, script, _ = dry_run(capsys, "--executor", "slurm")
    finally:
        dace.Config.set("ai", "cluster_account", value="")
    assert code == 0 and "#SBATCH -A from-dace-conf" in script


def test_a_key_in_the_prologue_is_refused_and_bad_values_are_one_line(capsys, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    code, out, err = dry_run(capsys, "--executor", "slurm", "--prologue", f"export ANTHROPIC_API_KEY={SECRET}")
    assert code == 1 and not out and SECRET not in err and "would carry a credential" in err
    for argv, words in (
        (["--executor", "slurm", "--adapt", "8"], "expected MIN:MAX"),
        (["--executor", "slurm", "--cores", "many"], "'cluster_cores'"),
        (["--executor", "dask", "--cluster", "sge"], "'cluster'"),
    ):
        code, out, err = dry_run(capsys, *argv)
        assert code == 1 and words in err and len(err.splitlines()) == 1, err


def test_dask_without_a_batch_system_writes_no_job_script(capsys):
    code, out, _ = dry_run(capsys, "--executor", "dask")
    assert code == 0 and out.startswith("# no job script: 2 worker processes")


@pytest.mark.parametrize("command", ["generate", "optimize"])
def test_help_names_the_batch_executors(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    assert "slurm" in text and "--queue" in text and "--walltime" in text and "--adapt" in text


def test_submit_commands_run_without_the_keys_of_this_environment(monkeypatch):
    """SLURM copies the submitting environment into the job (and its state files): sbatch gets none of our keys."""
    import asyncio

    from dace_ai_dask.clusters import _scrubbed
    from dask_jobqueue.slurm import SLURMJob

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("MYLAB_GATEWAY_URL", "https://user:hunter2-password@gw.invalid/v1")
    monkeypatch.setenv("DACE_AI_TEST_PLAIN", "kept")
    env = asyncio.run(_scrubbed(SLURMJob)._call(["env"]))
    assert "DACE_AI_TEST_PLAIN=kept" in env and "PATH=" in env
    assert SECRET not in env and "hunter2" not in env and "OPENAI_API_KEY" not in env


# ----------------------------------------------------------------------------- a real SLURM
def slurm_problem() -> str | None:
    """Why no real SLURM can take jobs here (None when one can)."""
    if not shutil.which("sbatch"):
        return "SLURM is not installed (.ci/slurm-up installs Debian's slurm-wlm and munge and starts it)"
    try:
        states = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sinfo does not answer: {exc}"
    if states.returncode != 0 or not re.search(r"idle|mixed|alloc", states.stdout):
        return (
            f"no SLURM controller with a usable node answers ({(states.stderr or states.stdout).strip()[:120]}); "
            "run .ci/slurm-up"
        )
    return None


def state_folder() -> str:
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=10).stdout
    return re.search(r"^StateSaveLocation\s*=\s*(\S+)", config, re.MULTILINE).group(1)


def worker_jobs() -> list[str]:
    out = subprocess.run(
        ["squeue", "-h", "-n", "dace-ai-worker", "-o", "%i"], capture_output=True, text=True, timeout=10
    ).stdout
    return out.split()


@pytest.mark.skipif(slurm_problem() is not None, reason=f"no real SLURM: {slurm_problem()}")
def test_checks_run_in_slurm_jobs_that_scale_with_the_queue_and_hold_no_key(fake, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    state = state_folder()
    seen: dict[str, bool] = {}  # job id -> its saved environment was read and holds no key

    def watch():
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not done.is_set():
            for job in worker_jobs():
                environment = subprocess.run(
                    ["find", state, "-path", f"*job.{job}/environment"], capture_output=True, text=True
                ).stdout.split()
                for path in environment:
                    with open(path, "rb") as f:
                        saved = f.read()
                    seen[job] = b"PATH=" in saved and SECRET.encode() not in saved
            time.sleep(0.2)

    done = threading.Event()
    watcher = threading.Thread(target=watch)
    watcher.start()
    sdfg, _ = inc_program("slurm_real")
    fake.queue(json.dumps(GOOD))
    try:
        summary = dace_ai.generate(
            sdfg,
            settings={
                "provider": "scripted",
                "cluster_cores": 1,
                "cluster_memory": "1GB",
                "cluster_walltime": "00:10:00",
                "cluster_adapt": "0:2",
            },
            executor="slurm",
            progress=False,
        )
    finally:
        done.set()
        watcher.join()
    (node,) = summary.nodes
    assert node.status == "generated" and VERIFIED.fullmatch(node.verification), node
    assert node.worker  # checked in a SLURM job's worker, not here
    assert seen and all(seen.values()), seen  # jobs started for the queue; the key stayed out of them
    deadline = time.monotonic() + 30
    while worker_jobs() and time.monotonic() < deadline:  # closing the cluster cancels its jobs
        time.sleep(0.5)
    assert not worker_jobs()


@pytest.mark.skipif(slurm_problem() is not None, reason=f"no real SLURM: {slurm_problem()}")
def test_cli_optimize_on_a_fixed_number_of_slurm_jobs(fake, tmp_path, capsys, monkeypatch):
    sdfg, _ = inc_program("slurm_cli")
    path = tmp_path / "prog.sdfg"
    sdfg.save(str(path))
    monkeypatch.setenv("DACE_ai_provider", "scripted")
    other = {"code": "for (int i = 7; i >= 0; --i) _out[i] = 1.0 + _a[i];"}
    fake.queue(json.dumps(GOOD), json.dumps(other))
    code = main(
        [
            "optimize",
            str(path),
            "--samples",
            "2",
            "--rounds",
            "0",
            "--json",
            "--executor",
            "slurm",
            "--workers",
            "1",
            "--cores",
            "1",
            "--memory",
            "1GB",
            "--walltime",
            "00:10:00",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "started a SLURM cluster (1 job(s) of 1 core(s)" in out.err
    (node,) = json.loads(out.out)["nodes"]
    assert [c["status"] for c in node["candidates"]] == ["passed", "passed"]
    assert len({c["worker"] for c in node["candidates"]}) == 1 and node["candidates"][0]["worker"]  # the one job
    assert (tmp_path / "prog.optimized.sdfg").is_file()
    deadline = time.monotonic() + 30
    while worker_jobs() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not worker_jobs()
