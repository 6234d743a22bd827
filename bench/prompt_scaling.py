"""How context collection and prompt rendering scale with the number of AI nodes.

Builds one SDFG with 20 and one with 200 ``AINode`` s (one per state, each inside
a map over the rows of its own arrays, half of them in a nested map), then
times collecting the SDFG's context once and rendering the prompt of every
node. Collection must be linear (one inferred copy per SDFG, not one per node),
so t200 / t20 should stay near 10; the target is at most 12.

Run: ``.venv/bin/python bench/prompt_scaling.py``
"""

from __future__ import annotations

import gc
import time

import dace
from dace_ai.config.settings import resolve_settings
from dace_ai.context.collect import collect_sdfg_context
from dace_ai.expansion.ainode import AINode
from dace_ai.prompt.render import render_prompt

REPEATS = 5


def build(count: int) -> dace.SDFG:
    """An SDFG with ``count`` AI nodes, each in its own state inside one or two maps."""
    N = dace.symbol("N")
    sdfg = dace.SDFG(f"scaling_{count}")
    previous = None
    for k in range(count):
        sdfg.add_array(f"A{k}", [N, 8], dace.float64)
        sdfg.add_array(f"B{k}", [N, 8], dace.float64)
        state = sdfg.add_state(f"s{k}") if previous is None else sdfg.add_state_after(previous, f"s{k}")
        previous = state
        node = AINode(f"ai{k}", f"Write _a scaled by {k + 1} into _out.", inputs={"_a"}, outputs={"_out"})
        read, write = state.add_read(f"A{k}"), state.add_write(f"B{k}")
        me, mx = state.add_map(f"rows{k}", {"i": "0:N"})
        if k % 2:
            ie, ix = state.add_map(f"cols{k}", {"j": "0:8"})
            state.add_memlet_path(read, me, ie, node, dst_conn="_a", memlet=dace.Memlet(f"A{k}[i, j]"))
            state.add_memlet_path(node, ix, mx, write, src_conn="_out", memlet=dace.Memlet(f"B{k}[i, j]"))
        else:
            state.add_memlet_path(read, me, node, dst_conn="_a", memlet=dace.Memlet(f"A{k}[i, 0:8]"))
            state.add_memlet_path(node, mx, write, src_conn="_out", memlet=dace.Memlet(f"B{k}[i, 0:8]"))
    return sdfg


def prompts_for(sdfg: dace.SDFG, settings) -> list[str]:
    ctx = collect_sdfg_context(sdfg, settings)
    return [render_prompt(ctx.node_context(state, node), settings).user for state, node in ctx.library_nodes()]


def timed(count: int, settings) -> float:
    """Best of ``REPEATS`` wall times (a fresh SDFG each time, so nothing is reused between runs)."""
    best = float("inf")
    for _ in range(REPEATS):
        sdfg = build(count)
        gc.collect()  # start each run from the same heap, so earlier garbage is not billed to it
        start = time.perf_counter()
        prompts = prompts_for(sdfg, settings)
        best = min(best, time.perf_counter() - start)
        assert len(prompts) == count and len(set(prompts)) == count
    return best


def main() -> None:
    settings = resolve_settings()
    prompts_for(build(2), settings)  # once-per-process costs: plugin loading, target detection, environments
    t20 = timed(20, settings)
    t200 = timed(200, settings)
    print(f"t20  = {t20 * 1000:8.1f} ms  ({t20 / 20 * 1000:.2f} ms per node)")
    print(f"t200 = {t200 * 1000:8.1f} ms  ({t200 / 200 * 1000:.2f} ms per node)")
    ratio = t200 / t20
    print(f"t200/t20 = {ratio:.2f} (target <= 12: {'ok' if ratio <= 12 else 'TOO HIGH'})")


if __name__ == "__main__":
    main()
