"""Concurrent generation against the path a user would otherwise take: plain expansion.

16 AI nodes; a (fake) server that takes 1 s per answer. Two ways to get a program's
tasklets, each from an empty answer cache, on copies of one SDFG:

* **expansion only** (what a user gets without ``dace_ai.generate``):
  ``sdfg.expand_library_nodes()``, which asks the provider one node after another;
* **generate, then expand**: ``dace_ai.generate(sdfg)`` with ``max_concurrency=8``
  fills the cache concurrently, then the same ``sdfg.expand_library_nodes()`` finds a
  cache hit for every node.

Both include everything up to the tasklets being in the SDFG (checks off, to time the
requests and not the compiler). The provider is the real ``anthropic`` SDK talking to
FakeLLMServer (tests/fakes) on 127.0.0.1, which answers every request after ``--delay``
seconds. Prints both wall times and their ratio (target: at least 5).

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
        node = dace_ai.AINode(
            f"scale_{i}", f"Write _out[i] = {i + 1} * _in0[i] for every i < N.", inputs={"_in0"}, outputs={"_out"}
        )
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
    os.environ.update(
        {"ANTHROPIC_API_KEY": "bench-key-not-secret", "DACE_ai_provider": "anthropic", "DACE_ai_model": "claude-bench"}
    )
    import dace
    import dace_ai
    from dace_ai.config.settings import resolve_settings

    from tests.fakes.llm_server import FakeLLMServer, Reply

    def answer(request):
        return Reply(text=json.dumps({"code": "for (int i = 0; i < N; ++i) _out[i] = _in0[i];"}), delay=args.delay)

    server = FakeLLMServer().start().respond_with(answer)
    import copy

    from dace_ai.expansion.pending import pending_nodes

    sdfg = build_sdfg(args.nodes)
    os.environ.update({"DACE_ai_base_url": server.url, "DACE_ai_compile_check": "0"})
    try:

        def fresh(tag: str):
            """A copy of the SDFG and an empty answer cache (its own build folder)."""
            dace.Config.set("default_build_folder", value=str(work / f".dacecache-{tag}"))
            server.requests.clear()
            server.max_in_flight = 0
            return copy.deepcopy(sdfg)

        def expanded(program) -> None:
            assert not pending_nodes(program), "AI nodes left unexpanded"
            assert len(server.requests) == args.nodes, len(server.requests)

        # Warm-up: one-time costs (plugin loading, SDK import, target detection, environment checks) stay out.
        os.environ["DACE_ai_max_concurrency"] = "1"
        server.respond_with(
            lambda request: Reply(text=json.dumps({"code": "for (int i = 0; i < N; ++i) _out[i] = _in0[i];"}))
        )
        warm = fresh("warm")
        warm.expand_library_nodes()
        server.respond_with(answer)

        program = fresh("sequential")
        started = time.perf_counter()
        program.expand_library_nodes()
        sequential = time.perf_counter() - started
        expanded(program)
        in_flight_seq = server.max_in_flight

        program = fresh("concurrent")
        started = time.perf_counter()
        summary = dace_ai.generate(program, resolve_settings({"max_concurrency": args.concurrency}), progress=False)
        program.expand_library_nodes()
        concurrent = time.perf_counter() - started
        assert summary.generated == args.nodes and summary.failed == 0, str(summary)
        expanded(program)
        in_flight_conc = server.max_in_flight
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    ratio = sequential / concurrent
    print(f"{args.nodes} AI nodes, fake server answering each request after {args.delay:g} s")
    print(
        f"expansion only (sdfg.expand_library_nodes()):           {sequential:6.2f} s  "
        f"(max requests in flight: {in_flight_seq})"
    )
    print(
        f"dace_ai.generate (max_concurrency={args.concurrency}) + expansion:      {concurrent:6.2f} s  "
        f"(max requests in flight: {in_flight_conc})"
    )
    print(f"expansion only / generate + expansion = {ratio:.2f}  (target >= 5)")
    print(f"summary of the concurrent run: {summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
