"""generate/optimize with their checks on executors: a real 2-worker dask LocalCluster (one per module),
routing by target, a worker killed mid-run, a forged result, and key-free job payloads."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import re
import shutil
import signal
import threading
import time
from types import SimpleNamespace
from typing import ClassVar

import dace
import dace_ai
import pytest
from dace_ai.execution.jobs import run_job
from dace_ai.plugin import Executor, JobResult, hookimpl
from dace_ai.runtime_check.instrument import strip

from tests.check_support import link_shared_artefacts, shared_artefacts_folder
from tests.dace_versions import cross_headers_problem
from tests.inc_program import BROKEN, GOOD

SECRET = "sk-cluster-test-0123456789abcdef"
PASSWORD = "gatewaypassw0rd-xyz"

#: The level of an answer the verify stage passed: what it varied (sanitizers where clang is installed).
VERIFIED = re.compile(
    r"verified \(3 seeds, \d+ sizes?, (\d thread counts, )?\d distributions"
    r"(, sanitizers|, no sanitizers: .+)?\)"
)


def inc_program(name: str) -> tuple[dace.SDFG, object]:
    """``B = A + 1`` over 8 elements as an AINode with a NumPy reference (shipped to workers pickled)."""
    sdfg = dace.SDFG(name)
    sdfg.add_array("A", [8], dace.float64)
    sdfg.add_array("B", [8], dace.float64)
    state = sdfg.add_state()
    node = dace_ai.AINode(
        "inc", "Write _out[i] = _a[i] + 1.", inputs={"_a"}, outputs={"_out"}, reference=lambda a: a + 1
    )
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet("A[0:8]"))
    state.add_edge(node, "_out", state.add_write("B"), None, dace.Memlet("B[0:8]"))
    return sdfg, node


def tasklet_code(sdfg: dace.SDFG) -> list[str]:
    """Generated tasklets' code without the provenance line (it names the session and cache key) and
    without the run-time check's lines (their id names the SDFG), which every one of them has."""
    codes = [n.code.as_string for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet)]
    assert all("// dace-ai run-time check" in code for code in codes)
    return [strip(code.split("\n", 1)[1]) for code in codes]


def fresh_build_root(tmp_path, name):
    """A build root of its own (answers, sessions, checks) whose content-addressed artefacts are the run's shared ones."""
    root = tmp_path / name
    link_shared_artefacts(root, shared_artefacts_folder(tmp_path.parent))  # tmp_path lies in the worker's basetemp
    dace.Config.set("default_build_folder", value=str(root))
    return root


@pytest.fixture(scope="module")
def cluster():
    """Two single-thread worker processes declaring what this machine offers (shared by the module)."""
    from dace_ai.execution.jobs import machine_resources
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, resources=machine_resources(1)
        ) as local,
        Client(local) as client,
    ):
        yield SimpleNamespace(address=local.scheduler_address, client=client)


@pytest.mark.xdist_group("cluster")  # one worker starts the module's LocalCluster
def test_cluster_gives_the_local_verdicts_levels_and_tasklets(fake, cluster, tmp_path):
    outcomes = {}
    for executor in ("threads", "dask"):
        fresh_build_root(tmp_path, executor)
        options = {"executor": executor, "scheduler": cluster.address if executor == "dask" else None}
        sdfg, _ = inc_program(f"cl_gen_{executor}")
        fake.queue(json.dumps(GOOD))
        summary = dace_ai.generate(sdfg, settings={"provider": "scripted"}, **options)
        sdfg, _ = inc_program(f"cl_opt_{executor}")
        fake.queue(json.dumps(GOOD), json.dumps(BROKEN))
        report = dace_ai.optimize(
            sdfg, samples=2, rounds=0, settings={"provider": "scripted", "bench_repeats": 1}, **options
        )
        outcomes[executor] = {
            "generate": [(n.status, n.verification) for n in summary.nodes],
            "optimize": [(c.status, c.stage, c.verification) for c in report.nodes[0].candidates],
            "outcome": report.nodes[0].outcome,
            "tasklets": tasklet_code(sdfg),
        }
        workers = {c.worker for c in report.nodes[0].candidates} | {n.worker for n in summary.nodes}
        assert (workers == {""}) == (executor == "threads")  # checks ran on the cluster's workers
    assert outcomes["dask"] == outcomes["threads"]
    ((status, level),) = outcomes["dask"]["generate"]
    assert status == "generated" and VERIFIED.fullmatch(level), level
    assert [s for s, _, _ in outcomes["dask"]["optimize"]] == ["passed", "refused"]
    assert outcomes["dask"]["tasklets"] and "+ 1.0" in outcomes["dask"]["tasklets"][0]


@pytest.mark.xdist_group("cluster")  # one worker starts the module's LocalCluster
def test_a_worker_killed_mid_run_is_survived_and_reported(fake, cluster, tmp_path):
    killed: list[str] = []

    def kill_a_busy_worker():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            busy = [
                w for w, keys in cluster.client.processing().items() if any("dace-ai-check" in str(k) for k in keys)
            ]
            if busy:
                time.sleep(0.3)  # mid-job: its compile or its child is running
                pid = cluster.client.run(os.getpid, workers=[busy[0]])[busy[0]]
                os.kill(pid, signal.SIGKILL)
                killed.append(busy[0])
            time.sleep(0.05)

    sdfg, _ = inc_program("cl_kill")
    other = {"code": "for (int i = 7; i >= 0; --i) _out[i] = 1.0 + _a[i];"}  # its own check folder
    fake.queue(json.dumps(GOOD), json.dumps(other))
    killer = threading.Thread(target=kill_a_busy_worker)
    killer.start()
    report = dace_ai.optimize(
        sdfg,
        samples=2,
        rounds=0,
        settings={"provider": "scripted", "bench": "off"},
        executor="dask",
        scheduler=cluster.address,
    )
    killer.join()
    assert killed, "no check job was seen running"
    candidates = report.nodes[0].candidates
    assert [c.status for c in candidates] == ["passed", "passed"], [c.reason for c in candidates]
    restarted = [c for c in candidates if c.retries]
    assert restarted and restarted[0].lost_workers and restarted[0].worker
    assert "restarted after a lost worker" in str(report.nodes[0])
    cluster.client.wait_for_workers(2, timeout=60)  # the nanny brought the worker back for the next test


@pytest.mark.skipif(
    cross_headers_problem() is not None,
    reason=f"DaCe 2's runtime headers do not compile with this aarch64-linux-gnu-g++: {cross_headers_problem()}",
)
@pytest.mark.xdist_group("cluster")  # one worker starts the module's LocalCluster
def test_a_target_no_worker_offers_is_compile_only_not_passed(fake, cluster, tmp_path):
    if not shutil.which("aarch64-linux-gnu-g++"):
        pytest.skip("the SVE target's cross compiler is not installed")
    sdfg, _ = inc_program("cl_sve")
    fake.queue(json.dumps(GOOD))
    summary = dace_ai.generate(
        sdfg, settings={"provider": "scripted", "target": "sve"}, executor="dask", scheduler=cluster.address
    )
    (node,) = summary.nodes
    assert node.status == "generated" and node.verification == "compile-only: no worker with resource 'sve'"
    assert "compile-only: no worker with resource 'sve'" in str(summary)


@pytest.fixture
def quick_connect(monkeypatch):
    """Give up on an unreachable scheduler after 1 s instead of 10."""
    import dace_ai_dask.plugin

    monkeypatch.setattr(dace_ai_dask.plugin, "CONNECT_TIMEOUT", 1)


def test_scheduler_that_is_gone_is_a_short_error_and_changes_nothing(fake, tmp_path, quick_connect):
    from dace_ai.execution.jobs import ExecutorUnavailable

    sdfg, _ = inc_program("cl_gone")
    before = json.dumps(sdfg.to_json(), sort_keys=True)
    fake.queue(json.dumps(GOOD))
    with pytest.raises(ExecutorUnavailable, match="no dask scheduler answers at tcp://127.0.0.1:9"):
        dace_ai.optimize(
            sdfg, samples=1, rounds=0, settings={"provider": "scripted"}, executor="dask", scheduler="tcp://127.0.0.1:9"
        )
    assert json.dumps(sdfg.to_json(), sort_keys=True) == before
    assert not (tmp_path / ".dacecache" / "ai-cache").exists() or not any(
        (tmp_path / ".dacecache" / "ai-cache").rglob("*.json")
    )


class RecordingRunner:
    """An executor that pickles every job as a cluster would, then runs it here (``forge``: claims a pass)."""

    sent: ClassVar[list[bytes]] = []
    forge = False

    def __init__(self, options=None):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def run(self, jobs):
        for job in jobs:
            RecordingRunner.sent.append(pickle.dumps(job))
            if RecordingRunner.forge:
                forged = {
                    "reports": [
                        {"checker": "verify", "status": "passed", "seconds": 0.0, "stage": "verify", "details": {}}
                    ],
                    "seconds": 0.1,
                    "check_seconds": 0.0,
                }
                yield JobResult(job.id, forged, None, "forger:1")
                continue
            out = run_job(pickle.loads(RecordingRunner.sent[-1]))
            yield JobResult(job.id, out["value"], out["error"], out["worker"])


@pytest.fixture
def recording(register_dace_ai_plugin):
    @hookimpl
    def dace_ai_executors():
        yield Executor(name="recording", factory=RecordingRunner, description="records the jobs it is given")

    register_dace_ai_plugin(SimpleNamespace(dace_ai_executors=dace_ai_executors), "recording-executor")
    RecordingRunner.sent, RecordingRunner.forge = [], False
    return RecordingRunner


def test_no_key_travels_in_a_job_and_the_node_is_rebuilt_from_data(fake, recording, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    sdfg, _ = inc_program("cl_keys")
    fake.queue(json.dumps(GOOD))
    summary = dace_ai.generate(
        sdfg,
        settings={"provider": "scripted", "model": "m-1", "base_url": f"https://user:{PASSWORD}@gateway.invalid/v1"},
        executor="recording",
    )
    (node,) = summary.nodes
    assert VERIFIED.fullmatch(node.verification), node.verification  # rebuilt from the payload: program, reference
    (sent,) = recording.sent
    assert SECRET.encode() not in sent and PASSWORD.encode() not in sent and b"gateway.invalid" not in sent
    payload = pickle.loads(sent).payload
    assert payload["program"] and payload["reference"] and "provider" not in payload["settings"]
    assert not any(name.startswith("cluster") for name in payload["plugin_settings"])  # the executor's own


def test_a_pass_without_its_evidence_is_not_believed(fake, recording):
    recording.forge = True
    sdfg, _ = inc_program("cl_forged")
    fake.queue(json.dumps(GOOD))
    with pytest.warns(UserWarning, match="not believed"):
        summary = dace_ai.generate(sdfg, settings={"provider": "scripted"}, executor="recording")
    (node,) = summary.nodes
    assert node.status == "failed" and "not believed" in node.error and "seeds and sizes" in node.error


def test_cli_scheduler_gone_is_a_short_error_and_the_file_stays(fake, tmp_path, capsys, monkeypatch, quick_connect):
    from dace_ai.cli.main import main

    from tests.inc_program import inc_sdfg

    sdfg, _, _ = inc_sdfg("cl_cli")
    path = tmp_path / "prog.sdfg"
    sdfg.save(str(path))
    before = path.read_bytes()
    monkeypatch.setenv("DACE_ai_provider", "scripted")
    for command in ("generate", "optimize"):
        code = main([command, str(path), "--executor", "dask", "--scheduler", "tcp://127.0.0.1:9"])
        err = capsys.readouterr().err
        assert code == 1 and "no dask scheduler answers at tcp://127.0.0.1:9" in err and len(err.splitlines()) == 1
    assert path.read_bytes() == before and not (tmp_path / "prog.optimized.sdfg").exists()


def shape(sdfg: dace.SDFG) -> list:
    """The SDFG's nodes (with their ids) and edges, independent of the order edges are listed in."""
    state = next(iter(sdfg.states()))
    nodes = [(state.node_id(n), type(n).__name__, str(n)) for n in state.nodes()]
    edges = sorted((str(e.src), e.src_conn or "", str(e.dst), e.dst_conn or "", str(e.data)) for e in state.edges())
    return [nodes, edges, [getattr(n, "implementation", None) for n in state.nodes()]]


def two_inc_nodes(name: str) -> dace.SDFG:
    sdfg = dace.SDFG(name)
    state = sdfg.add_state()
    for k in range(2):
        sdfg.add_array(f"A{k}", [8], dace.float64)
        sdfg.add_array(f"B{k}", [8], dace.float64)
        node = dace_ai.AINode(
            f"inc{k}", "Write _out[i] = _a[i] + 1.", inputs={"_a"}, outputs={"_out"}, reference=lambda a: a + 1
        )
        state.add_edge(state.add_read(f"A{k}"), None, node, "_a", dace.Memlet(f"A{k}[0:8]"))
        state.add_edge(node, "_out", state.add_write(f"B{k}"), None, dace.Memlet(f"B{k}[0:8]"))
    return sdfg


def test_a_scheduler_that_goes_away_mid_run_ends_it_and_the_sdfg_is_put_back(fake, tmp_path, quick_connect):
    from dace_ai.execution.jobs import ExecutorUnavailable
    from dace_ai.storage.session_store import Session
    from distributed import Client, LocalCluster

    sdfg = two_inc_nodes("cl_midrun")
    before = shape(sdfg)
    fake.queue(json.dumps(GOOD), json.dumps(GOOD))
    local = LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        dashboard_address=None,
        resources={"bench": 1, "cores": 1, **dict.fromkeys(("host", "x86-avx2", "x86-avx512"), 1)},
    )
    watcher = Client(local)
    seen: set[str] = set()

    def stop_during_the_second_job():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            now = {str(k) for keys in watcher.processing().values() for k in keys if "dace-ai" in str(k)}
            seen.update(now)
            recorded = any((tmp_path / ".dacecache" / "ai-sessions").glob("*/round-1/checks.json"))
            if len(seen) >= 2 and now and recorded:  # one node's job done and recorded, the other's running
                local.sync(local.scheduler.close)
                return
            time.sleep(0.05)

    stopper = threading.Thread(target=stop_during_the_second_job)
    stopper.start()
    try:
        with pytest.raises(ExecutorUnavailable, match="went away"):
            dace_ai.optimize(
                sdfg,
                samples=1,
                rounds=0,
                settings={"provider": "scripted"},
                executor="dask",
                scheduler=local.scheduler_address,
            )
    finally:
        stopper.join()
        for closing in (watcher, local):  # the scheduler is gone: do not wait for it
            with contextlib.suppress(Exception):
                closing.close(timeout=1)
    assert len(seen) == 2  # the first node's candidate was checked before the scheduler went away
    assert shape(sdfg) == before
    sessions = [Session(folder) for folder in (tmp_path / ".dacecache" / "ai-sessions").iterdir()]
    assert sessions and not any("optimize" in s.summary() for s in sessions)  # no summary claims a winner


def test_timed_jobs_take_a_whole_worker_and_other_jobs_pack():
    from dace_ai.execution.jobs import Job
    from dace_ai_dask.plugin import DaskRunner

    workers = {
        "a": {"resources": {"bench": 1, "cores": 4, "x86-avx512": 4}},
        "b": {"resources": {"bench": 1, "cores": 8, "x86-avx512": 8, "cuda": 8}},
    }
    runner = DaskRunner()
    assert runner._resources(Job("t", run_job, {}, stage="bench", target="x86-avx512"), workers) == {
        "bench": 1,
        "cores": 4,
        "x86-avx512": 1,
    }
    assert runner._resources(Job("g", run_job, {}, stage="bench", target="cuda"), workers)["cores"] == 8
    assert runner._resources(Job("c", run_job, {}, stage="check", target="x86-avx512"), workers) == {
        "cores": 1,
        "x86-avx512": 1,
    }
    plain = {"w": {"resources": {}}}  # a plain `dask worker`: nothing asked that nobody declares, but the target
    assert runner._resources(Job("p", run_job, {}, stage="bench", target="sve"), plain) == {"sve": 1}


def plus_nodes(name: str, count: int) -> dace.SDFG:
    """``B_k = A_k + k`` for k = 1..count, each an AINode with its NumPy reference."""
    sdfg = dace.SDFG(name)
    state = sdfg.add_state()
    for k in range(1, count + 1):
        sdfg.add_array(f"A{k}", [8], dace.float64)
        sdfg.add_array(f"B{k}", [8], dace.float64)
        node = dace_ai.AINode(
            f"plus{k}",
            f"Write _out[i] = _a[i] plus {k}.",
            inputs={"_a"},
            outputs={"_out"},
            reference=lambda a, k=k: a + k,
        )
        state.add_edge(state.add_read(f"A{k}"), None, node, "_a", dace.Memlet(f"A{k}[0:8]"))
        state.add_edge(node, "_out", state.add_write(f"B{k}"), None, dace.Memlet(f"B{k}[0:8]"))
    return sdfg


def answer_by_request(request) -> str:
    """The same answer for the same request, whichever node asks first: candidate 1 adds the node's constant,
    candidate 2 does not compile (so every node has a refused candidate too)."""
    text = " ".join(m.content for m in request.messages)
    k = re.search(r"plus (\d+)\.", text).group(1)
    if "candidate 2 of 2" in text:
        return json.dumps({"code": f"for (int i = 0; i < 8; ++i) _out[i] = _a[i] + undefined_{k};"})
    return json.dumps({"code": f"for (int i = 0; i < 8; ++i) _out[i] = _a[i] + {k}.0;"})


def session_rows(root) -> dict[str, list]:
    """Each node's session: its rounds' (optimize round, sample, status, answer) and the optimize outcome."""
    from dace_ai.storage.session_store import Session

    rows = {}
    for folder in sorted((root / "ai-sessions").iterdir()):
        if not folder.is_dir():
            continue
        session = Session(folder)
        summary = session.summary()
        rounds = sorted(
            (
                json.loads((folder / f"round-{r['number']}" / "request.json").read_text())["optimize"]["sample"],
                r["status"],
                json.dumps(session.answer(r["number"]), sort_keys=True),
            )
            for r in summary["rounds"]
        )
        rows[summary["node"]["name"]] = [rounds, summary["optimize"]["outcome"]]
    return rows


@pytest.mark.xdist_group("cluster")  # one worker starts the module's LocalCluster
def test_every_node_at_once_on_the_cluster_gives_the_local_tasklets_levels_and_sessions(
    fake, cluster, tmp_path, capsys
):
    outcomes = {}
    for executor in ("threads", "dask"):
        root = fresh_build_root(tmp_path, executor)
        sdfg = plus_nodes(f"cl_all_{executor}", 3)
        fake.queue(*[answer_by_request] * 6)
        report = dace_ai.optimize(
            sdfg,
            samples=2,
            rounds=0,
            settings={"provider": "scripted", "bench_repeats": 1},
            executor=executor,
            scheduler=cluster.address if executor == "dask" else None,
            progress=executor == "dask",
        )
        outcomes[executor] = {
            "nodes": [
                (n.name, n.outcome, sorted((c.sample, c.status, c.verification) for c in n.candidates))
                for n in report.nodes
            ],
            "tasklets": sorted(hashlib.sha256(code.encode()).hexdigest() for code in tasklet_code(sdfg)),
            "sessions": session_rows(root),
        }
    board = capsys.readouterr().err
    assert outcomes["dask"] == outcomes["threads"]
    nodes = outcomes["dask"]["nodes"]
    assert [name for name, _, _ in nodes] == ["plus1", "plus2", "plus3"]
    assert all(outcome == "optimized" and [s for _, s, _ in c] == ["passed", "refused"] for _, outcome, c in nodes)
    assert len(set(outcomes["dask"]["tasklets"])) == 3
    # The table of jobs per node: every node's two jobs done, nothing left running or queued.
    assert "dace-ai optimize: 6 check job(s) done, 0 running, 0 queued" in board
    assert all(re.search(rf"plus{k}\s*.\s*2\s*.\s*0\s*.\s*0", board) for k in (1, 2, 3)), board


def test_the_job_board_counts_queued_running_and_done_per_node():
    from dace_ai.dispatch.job_board import JobBoard
    from rich.console import Console

    running = {"a1"}
    board = JobBoard("dace-ai optimize", enabled=False, running=lambda: running)
    for node, job in (("a", "a1"), ("a", "a2"), ("b", "b1")):
        board.submitted(node, job)
    board.finished("b", "b1", ok=False)
    counts = board.counts()
    assert (counts["a"].running, counts["a"].queued, counts["a"].done) == (1, 1, 0)
    assert (counts["b"].failed, counts["b"].queued) == (1, 0)
    console = Console(width=100, record=True)
    console.print(board)
    text = console.export_text()
    assert "0 check job(s) done, 1 running, 1 queued, 1 without a result" in text
    board.running_jobs = None  # an executor that cannot tell: every submitted job counts as running
    assert board.counts()["a"].running == 2
