"""The C entry points the sandbox child calls, appended to every candidate's host unit.

The unit every host check compiles (:func:`dace_ai.compilation.compile.compile_candidate`:
:func:`dace_ai.compilation.units.host_unit`, the answer's code as DaCe runs it on the
host, with the real build's compiler and flags) ends with C entry points
(:func:`entry_points`) with one fixed signature whatever the node::

    void* dace_ai_entry_init(const double* symbols);
    void  dace_ai_entry_run(void* state, void** connectors, const double* symbols, const double* params);
    long  dace_ai_entry_run_record(void* state, void** connectors, const double* symbols, const double* params,
                                   long times, void** from, const long* bytes, long count, unsigned char* to,
                                   const volatile int* stop);
    void  dace_ai_entry_exit(void* state, const double* symbols);
    void  dace_ai_entry_team_member(void* team);
    void  dace_ai_install_fault_handler(int fd);
    int   dace_ai_install_yield_handler(int sig);

Pointer connectors get their address; value inputs are read from theirs; value
outputs are written back to theirs. ``dace_ai_entry_run_record`` makes up to ``times`` calls back to
back (at least one; fewer once ``*stop`` is set), as the threads of a program's map make them (the
child's calls at once, with no Python between them), after each copies the ``count`` byte ranges
``from``/``bytes`` (the outputs) to ``to``, one after the other, so that every call is judged, and
returns how many calls it made. ``dace_ai_entry_team_member`` is the body of an OpenMP team that the child
starts through the runtime (``GOMP_parallel``) for code that calls OpenMP, so that each call sees its own
``omp_get_thread_num()`` as in the program's map: each member takes the next slot of the team's
``dace_ai_team_t`` (an atomic count, no OpenMP call of ours: the unit's symbols still tell whether the
answer uses OpenMP), pins itself to the team's core (restored after), publishes its ``pthread_self()`` and
whether it is in its calls, and makes its slot's ``dace_ai_entry_run_record``. ``dace_ai_install_yield_handler`` makes a
signal give up the processor (``sched_yield``) wherever it lands: the child sends it to threads in the
middle of their calls, so that other calls run before theirs ends. The fault handler (our code, not the model's)
writes the signal, the faulting address and whether it was a write to ``fd`` and
lets the signal kill the process, so the parent can say which buffer was overrun.

They live apart from :mod:`dace_ai.compilation.candidate` (which links the compiled unit)
because :mod:`dace_ai.compilation.compile` appends them to the unit it compiles, and the
candidate library is made from that compile: each of the two needs this, neither the other.
"""

from __future__ import annotations

from dace_ai.compilation.units import init_symbols, scope_parameters
from dace_ai.context.types import NodeContext

_FAULT_HANDLER = r"""
#include <signal.h>
#include <sched.h>
#include <unistd.h>
#include <string.h>
#include <pthread.h>
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
/* Whether this thread is inside a call of the candidate (initial-exec: read safely in a signal handler), and how
   many yields landed there: only those let another thread's calls run in the middle of a call. */
static __thread int dace_ai_in_call __attribute__((tls_model("initial-exec")));
static long dace_ai_yields_in_call;
static void dace_ai_on_yield(int) {
    if (dace_ai_in_call) __atomic_fetch_add(&dace_ai_yields_in_call, 1L, __ATOMIC_RELAXED);
    sched_yield();
}
extern "C" long dace_ai_in_call_yields(void) { return __atomic_load_n(&dace_ai_yields_in_call, __ATOMIC_RELAXED); }
extern "C" int dace_ai_install_yield_handler(int sig) {
    struct sigaction sa; memset(&sa, 0, sizeof(sa));
    sa.sa_handler = dace_ai_on_yield;
    sa.sa_flags = SA_RESTART;
    return sigaction(sig, &sa, nullptr);
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

_TEAM_MEMBER = r"""
struct dace_ai_member_t {
    void* st; void** b; const double* s; const double* p; long n; void** from; const long* bytes; long count;
    unsigned char* to; long made; volatile int busy; unsigned long thread;
};
struct dace_ai_team_t { long next; long members; int core; const volatile int* stop; dace_ai_member_t* member; };
extern "C" void dace_ai_entry_team_member(void* data) {
    dace_ai_team_t* team = (dace_ai_team_t*) data;
    long k = __atomic_fetch_add(&team->next, 1L, __ATOMIC_SEQ_CST);
    if (k >= team->members) return;
    dace_ai_member_t* m = team->member + k;
    cpu_set_t before, one;
    int pinned = team->core >= 0 && sched_getaffinity(0, sizeof before, &before) == 0;
    if (pinned) { CPU_ZERO(&one); CPU_SET(team->core, &one); pinned = sched_setaffinity(0, sizeof one, &one) == 0; }
    m->thread = (unsigned long) pthread_self();
    m->busy = 1;
    m->made = dace_ai_entry_run_record(m->st, m->b, m->s, m->p, m->n, m->from, m->bytes, m->count, m->to, team->stop);
    m->busy = 0;
    if (pinned) sched_setaffinity(0, sizeof before, &before);
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
        + "\n".join(locals_)
        + ("\n" if locals_ else "")
        + f"    dace_ai_tasklet({run_args});\n"
        + "\n".join(write_back)
        + ("\n" if write_back else "")
        + "}\n"
        + 'extern "C" long dace_ai_entry_run_record(void* st, void** b, const double* s, const double* p, long n,\n'
        + "        void** from, const long* bytes, long count, unsigned char* to, const volatile int* stop) {\n"
        + "    long k = 0;\n"
        + "    do {\n"
        + "        dace_ai_in_call = 1;\n"
        + "        dace_ai_entry_run(st, b, s, p);\n"
        + "        dace_ai_in_call = 0;\n"
        + "        for (long i = 0; i < count; ++i) { memcpy(to, from[i], (size_t) bytes[i]); to += bytes[i]; }\n"
        + "        ++k;\n"
        + "    } while (k < n && !*stop);\n"
        + "    return k;\n"
        + "}\n"
        + _TEAM_MEMBER
        + 'extern "C" void dace_ai_entry_exit(void* st, const double* s) {\n'
        + f"    dace_ai_exit({exit_args});\n    delete (dace_ai_state_t*) st;\n}}\n"
    )
