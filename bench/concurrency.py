"""Concurrent generation: 16 AI nodes, a (fake) server that takes 1 s per answer.

``dace_ai.generate(sdfg)`` is timed twice on the same SDFG with a fresh answer
cache each time: once with ``max_concurrency=1`` (one request after another, as
a node-by-node expansion would ask) and once with ``max_concurrency=8``. The
provider is the real ``anthropic`` SDK talking to FakeLLMServer (tests/fakes)
on 127.0.0.1, which answers every request after ``--delay`` seconds.

Prints both wall times and their ratio (target: at least 5).

    .venv/bin/python bench/concurrency.py [--nodes 16] [--delay 1.0] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def build_sdfg(nodes: int):
    """One state with ``nodes`` independent AINodes, each reading A and writing its own output."""
    import dace
    import dace_ai

    N = dace.symbol("N")
    sdfg = dace.SDFG("concurrency_bench")
    sdfg.add_array("A", [N], dace.float64)
    state = sdfg.add_state("main")
    for i in range(nodes):
        sdfg.add_array(f"OUT{i}", [N], dace.float64)
        node = dace_ai.AINode(f"scale_{i}", f"Write _out[i] = {i + 1} * _in0[i] for every i < N.",
                              inputs={"_in0"}, outputs={"_out"})
        state.add_node(node)
        state.add_edge(state.add_read("A"), None, node, "_in0", dace.Memlet("A[0:N]"))
        state.add_edge(node, "_out", state.add_write(f"OUT{i}"), None, dace.Memlet(f"OUT{i}[0:N]"))
    return sdfg


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--delay", type=float, default=1.0, help="seconds the fake server takes per answer")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="dace-ai-bench-"))
    os.chdir(work)
    os.environ.update({"ANTHROPIC_API_KEY": "bench-key-not-secret",
                       "DACE_ai_provider": "anthropic", "DACE_ai_model": "claude-bench"})
    import dace
    import dace_ai
    from dace_ai.config.settings import resolve_settings

    from tests.fakes.llm_server import FakeLLMServer, Reply

    def answer(request):
        return Reply(text=json.dumps({"code": "for (int i = 0; i < N; ++i) _out[i] = _in0[i];"}), delay=args.delay)

    server = FakeLLMServer().start().respond_with(answer)
    sdfg = build_sdfg(args.nodes)
    try:
        def timed(concurrency: int, tag: str) -> tuple[float, object]:
            root = work / f".dacecache-{tag}"  # a fresh, empty answer cache for each run
            dace.Config.set("default_build_folder", value=str(root))
            settings = resolve_settings({"base_url": server.url, "max_concurrency": concurrency})
            server.requests.clear()
            server.max_in_flight = 0
            started = time.perf_counter()
            summary = dace_ai.generate(sdfg, settings, progress=False)
            wall = time.perf_counter() - started
            assert summary.generated == args.nodes and summary.failed == 0, str(summary)
            assert len(server.requests) == args.nodes
            return wall, summary

        # Warm-up: one-time costs (plugin loading, SDK import, target detection, environment checks) stay out.
        warm_settings = resolve_settings({"base_url": server.url})
        from dace_ai.expansion import pipeline
        from dace_ai.providers.select import make_client, select_provider

        with pipeline.expansion_pass():
            for nsdfg, state, node in pipeline.pending_nodes(sdfg)[:1]:
                pipeline.build_request(pipeline.node_context(nsdfg, state, node, warm_settings), warm_settings)
        make_client(select_provider(warm_settings), warm_settings)  # imports the SDK

        sequential, _ = timed(1, "sequential")
        in_flight_seq = server.max_in_flight
        concurrent, summary = timed(args.concurrency, "concurrent")
        in_flight_conc = server.max_in_flight
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    ratio = sequential / concurrent
    print(f"{args.nodes} AI nodes, fake server answering each request after {args.delay:g} s")
    print(f"sequential (max_concurrency=1):  {sequential:6.2f} s  (max requests in flight: {in_flight_seq})")
    print(f"concurrent (max_concurrency={args.concurrency}):  {concurrent:6.2f} s  "
          f"(max requests in flight: {in_flight_conc})")
    print(f"sequential wall / concurrent wall = {ratio:.2f}  (target >= 5)")
    print(f"summary of the concurrent run: {summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
