"""Whether a node's calls can run at the same time as each other: the enclosing scope whose
iterations run on several CPU threads at once, and the answers whose state every call shares."""

from __future__ import annotations

from collections.abc import Sequence

from dace_ai.context.types import NodeContext, ScopeInfo

#: Schedules of maps (and consume scopes) whose iterations run at the same time on CPU threads
#: (``Default`` stays in for a schedule DaCe has not resolved: on the CPU it becomes OpenMP).
CPU_PARALLEL_SCHEDULES = ("CPU_Multicore", "CPU_Persistent", "Default")


def parallel_scope(node: NodeContext) -> ScopeInfo | None:
    """The outermost enclosing map or consume scope whose iterations run at once on CPU threads, or None
    (also None for code inside a GPU kernel, whose threads are not host threads)."""
    if node.in_gpu_kernel:
        return None
    return next((s for s in node.scopes if s.kind in ("map", "consume") and s.schedule in CPU_PARALLEL_SCHEDULES), None)


def runs_concurrently(node: NodeContext, state_fields: Sequence[str] = ()) -> bool:
    """True when calls of the node's code can overlap: it sits in a parallel CPU scope, or its answer
    keeps state fields (one ``__state`` per program, shared by every call, from any thread)."""
    if node.in_gpu_kernel:
        return False
    return parallel_scope(node) is not None or any(f.strip() for f in state_fields)
