"""The candidate as a shared library the sandbox child can call, compiled once per answer.

The unit is :func:`dace_ai.checking.units.host_unit` (the answer's code as DaCe runs
it on the host) plus C entry points with one fixed signature whatever the node::

    void* dace_ai_entry_init(const double* symbols);
    void  dace_ai_entry_run(void* state, void** connectors, const double* symbols, const double* params);
    void  dace_ai_entry_exit(void* state, const double* symbols);
    void  dace_ai_install_fault_handler(int fd);

Pointer connectors get their address; value inputs are read from theirs; value
outputs are written back to theirs. The fault handler (our code, not the model's)
writes the signal, the faulting address and whether it was a write to ``fd`` and
lets the signal kill the process, so the parent can say which buffer was overrun.

It is compiled with the compiler and flags of DaCe's own build (``compiler.cpu``
configuration, plus OpenMP as DaCe's CMake adds it) and the precompiled ``dace.h``
of the probe. The library is only ever loaded by the child.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from dace_ai.checking.api import CheckRequest
from dace_ai.checking.units import ToolResult, host_unit, run_tool, scope_parameters

LIBRARY = "candidate.so"
SOURCE = "candidate.cpp"

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


def entry_points(request: CheckRequest) -> str:
    """The C entry points around ``dace_ai_tasklet`` for this node's connectors and symbols."""
    node = request.node
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
    init_args = ", ".join(["st", *sym_args])
    exit_args = ", ".join(["(dace_ai_state_t*) st", *sym_args])
    run_args = ", ".join(["(dace_ai_state_t*) st", *sym_args, *param_args, *conn_args])
    return (
        _FAULT_HANDLER
        + 'extern "C" void* dace_ai_entry_init(const double* s) {\n'
        + f"    dace_ai_state_t* st = new dace_ai_state_t();\n    dace_ai_init({init_args});\n    return st;\n}}\n"
        + 'extern "C" void dace_ai_entry_run(void* st, void** b, const double* s, const double* p) {\n'
        + "\n".join(locals_) + ("\n" if locals_ else "")
        + f"    dace_ai_tasklet({run_args});\n"
        + "\n".join(write_back) + ("\n" if write_back else "") + "}\n"
        + 'extern "C" void dace_ai_entry_exit(void* st, const double* s) {\n'
        + f"    dace_ai_exit({exit_args});\n    delete (dace_ai_state_t*) st;\n}}\n"
    )


def build_command() -> tuple[list[str], list[str]]:
    """(compiler, flags) of DaCe's own host build: ``compiler.cpu.executable``/``args``, plus OpenMP for GCC."""
    from dace_ai.checking.host import _base_flags
    from dace_ai.targets.host import host_compiler

    compiler, flags = host_compiler()
    return list(compiler), _base_flags(list(compiler), list(flags))


def compile_candidate(request: CheckRequest) -> tuple[Path | None, ToolResult | None, str]:
    """Build ``<workdir>/sandbox/candidate.so``; (library or None, the compiler run, the source text).

    Reused when the source and command are unchanged (the workdir is keyed by the answer).
    """
    from dace_ai.checking.host import _environment_classes, _environment_headers, ensure_pch
    from dace_ai.compat import dace_runtime_include

    compiler, flags = build_command()
    envs, _ = _environment_classes(request.answer)
    headers = [h for env in envs for h in _environment_headers(env)]
    headers += [h for req in request.answer.environments for h in req.headers]
    prelude = "\n".join(f"#include {h}" if h.startswith("<") else f'#include "{h}"' for h in headers)
    source = host_unit(request.answer, request.node, prelude=prelude) + entry_points(request)
    folder = Path(request.workdir) / "sandbox"
    folder.mkdir(parents=True, exist_ok=True)
    if shutil.which(compiler[0]) is None:
        return None, ToolResult(tuple(compiler), 127, f"{compiler[0]}: not found on PATH", 0.0), source
    pch_args, _ = ensure_pch(compiler, flags)
    libs = [f"-l{lib}" for env in envs for lib in (env.cmake_libraries or []) if "/" not in lib]
    includes = [f"-I{d}" for env in envs for d in (env.cmake_includes or [])]
    argv = [*compiler, *flags, "-I", dace_runtime_include(), *includes, *pch_args, "-shared", SOURCE,
            "-o", LIBRARY, *libs]
    stamp = hashlib.sha256(("\0".join(argv) + "\0" + source).encode()).hexdigest()
    library, stamp_file = folder / LIBRARY, folder / "candidate.stamp"
    if library.is_file() and stamp_file.is_file() and stamp_file.read_text() == stamp:
        return library, None, source
    (folder / SOURCE).write_text(source, encoding="utf-8")
    result = run_tool(argv, cwd=folder, timeout=300, env={"LC_ALL": "C"})
    if not result.ok:
        return None, result, source
    stamp_file.write_text(stamp)
    os.utime(library)
    return library, result, source
