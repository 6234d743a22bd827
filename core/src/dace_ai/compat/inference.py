"""What context collection reads of an SDFG: inferred types, schedules and storage, loops lifted into regions,
schedule names and element types.
"""

from __future__ import annotations

import copy
from typing import Any

import dace


def element_types() -> dict[str, Any]:
    """C++ and DaCe spellings of element types -> typeclass (``double`` and ``float64`` -> dace.float64)."""
    table: dict[str, Any] = {}
    for tc in (
        dace.bool,
        dace.int8,
        dace.int16,
        dace.int32,
        dace.int64,
        dace.uint8,
        dace.uint16,
        dace.uint32,
        dace.uint64,
        dace.float16,
        dace.float32,
        dace.float64,
        dace.complex64,
        dace.complex128,
    ):
        table[tc.ctype] = tc
        table[tc.to_string()] = tc
    table.update(
        {
            "long": dace.int64,
            "long long": dace.int64,
            "unsigned int": dace.uint32,
            "size_t": dace.uint64,
            "int32_t": dace.int32,
            "int8_t": dace.int8,
            "int16_t": dace.int16,
            "uint16_t": dace.uint16,
            "uint32_t": dace.uint32,
            "std::complex<double>": dace.complex128,
            "std::complex<float>": dace.complex64,
        }
    )
    return table


#: Schedules under which code runs on a GPU device (inside a kernel).
GPU_KERNEL_SCHEDULES: frozenset[str] = frozenset(s.name for s in dace.dtypes.GPU_SCHEDULES)
#: Storage that GPU device code cannot dereference.
HOST_ONLY_STORAGE: frozenset[str] = frozenset({"CPU_Heap", "CPU_ThreadLocal"})
#: Storage that lives in GPU memory (host code cannot dereference it).
GPU_STORAGE: frozenset[str] = frozenset({"GPU_Global", "GPU_Shared"})


def inferred_copy(sdfg: Any) -> tuple[Any, list[str]]:
    """One deep copy of ``sdfg`` with connector types, schedules and storage inferred.

    Inference mutates what it touches, so it runs on a copy; the copy keeps the
    original's node order, which is how nodes of the original are found in it.
    Failures are returned as notes (the context then falls back to memlet rules).
    """
    from dace.sdfg import infer_types

    inferred = copy.deepcopy(sdfg)
    inferred.reset_cfg_list()
    notes: list[str] = []
    try:
        infer_types.infer_connector_types(inferred)
    except Exception as exc:  # noqa: BLE001 - partial inference is still useful
        notes.append(f"connector type inference failed: {type(exc).__name__}: {exc}")
    try:
        infer_types.set_default_schedule_and_storage_types(inferred, None)
    except Exception as exc:  # noqa: BLE001
        notes.append(f"schedule/storage inference failed: {type(exc).__name__}: {exc}")
    return inferred, notes


def lift_state_machine_loops(sdfg: Any) -> list[str]:
    """Turn guard-state loops (what DaCe 1.0.2's frontend emits) into ``LoopRegion`` s, in place.

    Only ever applied to the inferred copy, so enclosing loops can be reported
    without changing the user's SDFG. States keep their identity when moved.
    """
    from dace.transformation.interstate.loop_lifting import LoopLifting

    try:
        sdfg.apply_transformations_repeated([LoopLifting], validate=False)
    except Exception as exc:  # noqa: BLE001
        return [f"loop detection failed: {type(exc).__name__}: {exc}"]
    return []


def loop_description(region: Any) -> tuple[str, str, str] | None:
    """(label, loop variable, 'init; condition; update') of a loop region, else None."""
    from dace.sdfg.state import LoopRegion

    if not isinstance(region, LoopRegion):
        return None

    def text(block: Any) -> str:
        return block.as_string.strip() if block is not None else ""

    header = "; ".join((text(region.init_statement), text(region.loop_condition), text(region.update_statement)))
    return region.label, region.loop_variable or "", header


def schedule_name(node: Any) -> str:
    """A node's schedule by name; ``Default`` for nodes without one (a nested SDFG on DaCe 2)."""
    schedule = getattr(node, "schedule", None)
    return schedule.name if schedule is not None else "Default"
