"""Built-in plugin: the ``no-shared-state`` checker (stage ``compile``, on by default).

A node inside a parallel scope (a map scheduled ``CPU_Multicore`` or ``Default``
on the CPU, which DaCe runs with OpenMP) is called by several threads at once, each
on its own slice. A ``static`` variable in its code, or a variable at file scope in
its global code, is one object shared by all of those calls: a scratch buffer there
is clobbered by a neighbouring call, whatever the verifier saw when it called the
map points one after the other. Such state is refused before the code runs, with
the variable named and the fix (keep scratch local to the call, or
``thread_local``). ``const``/``constexpr`` data, ``thread_local`` data and functions
are fine; nodes outside parallel scopes are not judged by this checker.
"""

from __future__ import annotations

import re

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.checking.probing import code_only
from dace_ai.context.types import NodeContext
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker

CHECKER = "no-shared-state"
#: Map schedules whose iterations run at the same time on the CPU.
PARALLEL_SCHEDULES = ("CPU_Multicore", "CPU_Persistent")

_STATIC = re.compile(r"\bstatic\b(?P<rest>[^;{(]*?)(?P<name>\b[A-Za-z_]\w*)\s*(?P<after>\[|=|;|\{|,)")
_FILE_SCOPE = re.compile(
    r"(?:^|(?<=[;{}]))\s*(?!return\b|typedef\b|using\b|namespace\b|struct\b|class\b|enum\b|template\b|#)"
    r"(?P<rest>(?:[A-Za-z_][\w:<>]*[\s\*&]+)+)(?P<name>[A-Za-z_]\w*)\s*(?P<after>\[|=|;)",
    re.M,
)
_IMMUTABLE = re.compile(r"\b(?:const|constexpr|thread_local|extern)\b")


def in_parallel_scope(node: NodeContext) -> bool:
    """True when an enclosing map runs its iterations at the same time on the CPU."""
    return not node.in_gpu_kernel and any(s.kind == "map" and s.schedule in PARALLEL_SCHEDULES for s in node.scopes)


def _depth_zero(text: str) -> str:
    """``text`` with everything inside braces blanked (what is at file scope); a namespace's braces keep
    file scope."""
    out: list[str] = []
    stack: list[bool] = []  # per open brace: does it open a namespace?
    for index, ch in enumerate(text):
        if ch == "{":
            opens_namespace = bool(re.search(r"\bnamespace\b[\w\s:]*$", text[max(0, index - 80) : index]))
            stack.append(opens_namespace)
        blank = not all(stack) and ch != "\n"
        out.append(" " if blank else ch)
        if ch == "}" and stack:
            stack.pop()
    return "".join(out)


def shared_variables(code: str, code_global: str) -> list[tuple[str, str]]:
    """(where, name) of every mutable variable the calls of the code share."""
    found: list[tuple[str, str]] = []
    for where, text in (("code", code), ("code_global", code_global)):
        for match in _STATIC.finditer(code_only(text)):
            if not _IMMUTABLE.search(match.group("rest")):
                found.append((where, match.group("name")))
    top = _depth_zero(code_only(code_global))
    for match in _FILE_SCOPE.finditer(top):
        rest = match.group("rest")
        if not _IMMUTABLE.search(rest) and not re.search(r"\bstatic\b", rest):
            found.append(("code_global", match.group("name")))
    return list(dict.fromkeys(found))


def applies(request: CheckRequest) -> bool:
    return in_parallel_scope(request.node)


def shared_state_check(request: CheckRequest) -> CheckReport:
    """Refuse mutable state shared by the concurrent calls of a node in a parallel scope."""
    found = shared_variables(request.answer.code, request.answer.code_global)
    if not found:
        return CheckReport(CHECKER, "passed", details={"static": True}, static=True)
    scope = next(s for s in request.node.scopes if s.kind == "map" and s.schedule in PARALLEL_SCHEDULES)
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
        description="Refuses static and file-scope mutable variables in code called concurrently by a parallel "
        "map's threads",
    )
