"""The device program of a host tasklet over GPU data: what the sandbox child runs on the GPU.

The candidate's one-node program (:func:`~dace_ai.compilation.standalone.standalone_sdfg`, as the
``cuda-nvcc`` check builds it) with each GPU container given a host twin of the same layout; the
program copies every twin to the GPU, runs the node, waits until the whole device is idle, and copies
the outputs back (:func:`device_program`). :func:`build_device_program` builds it for
:func:`~dace_ai.sandbox.harness.run_against_reference` (its ``device``); :func:`runs_on_gpu` says
where that can run (an NVIDIA GPU here that DaCe can build for). The ``gpu-verify`` and
``gpu-sanitizers`` checkers both run it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from dace_ai.checking.api import CheckRequest
from dace_ai.compat import compile_without_loading, debugprint_off
from dace_ai.compilation.gpu_toolchain import gpu_build_blocker, nvidia_gpu
from dace_ai.compilation.standalone import standalone_sdfg
from dace_ai.compilation.units import touches_gpu
from dace_ai.sandbox.reference import as_array, program_spec

#: Suffix of a GPU container's host twin in the device program (the child passes it the container's buffer).
HOST_SUFFIX = "_dace_ai_host"


def runs_on_gpu(request: CheckRequest) -> bool:
    """A host tasklet over GPU data, in a live program, on a machine with an NVIDIA GPU DaCe can build for."""

    node = request.node
    return (
        touches_gpu(node)
        and not node.in_gpu_kernel
        and node.target.kind == "gpu"
        and node.target.language == "cuda"
        and bool((node.live or {}).get("sdfg"))
        and nvidia_gpu() is not None
        and gpu_build_blocker() is None
    )


def device_program(request: CheckRequest) -> Any:
    """The candidate's one-node program with host twins of its GPU containers (see the module docstring)."""
    import dace

    sdfg = standalone_sdfg(request)
    (main,) = list(sdfg.states())
    outputs = {c.container for c in request.node.outputs}
    twins = []
    for name in sorted({c.container for c in request.node.connectors}):
        desc = sdfg.arrays[name]
        if not str(desc.storage.name).startswith("GPU_"):
            continue
        desc.transient = True
        host = name + HOST_SUFFIX
        sdfg.add_datadesc(host, as_array(copy.deepcopy(desc)))
        twins.append((host, name))
    copy_in = sdfg.add_state_before(main, "copy_in")
    idle = sdfg.add_state_after(main, "device_idle")
    copy_out = sdfg.add_state_after(idle, "copy_out")
    for host, gpu in twins:
        copy_in.add_nedge(
            copy_in.add_read(host), copy_in.add_write(gpu), dace.Memlet.from_array(host, sdfg.arrays[host])
        )
        if gpu in outputs:
            copy_out.add_nedge(
                copy_out.add_read(gpu), copy_out.add_write(host), dace.Memlet.from_array(gpu, sdfg.arrays[gpu])
            )
    idle.add_tasklet("device_idle", {}, {}, "cudaDeviceSynchronize();", language=dace.Language.CPP, side_effects=True)
    sdfg.name = "ai_device_" + sdfg.name.removeprefix("ai_check_")
    return sdfg


def build_device_program(request: CheckRequest) -> tuple[Path, Any]:
    """(library, the child's program spec) of :func:`device_program`, built in ``<workdir>/device``."""
    sdfg = device_program(request)
    sdfg.build_folder = str(Path(request.workdir) / "device")
    with debugprint_off():
        library = compile_without_loading(sdfg)
    spec = program_spec(sdfg, library)
    spec["args"] = [[name.removesuffix(HOST_SUFFIX), kind] for name, kind in spec["args"]]
    return Path(library), spec
