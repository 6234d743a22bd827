"""The standing adversarial suite: one wrong answer per loophole class the field knows, and its correct twin.

Each wrong answer below is a way generated kernels have passed other verifiers
(KernelBench's adversarial tests and v0.1 notes, KernelBench issue 165, gpu-mode
reference-kernels 159-162, the Sakana incident): an output read before it is written,
inputs modified in place, numerics that break at real magnitudes, zeros for tiny
outputs, results kept across calls, work left running after the call returns,
precision downgraded, code right only at one size, reads outside a view, a
distribution exploited (ties). Every one is refused with a message naming its
class, for library nodes expanded with ``'ai'`` and for ``dace_ai.ai(...,
reference=fn)`` nodes, with ``bench=off`` and with the default stages; a correct
answer of each shape is kept. The sanitizer classes (out-of-bounds inside the
guard slack, undefined behaviour, races found without collisions) are in
tests/test_sanitize.py.
"""

import json

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.checking.levels import verification_level
from dace_ai.checking.stages import run_checks
from dace_ai.expansion.pending import pending_nodes

from tests.check_support import link_shared_artefacts
from tests.test_ladder import MATMUL, ladder_matmul, ladder_sum, request

N = dace.symbol("N")


# ----------------------------------------------------------------------------- references and programs
def scaled(x):
    return 3 * x


def softmax(x):
    e = np.exp(x - np.max(x))
    return e / np.sum(e)


def exponential(x):
    return np.exp(x)


def first_largest(a):
    return np.array([np.argmax(a)])


def int_total(a):
    return np.array([np.sum(a, dtype=np.int32)], dtype=np.int32)


@dace.program
def adv_scale(x: dace.float64[N]):
    return dace_ai.ai("_out[i] = 3 * _x[i] for every i < N", x=x, reference=scaled)


@dace.program
def adv_softmax(x: dace.float64[N]):
    return dace_ai.ai("The softmax of the N elements of _x.", x=x, reference=softmax)


@dace.program
def adv_argmax(a: dace.float64[N]):
    return dace_ai.ai(
        "The index of the first largest element of _a.", a=a, reference=first_largest, shape=[1], dtype=dace.int64
    )


@dace.program
def adv_int_sum(a: dace.int32[N]):
    return dace_ai.ai("The sum of the N elements of _a (int32, wrapping).", a=a, reference=int_total, shape=[1])


# ----------------------------------------------------------------------------- answers
SCALE = "for (int i = 0; i < N; ++i) _out[i] = 3 * _x[i];"
SOFTMAX = (
    "double m = _x[0]; for (int i = 1; i < N; ++i) m = _x[i] > m ? _x[i] : m;"
    " double s = 0; for (int i = 0; i < N; ++i) { _out[i] = exp(_x[i] - m); s += _out[i]; }"
    " for (int i = 0; i < N; ++i) _out[i] /= s;"
)
ARGMAX = "long b = 0; for (int i = 1; i < N; ++i) if (_a[i] > _a[b]) b = i; _out = b;"
INT_SUM = "int s = 0; for (int i = 0; i < N; ++i) s += _a[i]; _out = s;"
SUM = "double s = 0; for (int i = 0; i < N; ++i) s += _a[i]; _out = s;"
SLEEPER = "#include <thread>\n#include <chrono>\n"
CACHE = "static double dace_ai_kept[1 << 16]; static long dace_ai_kept_n = -1;\nstatic double dace_ai_kept_total = 0;\n"

#: (class, program, code, global code, what the refusal must say)
WRONG = [
    (
        "read-before-write-gemm",
        ladder_matmul,
        (
            "for (int i = 0; i < N; ++i) for (int j = 0; j < M; ++j) for (int k = 0; k < K; ++k)"
            " _c[i * M + j] += _a[i * K + k] * _b[k * M + j];"
        ),
        "",
        ("Output read before it is written", "reads `_c` before writing it", "zero it or write it first"),
    ),
    (
        "read-before-write-sum",
        ladder_sum,
        "for (int i = 0; i < N; ++i) _out += _a[i];",
        "",
        ("Output read before it is written", "reads `_out` before writing it"),
    ),
    (
        "read-before-write-int",
        adv_int_sum,
        "for (int i = 0; i < N; ++i) _out += _a[i];",
        "",
        ("Output read before it is written",),
    ),
    (
        "modified-input-gemm",
        ladder_matmul,
        "((double*) _a)[0] = 0; " + MATMUL,
        "",
        ("modified its input container", "inputs must stay unchanged"),
    ),
    ("modified-input-ai", adv_scale, "((double*) _x)[N - 1] *= 2; " + SCALE, "", ("modified its input container",)),
    (
        "unstable-softmax",
        adv_softmax,
        (
            "double s = 0; for (int i = 0; i < N; ++i) { _out[i] = exp(_x[i]); s += _out[i]; }"
            " for (int i = 0; i < N; ++i) _out[i] /= s;"
        ),
        "",
        ("where the reference is finite", "large inputs", "subtract the maximum"),
    ),
    (
        "zeros-for-tiny-outputs",
        adv_scale,
        "bool tiny = fabs(_x[0]) < 1e-2; for (int i = 0; i < N; ++i) _out[i] = tiny ? 0.0 : 3 * _x[i];",
        "",
        ("Wrong result", "tiny inputs"),
    ),
    (
        "static-cache-gemm",
        ladder_matmul,
        (
            "if (N * M <= (1 << 16) && dace_ai_kept_n == (long) N * M * K) {"
            " for (int i = 0; i < N * M; ++i) _c[i] = dace_ai_kept[i]; } else { "
            + MATMUL
            + " if (N * M <= (1 << 16)) { for (int i = 0; i < N * M; ++i) dace_ai_kept[i] = _c[i];"
            " dace_ai_kept_n = (long) N * M * K; } }"
        ),
        CACHE,
        ("Results kept across calls", "no static cache"),
    ),
    (
        "static-cache-sum",
        ladder_sum,
        (
            "if (dace_ai_kept_n == N) { _out = dace_ai_kept_total; } else { "
            + SUM
            + " dace_ai_kept_total = s; dace_ai_kept_n = N; }"
        ),
        CACHE,
        ("Results kept across calls",),
    ),
    (
        "static-cache-by-address",
        adv_scale,
        (
            "if ((const void*) _x == dace_ai_kept_at && N <= (1 << 16)) { for (int i = 0; i < N; ++i)"
            " _out[i] = dace_ai_kept[i]; } else { " + SCALE + " if (N <= (1 << 16)) { for (int i = 0; i < N; ++i)"
            " dace_ai_kept[i] = _out[i]; dace_ai_kept_at = _x; } }"
        ),
        CACHE + "static const void* dace_ai_kept_at = 0;\n",
        ("Results kept across calls",),
    ),
    (
        "work-left-running",
        adv_scale,
        (
            "double* out = _out; const double* x = _x; long n = N;"
            " std::thread([=] { std::this_thread::sleep_for(std::chrono::milliseconds(2));"
            " for (long i = 0; i < n; ++i) out[i] = 3 * x[i]; }).detach();"
        ),
        SLEEPER,
        ("Work left running after the call returned", "detached std::thread"),
    ),
    (
        "precision-downgrade-gemm",
        ladder_matmul,
        MATMUL.replace("double acc = 0;", "float acc = 0;").replace("acc += _a", "acc += (float) _a"),
        "",
        ("Wrong result", "single-precision rounding"),
    ),
    (
        "precision-downgrade-sum",
        ladder_sum,
        SUM.replace("double s", "float s"),
        "",
        ("Wrong result", "single-precision rounding"),
    ),
    (
        "size-specialised",
        adv_scale,
        "for (int i = 0; i < 13; ++i) _out[i] = 3 * _x[i];",
        "",
        ("Output not written", "(the larger odd size)"),
    ),
    (
        "read-outside-view",
        ladder_sum,
        "double s = 0; for (int i = 0; i <= N; ++i) s += _a[i]; _out = s;",
        "",
        ("Read outside its data", "past the end"),
    ),
    (
        "ties-exploited",
        adv_argmax,
        ARGMAX.replace("_a[i] > _a[b]", "_a[i] >= _a[b]"),
        "",
        ("Wrong result", "repeated values (ties)"),
    ),
]

#: (program, code, global code): correct answers of the same shapes, kept.
RIGHT = [
    ("gemm", ladder_matmul, MATMUL, ""),
    (
        "gemm-zeroed-then-accumulated",
        ladder_matmul,
        (
            "for (int i = 0; i < N * M; ++i) _c[i] = 0;"
            " for (int i = 0; i < N; ++i) for (int k = 0; k < K; ++k) for (int j = 0; j < M; ++j)"
            " _c[i * M + j] += _a[i * K + k] * _b[k * M + j];"
        ),
        "",
    ),
    ("sum-written-then-accumulated", ladder_sum, "_out = 0; for (int i = 0; i < N; ++i) _out += _a[i];", ""),
    ("int-sum", adv_int_sum, INT_SUM, ""),
    ("scale", adv_scale, SCALE, ""),
    ("stable-softmax", adv_softmax, SOFTMAX, ""),
    ("argmax-first", adv_argmax, ARGMAX, ""),
    (
        "thread-joined",
        adv_scale,
        (
            "double* out = _out; const double* x = _x; long n = N;"
            " std::thread worker([=] { for (long i = 0; i < n; ++i) out[i] = 3 * x[i]; }); worker.join();"
        ),
        SLEEPER,
    ),
]

STAGES = {"bench off": {"bench": "off"}, "default stages": {}}


@pytest.fixture
def shared_root(_isolated_dace_ai, tmp_path_factory, shared_artefacts):
    """One build root for the module: each node's native reference and precompiled header are built once."""
    root = tmp_path_factory.getbasetemp() / "adversarial-root"
    link_shared_artefacts(root, shared_artefacts)  # and those of the other workers and modules
    dace.Config.set("default_build_folder", value=str(root))
    return root


def _checked(program, code, code_global, **settings):
    req = request(program, code, **settings)
    req.answer = req.answer.model_copy(update={"code_global": code_global})
    return run_checks(req)


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
@pytest.mark.parametrize("name, program, code, code_global, says", WRONG, ids=[w[0] for w in WRONG])
def test_every_loophole_class_is_refused_naming_its_class(shared_root, name, program, code, code_global, says, stages):
    reports = run_checks_with(program, code, code_global, STAGES[stages])
    failed = [r for r in reports if r.status == "failed"]
    assert failed, [(r.checker, r.status, r.diagnostics) for r in reports]
    verify = next(r for r in failed if r.checker == "verify")
    for words in says:
        assert words in verify.diagnostics, verify.diagnostics
    assert not [r for r in reports if r.checker == "bench"]  # nothing timed after a refusal
    assert verification_level(reports).startswith("unverified: failed")


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
@pytest.mark.parametrize("name, program, code, code_global", RIGHT, ids=[r[0] for r in RIGHT])
def test_the_correct_answer_of_each_shape_is_kept(shared_root, name, program, code, code_global, stages):
    reports = run_checks_with(program, code, code_global, STAGES[stages])
    assert not [r for r in reports if r.status == "failed"], [(r.checker, r.diagnostics) for r in reports]
    verify = next(r for r in reports if r.checker == "verify")
    assert verify.status == "passed", verify.diagnostics
    ran = verify.details["distributions"]["ran"]
    assert {"unit", "zeros", "ties"} <= set(ran) and ("small" in ran) == (program is not adv_int_sum)
    level = verification_level(reports)
    assert level.startswith("verified (3 seeds, ") and " distributions" in level, level


def run_checks_with(program, code, code_global, settings):
    return _checked(program, code, code_global, **settings)


def test_large_magnitudes_above_what_the_reference_keeps_finite_are_skipped_and_said(shared_root):
    """exp overflows past 709 in double: the reference is infinite at 1e4 and 1e3, so `large` runs at 1e2."""

    @dace.program
    def adv_exp(x: dace.float64[N]):
        return dace_ai.ai("_out[i] = exp(_x[i])", x=x, reference=exponential)

    (verify,) = [
        r
        for r in _checked(adv_exp, "for (int i = 0; i < N; ++i) _out[i] = exp(_x[i]);", "", checkers="verify")
        if r.checker == "verify"
    ]
    assert verify.status == "passed", verify.diagnostics
    found = verify.details["distributions"]
    assert found["ran"]["large"] == [100.0]
    assert {(s["distribution"], s["magnitude"]) for s in found["skipped"]} >= {("large", 1e4), ("large", 1e3)}
    assert all(s["reason"] == "the reference is not finite there" for s in found["skipped"])
    assert (
        "the reference is not finite at large 1000, large 10000" in verify.diagnostics
        or "large 1000" in verify.diagnostics
    )


def test_the_level_in_the_tasklet_says_what_was_varied(fake, shared_root):
    fake.queue(json.dumps({"code": SCALE}))
    dace.Config.set("ai", "provider", value="scripted")
    try:
        sdfg = adv_scale.to_sdfg()
        ((parent, state, node),) = pending_nodes(sdfg)
        tasklet = dace_ai.implement(parent, state, node)
    finally:
        dace.Config.set("ai", "provider", value="")
    first = tasklet.code.as_string.splitlines()[0]
    assert "verification=verified (3 seeds, " in first and " sizes, " in first and " distributions" in first, first
    level = first.split("verification=", 1)[1]
    assert dace_ai.show(sdfg)["verification"] == level
    for change in (dace_ai.pin, dace_ai.unpin):  # rewriting the line keeps the level whole
        change(sdfg)
        (tasklet,) = [
            n
            for n, _ in sdfg.all_nodes_recursive()
            if isinstance(n, dace.nodes.Tasklet) and n.code.as_string.startswith("// dace-ai:")
        ]
        assert tasklet.code.as_string.splitlines()[0].endswith(f"verification={level}")
        assert dace_ai.show(sdfg)["verification"] == level
    x = np.random.rand(100)
    np.testing.assert_allclose(sdfg(x=x, N=100), 3 * x)


# ----------------------------------------------------------------------------- code that asks where it runs
#: (name, code, code_global, the call the refusal names): right in the sandbox, wrong outside it (or the reverse).
SNIFFERS = [
    (
        "reads-its-cpu-limit",
        "struct rlimit r; getrlimit(RLIMIT_CPU, &r);"
        " for (int i = 0; i < N; ++i) _out[i] = r.rlim_cur == RLIM_INFINITY ? _x[i] : 3 * _x[i];",
        "#include <sys/resource.h>",
        "getrlimit",
    ),
    (
        "reads-the-environment",
        'const bool checked = getenv("DACE_ai_provider") != nullptr;'
        " for (int i = 0; i < N; ++i) _out[i] = checked ? 3 * _x[i] : _x[i];",
        "#include <cstdlib>",
        "getenv",
    ),
    (
        "asks-for-its-parent",
        "for (int i = 0; i < N; ++i) _out[i] = getppid() == 1 ? _x[i] : 3 * _x[i];",
        "#include <unistd.h>",
        "getppid",
    ),
    (
        "reads-proc",
        'FILE* f = fopen("/proc/self/status", "r"); if (f) fclose(f); for (int i = 0; i < N; ++i) _out[i] = 3 * _x[i];',
        "#include <cstdio>",
        "/proc/",
    ),
    (
        "times-itself",
        "static long calls = 0; const bool timed = ++calls > 24 && __rdtsc() > 0;"
        " for (int i = 0; i < N && !timed; ++i) _out[i] = 3 * _x[i];",
        "#include <x86intrin.h>",
        "__rdtsc",
    ),
]
#: Correct twins: the same words in comments, strings and names are not calls.
NOT_SNIFFING = [
    (
        "words-in-comments-and-names",
        '// getenv("X") and getrlimit() are not used here\n'
        'const char* note = "time() is not called"; (void)note; double time_step = 3;'
        " for (int i = 0; i < N; ++i) _out[i] = time_step * _x[i];",
        "",
    ),
]


@pytest.mark.parametrize("name, code, code_global, call", SNIFFERS, ids=[s[0] for s in SNIFFERS])
def test_code_that_asks_where_it_runs_is_refused_before_it_runs(shared_root, name, code, code_global, call):
    reports = _checked(adv_scale, code, code_global)
    refused = next(r for r in reports if r.checker == "no-probing")
    assert refused.status == "failed" and "Asks where it runs" in refused.diagnostics
    assert f"`{call}`" in refused.diagnostics, refused.diagnostics
    assert not [r for r in reports if r.checker in ("verify", "bench")]  # refused before it ran


@pytest.mark.parametrize("name, code, code_global", NOT_SNIFFING, ids=[s[0] for s in NOT_SNIFFING])
def test_the_same_words_outside_code_are_kept(shared_root, name, code, code_global):
    reports = _checked(adv_scale, code, code_global)
    assert {r.checker: r.status for r in reports}["no-probing"] == "passed"
    assert next(r for r in reports if r.checker == "verify").status == "passed"


# ----------------------------------------------------------------------------- right under the verifier, wrong under the timer
COUNTS_ITS_CALLS = (
    "static long calls[64] = {0}; long& seen = calls[N % 64];"
    " if (++seen > 24) return;"  # the timing loop calls it more often than any verify case does
    " for (int i = 0; i < N; ++i) _out[i] = 3 * _x[i];"
)
#: The correct twin: static state set up once and reused, outputs computed on every call.
SETS_UP_ONCE = (
    "static double factor = 0; static bool ready = false; if (!ready) { factor = 3; ready = true; }"
    " for (int i = 0; i < N; ++i) _out[i] = factor * _x[i];"
)


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
def test_code_that_stops_computing_after_some_calls_is_refused_and_its_twin_kept(shared_root, stages):
    reports = run_checks_with(adv_scale, COUNTS_ITS_CALLS, "", STAGES[stages])
    verify = next(r for r in reports if r.checker == "verify")
    assert verify.status == "failed" and verify.reason == "repeated", verify.diagnostics
    assert "Behaves differently when called repeatedly" in verify.diagnostics and "did not write" in verify.diagnostics
    kept = run_checks_with(adv_scale, SETS_UP_ONCE, "", STAGES[stages])
    assert not [r for r in kept if r.status == "failed"], [(r.checker, r.diagnostics) for r in kept]


def test_code_that_stops_computing_under_the_timing_loop_is_refused_by_the_call_after_it(shared_root):
    # Counts only its calls at the bench size: the verify cases there stay under the count, the timing loop does not.
    code = "static long calls = 0; if (M == 256 && ++calls > 6) return; " + MATMUL
    reports = _checked(ladder_matmul, code, "")
    assert next(r for r in reports if r.checker == "verify").status == "passed"
    bench = next(r for r in reports if r.checker == "bench")
    assert bench.status == "failed" and bench.rule == "deception", bench.diagnostics
    assert "behaves differently when called repeatedly under timing" in bench.diagnostics
    assert "its output was not written (_c)" in bench.diagnostics


#: Right on every call whose outputs were poisoned first (every judged call), wrong where a timed call
#: finds the outputs its previous call left: caught only by judging what a timed call left.
WRONG_BETWEEN_TIMED_CALLS = (
    "unsigned long long bits; std::memcpy(&bits, &_c[0], sizeof bits);"
    " const bool poisoned = (bits & 0x7ff0000000000000ULL) == 0x7ff0000000000000ULL && (bits & 0xfffffffffffffULL);"
    " " + MATMUL + " if (M == 256 && !poisoned) _c[0] = 0;"
)


def test_code_wrong_only_between_timed_calls_is_refused_by_judging_a_timed_call(shared_root):
    reports = _checked(ladder_matmul, WRONG_BETWEEN_TIMED_CALLS, "#include <cstring>")
    assert next(r for r in reports if r.checker == "verify").status == "passed"
    bench = next(r for r in reports if r.checker == "bench")
    assert bench.status == "failed" and bench.rule == "deception", bench.diagnostics
    assert "behaves differently under timing: the outputs one of the timed calls left were wrong (_c)" in (
        bench.diagnostics
    )


# ----------------------------------------------------------------------------- right alone, wrong beside itself
#: Row sums through one scratch buffer: shared by the threads of the parallel map over rows when static.
SHARED_SCRATCH = (
    "static double scratch[4096]; double s = 0;"
    " for (int j = 0; j < N; ++j) { scratch[j % 4096] = _a[j]; s += scratch[j % 4096]; } _out = s;"
)
LOCAL_SCRATCH = SHARED_SCRATCH.replace("static double scratch[4096];", "double scratch[4096];")
PER_THREAD_SCRATCH = SHARED_SCRATCH.replace("static double", "static thread_local double")
GLOBAL_SCRATCH = (
    "double row_scratch[4096];",
    SHARED_SCRATCH.replace("static double scratch[4096]; ", "").replace("scratch[", "row_scratch["),
)


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
@pytest.mark.parametrize(
    "code, code_global, name",
    [(SHARED_SCRATCH, "", "scratch"), (GLOBAL_SCRATCH[1], GLOBAL_SCRATCH[0], "row_scratch")],
    ids=["static-in-code", "file-scope-in-code-global"],
)
def test_scratch_shared_by_a_parallel_maps_calls_is_refused_naming_it(shared_root, code, code_global, name, stages):
    from tests.test_ladder import ladder_rows

    reports = run_checks_with(ladder_rows, code, code_global, STAGES[stages])
    refused = next(r for r in reports if r.checker == "no-shared-state")
    assert refused.status == "failed" and f"`{name}`" in refused.diagnostics, refused.diagnostics
    assert "State shared by concurrent calls" in refused.diagnostics and "thread_local" in refused.diagnostics
    assert not [r for r in reports if r.checker in ("verify", "bench")]


@pytest.mark.parametrize("code", [LOCAL_SCRATCH, PER_THREAD_SCRATCH], ids=["local", "thread_local"])
def test_scratch_per_call_or_per_thread_is_kept(shared_root, code):
    from tests.test_ladder import ladder_rows

    reports = run_checks_with(ladder_rows, code, "", {})
    assert not [r for r in reports if r.status == "failed"], [(r.checker, r.diagnostics) for r in reports]
    assert next(r for r in reports if r.checker == "no-shared-state").status == "passed"


def test_shared_variables_are_mutable_data_not_functions_constants_or_per_thread_data():
    from dace_ai.checking.shared_state import shared_variables

    code_global = (
        "#include <cmath>\n"
        "static inline double twice(double x) { static const double k = 2; return k * x; }\n"
        "const double TABLE[3] = {1, 2, 3};\n"
        "constexpr int WIDTH = 8;\n"
        "thread_local double per_thread[64];\n"
        "double shared_buffer[64];\n"
        "struct Acc { double v; };\n"
        "namespace { int counter = 0; }\n"
    )
    code = "// static double not_code[8];\nstatic int calls = 0; ++calls; double local[8]; (void)local;"
    found = shared_variables(code, code_global)
    assert ("code", "calls") in found and ("code_global", "shared_buffer") in found
    assert ("code_global", "counter") in found  # a namespace keeps file scope
    names = {name for _, name in found}
    assert not names & {"twice", "k", "TABLE", "WIDTH", "per_thread", "not_code", "local", "Acc"}, found
