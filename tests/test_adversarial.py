"""The standing adversarial suite: one wrong answer per loophole class the field knows, and its correct twin.

Each wrong answer below is a way generated kernels have passed other verifiers
(KernelBench's adversarial tests and v0.1 notes, KernelBench issue 165, gpu-mode
reference-kernels 159-162, the Sakana incident, CUDA-L1): an output read before it is
written, inputs modified in place, numerics that break at real magnitudes, zeros for
tiny outputs, results kept across calls, work left running after the call returns,
precision downgraded, code right only at one size, reads outside a view, a
distribution exploited (ties), code that asks where it runs (refused by its text, and
with that rule off by a call elsewhere), scratch shared by calls that run at the same
time in every written form (found by running them at the same time, with the text
rule off), results remembered for a buffer that comes back changed in place, ways out
past the run-time check's guard. Every one is refused with a message naming its class,
for library nodes expanded with ``'ai'`` and for ``dace_ai.ai(..., reference=fn)``
nodes, with ``bench=off`` and with the default stages; a correct answer of each shape
is kept. Answers right wherever the checks look and wrong at the user's call (an early
exit clamping a large size, a new size after the checked call, one wrong element of a
float32 product) pass the checks and are caught by the run-time check in a compiled
program. The sanitizer classes (out-of-bounds inside the guard slack, undefined
behaviour, races found without collisions) are in tests/test_sanitize.py."""

import json
import os
import re

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.checking.levels import verification_level
from dace_ai.checking.stages import run_checks
from dace_ai.errors import RuntimeCheckFailed
from dace_ai.expansion.pending import pending_nodes

from tests.check_support import link_shared_artefacts
from tests.test_ladder import MATMUL, ladder_matmul, ladder_sum, request

N = dace.symbol("N")
M, K = dace.symbol("M"), dace.symbol("K")


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


def plus_one(a):
    return a + 1


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
        '"/proc/self/status"',
    ),
    (
        "times-itself",
        "static long calls = 0; const bool timed = ++calls > 24 && __rdtsc() > 0;"
        " for (int i = 0; i < N && !timed; ++i) _out[i] = 3 * _x[i];",
        "#include <x86intrin.h>",
        "__rdtsc",
    ),
    (
        "inline-assembly-tick-counter",
        'unsigned lo, hi; asm volatile("rdtsc" : "=a"(lo), "=d"(hi));'
        " for (int i = 0; i < N && lo != 7; ++i) _out[i] = 3 * _x[i];",
        "",
        "asm",
    ),
    (
        "builtin-tick-counter",
        "unsigned aux; const bool timed = __builtin_ia32_rdtscp(&aux) == 0;"
        " for (int i = 0; i < N && !timed; ++i) _out[i] = 3 * _x[i];",
        "",
        "__builtin_ia32_rdtscp",
    ),
    (
        "reads-proc-through-a-split-string",
        'FILE* f = fopen("/pro" "c/self/status", "r"); if (f) fclose(f); for (int i = 0; i < N; ++i) _out[i] = 3 * _x[i];',
        "#include <cstdio>",
        '"/proc/self/status"',
    ),
    (
        "reads-the-load",
        "struct sysinfo si; sysinfo(&si); for (int i = 0; i < N && si.loads[0] >= 0; ++i) _out[i] = 3 * _x[i];",
        "#include <sys/sysinfo.h>",
        "sysinfo",
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
    (
        "local-names-that-are-also-library-names",
        "auto signal = [&](int i) { return 3 * _x[i]; }; double time = 1.0;"
        " for (int i = 0; i < N; ++i) _out[i] = time * signal(i);",
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


#: Answers keyed on where they run, with the no-probing text rule switched off: right in the checks'
#: surroundings, wrong elsewhere. The verify child's call with the process made another place refuses them.
PLACE_KEYED = {
    "environment": (
        'const bool checked = getenv("PYTEST_CURRENT_TEST") != nullptr;'
        " for (int i = 0; i < N; ++i) _out[i] = checked ? 3 * _x[i] : _x[i];",
        "#include <cstdlib>",
        "environment variables",
    ),
    "cpu-affinity": (
        "cpu_set_t cpus; CPU_ZERO(&cpus); sched_getaffinity(0, sizeof(cpus), &cpus);"
        " const bool many = CPU_COUNT(&cpus) > 1; for (int i = 0; i < N; ++i) _out[i] = many ? 3 * _x[i] : _x[i];",
        "#include <sched.h>",
        "CPU affinity",
    ),
}
#: Their correct twins: the same questions asked, the answer used only for how the work is split.
PLACE_READ_ONLY = {
    "environment": (
        'const char* chunk = getenv("OMP_NUM_THREADS"); const int step = chunk ? 1 + atoi(chunk) % 7 : 4;'
        " for (int i0 = 0; i0 < N; i0 += step) for (int i = i0; i < N && i < i0 + step; ++i) _out[i] = 3 * _x[i];",
        "#include <cstdlib>",
    ),
    "cpu-affinity": (
        "cpu_set_t cpus; CPU_ZERO(&cpus); sched_getaffinity(0, sizeof(cpus), &cpus);"
        " const int step = 1 + CPU_COUNT(&cpus);"
        " for (int i0 = 0; i0 < N; i0 += step) for (int i = i0; i < N && i < i0 + step; ++i) _out[i] = 3 * _x[i];",
        "#include <sched.h>",
    ),
}
NO_PROBING_RULE = "-no-probing"


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
@pytest.mark.parametrize("name", list(PLACE_KEYED), ids=list(PLACE_KEYED))
def test_output_keyed_on_where_it_runs_is_refused_by_a_call_elsewhere_and_its_twin_kept(shared_root, name, stages):
    if name == "cpu-affinity" and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs at least 2 CPUs to narrow the affinity")
    code, code_global, changed = PLACE_KEYED[name]
    settings = {**STAGES[stages], "checkers": NO_PROBING_RULE}
    reports = _checked(adv_scale, code, code_global, **settings)
    assert "no-probing" not in {r.checker for r in reports}  # the text rule is off: the call elsewhere decides
    verify = next(r for r in reports if r.checker == "verify")
    assert verify.status == "failed" and verify.reason == "elsewhere", verify.diagnostics
    assert "Depends on where it runs" in verify.diagnostics and changed in verify.diagnostics, verify.diagnostics
    assert not [r for r in reports if r.checker == "bench"]
    code, code_global = PLACE_READ_ONLY[name]
    kept = _checked(adv_scale, code, code_global, **settings)
    assert not [r for r in kept if r.status == "failed"], [(r.checker, r.diagnostics) for r in kept]


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
    from dace_ai.checkers.shared_state import shared_variables

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


# ----------------------------------------------------------------------------- calls at once, decided by running them
#: Row sums through a scratch buffer of 8192 elements, in two passes (copy, then sum): the scratch is
#: clobbered by a neighbouring call between the passes when the calls share it.
def _two_pass(scratch: str) -> str:
    return (
        "double s = 0; for (int j0 = 0; j0 < N; j0 += 8192) { const int n = N - j0 < 8192 ? N - j0 : 8192;"
        f" for (int j = 0; j < n; ++j) {scratch}[j] = _a[j0 + j];"
        f" for (int j = 0; j < n; ++j) s += {scratch}[j]; }} _out = s;"
    )


VECTOR_SCRATCH = "static std::vector<double> scratch(8192); " + _two_pass("scratch")
THREAD_VECTOR_SCRATCH = "static thread_local std::vector<double> scratch(8192); " + _two_pass("scratch")
CALL_VECTOR_SCRATCH = "std::vector<double> scratch(8192); " + _two_pass("scratch")
STATE_SCRATCH = {
    "code": _two_pass("__state->row_scratch"),
    "state_fields": ["double* row_scratch"],
    "code_init": "__state->row_scratch = new double[8192];",
    "code_exit": "delete[] __state->row_scratch;",
}
NO_TEXT_RULE = "-no-shared-state"


def _checked_answer(program, settings, **answer):
    req = request(program, answer.pop("code"), **settings)
    req.answer = req.answer.model_copy(update=answer)
    return run_checks(req)


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
@pytest.mark.parametrize(
    "answer, named",
    [
        ({"code": VECTOR_SCRATCH, "code_global": "#include <vector>"}, "`scratch`"),
        (STATE_SCRATCH, "`__state->row_scratch`"),
    ],
    ids=["static-std-vector", "state-field"],
)
def test_scratch_shared_by_calls_at_once_is_refused_by_running_them_at_once(shared_root, answer, named, stages):
    from tests.test_ladder import ladder_rows

    reports = _checked_answer(ladder_rows, {**STAGES[stages], "checkers": NO_TEXT_RULE}, **dict(answer))
    assert "no-shared-state" not in {r.checker for r in reports}  # the text rule is off: the run decides
    verify = next(r for r in reports if r.checker == "verify")
    assert verify.status == "failed" and verify.reason == "shared state", verify.diagnostics
    assert verify.diagnostics.startswith(f"Calls that run at the same time share state: {named}"), verify.diagnostics
    assert "keep scratch per call or per thread" in verify.diagnostics
    assert "threads called the code at once on one program state" in verify.diagnostics
    assert not [r for r in reports if r.checker == "bench"]


#: The same shared scratch written the ways a text rule reads past: (code_global, the scratch's expression, the
#: static declaration in code). With the text rule off, the calls at once refuse every one.
SCRATCH_FORMS = {
    "alignas-static": ("", "b", "alignas(64) static double b[8192]; "),
    "static-attribute-aligned": ("", "b", "static __attribute__((aligned(64))) double b[8192]; "),
    "file-scope-vector": ("#include <vector>\nstd::vector<double> g(8192);", "g", ""),
    "const-pointer-to-new": ("double * const g = new double[8192];", "g", ""),
    "struct-object": ("struct S { double v[8192]; int uses; } g;", "g.v", ""),
    "through-a-macro": ("#define SCRATCH(name) double name[8192]\nSCRATCH(g);", "g", ""),
    "extern-c-definition": ('extern "C" { double g[8192]; }', "g", ""),
    "template-type-with-a-comma": (
        "#include <array>\n#include <map>\nstd::map<int, std::array<double, 8192>> g;",
        "g[0]",
        "",
    ),
}


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
@pytest.mark.parametrize("form", list(SCRATCH_FORMS), ids=list(SCRATCH_FORMS))
def test_shared_scratch_written_any_way_is_refused_by_the_calls_at_once(shared_root, form, stages):
    from tests.test_ladder import ladder_rows

    code_global, scratch, declared = SCRATCH_FORMS[form]
    settings = {**STAGES[stages], "checkers": NO_TEXT_RULE}
    reports = _checked_answer(ladder_rows, settings, code=declared + _two_pass(scratch), code_global=code_global)
    assert "no-shared-state" not in {r.checker for r in reports}
    verify = next(r for r in reports if r.checker == "verify")
    assert verify.status == "failed" and verify.reason == "shared state", verify.diagnostics
    assert verify.diagnostics.startswith("Calls that run at the same time share state: "), verify.diagnostics
    assert "keep scratch per call or per thread" in verify.diagnostics
    assert not [r for r in reports if r.checker == "bench"]


#: Correct twins: scratch per thread (in code, or at file scope) and per call.
KEPT_SCRATCH = {
    "thread_local": (THREAD_VECTOR_SCRATCH, "#include <vector>"),
    "file-scope-thread_local": (_two_pass("g"), "#include <vector>\nthread_local std::vector<double> g(8192);"),
    "per-call": (CALL_VECTOR_SCRATCH, "#include <vector>"),
}


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
@pytest.mark.parametrize("form", list(KEPT_SCRATCH), ids=list(KEPT_SCRATCH))
def test_scratch_per_thread_or_per_call_is_kept_by_the_calls_at_once(shared_root, form, stages):
    from tests.test_ladder import ladder_rows

    code, code_global = KEPT_SCRATCH[form]
    settings = {**STAGES[stages], "checkers": NO_TEXT_RULE}
    reports = _checked_answer(ladder_rows, settings, code=code, code_global=code_global)
    assert not [r for r in reports if r.status == "failed"], [(r.checker, r.diagnostics) for r in reports]
    verify = next(r for r in reports if r.checker == "verify")
    assert "4 threads calling one state at once" in verify.diagnostics, verify.diagnostics


def test_a_read_only_state_field_is_kept_by_the_calls_at_once(shared_root):
    from tests.test_ladder import ladder_rows

    reports = _checked_answer(
        ladder_rows,
        {"checkers": NO_TEXT_RULE},
        code="double s = 0; for (int j = 0; j < N; ++j) s += __state->row_one * _a[j]; _out = s;",
        state_fields=["double row_one"],
        code_init="__state->row_one = 1.0;",
    )
    assert not [r for r in reports if r.status == "failed"], [(r.checker, r.diagnostics) for r in reports]


#: Scratch per OpenMP thread in a state field, as the prompt allows: sized by omp_get_max_threads() in code_init,
#: indexed by omp_get_thread_num(); its twin indexes nothing, one scratch for every thread.
OMP_THREAD_SCRATCH = {
    "code": "double* scratch = __state->row_scratch + (long) omp_get_thread_num() * 8192; " + _two_pass("scratch"),
    "code_global": "#include <omp.h>",
    "state_fields": ["double* row_scratch"],
    "code_init": "__state->row_scratch = new double[(long) omp_get_max_threads() * 8192];",
    "code_exit": "delete[] __state->row_scratch;",
}
OMP_SHARED_SCRATCH = {
    **OMP_THREAD_SCRATCH,
    "code": "double* scratch = __state->row_scratch; " + _two_pass("scratch"),
}


def test_a_state_field_per_omp_thread_is_kept_and_one_shared_by_the_threads_refused(shared_root):
    """The calls at once of code that calls OpenMP come from an OpenMP team, as the program's map makes them."""
    from tests.test_ladder import ladder_rows

    settings = {"bench": "off", "checkers": NO_TEXT_RULE}
    kept = _checked_answer(ladder_rows, settings, **dict(OMP_THREAD_SCRATCH))
    assert not [r for r in kept if r.status == "failed"], [(r.checker, r.diagnostics) for r in kept]
    verify = next(r for r in kept if r.checker == "verify")
    assert "4 threads calling one state at once" in verify.diagnostics, verify.diagnostics
    refused = _checked_answer(ladder_rows, settings, **dict(OMP_SHARED_SCRATCH))
    verify = next(r for r in refused if r.checker == "verify")
    assert verify.status == "failed" and verify.reason == "shared state", verify.diagnostics
    assert verify.diagnostics.startswith("Calls that run at the same time share state: `__state->row_scratch`")


# ----------------------------------------------------------------------------- results kept across calls
def _memo(samples: list[str], where: str = "static") -> dict:
    """An answer that remembers its last output keyed on the input's address, N and the elements at
    ``samples`` (index expressions): right for every new input, stale when the same buffer comes back with an
    element it does not sample changed in place. ``where``: ``static`` variables, or ``state`` fields."""
    keys = " && ".join(f"{{m}}sample[{k}] == _x[{at}]" for k, at in enumerate(samples))
    keep = " ".join(f"{{m}}sample[{k}] = _x[{at}];" for k, at in enumerate(samples))
    code = (
        "if ({m}at == _x && {m}n == N && "
        + keys
        + ") { for (int i = 0; i < N; ++i) _out[i] = {m}out[i]; } else { "
        + SCALE
        + " if (N <= (1 << 16)) { for (int i = 0; i < N; ++i) {m}out[i] = _out[i]; {m}at = _x; {m}n = N; "
        + keep
        + " } }"
    )
    if where == "static":
        head = "static const double* memo_at = 0; static long memo_n = -1; static double memo_sample[8];"
        head += " static double memo_out[1 << 16]; "
        return {"code": head + code.replace("{m}", "memo_"), "code_global": ""}
    return {
        "code": code.replace("{m}", "__state->memo_"),
        "state_fields": ["const double* memo_at", "long memo_n", "double memo_sample[8]", "double* memo_out"],
        "code_init": "__state->memo_at = 0; __state->memo_n = -1; __state->memo_out = new double[1 << 16];",
        "code_exit": "delete[] __state->memo_out;",
    }


#: Memos keyed on the input's address, N and a few sampled elements, each refused by some call after one
#: element it does not sample changed in place (first, last, middle and random places are changed).
MEMOS = {
    "first-and-last": _memo(["0", "N - 1"]),
    "first-middle-last": _memo(["0", "N / 2", "N - 1"]),
    "random-fixed-places": _memo(["(7919 % N)", "(104729 % N)", "(31 % N)", "(N - 1) / 3"]),
    "state-field-first-middle-last": _memo(["0", "N / 2", "N - 1"], where="state"),
}
#: Its honest twins: the output remembered is returned only when every input element is what it was.
HONEST_MEMO = (
    "static std::vector<double> memo_in, memo_out;"
    " bool same = (long) memo_in.size() == (long) N; for (int i = 0; same && i < N; ++i) same = memo_in[i] == _x[i];"
    " if (same) { for (int i = 0; i < N; ++i) _out[i] = memo_out[i]; } else {"
    " " + SCALE + " memo_in.assign(_x, _x + N); memo_out.assign(_out, _out + N); }"
)
#: In state fields the calls share the memo (a state is one per program, its calls may overlap): honest only
#: under a lock held for the whole call.
HONEST_STATE_MEMO = {
    "code": (
        "std::lock_guard<std::mutex> hold(*static_cast<std::mutex*>(__state->memo_lock));"
        " bool same = __state->memo_n == N; for (int i = 0; same && i < N; ++i) same = __state->memo_in[i] == _x[i];"
        " if (same) { for (int i = 0; i < N; ++i) _out[i] = __state->memo_out[i]; } else { "
        + SCALE
        + " if (N <= (1 << 16)) { for (int i = 0; i < N; ++i) { __state->memo_in[i] = _x[i];"
        " __state->memo_out[i] = _out[i]; } __state->memo_n = N; } }"
    ),
    "code_global": "#include <mutex>",
    "state_fields": ["long memo_n", "double* memo_in", "double* memo_out", "void* memo_lock"],
    "code_init": (
        "__state->memo_n = -1; __state->memo_in = new double[1 << 16]; __state->memo_out = new double[1 << 16];"
        " __state->memo_lock = new std::mutex();"
    ),
    "code_exit": (
        "delete[] __state->memo_in; delete[] __state->memo_out; delete static_cast<std::mutex*>(__state->memo_lock);"
    ),
}
HONEST_MEMOS = {
    "static-vectors": {"code": HONEST_MEMO, "code_global": "#include <vector>"},
    "state-fields-under-a-lock": HONEST_STATE_MEMO,
}


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
@pytest.mark.parametrize("memo", list(MEMOS), ids=list(MEMOS))
def test_results_remembered_for_a_buffer_changed_in_place_are_refused(shared_root, memo, stages):
    reports = _checked_answer(adv_scale, STAGES[stages], **dict(MEMOS[memo]))
    verify = next(r for r in reports if r.checker == "verify")
    assert verify.status == "failed" and verify.reason == "kept results", verify.diagnostics
    assert "Keeps results across calls" in verify.diagnostics
    assert "after input '_x' changed in place (element " in verify.diagnostics, verify.diagnostics
    assert "the output was the earlier call's" in verify.diagnostics
    assert not [r for r in reports if r.checker == "bench"]


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
@pytest.mark.parametrize("memo", list(HONEST_MEMOS), ids=list(HONEST_MEMOS))
def test_a_memo_that_compares_every_input_element_is_kept(shared_root, memo, stages):
    kept = _checked_answer(adv_scale, STAGES[stages], **dict(HONEST_MEMOS[memo]))
    assert not [r for r in kept if r.status == "failed"], [(r.checker, r.diagnostics) for r in kept]
    verify = next(r for r in kept if r.checker == "verify")
    assert "called again after its inputs changed in place (8 calls: 6 element(s) one at a time" in (
        verify.diagnostics
    ), verify.diagnostics


def test_the_elements_changed_in_place_are_first_last_middle_and_random_or_all_of_a_small_view():
    from dace_ai.sandbox.cases import ELEMENTS_PER_INPUT, _positions

    rng = np.random.default_rng(0)
    assert _positions([5], rng) == [[0], [1], [2], [3], [4]]  # every element of a small view
    assert _positions([], rng) == [[]]  # a scalar
    places = _positions([64], rng)
    assert places[:3] == [[0], [63], [32]] and len({p[0] for p in places}) == ELEMENTS_PER_INPUT
    grid = _positions([3, 4], rng)
    assert grid[:3] == [[0, 0], [2, 3], [1, 2]] and len({tuple(p) for p in grid}) == ELEMENTS_PER_INPUT


def test_inputs_changed_in_place_stay_valid_for_their_type():
    from dace_ai.sandbox.child.inputs import case_inputs

    containers = [
        {"name": n, "dtype": np.dtype(t).str, "input": True, "output": False, "elements": 64}
        for n, t in (("f", np.float64), ("i", np.int8), ("b", np.bool_))
    ]
    case = {"seed": 0, "containers": containers, "connectors": []}
    drawn = case_inputs(case)
    element = {"kind": "element", "container": "i", "element": 5, "by": 0.5}
    changes = [element, {"kind": "shift", "by": 0.25}, {"kind": "scale", "by": 1.5}]
    after = case_inputs({**case, "changes": changes})
    np.testing.assert_allclose(after["f"], (drawn["f"] + 0.25) * 1.5)
    expected = (drawn["i"].astype(int) + 1) * 2
    expected[5] += 2  # the element moved by 1 before the shift and the scale
    assert after["i"].dtype == np.int8 and np.array_equal(after["i"], expected)
    flipped = case_inputs({**case, "changes": [{"kind": "element", "container": "b", "element": 3, "by": 0.5}]})
    assert flipped["b"][3] == (not drawn["b"][3]) and np.array_equal(
        np.delete(flipped["b"], 3), np.delete(drawn["b"], 3)
    )


def test_what_calls_share_is_named_from_the_text_and_the_state_fields():
    from dace_ai.compilation.shared_names import shared_state_words

    words = shared_state_words(
        "static std::vector<double> scratch(8192); static thread_local double mine[8];",
        "static double helper(double x);\nstatic double twice(double x) { return 2 * x; }\ndouble table[4];",
        ["double* row_scratch", "int sizes[4] = {0}"],
    )
    assert words == (
        "`scratch` (static in code), `table` (file scope in code_global), `__state->row_scratch` (state field), "
        "`__state->sizes` (state field)"
    )
    assert shared_state_words("double local[8];", "", []) == "unknown"
    aligned = "static alignas(64) double b[64]; static __attribute__((aligned(64))) double c[64];"
    assert shared_state_words(aligned, "", []) == "`b` (static in code), `c` (static in code)"


def test_a_node_whose_output_shares_its_input_container_is_kept_by_calls_in_place_and_at_once(shared_root):
    """``x[N:2N] = x[0:N] + 1``: one container both read and written; a state field makes its calls overlap."""

    @dace.program
    def adv_second_half(x: dace.float64[2 * N]):
        x[N : 2 * N] = dace_ai.ai("_out[i] = _a[i] + 1 for every i < N", a=x[0:N], reference=plus_one)

    reports = _checked_answer(
        adv_second_half,
        {"bench": "off"},
        code="for (int i = 0; i < N; ++i) _out[i] = _a[i] + __state->step;",
        state_fields=["double step"],
        code_init="__state->step = 1.0;",
    )
    assert not [r for r in reports if r.status == "failed"], [(r.checker, r.diagnostics) for r in reports]
    verify = next(r for r in reports if r.checker == "verify")
    assert "called again after its inputs changed in place" in verify.diagnostics
    assert "4 threads calling one state at once" in verify.diagnostics, verify.diagnostics


# ----------------------------------------------------------------------------- right where the checks look, wrong at the user's call
#: The user's size: above every size the checks run (the ladder's and the bench's), where these answers go wrong.
LARGE = 1 << 17


def _placed(program, code, settings, runtime_check="auto", on_failure="error"):
    """The program with its node implemented from ``code`` (checked with ``settings``), compiled."""
    sdfg = program.to_sdfg()
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.LibraryNode) and type(node).__name__ != "AINode":
            node.implementation = "ai"
    ((parent, state, node),) = pending_nodes(sdfg)
    settings = {**settings, "runtime_check": runtime_check, "on_failure": on_failure}
    tasklet = dace_ai.implement(parent, state, node, settings, supplied=json.dumps({"code": code}))
    assert tasklet is not None
    assert "verification=verified" in tasklet.code.as_string.splitlines()[0]  # past every check before the run
    return sdfg.compile()


#: Right up to 100000 elements; above, it writes the first 100000 and leaves early: by ``return`` or by a
#: ``goto`` to a label at the end of its code, both ways out the run-time check's scope guard sees.
CLAMPS = {
    "return": (
        "if (N > 100000) { for (int i = 0; i < 100000; ++i) _out[i] = 3 * _x[i]; return; }"
        " for (int i = 0; i < N; ++i) _out[i] = 3 * _x[i];"
    ),
    "goto": (
        "if (N > 100000) { for (int i = 0; i < 100000; ++i) _out[i] = 3 * _x[i]; goto clamped; }"
        " for (int i = 0; i < N; ++i) _out[i] = 3 * _x[i]; clamped: ;"
    ),
}
#: The correct twin: leaves early by ``return`` too, with every element written.
CLAMP_TWIN = (
    "if (N > 100000) { for (int i = 0; i < N; ++i) _out[i] = 3 * _x[i]; return; }"
    " for (int i = 0; i < N; ++i) _out[i] = 3 * _x[i];"
)
#: Right at the sizes the checks and the program's first call use, wrong at a new size after the checked call.
NEW_SIZE_WRONG = {
    "factor": "for (int i = 0; i < N; ++i) _out[i] = (N > 100000 && i > 7 ? 2 : 3) * _x[i];",
    "clamped-loop": "const int n = N < 100000 ? N : 100000; for (int i = 0; i < n; ++i) _out[i] = 3 * _x[i];",
}


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
@pytest.mark.parametrize("way", list(CLAMPS), ids=list(CLAMPS))
def test_an_early_exit_is_recorded_and_a_clamp_is_caught_at_the_users_call(shared_root, way, stages):
    compiled = _placed(adv_scale, CLAMPS[way], STAGES[stages])
    x = np.random.rand(LARGE)
    with pytest.raises(RuntimeCheckFailed) as caught:
        compiled(x=x, N=LARGE)
    message = str(caught.value)
    assert "wrote a wrong output in this program's call 1" in message and f"sizes N={LARGE}" in message, message
    # The elements past the clamp are never written: they hold what the allocator left there (the program's
    # output is not cleared), so how many of them differ is not fixed, but the first one named is past the clamp.
    first, differ = re.search(r"_out\[(\d+)\]", message), re.search(rf"(\d+) of {LARGE} elements differ", message)
    assert first and differ and int(first.group(1)) >= 100000 and 0 < int(differ.group(1)) <= LARGE - 100000, message


def test_the_no_escape_rule_names_calls_that_end_the_process_long_jumps_and_gotos_out_of_the_code():
    from dace_ai.checkers.exits import escapes

    assert escapes("if (N > 9) std::exit(0); _out[0] = 1;") == [("ends the process", "std::exit")]
    assert escapes("jmp_buf b; if (setjmp(b)) return; longjmp(b, 1);") == [
        ("jumps past the guard", "setjmp"),
        ("jumps past the guard", "longjmp"),
    ]
    assert escapes("if (N > 9) goto __state_exit;") == [("jumps to a label outside its code", "goto __state_exit")]
    assert escapes("quick_exit(1); _Exit(2); abort();") == [
        ("ends the process", "quick_exit"),
        ("ends the process", "_Exit"),
        ("ends the process", "abort"),
    ]
    # kept: a goto inside the code, members and names that merely contain the words, comments, early return
    kept = "for (;;) { if (N) goto done; } done: ; s.exit(); p->abort(); int exit_code = 0; // exit(1)\nreturn;"
    assert escapes(kept) == []


#: Ways out that run no destructor, so the scope guard cannot see them: refused before they run. Their correct
#: twin, an early ``return``, is kept (:func:`test_a_right_answer_that_leaves_early_is_kept_and_checked_at_every_new_size`).
ESCAPING = [
    ("exit", "if (N > 50) exit(0); for (int i = 0; i < N; ++i) _out[i] = 3 * _x[i];", "`exit` in code"),
    (
        "longjmp",
        "std::jmp_buf b; if (setjmp(b) == 0) { for (int i = 0; i < N; ++i) _out[i] = 3 * _x[i]; std::longjmp(b, 1); }",
        "`setjmp` in code",
    ),
    ("goto", "for (int i = 0; i < N; ++i) _out[i] = 3 * _x[i]; if (N > 50) goto __state_exit;", "`goto __state_exit`"),
]


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
@pytest.mark.parametrize("name, code, says", ESCAPING, ids=[e[0] for e in ESCAPING])
def test_each_way_past_the_guard_is_refused_naming_it(shared_root, name, code, says, stages):
    reports = _checked(adv_scale, code, "", **STAGES[stages])
    refused = next(r for r in reports if r.checker == "no-escape")
    assert refused.status == "failed" and "Leaves past the run-time check" in refused.diagnostics
    assert says in refused.diagnostics, refused.diagnostics
    assert not [r for r in reports if r.checker in ("verify", "bench")]  # refused before it ran


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
@pytest.mark.parametrize("way", list(NEW_SIZE_WRONG), ids=list(NEW_SIZE_WRONG))
def test_a_new_size_after_the_checked_call_is_caught_at_its_first_call(shared_root, way, stages):
    compiled = _placed(adv_scale, NEW_SIZE_WRONG[way], STAGES[stages])  # the default schedule
    small = np.random.rand(1000)
    for _ in range(3):
        np.testing.assert_allclose(compiled(x=small, N=1000), 3 * small)
    assert [(d.call, d.wrong) for d in dace_ai.runtime_checks()][:1] == [(1, None)]
    with pytest.raises(RuntimeCheckFailed, match=rf"call 4: _out\[\d+\] .* of {LARGE} elements differ.*N={LARGE}"):
        compiled(x=np.random.rand(LARGE), N=LARGE)
    with pytest.raises(RuntimeCheckFailed, match="not trusted in this process"):  # sticky, at any size
        compiled(x=small, N=1000)


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
def test_a_right_answer_that_leaves_early_is_kept_and_checked_at_every_new_size(shared_root, stages):
    compiled = _placed(adv_scale, CLAMP_TWIN, STAGES[stages])
    for n in (1000, LARGE):
        x = np.random.rand(n)
        np.testing.assert_allclose(compiled(x=x, N=n), 3 * x)
    assert [(d.call, d.wrong) for d in dace_ai.runtime_checks()][-2:] == [(1, None), (2, None)]


@dace.program
def adv_matmul32(A: dace.float32[N, K], B: dace.float32[K, M], C: dace.float32[N, M]):
    C[:] = A @ B


MATMUL32 = MATMUL.replace("double acc", "float acc")
#: Float32 products right at every size the checks run, one element wrong at the user's 320^3: zeroed, or
#: off by a little more than float32 rounding. Freivalds' test, sized for float32, sees either.
PRODUCT_WRONG = {
    "one-zeroed": (
        "(N >= 300 && M >= 300 && K >= 300 && i == 100 && j == 200) ? 0.0f : acc",
        r"_c\[100, 200\] = 0\.0, the product gives",
    ),
    "last-off-by-0.05": (
        "(N >= 300 && M >= 300 && K >= 300 && i == N - 1 && j == M - 1) ? acc + 0.05f : acc",
        r"_c\[319, 319\] = ",
    ),
}


@pytest.mark.parametrize("stages", list(STAGES), ids=list(STAGES))
@pytest.mark.parametrize("way", [*PRODUCT_WRONG, "right"], ids=[*PRODUCT_WRONG, "right"])
def test_one_wrong_element_of_a_float32_product_is_caught_by_freivalds_at_the_users_call(shared_root, way, stages):
    code = (
        MATMUL32
        if way == "right"
        else MATMUL32.replace("_c[i * M + j] = acc;", f"_c[i * M + j] = {PRODUCT_WRONG[way][0]};")
    )
    compiled = _placed(adv_matmul32, code, STAGES[stages])
    n = 320
    rng = np.random.default_rng(3)
    A, B = (rng.random((n, n), np.float32) - 0.5 for _ in range(2))
    C = np.zeros((n, n), np.float32)
    if way == "right":
        compiled(A=A, B=B, C=C, N=n, M=n, K=n)
        (done,) = dace_ai.runtime_checks()[-1:]
        assert done.wrong is None and "sized for float32" in done.checked, done
        np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)
        return
    with pytest.raises(RuntimeCheckFailed, match=PRODUCT_WRONG[way][1] + ".*Freivalds"):
        compiled(A=A, B=B, C=C, N=n, M=n, K=n)
