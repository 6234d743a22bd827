"""Calls after the inputs changed in place: one state called again on the same buffers, as a loop calls it.

:func:`call_in_place`: ``case["in_place"]`` holds cases whose inputs are the case's own with changes
made in order (:func:`~dace_ai.sandbox.cases.add_in_place_calls`): one element at a time, each its own
call (every element of an input view of at most 6, else its first, last and middle elements and 3 drawn
from the case's seed and sizes; up to 4 input views, so at most 24 calls), then every element shifted, then every
element scaled (see :func:`~.inputs.changed`): at most 26 calls. Each is written into the same buffers
(the inputs' contents only; outputs keep what the last call left, as in a loop) and called, and its
outputs compared with the reference's: a wrong one is kind ``kept`` (the output depends on something
other than the inputs' current values, a result remembered for the buffer's address and a few sampled
elements, say: some changed element is one it does not sample). The calls reuse the verify run's build,
state and buffers; each costs one call of the candidate and one comparison."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .buffers import GuardedBuffer
from .compare import against_reference, connector_views, expected_of, outputs_now, same_outputs
from .inputs import case_data
from .process import Phase
from .programs import P, Program
from .records import Case, Change, Problem

Outputs = dict[str, np.ndarray]


def finite_reference(case: Case, native: Outputs | None) -> bool:
    """Whether the reference's outputs of ``case`` are all finite (else the case says nothing)."""
    for conn in case["connectors"]:
        if conn["direction"] != "out":
            continue
        expected = expected_of(case, conn, native)
        if expected is not None and np.asarray(expected).dtype.kind in "fc" and not np.all(np.isfinite(expected)):
            return False
    return True


def call_in_place(
    case: Case,
    candidate: Program[P],
    prepared: P,
    buffers: dict[str, GuardedBuffer],
    natives: Mapping[Any, Outputs | None],
    phase: Phase,
) -> Problem | None:
    """The calls of ``case["in_place"]`` on the case's own buffers and state, judged after each.

    A case whose reference is not finite (or failed, ``unfit``) is written but not judged.
    """
    inputs = [c["name"] for c in case["containers"] if c["input"]]
    for step, later in enumerate(case.get("in_place") or []):
        data = case_data(later)
        for name in inputs:
            buffers[name].array[:] = data[name]  # the same memory, its values changed
        phase(who="candidate", step="in_place", seed=later["seed"], sizes=later["sizes"], call=step + 2)
        before = outputs_now(later, buffers)
        candidate.call(prepared)
        after = outputs_now(later, buffers)
        native = natives.get(later.get("id"))
        if later.get("unfit") or not finite_reference(later, native):
            continue
        problem = against_reference(later, connector_views(later, after), native)
        if problem is None:
            continue
        change: Change = later["changes"][-1]
        out: Problem = {**problem, "kind": "kept", "was": problem["kind"], "calls": step + 2, "change": change}
        out["unchanged"] = same_outputs(before, after)
        if change["kind"] == "element":
            out["value"] = data[change["container"]][change["element"]].item()
        return out
    return None
