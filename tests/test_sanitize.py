"""The ``sanitizers`` checker: the wrong answers the guarded verify run cannot see, and their correct twins.

Each wrong answer below computes the right result on this machine, so the ``verify``
checker passes it: a read just past an input that stays inside the slack before the
guard page (its value is never used), signed overflow whose wrapped result is still
right, a misaligned ``double`` load x86 tolerates, an OpenMP reduction without the
clause (right whenever the threads do not collide). Built again by clang++ under
AddressSanitizer + UBSan, or ThreadSanitizer with LLVM's OpenMP and Archer, each is
refused with a message naming its class and the answer's line; the correct answer of
the same shape is kept. The first part needs no compiler.
"""

import shutil
from types import SimpleNamespace

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.checkers import sanitizers as sanitize_check
from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.checking.artefacts import Artefacts
from dace_ai.checking.stages import check_workdir, run_checks, select_checkers
from dace_ai.config.settings import resolve_settings
from dace_ai.expansion.expansion_pass import node_context
from dace_ai.expansion.pending import pending_nodes
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker
from dace_ai.prompt.answer import Answer
from dace_ai.sandbox import sanitizers as sanitize
from dace_ai.sandbox.sanitizers import SanitizerRun
from dace_ai.sandbox.sanitizers import builds as sanitize_builds

from tests.check_support import link_shared_artefacts
from tests.dace_versions import DACE2

N = dace.symbol("N")
CLANG = shutil.which("clang++")
needs_clang = pytest.mark.skipif(CLANG is None, reason="clang++ is not installed (Debian package clang)")
LIBOMP = sanitize.libomp_problem(CLANG) if CLANG else "no clang++"
needs_libomp = pytest.mark.skipif(LIBOMP is not None, reason=f"no ThreadSanitizer run for OpenMP here: {LIBOMP}")


# ----------------------------------------------------------------------------- programs
def twice(a):
    return 2 * a


def total(a):
    return np.sum(a)


@dace.program
def san_twice(A: dace.float64[N], B: dace.float64[N]):
    B[:] = dace_ai.ai("Twice _a.", a=A, reference=twice)


@dace.program
def san_twice_int(A: dace.int32[N], B: dace.int32[N]):
    B[:] = dace_ai.ai("Twice _a.", a=A, reference=twice)


@dace.program
def san_twice_float(A: dace.float32[N], B: dace.float32[N]):
    B[:] = dace_ai.ai("Twice _a.", a=A, reference=twice)


@dace.program
def san_sum(A: dace.float64[N]):
    return dace_ai.ai("The sum of the N elements of _a.", a=A, reference=total, shape=[1])


def request(program, code: str, **settings) -> CheckRequest:
    """A check request for the program's one ``dace_ai.ai`` node and ``code`` (bench off unless told)."""
    settings.setdefault("bench", "off")
    settings = resolve_settings(settings)
    ((parent, state, node),) = pending_nodes(program.to_sdfg())
    ctx = node_context(parent, state, node, settings)
    answer = Answer(code=code)
    return CheckRequest(answer, ctx, settings, check_workdir(ctx, answer))


def by_checker(reports):
    return {r.checker: r for r in reports}


@pytest.fixture
def shared_root(_isolated_dace_ai, tmp_path_factory, shared_artefacts):
    """One build root for this module: the precompiled dace.h (g++ and clang) and the driver are built once."""
    root = tmp_path_factory.getbasetemp() / "sanitize-root"
    link_shared_artefacts(root, shared_artefacts)  # and those of the other workers and modules
    dace.Config.set("default_build_folder", value=str(root))
    return root


# ----------------------------------------------------------------------------- answers
TWICE = "for (int i = 0; i < N; ++i) _out[i] = 2 * _a[i];"
#: Four elements per step through a 32-byte vector; the last chunk (i = 12 at N = 13) loads three doubles past the
#: end of _a. They lie in the slack between the buffer and the guard page, and only lanes inside N are stored.
CHUNK_PAST_END = (
    "typedef double v4 __attribute__((vector_size(32)));\n"
    "for (int i = 0; i < N; i += 4) {\n"
    "    v4 x; __builtin_memcpy(&x, _a + i, sizeof x);\n"
    "    x = x * 2; double t[4]; __builtin_memcpy(t, &x, sizeof t);\n"
    "    for (int v = 0; v < 4 && i + v < N; ++v) _out[i + v] = t[v];\n"
    "}"
)
#: Reads _a[i + 1] at i = N - 1 (in the slack, a NaN there) and never uses it.
NEXT_PAST_END = (
    "for (int i = 0; i < N; ++i) {\n"
    "    double next = _a[i + 1];\n"
    "    _out[i] = (i + 1 < N) ? 2 * _a[i] + 0 * next : 2 * _a[i];\n"
    "}"
)
#: a * 2^32 overflows int; wrapped it is 0 and the result is still right.
OVERFLOW = "for (int i = 0; i < N; ++i) {\n    int t = _a[i] * 65536 * 65536;\n    _out[i] = 2 * _a[i] + t;\n}"
#: A shift by 32 of a 32-bit value: undefined (x86 shifts by 0), multiplied away.
WIDE_SHIFT = (
    "for (int i = 0; i < N; ++i) {\n"
    "    int s = 32 + (_a[i] & 1) * 0;\n"
    "    _out[i] = 2 * _a[i] + (int)((unsigned)_a[i] << s) * 0;\n"
    "}"
)
#: Pairs of floats moved as doubles from _a + 1: 4 bytes past an 8-byte boundary, which x86 loads anyway.
MISALIGNED = (
    "_out[0] = 2 * _a[0];\n"
    "const double* p = (const double*)(_a + 1); double* q = (double*)(_out + 1);\n"
    "for (int k = 0; k < (N - 1) / 2; ++k) {\n"
    "    double d = p[k]; float f[2]; __builtin_memcpy(f, &d, 8);\n"
    "    f[0] *= 2; f[1] *= 2; __builtin_memcpy(&d, f, 8); q[k] = d;\n"
    "}\n"
    "if ((N - 1) % 2) _out[N - 1] = 2 * _a[N - 1];"
)
#: The same pairs through memcpy: no alignment is assumed.
ALIGNED_PAIRS = MISALIGNED.replace("double d = p[k];", "double d; __builtin_memcpy(&d, p + k, 8);").replace(
    "q[k] = d;", "__builtin_memcpy(q + k, &d, 8);"
)
RACY_SUM = "double s = 0;\n#pragma omp parallel for\nfor (int i = 0; i < N; ++i) s += _a[i];\n_out = s;"
REDUCED_SUM = RACY_SUM.replace("#pragma omp parallel for", "#pragma omp parallel for reduction(+:s)")
PARALLEL_TWICE = "#pragma omp parallel for\n" + TWICE
#: A narrowing conversion in braces: a warning for g++ (-Wnarrowing), an error for clang.
NARROWING = "for (int i = 0; i < N; ++i) { long long k = i; int at[1] = { k }; _out[at[0]] = 2 * _a[i]; }"


# ----------------------------------------------------------------------------- without a compiler
def test_sanitizers_run_after_verify_in_their_stage_and_can_be_removed(_isolated_dace_ai):
    ctx = request(san_twice, TWICE).node
    names = [c.name for c in select_checkers(ctx, resolve_settings({}))[0]]
    assert "sanitizers" in names and names.index("verify") < names.index("sanitizers")
    assert names.index("sanitizers") < names.index("bench")
    listed = [c.name for c in select_checkers(ctx, resolve_settings({"checkers": "sanitizers,verify"}))[0]]
    assert listed == ["verify", "sanitizers"]  # by order within the stage, whatever the list's order
    assert "sanitizers" not in [c.name for c in select_checkers(ctx, resolve_settings({"checkers": "-sanitizers"}))[0]]


def test_missing_clang_is_inconclusive_naming_the_debian_package(_isolated_dace_ai):
    (report,) = run_checks(request(san_twice, TWICE, checkers="sanitizers", sanitizers_compiler="clang++-not-here"))
    assert report.status == "inconclusive" and report.reason == "clang missing"
    assert "`clang`" in report.diagnostics and "clang++-not-here" in report.diagnostics


def test_missing_clang_found_through_path_is_inconclusive(_isolated_dace_ai, monkeypatch):
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if "clang" in name else real(name, *a, **k))
    (report,) = run_checks(request(san_twice, TWICE, checkers="sanitizers"))
    assert report.status == "inconclusive" and "Debian package `clang`" in report.diagnostics


def _case():
    return {
        "seed": 0,
        "sizes": {"N": 13},
        "rung": "small",
        "point": {},
        "containers": [{"name": "A"}, {"name": "B"}],
        "connectors": [{"name": "_a", "container": "A"}, {"name": "_out", "container": "B"}],
    }


UNIT = "// unit\n// ---- code ----\nfor (...) _out[i] = 2 * _a[i + 1];\n}\n// entry points"
DRIVER_REPORT = """dace-ai-buffer 0 0x610000000040 104
dace-ai-buffer 1 0x610000000140 104
=================================================================
==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6100000000a8 at pc 0x1 bp 0x2 sp 0x3
READ of size 8 at 0x6100000000a8 thread T0
    #0 0x55 in main /x/sanitize-driver/abc/dace_ai_sanitizers_driver.cpp:59:5
    #1 0x7f in __libc_start_main csu/../csu/libc-start.c:360:3
0x6100000000a8 is located 0 bytes to the right of 104-byte region [0x610000000040,0x6100000000a8)
SUMMARY: AddressSanitizer: heap-buffer-overflow /x/dace_ai_sanitizers_driver.cpp:59:5 in main
"""


def test_a_report_outside_the_candidates_code_is_not_blamed_on_it():
    build = SimpleNamespace(kind="address")
    part = sanitize_check._judge_run(build, SanitizerRun("address", 65, DRIVER_REPORT, 0.1), _case(), UNIT, 4, None)
    assert part.status == "inconclusive" and part.reason == "outside the code", part
    in_code = DRIVER_REPORT.replace(
        "#0 0x55 in main /x/sanitize-driver/abc/dace_ai_sanitizers_driver.cpp:59:5",
        "#0 0x55 in dace_ai_tasklet(int) /tmp/w/sanitize/address/tasklet.cpp:3:20",
    )
    part = sanitize_check._judge_run(build, SanitizerRun("address", 65, in_code, 0.1), _case(), UNIT, 4, None)
    assert part.status == "failed", part
    assert part.message.startswith(
        "AddressSanitizer: heap-buffer-overflow: READ of 8 bytes right after the end of "
        "container A (connector _a) at tasklet.cpp:3: `for (...) _out[i] = 2 * _a[i + 1];` "
        "(line 1 of your code) (seed 0, sizes N=13 (the small odd size))"
    ), part.message
    assert "0x" not in part.message and "/tmp" not in part.message  # byte-stable: no address, no folder
    in_entry_points = in_code.replace("tasklet.cpp:3:20", "tasklet.cpp:5:1")
    part = sanitize_check._judge_run(build, SanitizerRun("address", 65, in_entry_points, 0.1), _case(), UNIT, 4, None)
    assert part.status == "inconclusive" and "entry points" in part.message


RACE_UNIT = (
    "// unit\n// ---- code ----\ndouble s = 0;\n#pragma omp parallel for\n"
    "for (int i = 0; i < N; ++i) s += _a[i];\n_out = s;\n}"
)


def _race_report(first: str, second: str, line_first: int, line_second: int) -> str:
    return f"""Archer detected OpenMP application with TSan, supplying OpenMP synchronization semantics
dace-ai-buffer 0 0x7b0c00000010 104
dace-ai-driver: calling the candidate
==================
WARNING: ThreadSanitizer: data race (pid=4242)
  {first} of size 8 at 0x7ffd1234 by thread T2:
    #0 .omp_outlined._debug__ /tmp/w/sanitize/thread/tasklet.cpp:{line_first}:44 (candidate+0xd455e)
    #1 __kmp_invoke_microtask <null> (libomp.so.5+0xd55a2)

  Previous {second.lower()} of size 8 at 0x7ffd1234 by main thread:
    #0 .omp_outlined._debug__ /tmp/w/sanitize/thread/tasklet.cpp:{line_second}:44 (candidate+0xd455e)

  Location is stack of main thread.
SUMMARY: ThreadSanitizer: data race /tmp/w/tasklet.cpp:5:44 in .omp_outlined._debug__
"""


def test_a_race_report_is_worded_the_same_whichever_thread_tsan_caught_first():
    build = SimpleNamespace(kind="thread")
    words = set()
    for first, second, a, b in (("Write", "Read", 5, 5), ("Read", "Write", 5, 5), ("Write", "Write", 5, 5)):
        part = sanitize_check._judge_run(
            build, SanitizerRun("thread", 66, _race_report(first, second, a, b), 0.1), _case(), RACE_UNIT, 7, 4
        )
        assert part.status == "failed" and part.reason == "race", part
        words.add(part.message)
    (message,) = words
    assert message.startswith(
        "ThreadSanitizer: data race between threads (unsynchronised accesses by different "
        "threads, at least one a write) on a local variable of the calling thread that the "
        "threads share at tasklet.cpp:5: `for (int i = 0; i < N; ++i) s += _a[i];` (line 3 of "
        "your code) (OpenMP, 4 threads, seed 0, sizes N=13 (the small odd size)): use a "
        "reduction clause"
    ), message
    without_archer = _race_report("Write", "Read", 5, 5).replace("Archer detected", "Nothing")
    part = sanitize_check._judge_run(build, SanitizerRun("thread", 66, without_archer, 0.1), _case(), RACE_UNIT, 7, 4)
    assert part.status == "inconclusive" and part.reason == "libomp missing" and "libomp-dev" in part.message
    leak = _race_report("Write", "Read", 5, 5).replace("data race (pid", "thread leak (pid")
    part = sanitize_check._judge_run(build, SanitizerRun("thread", 66, leak, 0.1), _case(), RACE_UNIT, 7, 4)
    assert part.status == "inconclusive", part


def test_a_race_during_the_calls_at_once_is_refused_as_shared_state_naming_the_variable():
    build = SimpleNamespace(kind="thread")
    at_once = "dace-ai-driver: calling the candidate at once\n"
    on_static = _race_report("Write", "Write", 5, 5).replace(
        "  Location is stack of main thread.",
        "  Location is global 'dace_ai_tasklet(dace_ai_state_t*, int, double const*, double&)::scratch' of size 512",
    )
    racy = on_static.replace("dace-ai-driver: calling the candidate\n", at_once)
    part = sanitize_check._judge_run(build, SanitizerRun("thread", 66, racy, 0.1), _case(), RACE_UNIT, 7, 4, True)
    assert part.status == "failed" and part.reason == "shared state", part
    assert part.message.startswith(
        "Calls that run at the same time share state: `scratch`; keep scratch per call or per thread. "
        "ThreadSanitizer: data race between threads"
    ), part.message
    assert "(4 threads calling one state at once, 3 rounds, seed 0" in part.message
    on_heap = racy.replace(
        "Location is global 'dace_ai_tasklet(dace_ai_state_t*, int, double const*, double&)::scratch' of size 512",
        "Location is heap block of size 65536 at 0x7b8000000000 allocated by main thread:",
    )
    part = sanitize_check._judge_run(build, SanitizerRun("thread", 66, on_heap, 0.1), _case(), RACE_UNIT, 7, 4, True)
    assert part.reason == "shared state" and part.message.startswith(
        "Calls that run at the same time share state: what tasklet.cpp:5: `for (int i = 0; i < N; ++i) s += _a[i];` "
        "(line 3 of your code) accesses; keep scratch per call or per thread."
    ), part.message
    # A race in the one call before them is the code's own threads: a race, as before.
    part = sanitize_check._judge_run(build, SanitizerRun("thread", 66, on_static, 0.1), _case(), RACE_UNIT, 7, 4, True)
    assert part.reason == "race" and "(OpenMP, 4 threads," in part.message, part


def test_clang_gets_the_builds_standard_machine_and_macros_but_not_gcc_only_flags():
    flags = [
        "-std=c++14",
        "-fPIC",
        "-Wall",
        "-O3",
        "-march=native",
        "-ffast-math",
        "-fno-trapping-math",
        "-O2",
        "-DNDEBUG",
        "-I",
        "/inc",
        "-mavx2",
        "-fopenmp",
    ]
    assert sanitize.clang_flags(flags) == ["-std=c++14", "-march=native", "-DNDEBUG", "-I", "/inc", "-mavx2"]
    thread = sanitize.sanitizer_flags("thread", flags, openmp=True)
    assert "-fsanitize=thread" in thread and "-fopenmp" in thread and "-w" in thread


# ----------------------------------------------------------------------------- refused, and their twins kept
@needs_clang
@pytest.mark.parametrize("code", [CHUNK_PAST_END, NEXT_PAST_END], ids=["vector-chunk", "next-element"])
def test_read_past_the_end_inside_the_slack_is_refused_by_address_sanitizer(shared_root, code):
    reports = by_checker(run_checks(request(san_twice, code)))
    # The guarded run cannot see it: the bytes read lie between the buffer's end and its guard page, and
    # the values read there (NaN poison) never reach an output.
    assert reports["verify"].status == "passed", reports["verify"].diagnostics
    report = reports["sanitizers"]
    assert report.status == "failed" and report.reason == "address", report.diagnostics
    assert report.diagnostics.startswith("AddressSanitizer: heap-buffer-overflow: READ of ")
    assert (
        "past the end of container A (connector _a)" in report.diagnostics
        or "right after the end of container A (connector _a)" in report.diagnostics
    )
    assert "of your code) (seed 0, sizes N=13 (the small odd size))" in report.diagnostics
    assert "0x" not in report.diagnostics and str(shared_root) not in report.diagnostics


@needs_clang
@pytest.mark.parametrize(
    "program, code, words",
    [
        (san_twice_int, OVERFLOW, "UndefinedBehaviorSanitizer: signed integer overflow: "),
        (san_twice_int, WIDE_SHIFT, "UndefinedBehaviorSanitizer: shift exponent 32 is too large for 32-bit type"),
        (
            san_twice_float,
            MISALIGNED,
            (
                "UndefinedBehaviorSanitizer: load of misaligned address for type 'const double', "
                "which requires 8 byte alignment"
            ),
        ),
    ],
    ids=["signed-overflow", "wide-shift", "misaligned-double"],
)
def test_undefined_behaviour_with_a_right_result_is_refused_by_ubsan(shared_root, program, code, words):
    reports = by_checker(run_checks(request(program, code)))
    assert reports["verify"].status == "passed", reports["verify"].diagnostics
    report = reports["sanitizers"]
    assert report.status == "failed" and report.reason == "undefined", report.diagnostics
    assert report.diagnostics.startswith(words), report.diagnostics
    assert "at tasklet.cpp:" in report.diagnostics and "(line " in report.diagnostics


@needs_clang
@pytest.mark.parametrize(
    "program, code",
    [(san_twice, TWICE), (san_twice_int, TWICE), (san_twice_float, ALIGNED_PAIRS)],
    ids=["double", "int32", "float-pairs"],
)
def test_correct_twins_pass_the_sanitizers(shared_root, program, code):
    reports = by_checker(run_checks(request(program, code)))
    report = reports["sanitizers"]
    assert report.status == "passed", report.diagnostics
    assert report.details["sanitizers"] == ["address", "undefined"] and report.details["threads"] is None
    assert report.details["sanitizer_sizes"] == {"address": {"N": 13}} and report.sizes == [{"N": 13}]
    # clang compiled the DaCe in use's runtime headers (C++14 for DaCe 1.0, C++20 for DaCe 2) into its own pch.
    assert report.details["pch"]["address"] in ("pch built", "pch reused"), (DACE2, report.details["pch"])


@needs_clang
def test_a_candidate_verify_refused_is_not_run_again_and_its_builds_are_stopped(shared_root):
    req = request(san_twice, TWICE.replace("2 * _a[i]", "3 * _a[i]"))
    store = Artefacts()
    reports = by_checker(run_checks(req, artefacts=store))
    assert reports["verify"].status == "failed" and "sanitizers" not in reports
    builds = store[sanitize.SANITIZER_BUILDS].builds
    assert builds and all(b._stopped for b in builds.values())


@dace.program
def san_bins(x: dace.int32[N]):
    return dace_ai.ai(
        "64-bin histogram: _out[b] = number of i < N with _x[i] == b; every _x[i] is in [0, 64).",
        x=x,
        shape=[64],
        dtype=dace.int64,
    )


@needs_clang
def test_a_candidate_verify_could_not_judge_is_not_blamed_for_inputs_it_is_not_defined_for(shared_root):
    """No reference: the generated inputs (-10..10) are outside the bins the node is defined for, so no sanitizer."""
    code = "long h[64] = {0}; for (int i = 0; i < N; ++i) ++h[_x[i]]; for (int b = 0; b < 64; ++b) _out[b] = h[b];"
    reports = by_checker(run_checks(request(san_bins, code)))
    assert reports["verify"].status == "inconclusive" and reports["verify"].reason == "no reference"
    assert "sanitizers" not in reports


@needs_clang
def test_builds_start_beside_the_main_compile_and_stop_when_it_fails(shared_root, register_dace_ai_plugin):
    """The runner starts the builds the selected sanitizers checker needs before the compile stage runs."""
    seen: list[object] = []

    class _First:
        @hookimpl
        def dace_ai_checkers(self):
            def first(request):  # the compile stage's first checker: the builds are already running
                seen.append(request.artefacts.get(sanitize.SANITIZER_BUILDS))
                return CheckReport("t-first", "passed")

            yield Checker(name="t-first", stage="compile", check=first, needs=(sanitize.SANITIZER_BUILDS,))

    register_dace_ai_plugin(_First(), "first-plugin")
    req = request(san_twice, TWICE + " // beside", checkers="t-first,sanitizers")
    store = Artefacts()
    run_checks(req, artefacts=store)
    (builds,) = seen
    assert isinstance(builds, sanitize.SanitizerBuilds) and builds is store[sanitize.SANITIZER_BUILDS]
    build = builds.builds["address"]
    assert build.kind == "address" and build.wait().ok and build.executable.is_file()
    broken = request(san_twice, "this is not C++;")
    store = Artefacts()
    reports = by_checker(run_checks(broken, artefacts=store))
    assert reports["probe"].status == "failed" and "sanitizers" not in reports
    assert all(b._stopped for b in store[sanitize.SANITIZER_BUILDS].builds.values())


@needs_clang
def test_code_only_gcc_compiles_is_inconclusive_with_clangs_first_error(shared_root):
    reports = by_checker(run_checks(request(san_twice, NARROWING)))
    assert reports["verify"].status == "passed"
    report = reports["sanitizers"]
    assert report.status == "inconclusive", report.diagnostics
    assert report.reason == "clang could not compile the code"
    assert "tasklet.cpp:1:" in report.diagnostics or "tasklet.cpp:" in report.diagnostics
    assert "cannot be narrowed" in report.diagnostics and "0x" not in report.diagnostics


# ----------------------------------------------------------------------------- OpenMP under ThreadSanitizer
@needs_clang
@needs_libomp
def test_openmp_race_is_refused_every_time_by_thread_sanitizer(shared_root):
    """Ten fresh checks (a new answer text, folder and build each time): ten refusals, none a lucky collision."""
    for run in range(10):
        code = RACY_SUM + f"\n// attempt {run}"
        reports = by_checker(run_checks(request(san_sum, code, checkers="probe,sanitizers")))
        report = reports["sanitizers"]
        assert report.status == "failed" and report.reason == "race", (run, report.diagnostics)
        assert report.diagnostics.startswith("ThreadSanitizer: data race between threads"), report.diagnostics
        assert "at tasklet.cpp:" in report.diagnostics and "s += _a[i];` (line 3 of your code)" in report.diagnostics
        assert "(OpenMP, 4 threads, seed 0, sizes N=67 (the larger odd size))" in report.diagnostics
        assert "reduction" in report.diagnostics
        assert report.details["threads"] == 4 and report.details["sanitizers"][-1] == "thread"


@needs_clang
@needs_libomp
def test_openmp_race_is_refused_with_the_default_stages(shared_root):
    """With ``verify`` first: refused by its runs when the threads collided in one of them, else by ThreadSanitizer.

    Which of verify's runs sees the collision is the threads' timing: its thread-count runs (``nondeterministic``),
    the repeated calls on the same inputs (``repeated``), the second call on other inputs (``stale``) or a call after
    the inputs changed in place (``kept results``); each is a right refusal of the race.
    """
    reports = run_checks(request(san_sum, RACY_SUM + "\n// default stages"))
    (failed,) = [r for r in reports if r.status == "failed"]
    assert (failed.checker, failed.reason) in RACE_REFUSALS, failed.diagnostics


#: How the default stages may refuse a racy OpenMP sum: verify, in whichever run the threads collided, else TSan.
RACE_REFUSALS = (
    ("verify", "nondeterministic"),
    ("verify", "repeated"),
    ("verify", "stale"),
    ("verify", "kept results"),  # the collision fell in a call after the inputs changed in place
    ("sanitizers", "race"),
)


@needs_clang
@needs_libomp
@pytest.mark.parametrize(
    "program, code", [(san_sum, REDUCED_SUM), (san_twice, PARALLEL_TWICE)], ids=["reduction", "disjoint-writes"]
)
def test_correct_openmp_passes_thread_sanitizer(shared_root, program, code):
    reports = by_checker(run_checks(request(program, code)))
    assert reports["verify"].status == "passed", reports["verify"].diagnostics
    report = reports["sanitizers"]
    assert report.status == "passed", report.diagnostics
    assert report.details["sanitizers"] == ["address", "undefined", "thread"] and report.details["threads"] == 4
    assert report.details["sanitizer_sizes"]["thread"] == {"N": 67}


@needs_clang
def test_missing_libomp_makes_the_thread_run_inconclusive_but_the_address_run_counts(shared_root, monkeypatch):
    for where in (sanitize_check, sanitize_builds):  # the modules that ask
        monkeypatch.setattr(where, "libomp_problem", lambda compiler: "libomp.so not found; install `libomp-dev`")
    report = by_checker(run_checks(request(san_sum, REDUCED_SUM)))["sanitizers"]
    assert report.status == "inconclusive" and report.reason == "libomp missing", report.diagnostics
    assert "libomp-dev" in report.diagnostics and report.details["passed"] == ["address"]
    # Without libomp the address run builds the code without OpenMP (the pragmas ignored): it still sees an overrun.
    overrun = REDUCED_SUM.replace("i < N; ++i) s += _a[i];", "i < N; ++i) s += _a[i] + 0 * _a[i + 1];")
    report = by_checker(run_checks(request(san_sum, overrun, checkers="probe,sanitizers")))["sanitizers"]
    assert report.status == "failed" and report.reason == "address", report.diagnostics


# ----------------------------------------------------------------------------- calls at once under ThreadSanitizer
#: Row sums through a scratch buffer in two passes (copy, then sum), in a parallel map over rows.
def _two_pass(scratch: str) -> str:
    return (
        "double s = 0; for (int j0 = 0; j0 < N; j0 += 8192) { const int n = N - j0 < 8192 ? N - j0 : 8192;\n"
        f" for (int j = 0; j < n; ++j) {scratch}[j] = _a[j0 + j];\n"
        f" for (int j = 0; j < n; ++j) s += {scratch}[j]; }}\n_out = s;"
    )


VECTOR_SCRATCH = "static std::vector<double> scratch(8192);\n" + _two_pass("scratch")
ARRAY_SCRATCH = "static double scratch[8192];\n" + _two_pass("scratch")
THREAD_VECTOR_SCRATCH = "static thread_local std::vector<double> scratch(8192);\n" + _two_pass("scratch")
CALL_VECTOR_SCRATCH = "std::vector<double> scratch(8192);\n" + _two_pass("scratch")
STATE_SCRATCH = {
    "code": _two_pass("__state->row_scratch"),
    "state_fields": ["double* row_scratch"],
    "code_init": "__state->row_scratch = new double[8192];",
    "code_exit": "delete[] __state->row_scratch;",
}
#: Only the sanitizers (and the probe they run beside): neither verify's calls at once nor the text rule.
SANITIZERS_ONLY = "probe,sanitizers"


def _rows_answer(code: str, **answer):
    from tests.test_ladder import ladder_rows
    from tests.test_ladder import request as rows_request

    req = rows_request(ladder_rows, code, bench="off", checkers=SANITIZERS_ONLY)
    req.answer = req.answer.model_copy(update={"code_global": "#include <vector>", **answer})
    return by_checker(run_checks(req))


@needs_clang
@needs_libomp
@pytest.mark.parametrize(
    "answer, named",
    [
        ({"code": VECTOR_SCRATCH}, "what tasklet.cpp:"),
        ({"code": ARRAY_SCRATCH}, "`scratch`"),
        (STATE_SCRATCH, "what tasklet.cpp:"),
    ],
    ids=["static-std-vector", "static-array", "state-field"],
)
def test_scratch_shared_by_calls_at_once_is_refused_by_thread_sanitizer_across_them(shared_root, answer, named):
    reports = _rows_answer(**answer)
    assert not {"verify", "no-shared-state"} & set(reports)  # neither verify's calls at once nor the text rule
    report = reports["sanitizers"]
    assert report.status == "failed" and report.reason == "shared state", report.diagnostics
    assert report.diagnostics.startswith(f"Calls that run at the same time share state: {named}"), report.diagnostics
    assert "; keep scratch per call or per thread. ThreadSanitizer: data race" in report.diagnostics
    assert "(line 2 of your code)" in report.diagnostics or "(line 3 of your code)" in report.diagnostics
    assert "4 threads calling one state at once, 3 rounds" in report.diagnostics
    assert report.details["at_once"] == {"threads": 4, "rounds": 3}


@needs_clang
@needs_libomp
@pytest.mark.parametrize("code", [THREAD_VECTOR_SCRATCH, CALL_VECTOR_SCRATCH], ids=["thread_local", "per-call"])
def test_scratch_per_thread_or_per_call_passes_thread_sanitizer_across_calls_at_once(shared_root, code):
    report = _rows_answer(code)["sanitizers"]
    assert report.status == "passed", report.diagnostics
    assert report.details["sanitizers"] == ["address", "undefined", "thread"]
    assert report.diagnostics.endswith("also across 4 calls at once on one state"), report.diagnostics


@needs_clang
def test_missing_libomp_leaves_the_calls_at_once_unchecked_by_thread_sanitizer(shared_root, monkeypatch):
    for where in (sanitize_check, sanitize_builds):
        monkeypatch.setattr(where, "libomp_problem", lambda compiler: "libomp.so not found; install `libomp-dev`")
    report = _rows_answer(CALL_VECTOR_SCRATCH)["sanitizers"]
    assert report.status == "inconclusive" and report.reason == "libomp missing", report.diagnostics
    assert "no thread sanitizer run across calls at once" in report.diagnostics
    assert report.details["passed"] == ["address"]
