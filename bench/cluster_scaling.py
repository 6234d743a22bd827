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
        return ProviderReply(text=text, usage=Usage(input_tokens=len(request.system), output_tokens=len(text)),
                             model="scripted", stop_reason="end_turn")


def program(name: str, nodes: int):
    import dace
    import dace_ai

    sdfg = dace.SDFG(name)
    state = sdfg.add_state()
    for k in range(nodes):
        sdfg.add_array(f"A{k}", [64], dace.float64)
        sdfg.add_array(f"B{k}", [64], dace.float64)
        node = dace_ai.AINode(f"inc{k}", "Write _out[i] = _a[i] + 1 for every i.", inputs={"_a"},
                              outputs={"_out"}, reference=lambda a: a + 1)
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
            yield Provider(name="scripted-latency", factory=lambda settings: client, offline=False,
                           description="fixed-latency scripted answers (bench)")

    get_plugin_manager().register(Plugin(), "bench-cluster-provider")
    load = os.getloadavg()[0]
    print(f"{args.nodes} AI nodes x {args.samples} samples = {args.nodes * args.samples} check jobs per executor; "
          f"provider latency {args.latency:.2f} s; {os.cpu_count()} cores, load {load:.1f}")
    rows = []
    try:
        for name in args.executors.split(","):
            dace.Config.set("default_build_folder", value=str(work / name / ".dacecache"))
            sdfg = program(f"scaling_{name}", args.nodes)
            started = time.perf_counter()
            report = dace_ai.optimize(sdfg, samples=args.samples, rounds=0, executor=name,
                                      workers=None if name == "threads" else args.workers,
                                      settings={"provider": "scripted-latency", "bench_repeats": 3})
            wall = time.perf_counter() - started
            stats = report.stats
            passed = sum(1 for n in report.nodes for c in n.candidates if c.status == "passed")
            rows.append((name, wall, stats, passed))
            for node in report.nodes:
                for c in node.candidates:
                    if c.status != "passed":
                        print(f"    {node.name} r{c.round}s{c.sample} {c.status} ({c.stage}): "
                              f"{(c.reason.strip().splitlines() or [''])[0][:200]}")
            print(f"  {name:8s} wall {wall:7.1f} s  {stats.jobs / wall:5.2f} jobs/s  checks {stats.check_seconds:7.1f} s"
                  f"  round trips {stats.round_trip_seconds:7.1f} s  outside the checks {stats.outside_checks:5.1%}"
                  f"  passed {passed}/{stats.jobs}  workers {len(stats.workers)}  dace.h {stats.pch}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = rows[0]
    for name, wall, _stats, _ in rows[1:]:
        print(f"{name} vs {base[0]}: {base[1] / wall:.2f}x jobs per second")
    return 0


if __name__ == "__main__":
    sys.exit(main())
