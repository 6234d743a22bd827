"""Built-in plugin: compile checkers for host (CPU, C++) code.

``probe`` (default): the candidate alone in the standalone host unit (what a DaCe
tasklet sees: ``dace/dace.h``, its global code at file scope, its connectors and
symbols as parameters), compiled to an object file with exactly the compiler,
standard and flags of the DaCe build that will compile the program
(:func:`dace_ai.targets.build_flags.build_command`). The compile is shared with
every other checker of the candidate (:func:`dace_ai.checking.compile.compile_candidate`),
so the x86 ISA check costs no second compile. A passed probe's ``details["remarks"]`` hold the
compiler's vectoriser remarks on the answer's own loops (:mod:`dace_ai.checking.remarks`).

``faithful`` (opt-in via the ``checkers`` setting): a program holding only the
generated tasklet with the node's containers, memlets, symbols and environments,
built by DaCe itself and never loaded. Slower, but it sees exactly what DaCe will generate.
"""

from __future__ import annotations

import copy
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dace_ai.checking.api import CheckReport, CheckRequest, Status
from dace_ai.checking.compile import COMPILED, compile_candidate
from dace_ai.checking.diagnostics import errors_with_notes, parse_diagnostics, summarize_output
from dace_ai.checking.host_target import is_host_cpp, uses_host_compiler
from dace_ai.checking.one_node import one_node_program
from dace_ai.checking.remarks import cost_model_note
from dace_ai.checking.units import environment_classes, environment_headers, gpu_host_parts
from dace_ai.context.types import ConnectorInfo, NodeContext, ScopeInfo
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker
from dace_ai.targets.build_flags import builds_with_dace

_MISSING_HEADER = re.compile(r"(?:'|‘|\")?([^'‘’\"\s]+)(?:'|’|\")? ?(?:file not found|: No such file or directory)")


def _only_missing_declared_headers(output: str, declared: set[str]) -> bool:
    """True when every error is a header the answer declared through an environment.

    The probe cannot know where a generated or CMake-found environment puts its
    headers, so such a failure is undecidable here, not the model's fault.
    """
    errors = [d for d in errors_with_notes(parse_diagnostics(output)) if d.is_error]
    if not errors:
        return False
    for diag in errors:
        m = _MISSING_HEADER.search(diag.message)
        if not m or m.group(1).strip('<>"') not in declared:
            return False
    return True


def probe_check(request: CheckRequest) -> CheckReport:
    """Compile the candidate's unit to an object file as the real build would (shared with other checkers)."""
    from dace_ai.compat import dace_runtime_include

    include = dace_runtime_include()
    if not os.path.isfile(os.path.join(include, "dace", "dace.h")):
        return CheckReport("probe", "inconclusive", f"DaCe runtime header dace/dace.h not found under {include}")
    build = compile_candidate(request)
    details = {
        "command": build.command,
        "compiler": build.compiler,
        "flags": build.flags,
        "pch": build.pch,
        "returncode": build.result.returncode,
    }
    if build.missing_compiler:
        return CheckReport("probe", "inconclusive", build.result.output, 0.0, details)
    if build.ok:
        remarks = build.remarks()  # the vectoriser's word on the answer's loops, for the feedback
        details["remarks"] = remarks
        note = cost_model_note(build.remark_kind, build.flags, remarks)
        if note:
            details["remarks_note"] = note
        return CheckReport("probe", "passed", "", 0.0, details)
    if build.result.timed_out:
        return CheckReport(
            "probe", "failed", f"the compiler did not finish: {build.result.output.strip()}", 0.0, details
        )
    build.claim_output("probe")
    envs, _ = environment_classes(request.answer)
    declared = {h.strip('<>"') for env in envs for h in environment_headers(env)}
    declared |= {h.strip('<>"') for req in request.answer.environments for h in req.headers}
    status: Status = "inconclusive" if _only_missing_declared_headers(build.result.output, declared) else "failed"
    return CheckReport("probe", status, build.diagnostics, 0.0, details)


# ----------------------------------------------------------------------------- faithful
def _target_compiles_itself(target_name: str) -> bool:
    """True when the target pack names a compile-stage checker of its own (the SVE pack's ``sve-compile``)."""
    from dace_ai.plugins.manager import get_plugin_manager

    manager = get_plugin_manager()
    target = manager.targets().get(target_name)
    if target is None:
        return False
    checkers = manager.checkers()
    return any(name in checkers and checkers[name].stage == "compile" for name in target.checkers)


def probe_applies(request: CheckRequest) -> bool:
    """Host C++ that DaCe builds, and C++ for a cross target that brings no compile check of its own.

    A cross target (a NEON or RISC-V pack naming only its compiler) is compiled with
    that compiler and its flags; when the compiler is not installed here the report
    says so (inconclusive) instead of compiling with the host's compiler, which
    would judge the code for the wrong machine.
    """
    if not is_host_cpp(request):
        return False
    return builds_with_dace(request.node.target) or not _target_compiles_itself(request.node.target.name)


def _descriptor(conn: ConnectorInfo, live_sdfg: Any) -> Any:
    import dace

    from dace_ai.compat import element_types

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
    from dace_ai.compat import GPU_KERNEL_SCHEDULES

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


def build_standalone(request: CheckRequest) -> StandaloneBuild:
    """Build :func:`standalone_sdfg` with DaCe in ``<workdir>/program``, never loaded here; never raises."""
    from dace_ai.compat import compilation_error_types, compile_without_loading, debugprint_off

    compilation_error, configuration_error = compilation_error_types()
    try:
        sdfg = standalone_sdfg(request)
    except Exception as exc:  # noqa: BLE001 - the node could not be rebuilt: undecidable, not the model's fault
        return StandaloneBuild("not rebuilt", str(exc), 0.0, "")
    folder = Path(request.workdir) / "program"
    sdfg.build_folder = str(folder)
    start = time.perf_counter()
    try:
        with debugprint_off():
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


def faithful_check(request: CheckRequest) -> CheckReport:
    """Build the tasklet-only program with DaCe in ``<workdir>/program`` (never loaded here)."""
    build = build_standalone(request)
    if build.outcome == "not rebuilt":
        return CheckReport("faithful", "inconclusive", f"could not rebuild the node as a program: {build.text}")
    if build.outcome == "compile error":
        return CheckReport(
            "faithful", "failed", summarize_output(build.text), build.seconds, {"program": build.program}
        )
    if build.outcome == "configuration error":
        return CheckReport("faithful", "inconclusive", f"DaCe could not configure the build: {build.text}")
    if build.outcome == "generation error":
        return CheckReport("faithful", "inconclusive", f"DaCe could not generate the program: {build.text}")
    return CheckReport("faithful", "passed", "", build.seconds, {"program": build.program})


@hookimpl
def dace_ai_checkers():
    yield Checker(
        name="probe",
        stage="compile",
        needs=(COMPILED,),
        check=probe_check,
        applies=probe_applies,
        default=True,
        description="Compiles the tasklet alone with the real build's compiler, standard and flags "
        "(dace.h precompiled; one compile shared by the candidate's checkers); a cross "
        "target without a compile check of its own with its compiler and flags",
    )
    yield Checker(
        name="faithful",
        stage="compile",
        check=faithful_check,
        applies=uses_host_compiler,
        default=False,
        description="DaCe build of a program holding only the tasklet with the node's data",
    )
