"""The candidate's tasklet alone in a program DaCe builds: the node's containers, memlets, symbols and
environments around the very tasklet the expansion would place (inside the node's GPU kernel maps for
device code), built by DaCe into ``<workdir>/program`` and never loaded. The ``faithful`` and GPU build
checks build it; the GPU verify check runs it with host twins (:mod:`dace_ai.sandbox.device_program`)."""

from __future__ import annotations

import copy
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dace_ai.checking.api import CheckRequest
from dace_ai.compat import (
    GPU_KERNEL_SCHEDULES,
    compilation_error_types,
    compile_without_loading,
    debugprint_off,
    element_types,
    gpu_backend,
)
from dace_ai.compilation.one_node import one_node_program
from dace_ai.compilation.units import environment_classes, gpu_host_parts
from dace_ai.context.types import ConnectorInfo, NodeContext, ScopeInfo


def _descriptor(conn: ConnectorInfo, live_sdfg: Any) -> Any:
    import dace

    if live_sdfg is not None and conn.container in live_sdfg.arrays:
        return copy.deepcopy(live_sdfg.arrays[conn.container])
    dtype = element_types().get(conn.dtype.strip(), None)
    if dtype is None:
        raise ValueError(f"connector {conn.name!r}: unknown element type {conn.dtype!r}")
    shape = [dace.symbolic.pystr_to_symbolic(s) for s in conn.container_shape] or [1]
    strides = [dace.symbolic.pystr_to_symbolic(s) for s in conn.container_strides] or None
    return dace.data.Array(
        dtype, shape, strides=strides if strides and len(strides) == len(shape) else None, transient=conn.transient
    )


def standalone_sdfg(request: CheckRequest) -> Any:
    """A program that holds only the candidate tasklet, wired like the node it replaces."""
    import dace

    answer, node = request.answer, request.node
    live_sdfg = (node.live or {}).get("sdfg")
    envs, _ = environment_classes(answer, request.environments)
    environments = {env.full_class_path() for env in envs}

    def place(state: Any) -> Any:
        if request.make_tasklet is not None:  # the very tasklet the expansion would place, typed the same way
            tasklet = request.make_tasklet(environments, state.sdfg)
            state.add_node(tasklet)
            return tasklet
        code, code_global = gpu_host_parts(state.sdfg, node.name or "tasklet", answer, node, "")
        tasklet = state.add_tasklet(
            node.name or "tasklet",
            {c.name for c in node.inputs},
            {c.name for c in node.outputs},
            code,
            language=dace.Language.CPP,
            code_global=code_global,
            code_init=answer.code_init,
            code_exit=answer.code_exit,
            state_fields=list(answer.state_fields),
            side_effects=answer.side_effects or None,
        )
        tasklet.environments = environments
        return tasklet

    return one_node_program(
        "ai_check_" + re.sub(r"\W", "_", node.name or "node"),
        node,
        place,
        lambda conn: _descriptor(conn, live_sdfg),
        kernel_maps(node),
    )


def kernel_maps(node: NodeContext) -> list[ScopeInfo]:
    """The maps of the GPU kernel around ``node``, outermost first (none for host code)."""
    if not node.in_gpu_kernel:
        return []
    start = next((i for i, s in enumerate(node.scopes) if s.schedule in GPU_KERNEL_SCHEDULES), len(node.scopes))
    return [s for s in node.scopes[start:] if s.kind == "map"]


@dataclass(frozen=True)
class StandaloneBuild:
    """What DaCe made of the tasklet-only program of :func:`build_standalone`."""

    #: ``built``, ``not rebuilt`` (the node could not be made a program), ``compile error``,
    #: ``configuration error`` or ``generation error`` (DaCe's code generation failed).
    outcome: str
    text: str  #: the build's output (paths under its folder made relative) or why it stopped; "" when built
    seconds: float  #: the build's own time (0 when it did not start)
    program: str  #: the program's name ("" when not rebuilt)


def build_standalone(request: CheckRequest, backend: str = "cuda") -> StandaloneBuild:
    """Build :func:`standalone_sdfg` with DaCe in ``<workdir>/program``, never loaded here; never raises.

    GPU code is built with DaCe's ``backend`` (``compiler.cuda.backend``: ``cuda`` or ``hip``)."""
    compilation_error, configuration_error = compilation_error_types()
    try:
        sdfg = standalone_sdfg(request)
    except Exception as exc:  # noqa: BLE001 - the node could not be rebuilt: undecidable, not the model's fault
        return StandaloneBuild("not rebuilt", str(exc), 0.0, "")
    folder = Path(request.workdir) / "program"
    sdfg.build_folder = str(folder)
    start = time.perf_counter()
    try:
        with debugprint_off(), gpu_backend(backend):
            compile_without_loading(sdfg)
    except compilation_error as exc:
        output = str(exc).replace(str(folder) + os.sep, "")
        return StandaloneBuild("compile error", output, time.perf_counter() - start, sdfg.name)
    except configuration_error as exc:
        return StandaloneBuild("configuration error", str(exc), time.perf_counter() - start, sdfg.name)
    except Exception as exc:  # noqa: BLE001 - code generation of the rebuilt program failed
        return StandaloneBuild(
            "generation error", f"{type(exc).__name__}: {exc}", time.perf_counter() - start, sdfg.name
        )
    return StandaloneBuild("built", "", time.perf_counter() - start, sdfg.name)
