"""Built-in plugin: the ``no-probing`` checker (stage ``compile``, on by default).

A kernel computes its outputs from its inputs; code that asks where it runs can behave one way in the
checks and another in the user's program. The rule reads the code's tokens
(:func:`~dace_ai.compilation.code_text.tokens`): every name of :data:`PROBES` used as the library's
name (called, or taken as a value) is refused with what it asks; the same name as a member
(``s.time``), in another namespace (``mine::clock``) or declared by the code itself (a local
lambda ``signal``, a variable ``time``, a function it defines) is not. Inline assembly is refused
(it can read tick counters); string literals, joined as the compiler joins them, may not name
``/proc`` or ``/sys``. Comments and ``#include``/``#pragma`` lines are not read. A lab that needs one of
these calls switches the checker off with ``checkers = "-no-probing"``.
"""

from __future__ import annotations

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.compilation.code_text import Token, tokens
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker

CHECKER = "no-probing"

#: (what it asks, the names that ask it): exactly the names the rule refuses.
PROBES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("resource limits", ("getrlimit", "getrlimit64", "prlimit", "prlimit64", "getrusage", "sysinfo")),
    (
        "environment variables",
        ("getenv", "secure_getenv", "setenv", "putenv", "unsetenv", "clearenv", "environ", "__environ"),
    ),
    (
        "process identity",
        ("getpid", "getppid", "gettid", "getpgid", "getpgrp", "getsid", "getuid", "geteuid", "getgid", "getegid"),
    ),
    ("the host name", ("gethostname", "uname", "getdomainname")),
    (
        "the machine's load and CPUs",
        (
            "getloadavg",
            "sched_getaffinity",
            "pthread_getaffinity_np",
            "sched_getcpu",
            "getcpu",
            "get_nprocs",
            "get_nprocs_conf",
        ),
    ),
    (
        "signals",
        ("signal", "sigaction", "raise", "alarm", "setitimer", "getitimer", "kill", "sigprocmask", "pthread_sigmask"),
    ),
    ("loading libraries", ("dlopen", "dlsym", "dlvsym", "dlmopen", "dladdr", "dlinfo")),
    (
        "clocks and tick counters",
        (
            "clock_gettime",
            "clock_getres",
            "gettimeofday",
            "clock",
            "time",
            "times",
            "ftime",
            "timespec_get",
            "omp_get_wtime",
            "omp_get_wtick",
            "steady_clock",
            "system_clock",
            "high_resolution_clock",
            "__rdtsc",
            "__rdtscp",
            "_rdtsc",
            "__rdpmc",
            "_rdpmc",
            "clock64",
            "__builtin_readcyclecounter",
            "__builtin_readsteadycounter",
            "__builtin_ia32_rdtsc",
            "__builtin_ia32_rdtscp",
            "__builtin_ia32_rdpmc",
        ),
    ),
    ("the process's state", ("sysconf", "getcwd", "readlink", "ptrace", "prctl", "syscall", "getauxval")),
    ("inline assembly", ("asm", "__asm__", "__asm")),
)
#: Where a string literal (joined as the compiler joins adjacent ones) may not point.
PATHS = ("/proc", "/sys/")
_WHAT = {name: what for what, names in PROBES for name in names}
#: Qualifiers under which a name is still the library's (``std::time``, ``::getpid``, ``std::chrono::steady_clock``).
_LIBRARY_SCOPES = {"", "std", "chrono", "this_thread"}
#: Words before a name that make it an expression, not a declaration (``return time(0)``).
_NOT_TYPES = {"return", "case", "throw", "sizeof", "new", "delete", "else", "do", "goto", "co_return", "co_yield"}


def _declared(toks: list[Token]) -> set[str]:
    """Names the code declares itself: variables, lambdas and functions with a body (not prototypes)."""
    names = set()
    for i, tok in enumerate(toks[1:-1], start=1):
        if tok.kind != "ident" or tok.text not in _WHAT:
            continue
        before, after = toks[i - 1], toks[i + 1]
        typed = before.kind == "ident" and before.text not in _NOT_TYPES and before.text not in _WHAT
        if before.text in ("*", "&", "&&") and i >= 2:
            typed = (
                toks[i - 2].kind == "ident" and toks[i - 2].text not in _NOT_TYPES or toks[i - 2].text in (">", "const")
            )
        typed = typed or before.text == ">"
        if not typed:
            continue
        if after.text in ("=", ";", ",", "[", "{"):
            names.add(tok.text)
        elif after.text == "(" and _defines_body(toks, i + 1):
            names.add(tok.text)
    return names


def _defines_body(toks: list[Token], opening: int) -> bool:
    """Whether the parenthesis at ``opening`` closes before a function body (``{``, after ``const`` etc.)."""
    depth = 0
    for j in range(opening, len(toks)):
        depth += {"(": 1, ")": -1}.get(toks[j].text, 0)
        if depth == 0:
            rest = [t.text for t in toks[j + 1 : j + 4]]
            while rest and rest[0] in ("const", "noexcept", "override", "final"):
                rest.pop(0)
            return bool(rest) and rest[0] == "{"
    return False


def probes(code: str) -> list[tuple[str, str]]:
    """(what it asks, the name or literal as written) of every probe in ``code``, once each, in order of appearance."""
    toks = tokens(code)
    own = _declared(toks)
    found = []
    for i, tok in enumerate(toks):
        if tok.kind == "string" and any(path in tok.text for path in PATHS):
            found.append(("/proc or /sys", f'"{tok.text}"'))
            continue
        if tok.kind != "ident" or tok.text not in _WHAT:
            continue
        before = toks[i - 1].text if i else ""
        if before in (".", "->"):
            continue  # a member of the code's own object
        if before == "::":
            scope = toks[i - 2].text if i >= 2 and toks[i - 2].kind == "ident" else ""
            if scope not in _LIBRARY_SCOPES:
                continue  # a name in the code's own namespace or class
        elif tok.text in own:
            continue
        found.append((_WHAT[tok.text], tok.text))
    return list(dict.fromkeys(found))


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
        "clocks, tick counters or signals, or runs inline assembly, can behave differently in the checks than "
        "in the program. Remove these calls (sizes come from the symbols; scratch space is local to the call; "
        "use intrinsics, not asm).",
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
        "/proc, host name, load and CPUs, clocks and tick counters, signals, dlopen, inline assembly) before it runs",
    )
