"""Built-in plugin: the ``no-shared-state`` checker (stage ``compile``, on by default).

A node inside a parallel scope (a map scheduled ``CPU_Multicore`` or ``Default``
on the CPU, which DaCe runs with OpenMP) is called by several threads at once, each
on its own slice. A ``static`` variable in its code, or a variable at file scope in
its global code, is one object shared by all of those calls: a scratch buffer there
is clobbered by a neighbouring call. The variables the text declares plainly
(:func:`dace_ai.compilation.shared_names.shared_variables`) are refused before the
code runs, with the variable named and the fix (keep scratch local to the call, or
``thread_local``). A reading of the text, so an early refusal of the obvious only:
what decides is the verify stage, which calls the code from several threads at once
and refuses results that differ when the calls overlap, however the state is declared.
"""

from __future__ import annotations

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.compilation.shared_names import shared_variables
from dace_ai.context.concurrency import parallel_scope
from dace_ai.context.types import NodeContext
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker

CHECKER = "no-shared-state"

__all__ = ["CHECKER", "in_parallel_scope", "shared_variables"]


def in_parallel_scope(node: NodeContext) -> bool:
    """True when an enclosing map runs its iterations at the same time on CPU threads."""
    return parallel_scope(node) is not None


def applies(request: CheckRequest) -> bool:
    return in_parallel_scope(request.node)


def shared_state_check(request: CheckRequest) -> CheckReport:
    """Refuse mutable state shared by the concurrent calls of a node in a parallel scope."""
    found = shared_variables(request.answer.code, request.answer.code_global)
    if not found:
        return CheckReport(CHECKER, "passed", details={"static": True}, static=True)
    scope = parallel_scope(request.node)
    assert scope is not None  # the checker applies only inside a parallel scope
    names = ", ".join(f"`{name}` ({where})" for where, name in found)
    return CheckReport(
        CHECKER,
        "failed",
        f"State shared by concurrent calls: {names}. The node runs inside the parallel map {scope.label!r} "
        f"({scope.schedule}), so several threads call this code at once and share these variables: one call's "
        "writes clobber another's. Keep scratch space local to the call (a local array, or memory allocated "
        "and freed in the call), or make it `thread_local`.",
        reason="shared state",
        static=True,
        details={"shared": [{"where": w, "name": n} for w, n in found], "scope": scope.label, "static": True},
    )


@hookimpl
def dace_ai_checkers():
    yield Checker(
        name=CHECKER,
        stage="compile",
        check=shared_state_check,
        applies=applies,
        default=True,
        description="Refuses plainly declared static and file-scope mutable variables in code a parallel map's "
        "threads call at once (an early refusal; the verify stage's calls at the same time decide)",
    )
