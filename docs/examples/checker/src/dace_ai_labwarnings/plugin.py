"""The ``lab-warnings`` checker: code that makes the compiler warn is sent back for repair.

A checker receives a :class:`CheckRequest` (the candidate :class:`Answer`, the
node's :class:`NodeContext`, the settings and a private ``workdir``) and returns a
:class:`CheckReport`: ``passed``, ``failed`` (the diagnostics go back to the model)
or ``inconclusive`` (it could not decide, e.g. the compiler is missing).

It builds a standalone unit of the answer exactly as DaCe would call it
(:func:`host_unit`), compiles it in a child process with a time limit
(:func:`run_tool`) and turns the compiler's output into a report
(:func:`report_from_tool`). Nothing built is ever loaded into the user's process.
"""

from __future__ import annotations

import shlex

from dace_ai.plugin import (
    Checker,
    CheckReport,
    CheckRequest,
    Setting,
    dace_include_dir,
    hookimpl,
    host_unit,
    report_from_tool,
    run_tool,
    runtime_standard_flag,
)

NAME = "lab-warnings"

#: The warnings the lab refuses, as a setting it owns (DACE_ai_labwarnings_flags, [tool.dace-ai], ...).
FLAGS = Setting("labwarnings_flags", str, "-Wall -Werror", "Warning flags generated code must compile cleanly with")


def applies(request: CheckRequest) -> bool:
    """Only host C++ (GPU code has its own checkers)."""
    return request.node.target.kind == "cpu" and request.answer.language == "cpp"


def check(request: CheckRequest) -> CheckReport:
    node = request.node
    compiler = node.target.compiler[0] if node.target.compiler else "g++"
    unit = request.workdir / "candidate.cpp"
    unit.write_text(host_unit(request.answer, node, prelude="#include <dace/dace.h>\n"))
    argv = [
        compiler,
        runtime_standard_flag(),
        "-fsyntax-only",
        *shlex.split(request.settings.labwarnings_flags),
        # DaCe's own headers are not the answer's business: their warnings are silenced.
        "-isystem",
        str(dace_include_dir()),
        unit.name,
    ]
    result = run_tool(argv, cwd=request.workdir, timeout=60)
    return report_from_tool(
        NAME,
        result,
        request.workdir,
        failure_prefix="The compiler warns about the code; the lab accepts no warnings:\n",
    )


@hookimpl
def dace_ai_checkers():
    # default=False: it runs where a site asks for it (checkers = "+lab-warnings") or a target names it.
    yield Checker(
        name=NAME,
        stage="compile",
        check=check,
        applies=applies,
        default=False,
        settings=(FLAGS,),
        description="Refuses code the compiler warns about (-Wall -Werror by default)",
    )
