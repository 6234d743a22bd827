"""Built-in plugin: the ``gpu-verify`` checker (stage ``verify``): host tasklets over GPU data run on the GPU.

The candidate becomes a program DaCe builds (:mod:`dace_ai.sandbox.device_program`): its one-node
program (as the ``cuda-nvcc`` check builds it) with each GPU container given a host
twin of the same layout; the program copies every twin to the GPU, runs the node,
waits until the whole device is idle, and copies the outputs back. The sandbox
child (:func:`dace_ai.sandbox.harness.run_against_reference`) then runs it like any
candidate: the size ladder, seeds and input distributions, outputs filled before
every call, guard regions after every host buffer, inputs unchanged, a second call
with new inputs, a time limit that kills a hung kernel with its process, against the
node's reference (its native expansion on the CPU, or ``reference=``).

It applies where an NVIDIA GPU is present and DaCe can build GPU programs
(:func:`dace_ai.compilation.gpu_toolchain.gpu_build_blocker`); elsewhere GPU answers stay
``compile-only``. Device tasklets inside GPU maps are not run on the GPU yet; the GPU packs'
twin checkers run them on their CPU twin (:mod:`dace_ai.sandbox.cpu_twin`).
"""

from __future__ import annotations

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.compilation.gpu_toolchain import nvidia_gpu
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker
from dace_ai.sandbox.cases import parse_sizes_setting
from dace_ai.sandbox.device_program import build_device_program, runs_on_gpu
from dace_ai.sandbox.harness import run_against_reference
from dace_ai.sandbox.run_report import sandbox_report
from dace_ai.sandbox.sandbox_run import GPU_RUN

CHECKER = "gpu-verify"


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
        applies=runs_on_gpu,
        gives=(GPU_RUN,),
        description="Runs host tasklets over GPU data on the GPU (a program DaCe builds, with host twins of the "
        "GPU data) against the node's reference in the sandbox: the size ladder, seeds, distributions",
    )
