"""The candidate as a shared library the sandbox child can call, from its one compile.

The unit every host check compiles (:func:`dace_ai.checking.compile.compile_candidate`:
:func:`dace_ai.checking.units.host_unit`, the answer's code as DaCe runs it on the
host, with the real build's compiler and flags) ends with C entry points
(:func:`entry_points`) with one fixed signature whatever the node::

    void* dace_ai_entry_init(const double* symbols);
    void  dace_ai_entry_run(void* state, void** connectors, const double* symbols, const double* params);
    void  dace_ai_entry_exit(void* state, const double* symbols);
    void  dace_ai_install_fault_handler(int fd);

Pointer connectors get their address; value inputs are read from theirs; value
outputs are written back to theirs. The fault handler (our code, not the model's)
writes the signal, the faulting address and whether it was a write to ``fd`` and
lets the signal kill the process, so the parent can say which buffer was overrun.

The verify stage only links that object into ``candidate.so`` (with the answer's
environments' libraries). The library is only ever loaded by the child.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from dace_ai.checking.api import CheckRequest
from dace_ai.checking.units import ToolResult, environment_classes, init_symbols, run_tool, scope_parameters
from dace_ai.context.types import NodeContext

if TYPE_CHECKING:
    from dace_ai.checking.compile import CandidateBuild

LIBRARY = "candidate.so"

_FAULT_HANDLER = r"""
#include <signal.h>
#include <unistd.h>
#include <string.h>
#if defined(__x86_64__) && defined(__linux__)
#include <ucontext.h>
#endif
static int dace_ai_fault_fd = -1;
static char dace_ai_altstack[1 << 16];
static void dace_ai_put_hex(char* out, unsigned long long v) {
    for (int i = 15; i >= 0; --i) { out[i] = "0123456789abcdef"[v & 15]; v >>= 4; }
}
static void dace_ai_on_fault(int sig, siginfo_t* info, void* ctx) {
    char line[64];
    memcpy(line, "fault ", 6);
    line[6] = (char)('0' + (sig / 10) % 10); line[7] = (char)('0' + sig % 10); line[8] = ' ';
    dace_ai_put_hex(line + 9, (unsigned long long)info->si_addr);
    int write_access = -1;
#if defined(__x86_64__) && defined(__linux__)
    if (ctx) write_access = (((ucontext_t*)ctx)->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;
#endif
    line[25] = ' '; line[26] = (char)(write_access < 0 ? '?' : '0' + write_access); line[27] = '\n';
    if (dace_ai_fault_fd >= 0) { ssize_t r = write(dace_ai_fault_fd, line, 28); (void)r; }
    /* SA_RESETHAND restored the default action: returning faults again and ends the process. */
}
extern "C" void dace_ai_install_fault_handler(int fd) {
    dace_ai_fault_fd = fd;
    stack_t ss; ss.ss_sp = dace_ai_altstack; ss.ss_size = sizeof(dace_ai_altstack); ss.ss_flags = 0;
    sigaltstack(&ss, nullptr);
    struct sigaction sa; memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = dace_ai_on_fault;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
}
"""


def entry_points(node: NodeContext) -> str:
    """The C entry points around ``dace_ai_tasklet`` for this node's connectors and symbols."""
    symbols = list(node.symbols.items())
    params = scope_parameters(node)
    sym_args = [f"({ctype}) s[{i}]" for i, (_, ctype) in enumerate(symbols)]
    param_args = [f"(int) p[{i}]" for i in range(len(params))]
    locals_, conn_args, write_back = [], [], []
    for i, conn in enumerate(node.connectors):
        ctype = conn.ctype.strip()
        if conn.is_pointer:
            conn_args.append(f"({ctype}) b[{i}]")
        elif conn.direction == "in":
            conn_args.append(f"*(const {ctype}*) b[{i}]")
        else:
            locals_.append(f"    {ctype} v{i} = *({ctype}*) b[{i}];")
            conn_args.append(f"v{i}")
            write_back.append(f"    *({ctype}*) b[{i}] = v{i};")
    passed = init_symbols(node)
    init_args = ", ".join(["(dace_ai_state_t*) st", *(a for (name, _), a in zip(symbols, sym_args) if name in passed)])
    exit_args = "(dace_ai_state_t*) st"
    run_args = ", ".join(["(dace_ai_state_t*) st", *sym_args, *param_args, *conn_args])
    return (
        _FAULT_HANDLER
        + 'extern "C" void* dace_ai_entry_init(const double* s) {\n'
        + f"    void* st = new dace_ai_state_t();\n    dace_ai_init({init_args});\n    return st;\n}}\n"
        + 'extern "C" void dace_ai_entry_run(void* st, void** b, const double* s, const double* p) {\n'
        + "\n".join(locals_) + ("\n" if locals_ else "")
        + f"    dace_ai_tasklet({run_args});\n"
        + "\n".join(write_back) + ("\n" if write_back else "") + "}\n"
        + 'extern "C" void dace_ai_entry_exit(void* st, const double* s) {\n'
        + f"    dace_ai_exit({exit_args});\n    delete (dace_ai_state_t*) st;\n}}\n"
    )


def candidate_library(request: CheckRequest) -> tuple[Path | None, CandidateBuild, ToolResult | None]:
    """``<workdir>/sandbox/candidate.so``: the candidate's one shared compile, linked as a shared library.

    The object comes from :func:`dace_ai.checking.compile.compile_candidate` (the
    compile stage's own compile with the real build's flags, whose unit already holds
    the entry points above), so verification adds a link, not a compile. Returns
    (library or None, the compile, the link run or None when reused).
    """
    from dace_ai.checking.compile import compile_candidate

    build = compile_candidate(request)
    folder = Path(request.workdir) / "sandbox"
    folder.mkdir(parents=True, exist_ok=True)
    if not build.ok or build.object is None:
        return None, build, None
    envs, _ = environment_classes(request.answer, request.environments)  # the pipeline's resolved ones too
    libs = [f"-l{lib}" for env in envs for lib in (env.cmake_libraries or []) if "/" not in lib]
    libs += [f for env in envs for f in (env.cmake_link_flags or [])]
    libs += [lib for env in envs for lib in (env.cmake_libraries or []) if "/" in lib]
    libs += [f"-l{lib}" for req in request.answer.environments for lib in req.libraries]
    library = folder / LIBRARY
    # Linked under a private name and renamed into place: identical answers share this folder, and a
    # child loading candidate.so must never see a half-written file (nor one a killed linker left).
    partial = folder / f".{LIBRARY}.{os.getpid()}.{threading.get_ident()}"
    argv = [*build.compiler, *build.flags, "-shared", str(build.object), "-o", str(partial), *libs]
    result = run_tool(argv, cwd=folder, timeout=300, env={"LC_ALL": "C"})
    if not result.ok:
        partial.unlink(missing_ok=True)
        return None, build, result
    os.replace(partial, library)
    return library, build, result
