"""A task's baselines in the task run: the strongest implementations on this machine, timed alongside.

The task run (:mod:`dace_ai.evaluation.task_run`, in the sandbox child every check uses)
times the candidate's program against the task's native program. Next to it, in the
same child run, with the same inputs, interleaved samples and the same threads, it times

* for library-node tasks, the program with the node expanded by each of DaCe's own
  implementations installed here (:func:`dace_ai.sandbox.baselines.node_baselines`:
  ``OpenBLAS``, ``MKL``, ``OpenMP``, ...), each built once per task like the native one;
* the task's NumPy reference (NumPy's BLAS is OpenBLAS, threads as the child's).

A baseline whose own outputs disagree with the reference, or that does not build, is
left out with its reason. Labels name the baseline as figures print it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dace_ai.evaluation.task_programs import program_sdfg
from dace_ai.evaluation.tasks import suite_member
from dace_ai.sandbox.baselines import node_baselines
from dace_ai.sandbox.child.records import BaselineSpec

if TYPE_CHECKING:
    from dace_ai.evaluation.tasks import Task
    from dace_ai.sandbox.child.records import LibrarySpec

NUMPY = "NumPy"

#: The task's native program (AI-node tasks: the ``baseline`` program of the suite).
NATIVE_PROGRAM = "DaCe native program"


class TaskSide(BaselineSpec, total=False):
    """One baseline side of a task run, with the name a baseline left out is filed under; the child's
    job gets the side without it (:func:`job_side`)."""

    name: str


def job_side(side: TaskSide) -> BaselineSpec:
    """The side as the sandbox child reads it: the name is the task run's own bookkeeping."""
    spec = side.copy()
    spec.pop("name", None)
    return spec


def native_label(suite: str, task: Task) -> str:
    """How the task's native baseline is named: ``DaCe pure`` for a library node, else the native program."""
    if task.kind != "library":
        return NATIVE_PROGRAM

    _sdfg, _state, node = program_sdfg(suite, task, f"bench_{task.id}_label")
    found = node_baselines(node).native
    return found.label if found is not None else NATIVE_PROGRAM


def task_baseline_sides(
    suite: str, task: Task, digest: str, arguments: dict[str, Any], build: Callable[[Any], LibrarySpec]
) -> tuple[list[TaskSide], dict[str, str]]:
    """(the bench section's extra sides for one task, baselines left out with their reason).

    ``build(sdfg)`` builds a program once per name without loading it (the task run's
    ``_built``) and returns its program spec. Sides: ``{"label", "kind": "program",
    "program"}`` for each of DaCe's library implementations of a library-node task,
    and ``{"label": "NumPy", "kind": "python", "function", "arrays", "scalars"}``: the
    task's NumPy reference, imported by the sandbox child from the suite's own module
    (a trusted project module, never model code) and called on the case's buffers.
    """
    import numpy as np

    sides: list[TaskSide] = []
    left_out: dict[str, str] = {}
    if task.kind == "library":
        _probe, _state, node = program_sdfg(suite, task, f"bench_{task.id}_probe")
        found = node_baselines(node)
        left_out.update({u.name: u.reason for u in found.unavailable})
        for baseline in found.others:
            if baseline.implementation not in (getattr(type(node), "implementations", None) or {}):
                left_out[baseline.name] = f"an implementation of the nodes {type(node).__name__} becomes, not of it"
                continue
            safe = re.sub(r"\W", "_", baseline.name)
            program, _st, lib_node = program_sdfg(suite, task, f"bench_{task.id}_{safe}_{digest}")
            lib_node.implementation = baseline.implementation
            try:
                spec = build(program)
            except Exception as exc:  # noqa: BLE001 - DaCe's own expansion did not build here
                text = str(exc).strip().splitlines()
                left_out[baseline.name] = f"could not be built: {type(exc).__name__}: {text[-1] if text else ''}"[:300]
                continue
            sides.append({"label": baseline.label, "kind": "program", "program": spec, "name": baseline.name})
    reference = suite_member(suite, task.reference)
    arrays = {name: list(value.shape) for name, value in arguments.items() if isinstance(value, np.ndarray)}
    scalars = {
        name: (value.item() if hasattr(value, "item") else value)
        for name, value in arguments.items()
        if not isinstance(value, np.ndarray)
    }
    sides.append(
        {
            "label": NUMPY,
            "kind": "python",
            "function": f"{reference.__module__}:{reference.__qualname__}",
            "arrays": arrays,
            "scalars": {**scalars, **dict(task.sizes)},
        }
    )
    return sides, left_out
