"""The C++ of a spot check: what records one call of a tasklet, and the line the tasklet gets.

Every line the tasklet gets ends with :data:`MARK`, and the global code sits between
:data:`BEGIN` and :data:`END` lines, so :func:`~dace_ai.runtime_check.instrument.strip`
gives back exactly what the model wrote. The line before the model's code starts the
recording and constructs a scope guard whose destructor finishes it, so a ``return``, a
``goto`` out of the code or an exception still completes the recording (``exit``,
``longjmp`` and their kin are refused before the code runs, by the ``no-escape`` checker).

The recorder's state is set from Python through ``__dace_ai_spot_<id>_arm``: 0 never armed
(no dace-ai hook in this process, said once on stderr), negative off, 1 watching (a call
whose symbols, shapes and strides differ from the last recorded one is recorded, any other
costs one load and a compare of a few numbers), 2 record the next call, 3 failed (a call only
raises a flag). ``_status`` gives the address of two ints Python reads after each program
call: [0] 0 nothing recorded, 1 a call was recorded, 2 the call's data was over
:data:`RECORD_LIMIT_BYTES` and was not, 3 a recording started and did not finish; [1] 1 when
the node was called in state 3. ``_fetch``, ``_number`` and ``_elapsed`` read the recorded call; ``_seen`` tells a library
loaded again the shape its process already checked.
Only one call per arming is recorded (an atomic claim), so concurrent map points cost a few
loads each.
"""

from __future__ import annotations

import re
from string import Template

from dace_ai.runtime_check.plan import SpotPlan

MARK = "// dace-ai run-time check"
_IDENT = re.compile(r"__dace_ai_spot_(\w{12})_begin\(")
BEGIN = "// dace-ai run-time check {ident} begin"
END = "// dace-ai run-time check {ident} end"

#: The most one call's recording may copy (its inputs and outputs together); a larger call is not recorded.
RECORD_LIMIT_BYTES = 2 << 30
_EXPORT = 'extern "C" __attribute__((visibility("default")))'

_COPY = r"""#ifndef DACE_AI_SPOT_COPY
#define DACE_AI_SPOT_COPY
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
template <typename T>
static void *__dace_ai_spot_copy(const T *src, const long long *dims, int nd) {
    long long count = 1;
    for (int d = 0; d < nd; ++d) count *= dims[d];
    T *dst = static_cast<T *>(std::malloc(sizeof(T) * (count > 0 ? count : 1)));
    if (!dst || count <= 0) return dst;
    long long index[16] = {0};
    for (long long k = 0; k < count; ++k) {
        long long at = 0;
        for (int d = 0; d < nd; ++d) at += index[d] * dims[nd + d];
        dst[k] = src[at];
        for (int d = nd - 1; d >= 0; --d) {
            if (++index[d] < dims[d]) break;
            index[d] = 0;
        }
    }
    return dst;
}
// runs its function when the scope it lives in is left, by any path (return, goto, break, an exception)
template <typename F>
struct __dace_ai_spot_guard {
    F finish;
    ~__dace_ai_spot_guard() { finish(); }
};
template <typename F>
static __dace_ai_spot_guard<F> __dace_ai_spot_defer(F finish) {
    return {finish};
}
static inline long long __dace_ai_spot_now() {
    return (long long) std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}
template <typename T>
static void *__dace_ai_spot_value(T value) {
    T *dst = static_cast<T *>(std::malloc(sizeof(T)));
    if (dst) *dst = value;
    return dst;
}
#endif
"""


def _parameter(conn_ctype: str, is_pointer: bool, name: str) -> str:
    return f"const {conn_ctype} *{name}" if is_pointer else f"{conn_ctype} {name}"


#: One node's recorder (``string.Template``: ``$ns`` names it, ``$count`` connectors, ``$numbers`` recorded numbers).
_RECORDER = Template("""#ifndef DACE_AI_SPOT_$ident
#define DACE_AI_SPOT_$ident
namespace $ns {
static std::atomic<int> armed(0), claimed(0), told(0), have_seen(0);
static std::atomic<long long> seen[$slots];
static int status[2] = {0, 0};
static long long started = 0, elapsed = 0;
static void *data[$count] = {0};
static long long numbers[$slots] = {0};
}
$export void ${ns}_arm(int state) {
    using namespace $ns;
    for (int k = 0; k < $count; ++k) { std::free(data[k]); data[k] = 0; }
    __atomic_store_n(&status[0], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&status[1], 0, __ATOMIC_RELAXED);
    claimed.store(0); armed.store(state);
}
$export int *${ns}_status() { return $ns::status; }
$export void ${ns}_seen(const long long *n) {
    using namespace $ns;
    for (int k = 0; k < $numbers; ++k) seen[k].store(n[k], std::memory_order_relaxed);
    have_seen.store(1, std::memory_order_release);
}
$export int ${ns}_fetch(int k, void **out) {
    using namespace $ns;
    *out = (k >= 0 && k < $count) ? data[k] : 0;
    return __atomic_load_n(&status[0], __ATOMIC_ACQUIRE);
}
$export long long ${ns}_number(int k) {
    using namespace $ns;
    return (k >= 0 && k < $slots) ? numbers[k] : 0;
}
$export long long ${ns}_elapsed() { return $ns::elapsed; }
static inline int ${ns}_begin($begin_params) {
    using namespace $ns;
    int state = armed.load(std::memory_order_acquire);
    if (state != 2) {
        if (state == 1) {  // watching: only a call of another shape than the last recorded one is recorded
            if (have_seen.load(std::memory_order_acquire)) {
                int k = 0;
                while (k < $numbers && seen[k].load(std::memory_order_relaxed) == n[k]) ++k;
                if (k == $numbers) return -1;
            }
        } else {
            if (state == 3) __atomic_store_n(&status[1], 1, __ATOMIC_RELAXED);
            else if (state == 0 && !told.exchange(1))
                std::fprintf(stderr, "dace-ai: the run-time check of node '%s' is off in this process "
                                     "(no dace-ai hook arms it here); the node runs unchecked\\n", "$node");
            return -1;
        }
    }
    int expected = 0;
    if (!claimed.compare_exchange_strong(expected, 1)) return -1;
    for (int k = 0; k < $numbers; ++k) seen[k].store(n[k], std::memory_order_relaxed);
    have_seen.store(1, std::memory_order_release);
    std::memcpy(numbers, n, sizeof(long long) * $numbers);
    double bytes = 0;
$sizes
    if (bytes > $limit.0) { __atomic_store_n(&status[0], 2, __ATOMIC_RELEASE); return -1; }
    __atomic_store_n(&status[0], 3, __ATOMIC_RELEASE);
$copy_inputs
    started = __dace_ai_spot_now();
    return 0;
}
static inline void ${ns}_end($end_params) {
    using namespace $ns;
    if (ticket < 0) return;
    elapsed = __dace_ai_spot_now() - started;
$copy_outputs
    __atomic_store_n(&status[0], 1, __ATOMIC_RELEASE);
}
#endif
""")


def _copies(plan: SpotPlan, direction: str) -> str:
    """Statements copying the connectors of one direction into the recording."""
    layout = plan.layout()
    lines = []
    for index, conn in enumerate(plan.connectors):
        if conn.direction != direction:
            continue
        if conn.is_pointer:
            at, nd = layout[conn.name]
            lines.append(f"    data[{index}] = __dace_ai_spot_copy<{conn.ctype}>({conn.name}, n + {at}, {nd});")
        else:
            lines.append(f"    data[{index}] = __dace_ai_spot_value<{conn.ctype}>({conn.name});")
    return "\n".join(lines)


def _sizes(plan: SpotPlan) -> str:
    """Statements adding up the bytes one call's recording would copy."""
    layout = plan.layout()
    lines = []
    for conn in plan.connectors:
        if conn.is_pointer:
            at, nd = layout[conn.name]
            dims = " * ".join(f"(double) n[{at + d}]" for d in range(nd)) or "1.0"
            lines.append(f"    bytes += sizeof({conn.ctype}) * {dims};")
    return "\n".join(lines)


def global_code(plan: SpotPlan) -> str:
    """The recorder's functions, for the tasklet's global code."""
    ins = [c for c in plan.connectors if c.direction == "in"]
    outs = [c for c in plan.connectors if c.direction == "out"]
    recorder = _RECORDER.substitute(
        ident=plan.ident,
        ns=f"__dace_ai_spot_{plan.ident}",
        count=len(plan.connectors),
        slots=max(plan.numbers, 1),
        numbers=plan.numbers,
        export=_EXPORT,
        node=plan.node.replace("\\", "\\\\").replace('"', '\\"'),
        begin_params=", ".join(["const long long *n", *(_parameter(c.ctype, c.is_pointer, c.name) for c in ins)]),
        end_params=", ".join(
            ["int ticket", "const long long *n", *(_parameter(c.ctype, c.is_pointer, c.name) for c in outs)]
        ),
        sizes=_sizes(plan),
        limit=RECORD_LIMIT_BYTES,
        copy_inputs=_copies(plan, "in"),
        copy_outputs=_copies(plan, "out"),
    )
    return f"{BEGIN.format(ident=plan.ident)}\n{_COPY}{recorder}{END.format(ident=plan.ident)}\n"


def call_line(plan: SpotPlan) -> str:
    """The line before the model's code: it records the inputs and guards the scope, whose every exit records
    the outputs."""
    i = plan.ident
    ns = f"__dace_ai_spot_{i}"
    numbers = [f"(long long)({expr})" for _, expr in plan.values]
    for conn in plan.connectors:
        if conn.is_pointer:
            numbers += [f"(long long)({e})" for e in (*conn.shape, *conn.strides)]
    ins = ", ".join(c.name for c in plan.connectors if c.direction == "in")
    # output pointers as they are before the model's code runs (code may advance them: *_c++ = ...)
    kept = [c for c in plan.connectors if c.direction == "out" and c.is_pointer]
    held = "".join(f"auto *const {ns}_{c.name} = {c.name}; " for c in kept)
    outs = ", ".join(f"{ns}_{c.name}" if c in kept else c.name for c in plan.connectors if c.direction == "out")
    return (
        f"const long long {ns}_n[] = {{{', '.join(numbers) or '0'}}}; {held}"
        f"const int {ns}_t = {ns}_begin({ns}_n{', ' + ins if ins else ''}); "
        f"auto &&{ns}_g = __dace_ai_spot_defer([&]() {{ {ns}_end({ns}_t, {ns}_n{', ' + outs if outs else ''}); }}); "
        f"(void) {ns}_g;  {MARK}"
    )


def ident_of(code: str) -> str | None:
    """The spot check's id in a tasklet's code, or None."""
    found = _IDENT.search(code)
    return found.group(1) if found else None
