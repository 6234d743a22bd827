"""Built-in plugin: the ``no-probing`` checker (stage ``compile``, on by default).

A kernel computes its outputs from its inputs; code that asks where it runs can
behave one way in the checks and another in the user's program (a finite CPU limit
in the sandbox, an environment variable, the process's parent, ``/proc``, the host
name, a clock or tick counter to tell a timing loop from a real call, a signal
handler, the checker's own libraries through ``dlopen``). Such calls are refused
before the code runs, with the call named and what to do instead. The list is in
:data:`PROBES`; a lab that needs one of these calls switches the checker off with
``checkers = "-no-probing"``. Comments and string literals are not code and are
not scanned.
"""

from __future__ import annotations

import re

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker

CHECKER = "no-probing"

#: (what it asks, pattern of the call) of every refused way of asking where the code runs.
PROBES: tuple[tuple[str, str], ...] = (
    ("resource limits", r"\b(?:getrlimit|getrlimit64|prlimit|prlimit64|getrusage)\s*\("),
    ("environment variables", r"\b(?:getenv|secure_getenv|setenv|putenv)\s*\(|\b(?:__)?environ\b"),
    ("process identity", r"\b(?:getpid|getppid|gettid|getpgid|getsid|getuid|geteuid|getgid)\s*\("),
    ("/proc or /sys", r"/proc/|/sys/"),
    ("the host name", r"\b(?:gethostname|uname|getdomainname)\s*\("),
    ("signals", r"\b(?:signal|sigaction|raise|alarm|setitimer|kill)\s*\("),
    ("loading libraries", r"\b(?:dlopen|dlsym|dlmopen|dladdr)\s*\("),
    (
        "clocks and tick counters",
        r"\b(?:clock_gettime|gettimeofday|clock|time|omp_get_wtime|__rdtsc|__rdtscp|_rdtsc|clock64|"
        r"__builtin_readcyclecounter|__builtin_ia32_rdtsc)\s*\(|"
        r"\b(?:steady_clock|system_clock|high_resolution_clock)\b",
    ),
    ("the process's state", r"\b(?:sysconf|getcwd|readlink|ptrace|prctl|syscall)\s*\("),
)
_COMPILED = tuple((what, re.compile(pattern)) for what, pattern in PROBES)
_COMMENTS_AND_STRINGS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def code_only(text: str) -> str:
    """``text`` without comments; string literals keep only what names a path (``"/proc/self"``)."""

    def keep(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith(("//", "/*")):
            return " "
        return token if ("/proc/" in token or "/sys/" in token) else '""'

    return _COMMENTS_AND_STRINGS.sub(keep, text)


def probes(code: str) -> list[tuple[str, str]]:
    """(what it asks, the call as written) for every probe in ``code``, in order of appearance."""
    text = code_only(code)
    found = []
    for what, pattern in _COMPILED:
        for match in pattern.finditer(text):
            found.append((match.start(), what, match.group(0).rstrip("( \t")))
    return [(what, call) for _, what, call in sorted(found)]


def probing_check(request: CheckRequest) -> CheckReport:
    """Refuse code that asks where it runs (see the module docstring)."""
    answer = request.answer
    parts = {
        "code": answer.code,
        "code_global": answer.code_global,
        "code_init": answer.code_init,
        "code_exit": answer.code_exit,
    }
    found = [(part, what, call) for part, text in parts.items() for what, call in probes(text)]
    if not found:
        return CheckReport(CHECKER, "passed", details={"static": True}, static=True)
    listed = "; ".join(f"`{call}` in {part} ({what})" for part, what, call in found[:6])
    return CheckReport(
        CHECKER,
        "failed",
        f"Asks where it runs: {listed}. A kernel computes its outputs from its inputs, connectors and "
        "symbols only; code that reads resource limits, the environment, the process, /proc, the host, "
        "clocks or signals can behave differently in the checks than in the program. Remove these calls "
        "(sizes come from the symbols; scratch space is local to the call).",
        reason="asks where it runs",
        static=True,
        details={"probes": [{"part": p, "asks": w, "call": c} for p, w, c in found], "static": True},
    )


@hookimpl
def dace_ai_checkers():
    yield Checker(
        name=CHECKER,
        stage="compile",
        check=probing_check,
        default=True,
        description="Refuses code that asks where it runs (resource limits, environment, process identity, "
        "/proc, host name, clocks, signals, dlopen) before it runs",
    )
