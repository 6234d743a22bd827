"""The ``no-probing`` rule reads tokens: library names used as the library's are refused, the same
names as the code's own (a local lambda, a variable, a member, another namespace) are not."""

import pytest
from dace_ai.checkers.probing import PROBES, probes

REFUSED = {
    "inline assembly": ('unsigned lo, hi; asm volatile("rdtsc" : "=a"(lo), "=d"(hi));', "asm"),
    "gnu asm keyword": ('__asm__ __volatile__("rdtsc");', "__asm__"),
    "builtin tick counter": ("unsigned aux; auto t = __builtin_ia32_rdtscp(&aux);", "__builtin_ia32_rdtscp"),
    "sysinfo": ("struct sysinfo si; sysinfo(&si);", "sysinfo"),
    "times": ("struct tms t; times(&t);", "times"),
    "affinity": ("cpu_set_t s; sched_getaffinity(0, sizeof(s), &s);", "sched_getaffinity"),
    "load average": ("double l[3]; getloadavg(l, 3);", "getloadavg"),
    "split string": ('FILE* f = fopen("/pro" "c/self/status", "r");', '"/proc/self/status"'),
    "raw string": ('const char* p = R"(/sys/devices)";', '"/sys/devices"'),
    "std qualified": ("auto t = std::time(nullptr);", "time"),
    "global qualified beside a local": ("double time = 1; auto t = ::time(nullptr);", "time"),
    "function pointer": ("auto f = &getpid; f();", "getpid"),
    "chrono clock": ("auto t = std::chrono::steady_clock::now();", "steady_clock"),
    "redeclared library function": ('extern "C" int getpid(); int p = getpid();', "getpid"),
    "through a macro": ("#define NOW() clock()\nlong t = NOW();", "clock"),
}
KEPT = {
    "local lambda": "auto signal = [&](int i) { return 3 * _x[i]; }; for (int i = 0; i < N; ++i) _out[i] = signal(i);",
    "local variable": "double time = 2.0; for (int i = 0; i < N; ++i) _out[i] = time * _x[i];",
    "member": "struct S { double time; } s{3}; _out[0] = s.time;",
    "own function": "static double clock(double v) { return v; }",
    "own namespace": "namespace mine { int clock() { return 1; } } int v = mine::clock();",
    "includes": "#include <sys/time.h>\n#include <time.h>\n_out[0] = 1;",
    "comments and strings": '// getenv("X") and getrlimit()\nconst char* note = "time() is not called"; double time_step = 3;',
}


@pytest.mark.parametrize("code, name", REFUSED.values(), ids=list(REFUSED))
def test_library_names_used_as_the_librarys_are_refused(code, name):
    assert name in [call for _, call in probes(code)], probes(code)


@pytest.mark.parametrize("code", KEPT.values(), ids=list(KEPT))
def test_the_codes_own_names_are_kept(code):
    assert probes(code) == []


def test_every_listed_name_is_refused_when_called():
    for what, names in PROBES:
        for name in names:
            assert (what, name) in probes(f"auto v = {name}(0);"), name
