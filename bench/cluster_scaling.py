"""Check jobs of ``dace_ai.optimize`` on executors: threads, a local process pool, a 2-worker dask LocalCluster.

A program of ``--nodes`` AI nodes (``B_k = A_k + 1``, each with a NumPy reference) is
optimized with ``--samples`` candidates per node and no refinement round, so it makes
nodes x samples check jobs (compile, verify against the reference, time). The
provider is scripted in this process and answers after a fixed ``--latency``; the
checks run on each executor in turn, each run in a fresh build folder (no answer
cache, no build cache carried over). Printed per executor: wall time, check jobs per
second, the checks' own time, and the share of the jobs' round-trip time spent
outside the checkers (scheduling, transfer, rebuilding the node on the worker), plus
how the compiles included dace.h (``pch built`` once per build folder, then reused).

    .venv/bin/python bench/cluster_scaling.py                       # 64 nodes x 4 samples
    .venv/bin/python bench/cluster_scaling.py --nodes 8 --samples 4 # a few minutes on 2 cores

``--together`` compares instead, on one dask cluster of ``--workers`` workers started
once for both, ``optimize`` working on the nodes one after another
(``node_concurrency=1``) with all nodes submitted together (the default on an
executor), ``--pairs`` times in alternating order, and prints the ratio of their wall
times:

    .venv/bin/python bench/cluster_scaling.py --together --nodes 8 --samples 4 --latency 2
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CODE = {"code": "for (int i = 0; i < 64; ++i) _out[i] = _a[i] + 1.0;"}


class LatencyProvider:
    """Answers every request with correct code after ``latency`` seconds (thread-safe)."""

    def __init__(self, latency: float) -> None:
        self.latency, self.requests, self._lock = latency, 0, threading.Lock()

    def complete(self, request):
        from dace_ai.providers.api import ProviderReply, Usage

        time.sleep(self.latency)
        with self._lock:
            self.requests += 1
            serial = self.requests
        # Each answer its own text (as samples of a model differ), so each gets its own check folder.
        text = json.dumps({"code": CODE["code"] + f" // answer {serial}"})
        return ProviderReply(
            text=text,
            usage=Usage(input_tokens=len(request.system), output_tokens=len(text)),
            model="scripted",
            stop_reason="end_turn",
        )


def program(name: str, nodes: int):
    import dace
    import dace_ai

    sdfg = dace.SDFG(name)
    state = sdfg.add_state()
    for k in range(nodes):
        sdfg.add_array(f"A{k}", [64], dace.float64)
        sdfg.add_array(f"B{k}", [64], dace.float64)
        node = dace_ai.AINode(
            f"inc{k}",
            "Write _out[i] = _a[i] + 1 for every i.",
            inputs={"_a"},
            outputs={"_out"},
            reference=lambda a: a + 1,
        )
        state.add_edge(state.add_read(f"A{k}"), None, node, "_a", dace.Memlet(f"A{k}[0:64]"))
        state.add_edge(node, "_out", state.add_write(f"B{k}"), None, dace.Memlet(f"B{k}[0:64]"))
    return sdfg


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the scripted provider takes per answer")
    parser.add_argument("--workers", type=int, default=2, help="workers of the process pool and the LocalCluster")
    parser.add_argument("--executors", default="threads,local,dask")
    parser.add_argument(
        "--together", action="store_true", help="compare node by node with every node at once on one dask cluster"
    )
    parser.add_argument("--pairs", type=int, default=2, help="--together: runs of each, alternating")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="dace-ai-bench-cluster-"))
    os.chdir(work)
    import dace
    import dace_ai
    from dace_ai.plugins.hookspecs import hookimpl
    from dace_ai.plugins.manager import get_plugin_manager
    from dace_ai.plugins.registrations import Provider

    client = LatencyProvider(args.latency)

    class Plugin:
        @hookimpl
        def dace_ai_providers(self):
            yield Provider(
                name="scripted-latency",
                factory=lambda settings: client,
                offline=False,
                description="fixed-latency scripted answers (bench)",
            )

    get_plugin_manager().register(Plugin(), "bench-cluster-provider")
    if args.together:
        try:
            return together(args, work, program)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()[0]
    print(
        f"{args.nodes} AI nodes x {args.samples} samples = {args.nodes * args.samples} check jobs per executor; "
        f"provider latency {args.latency:.2f} s; {os.cpu_count()} cores, load {load:.1f}"
    )
    rows = []
    try:
        for name in args.executors.split(","):
            dace.Config.set("default_build_folder", value=str(work / name / ".dacecache"))
            sdfg = program(f"scaling_{name}", args.nodes)
            started = time.perf_counter()
            report = dace_ai.optimize(
                sdfg,
                samples=args.samples,
                rounds=0,
                executor=name,
                workers=None if name == "threads" else args.workers,
                settings={"provider": "scripted-latency", "bench_repeats": 3},
            )
            wall = time.perf_counter() - started
            stats = report.stats
            passed = sum(1 for n in report.nodes for c in n.candidates if c.status == "passed")
            rows.append((name, wall, stats, passed))
            for node in report.nodes:
                for c in node.candidates:
                    if c.status != "passed":
                        print(
                            f"    {node.name} r{c.round}s{c.sample} {c.status} ({c.stage}): "
                            f"{(c.reason.strip().splitlines() or [''])[0][:200]}"
                        )
            print(
                f"  {name:8s} wall {wall:7.1f} s  {stats.jobs / wall:5.2f} jobs/s  checks {stats.check_seconds:7.1f} s"
                f"  round trips {stats.round_trip_seconds:7.1f} s  outside the checks {stats.outside_checks:5.1%}"
                f"  passed {passed}/{stats.jobs}  workers {len(stats.workers)}  dace.h {stats.pch}",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = rows[0]
    for name, wall, _stats, _ in rows[1:]:
        print(f"{name} vs {base[0]}: {base[1] / wall:.2f}x jobs per second")
    return 0


def together(args, work: Path, program) -> int:
    """Node by node against every node at once, on one cluster, alternating; prints the wall-time ratio."""
    import dace
    import dace_ai
    from dace_ai_dask.clusters import start_local
    from distributed import Client

    threads = 1
    cluster = start_local(args.workers, threads)
    with Client(cluster) as client:
        client.wait_for_workers(args.workers, timeout=120)
    print(
        f"optimize of {args.nodes} AI nodes x {args.samples} samples on a dask cluster of {args.workers} "
        f"worker(s) x {threads} thread(s); provider latency {args.latency:.2f} s; {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    walls: dict[str, list[float]] = {"node by node": [], "all nodes at once": []}
    try:
        for pair in range(args.pairs):
            order = [("node by node", 1), ("all nodes at once", 0)]
            for label, at_once in order if pair % 2 == 0 else order[::-1]:
                folder = work / f"{pair}-{at_once}"
                dace.Config.set("default_build_folder", value=str(folder / ".dacecache"))
                sdfg = program(f"together_{pair}_{at_once}", args.nodes)
                started = time.perf_counter()
                report = dace_ai.optimize(
                    sdfg,
                    samples=args.samples,
                    rounds=0,
                    executor="dask",
                    scheduler=cluster.scheduler_address,
                    progress=False,
                    settings={"provider": "scripted-latency", "bench_repeats": 3, "node_concurrency": at_once},
                )
                wall = time.perf_counter() - started
                passed = sum(1 for n in report.nodes for c in n.candidates if c.status == "passed")
                walls[label].append(wall)
                print(
                    f"  {label:18s} wall {wall:6.1f} s  {report.stats.jobs / wall:5.2f} jobs/s  "
                    f"passed {passed}/{report.stats.jobs}  workers {len(report.stats.workers)}",
                    flush=True,
                )
    finally:
        cluster.close()
    one, all_ = sum(walls["node by node"]), sum(walls["all nodes at once"])
    print(
        f"all nodes at once vs node by node: {one / all_:.2f}x faster (wall {all_:.1f} s vs {one:.1f} s over "
        f"{args.pairs} run(s) each)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
