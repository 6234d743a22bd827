"""A task's baselines in the task run: the strongest implementations on this machine, timed alongside.

The task run (the sandboxed child of :mod:`dace_ai.evaluation.child`) times the
candidate's program against the task's native program. Next to it, with the same
inputs, interleaved samples and the same threads, it times

* for library-node tasks, the program with the node expanded by each of DaCe's own
  implementations installed here (:func:`dace_ai.checking.baselines.node_baselines`:
  ``OpenBLAS``, ``MKL``, ``OpenMP``, ...), each built once per task like the native one;
* the task's NumPy reference (NumPy's BLAS is OpenBLAS, threads as the child's).

A baseline whose own outputs disagree with the reference, or that does not build, is
left out with its reason. Labels name the baseline as figures print it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

NUMPY = "NumPy"
#: The task's native program (AI-node tasks: the ``baseline`` program of the suite).
NATIVE_PROGRAM = "DaCe native program"


def native_label(suite: str, task: Any) -> str:
    """How the task's native baseline is named: ``DaCe pure`` for a library node, else the native program."""
    if task.kind != "library":
        return NATIVE_PROGRAM
    from dace_ai.checking.baselines import node_baselines
    from dace_ai.evaluation.programs import program_sdfg

    _sdfg, _state, node = program_sdfg(suite, task, f"bench_{task.id}_label")
    found = node_baselines(node).native
    return found.label if found is not None else NATIVE_PROGRAM


def task_baseline_runs(suite: str, task: Any, sdfg: Any, build_root: Path, digest: str,
                       compiled: Callable[..., Any]) -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    """(timed calls by baseline label, baselines left out with their reason) for one task.

    ``compiled(sdfg, build_root)`` builds a program once per name (the child's cache).
    Runs only in the sandboxed child: it calls compiled DaCe programs.
    """
    from dace_ai.checking.baselines import node_baselines
    from dace_ai.compat import fast_caller
    from dace_ai.evaluation.programs import compare, make_arguments, program_sdfg
    from dace_ai.evaluation.tasks import suite_member

    reference = suite_member(suite, task.reference)
    expected = reference(**make_arguments(sdfg, task, 0), **task.sizes)
    runs: dict[str, Callable[[], Any]] = {}
    left_out: dict[str, str] = {}
    if task.kind == "library":
        _probe, _state, node = program_sdfg(suite, task, f"bench_{task.id}_probe")
        found = node_baselines(node)
        left_out.update({u.name: u.reason for u in found.unavailable})
        for baseline in found.others:
            safe = re.sub(r"\W", "_", baseline.name)
            name = f"bench_{task.id}_{safe}_{digest}"
            program, _st, lib_node = program_sdfg(suite, task, name)
            lib_node.implementation = baseline.implementation
            try:
                built = compiled(program, build_root)
            except Exception as exc:  # noqa: BLE001 - DaCe's own expansion did not build here
                text = str(exc).strip().splitlines()
                left_out[baseline.name] = f"could not be built: {type(exc).__name__}: {text[-1] if text else ''}"[:300]
                continue
            args = make_arguments(sdfg, task, 0)
            built(**args, **task.sizes)
            problem = compare(task, args, expected)
            if problem is not None:
                left_out[baseline.name] = f"its outputs differ from the reference: {problem}"[:300]
                continue
            runs[baseline.label] = fast_caller(built, {**args, **task.sizes})
    args_n = make_arguments(sdfg, task, 0)
    runs[NUMPY] = lambda: reference(**args_n, **task.sizes)
    return runs, left_out
