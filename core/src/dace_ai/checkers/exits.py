"""Built-in plugin: the ``no-escape`` checker (stage ``compile``, on by default).

The run-time check (setting ``runtime_check``) records a call of a placed tasklet
between a line before the model's code and a scope guard whose destructor runs on
every way out of that code: falling off its end, ``return``, ``break``, a ``goto``
and an exception. Four ways out run no destructor and leave the tasklet, or the
whole process, past the guard: ``exit``, ``_exit``/``_Exit``, ``abort`` and
``quick_exit`` (and ``std::`` ones), ``longjmp``/``siglongjmp`` (with ``setjmp``,
which prepares one), and a ``goto`` to a label the code does not define (a label of
the program around the tasklet). A kernel computes its outputs and returns, so such
code is refused before it runs, naming the call. This is a rule on the code's text
(comments and strings are not code): a guard cannot catch a process that ends.
"""

from __future__ import annotations

import re

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.compilation.code_text import code_only
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker

CHECKER = "no-escape"

#: Calls that leave past every destructor: (what, pattern). A member (``.exit(``, ``->abort(``) is not one.
ESCAPES: tuple[tuple[str, str], ...] = (
    ("ends the process", r"(?<![\w.>])(?:std\s*::\s*)?(?:exit|_exit|_Exit|abort|quick_exit)\s*\("),
    ("jumps past the guard", r"(?<![\w.>])(?:std\s*::\s*)?(?:longjmp|siglongjmp|_longjmp|setjmp|sigsetjmp)\s*\("),
)
_COMPILED = tuple((what, re.compile(pattern)) for what, pattern in ESCAPES)
_GOTO = re.compile(r"\bgoto\s+([A-Za-z_]\w*)")
_LABEL = re.compile(r"(?<![:\w])([A-Za-z_]\w*)\s*:(?!:)")


def escapes(code: str) -> list[tuple[str, str]]:
    """(what it does, the call as written) for every way out of ``code`` past a scope guard, in order."""
    text = code_only(code)
    found = [
        (match.start(), what, re.sub(r"\s+", "", match.group(0).rstrip("( \t")))
        for what, pattern in _COMPILED
        for match in pattern.finditer(text)
    ]
    labels = {m.group(1) for m in _LABEL.finditer(text)} - {"default", "public", "private", "protected"}
    found += [
        (m.start(), "jumps to a label outside its code", f"goto {m.group(1)}")
        for m in _GOTO.finditer(text)
        if m.group(1) not in labels
    ]
    return [(what, call) for _, what, call in sorted(found)]


def escape_check(request: CheckRequest) -> CheckReport:
    """Refuse code that leaves past the run-time check's scope guard (see the module docstring)."""
    answer = request.answer
    parts = {"code": answer.code, "code_global": answer.code_global}
    found = [(part, what, call) for part, text in parts.items() for what, call in escapes(text)]
    if not found:
        return CheckReport(CHECKER, "passed", details={"static": True}, static=True)
    listed = "; ".join(f"`{call}` in {part} ({what})" for part, what, call in found[:6])
    return CheckReport(
        CHECKER,
        "failed",
        f"Leaves past the run-time check: {listed}. A kernel computes its outputs and returns; ending the "
        "process, a long jump or a goto out of the code skips the check that records the call in the user's "
        "program. Return normally (an early `return;` is fine) and report nothing by ending the process.",
        reason="leaves past the run-time check",
        static=True,
        details={"escapes": [{"part": p, "does": w, "call": c} for p, w, c in found], "static": True},
    )


@hookimpl
def dace_ai_checkers():
    yield Checker(
        name=CHECKER,
        stage="compile",
        check=escape_check,
        default=True,
        description="Refuses code that leaves past the run-time check's scope guard (exit, _exit, abort, "
        "quick_exit, longjmp, a goto to a label outside the code) before it runs",
    )
