"""Built-in plugin: the ``gpu-verify`` checker (stage ``verify``): host tasklets over GPU data run on the GPU.

The candidate becomes a program DaCe builds (:func:`device_program`): its one-node
program (as the ``cuda-nvcc`` check builds it) with each GPU container given a host
twin of the same layout; the program copies every twin to the GPU, runs the node,
waits until the whole device is idle, and copies the outputs back. The sandbox
child (:func:`dace_ai.checking.harness.run_against_reference`) then runs it like any
candidate: the size ladder, seeds and input distributions, outputs filled before
every call, guard regions after every host buffer, inputs unchanged, a second call
with new inputs, a time limit that kills a hung kernel with its process, against the
node's reference (its native expansion on the CPU, or ``reference=``).

It applies where an NVIDIA GPU is present and DaCe can build GPU programs
(:func:`dace_ai.checking.gpu_build.gpu_build_blocker`); elsewhere GPU answers stay
``compile-only``. Device tasklets inside GPU maps are not run yet (their reference
is defined per map point).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.checking.gpu_build import gpu_build_blocker, gpu_compute_capability
from dace_ai.checking.harness import parse_sizes_setting, run_against_reference
from dace_ai.checking.host import standalone_sdfg
from dace_ai.checking.reference import _as_array, program_spec
from dace_ai.checking.sandbox_run import SandboxRun
from dace_ai.checking.units import touches_gpu
from dace_ai.checking.verify import sandbox_report
from dace_ai.plugins.artefacts import Artefact
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker

CHECKER = "gpu-verify"
#: The run ``gpu-verify`` gives (``gpu-sanitizers`` needs it: it runs after it, and only after a passed one).
GPU_RUN: Artefact[SandboxRun] = Artefact("gpu_run")
#: Suffix of a GPU container's host twin in the device program (the child passes it the container's buffer).
HOST_SUFFIX = "_dace_ai_host"


def nvidia_gpu() -> str | None:
    """``<name> sm_XY`` of the first GPU nvidia-smi reports, or None."""

    gpu = gpu_compute_capability()
    return f"{gpu[0]} {gpu[1]}" if gpu is not None else None


def applies(request: CheckRequest) -> bool:
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
        sdfg.add_datadesc(host, _as_array(copy.deepcopy(desc)))
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
    from dace_ai.compat import compile_without_loading, debugprint_off

    sdfg = device_program(request)
    sdfg.build_folder = str(Path(request.workdir) / "device")
    with debugprint_off():
        library = compile_without_loading(sdfg)
    spec = program_spec(sdfg, library)
    spec["args"] = [[name.removesuffix(HOST_SUFFIX), kind] for name, kind in spec["args"]]
    return Path(library), spec


def gpu_verify_check(request: CheckRequest) -> CheckReport:
    """Compare the candidate, run on the GPU, with the node's reference along the size ladder."""

    settings = request.settings
    result = run_against_reference(
        request,
        mode="verify",
        seeds=settings.verify_seeds,
        sizes=parse_sizes_setting(settings.verify_sizes),
        device=build_device_program,
    )
    device = nvidia_gpu() or "GPU"
    message = result.message
    if result.status == "passed":
        message = f"{message} (on {device})".strip()
    report = sandbox_report(CHECKER, request, result, message, result.seconds["total"], {"device": device})
    return report.give(GPU_RUN, result)


@hookimpl
def dace_ai_checkers():
    yield Checker(
        name=CHECKER,
        stage="verify",
        check=gpu_verify_check,
        applies=applies,
        gives=(GPU_RUN,),
        description="Runs host tasklets over GPU data on the GPU (a program DaCe builds, with host twins of the "
        "GPU data) against the node's reference in the sandbox: the size ladder, seeds, distributions",
    )
