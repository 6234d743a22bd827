"""Built-in plugin: compile checkers for host (CPU, C++) code.

``probe`` (default): the candidate alone in the standalone host unit (what a DaCe
tasklet sees: ``dace/dace.h``, its global code at file scope, its connectors and
symbols as parameters), compiled to an object file with exactly the compiler,
standard and flags of the DaCe build that will compile the program
(:func:`dace_ai.targets.build_flags.build_command`). The compile is shared with
every other checker of the candidate (:func:`dace_ai.compilation.compile.compile_candidate`),
so the x86 ISA check costs no second compile. A passed probe's ``details["remarks"]`` hold the
compiler's vectoriser remarks on the answer's own loops (:mod:`dace_ai.compilation.remarks`).

``faithful`` (opt-in via the ``checkers`` setting): a program holding only the
generated tasklet with the node's containers, memlets, symbols and environments,
built by DaCe itself and never loaded. Slower, but it sees exactly what DaCe will generate.
"""

from __future__ import annotations

import os
import re

from dace_ai.checking.api import CheckReport, CheckRequest, Status
from dace_ai.compat import dace_runtime_include
from dace_ai.compilation.compile import COMPILED, compile_candidate
from dace_ai.compilation.diagnostics import errors_with_notes, parse_diagnostics, summarize_output
from dace_ai.compilation.host_target import is_host_cpp, uses_host_compiler
from dace_ai.compilation.remarks import cost_model_note
from dace_ai.compilation.standalone import build_standalone
from dace_ai.compilation.units import environment_classes, environment_headers
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.manager import get_plugin_manager
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
