"""A task's SDFGs: the program with the node to implement, the candidate with its tasklet, the baseline.

Used by the job (to collect the node's context and render its prompt) and by the
sandboxed child (to build, compile and run candidate and baseline). Nothing here
runs generated code.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from dace_ai.errors import SettingsError
from dace_ai.evaluation.tasks import Task, suite_member
from dace_ai.expansion.charge import CHARGE

#: Library-node expansions tried while looking for the task's node (MatMul -> Gemm, ...).
MAX_EXPANSIONS = 8


def task_digest(suite: str, task: Task) -> str:
    return hashlib.sha256(json.dumps([suite, task.model_dump(mode="json")], sort_keys=True).encode()).hexdigest()[:10]


def _find(sdfg: Any, task: Task) -> tuple[Any, Any] | None:
    from dace.sdfg import nodes

    for node, parent in sdfg.all_nodes_recursive():
        if not isinstance(node, nodes.LibraryNode):
            continue
        if (task.kind == "library" and type(node).__name__ == task.node) or (
            task.kind == "ai" and node.name == task.node
        ):
            return node, parent
    return None


def program_sdfg(suite: str, task: Task, name: str) -> tuple[Any, Any, Any]:
    """``(sdfg, state, node)``: the task's program with its node found (library nodes set to dace-ai's implementation)."""
    import dace.library  # noqa: F401 - the library node classes register on import
    from dace.sdfg import nodes

    sdfg = suite_member(suite, task.program).to_sdfg()
    sdfg.name = name
    for _ in range(MAX_EXPANSIONS):
        found = _find(sdfg, task)
        if found is not None:
            node, state = found
            if task.kind == "library":
                node.implementation = CHARGE.implementation  # 'ai', or 'dace-ai' when DaCe's own library keeps 'ai'
            return sdfg, state, node
        others = [
            (n, p)
            for n, p in sdfg.all_nodes_recursive()
            if isinstance(n, nodes.LibraryNode) and type(n).__name__ != task.node
        ]
        if not others:
            break
        node, state = others[0]
        node.expand(state.sdfg, state)
    raise SettingsError(f"task {task.id!r}: program {task.program!r} has no node {task.node!r}")


def baseline_sdfg(suite: str, task: Task, name: str) -> Any:
    """The native baseline: the ``baseline`` program, or the task's program expanded natively."""
    sdfg = suite_member(suite, task.baseline or task.program).to_sdfg()
    sdfg.name = name
    return sdfg


def _symbol_values(task: Task) -> dict[str, int]:
    return dict(task.sizes)


def make_arguments(sdfg: Any, task: Task, seed: int) -> dict[str, Any]:
    """Inputs drawn from ``seed``, outputs pre-filled with a canary (NaN, or -7777 for integers)."""
    from dace import symbolic

    rng = np.random.default_rng(seed)
    values = _symbol_values(task)
    args: dict[str, Any] = {}
    for name, desc in sdfg.arglist().items():
        if name in values:  # symbols are passed separately
            continue
        if name in task.scalars:
            args[name] = desc.dtype.type(task.scalars[name])
            continue
        shape = tuple(int(symbolic.evaluate(s, values)) for s in desc.shape)
        dtype = desc.dtype.as_numpy_dtype()
        if name in task.outputs:
            canary = np.nan if np.issubdtype(dtype, np.inexact) else -7777
            args[name] = np.full(shape, canary, dtype=dtype)
            continue
        how = task.inputs.get(name, "uniform")
        data: np.ndarray
        if how.startswith("int:"):
            lo, hi = (int(v) for v in how.split(":")[1:3])
            data = rng.integers(lo, hi, size=shape)
        elif np.issubdtype(dtype, np.complexfloating):
            data = rng.uniform(-1, 1, size=shape) + 1j * rng.uniform(-1, 1, size=shape)
        elif how == "positive":
            data = rng.uniform(0.1, 1, size=shape)
        else:
            data = rng.uniform(-1, 1, size=shape)
        args[name] = np.ascontiguousarray(data, dtype=dtype)
    return args


def compare(task: Task, got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> str | None:
    """``None`` when every output matches its reference, else the first mismatch in words."""
    for name in task.outputs:
        want = np.asarray(expected[name])
        have = np.asarray(got[name]).reshape(want.shape)
        bad = ~np.isclose(have, want, rtol=task.rtol, atol=task.atol)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            with np.errstate(invalid="ignore"):
                err = np.nanmax(np.abs(have - want)) if np.isfinite(have).all() else float("nan")
            return (
                f"output {name!r}: {int(bad.sum())} of {bad.size} elements wrong; first at {list(index)}: "
                f"expected {want[index]!r}, got {have[index]!r}; max error {err!r}"
            )
    return None
