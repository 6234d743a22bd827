"""Built-in checker ``sanitizers`` (stage ``verify``, on by default): the candidate once more, under clang's sanitizers.

The verify stage runs the candidate on guarded buffers: an access past a buffer's
guard page faults, but one that stays inside the slack before it (a vector load of
the last partial chunk, ``_a[i + 1]`` at ``i = N - 1``) goes unseen when its value
is not used, and a data race is only found when threads happen to collide. This
checker builds the very unit of the candidate's one compile
(:func:`dace_ai.checking.compile.compile_candidate`) a second time with ``clang++``
and runs it once at a small size, in a process of its own:

* **AddressSanitizer + UndefinedBehaviorSanitizer** (``-fsanitize=address,undefined
  -fno-sanitize-recover=all -O1 -g``): every container is allocated with exactly its
  byte count, so ASan's redzone starts right after it; out-of-bounds accesses,
  misaligned typed loads, signed overflow, over-wide shifts, ... end the run with a
  report. Sizes: the ladder's first ``small`` case.
* **ThreadSanitizer** with LLVM's OpenMP runtime and Archer (``-fsanitize=thread
  -fopenmp``), for code that uses OpenMP: 4 threads even on 2 cores, at the ``odd``
  rung's size (else ``small``). TSan sees two unsynchronised accesses whether or not
  they overlap in time, so a shared accumulator without a reduction fails every time;
  Archer tells TSan about OpenMP's own synchronisation, so a correct reduction or a
  parallel loop writing disjoint elements passes.

Both builds are started beside the main compile (:func:`start_sanitizer_builds`,
called by ``compile_candidate``: background threads whose compiler processes are kept
on ``request.shared[SANITIZER_BUILDS]``, listed in ``request.shared.background`` and
killed when the main compile fails or the checks end), so a 2-core machine overlaps them.
``dace/dace.h`` is precompiled for clang once per flag set
(:func:`dace_ai.checking.compile.ensure_pch`) and the fixed C++ driver
(:data:`DRIVER_SOURCE`, our code, never the model's) is compiled once per flag set, so a
warm sanitizer build is one short compile and link.

The driver reads a plain job file (symbol values, enclosing-map parameters, per
container its byte size and a raw data file, per connector its container and byte
offset, in the entry points' order; see :func:`write_job`), allocates each container
with exactly its byte count (64-byte aligned, as the verify child aligns its buffers),
calls ``dace_ai_entry_init/run/exit`` and prints each buffer's address range first,
so a report's address is mapped to the container. The first report becomes one short
message naming the class, the container and the answer's line::

    AddressSanitizer: heap-buffer-overflow: READ of 8 bytes right after the end of container A
    (connector _a) at tasklet.cpp:27: `double next = _a[i + 1];` (line 2 of your code) (seed 0,
    sizes N=13 (the small odd size)): every access must stay inside the data its connector covers, ...

Reports: ``CheckReport("sanitizers", "passed" | "failed" | "inconclusive", diagnostics,
stage="verify", reason=..., sizes=[address run's, thread run's], details={"sanitizers":
["address", "undefined"(, "thread")], "sanitizer_sizes": {"address": {...}, "thread": {...}},
"threads": 4 | None, "seconds": {...}, "pch": {...}})`` (``"passed": [...]``: the runs that passed when
another was inconclusive). Inconclusive (never failed) when clang++ is missing (Debian
package ``clang``), when LLVM's OpenMP runtime or Archer is missing for the thread
run (``libomp-dev``; the address run still counts), when clang has no sanitizer
runtime (``libclang-rt-dev``) - these three are the machine's, said once per process
and marked ``told`` -, when clang cannot compile what the real build's compiler
compiled (a GCC extension: clang's first error is quoted), and when a report is not
in the candidate's code (the driver, our entry points). The checker applies only to
candidates the ``verify`` checker passed (inputs it could not judge may lie outside
what the node is defined for), and it runs after ``verify`` in its stage (its ``order``).
``checkers = "-sanitizers"`` turns it off; the setting ``sanitizers_compiler`` names the clang++ to use.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dace_ai.checking.api import CheckReport, CheckRequest, SharedKey, Status, stable_paths
from dace_ai.checking.units import UNIT_FILE, ToolResult, environment_classes, unit_place
from dace_ai.config.settings import AISettings
from dace_ai.plugins.registrations import Checker, Setting
from dace_ai.state import STATE

if TYPE_CHECKING:
    from dace_ai.checking.child.records import Case

NAME = "sanitizers"
#: Folder under the check's workdir.
FOLDER = "sanitize"
#: The one setting of this checker: the clang++ to build with.
COMPILER_SETTING = Setting(
    "sanitizers_compiler",
    str,
    "clang++",
    "The clang++ that builds the sanitizers checker's runs (AddressSanitizer, "
    "UndefinedBehaviorSanitizer, ThreadSanitizer with LLVM's OpenMP and Archer)",
)
#: Flags of the address run (ASan and UBSan in one build).
ADDRESS_FLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g", "-O1")
#: Flags of the thread run.
THREAD_FLAGS = ("-fsanitize=thread", "-fopenmp", "-g", "-O1")
#: Warnings are the main compile's business: clang's own, and GCC-only warning options, stay quiet.
QUIET_FLAGS = ("-Wno-unknown-warning-option", "-w")
#: Threads of the thread run (more than the cores is fine: TSan needs no collision).
THREAD_COUNT = 4
#: Threads of an OpenMP candidate's address run.
ADDRESS_THREADS = 2
#: Exit codes the sanitizers are told to use (a report is recognised by its text first).
EXIT_ADDRESS, EXIT_THREAD, EXIT_UNDEFINED = 65, 66, 67
#: Niceness of the sanitizer compiles (which run beside the main compile and the verify run).
BUILD_NICENESS = 5
#: Seconds one sanitizer compile (or link) may take.
BUILD_TIMEOUT = 300.0
#: Debian packages to name when a tool is missing (clang only recommends its sanitizer runtimes).
CLANG_PACKAGE, LIBOMP_PACKAGE, RUNTIME_PACKAGE = "clang", "libomp-dev", "libclang-rt-dev"
#: Line printed by Archer when it supplies OpenMP's synchronisation to TSan (``ARCHER_OPTIONS=verbose=1``).
ARCHER_ACTIVE = "Archer detected OpenMP application with TSan"
#: What tells a unit uses OpenMP before its object exists (the object's symbols decide afterwards).
_OPENMP_SOURCE = re.compile(
    r"#\s*pragma\s+omp\s+(?!simd\b|declare\s+simd\b)|_Pragma\s*\(\s*\"\s*omp\b"
    r"|\bomp_[a-z_]+\s*\("
)

#: The driver: our code, fixed, compiled once per flag set. It never sees model text.
DRIVER_SOURCE = r"""// dace-ai sanitizers driver: runs a candidate's entry points once on buffers of exactly their size.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/resource.h>
extern "C" void* dace_ai_entry_init(const double* symbols);
extern "C" void dace_ai_entry_run(void* state, void** connectors, const double* symbols, const double* params);
extern "C" void dace_ai_entry_exit(void* state, const double* symbols);

static void dace_ai_driver_fail(const char* what) {
    fprintf(stderr, "dace-ai-driver: bad job file: %s\n", what);
    exit(3);
}
static size_t dace_ai_driver_count(FILE* job, const char* key) {
    char word[64];
    size_t n = 0;
    if (fscanf(job, "%63s %zu", word, &n) != 2 || strcmp(word, key) != 0) dace_ai_driver_fail(key);
    return n;
}
static double* dace_ai_driver_values(FILE* job, const char* key) {
    size_t n = dace_ai_driver_count(job, key);
    double* values = (double*) calloc(n + 1, sizeof(double));
    for (size_t i = 0; i < n; ++i)
        if (fscanf(job, "%lf", &values[i]) != 1) dace_ai_driver_fail(key);
    return values;
}

int main(int argc, char** argv) {
    if (argc != 2) dace_ai_driver_fail("usage: driver JOB");
    FILE* job = fopen(argv[1], "r");
    if (!job) dace_ai_driver_fail("cannot open it");
    // CPU time (every thread's), set by the driver itself before any candidate code runs; never an address-space
    // limit: the sanitizers reserve terabytes of shadow memory.
    struct rlimit cpu;
    cpu.rlim_cur = (rlim_t) dace_ai_driver_count(job, "cpu_seconds");
    cpu.rlim_max = cpu.rlim_cur + 1;
    struct rlimit core = {0, 0};
    if (setrlimit(RLIMIT_CPU, &cpu) != 0 || setrlimit(RLIMIT_CORE, &core) != 0) dace_ai_driver_fail("limits");
    double* symbols = dace_ai_driver_values(job, "symbols");
    double* params = dace_ai_driver_values(job, "params");
    size_t containers = dace_ai_driver_count(job, "containers");
    unsigned char** buffers = (unsigned char**) calloc(containers + 1, sizeof(unsigned char*));
    for (size_t i = 0; i < containers; ++i) {
        size_t bytes = 0;
        char name[256];
        if (fscanf(job, "%zu %255s", &bytes, name) != 2) dace_ai_driver_fail("container");
        void* memory = nullptr;
        // Exactly `bytes`: the sanitizer's redzone starts right after the last byte. Aligned like the verify
        // child's buffers, so code that passed there is not refused for an alignment it was given.
        if (posix_memalign(&memory, 64, bytes ? bytes : 1) != 0) dace_ai_driver_fail("out of memory");
        buffers[i] = (unsigned char*) memory;
        FILE* data = fopen(name, "rb");
        if (!data || fread(buffers[i], 1, bytes, data) != bytes) dace_ai_driver_fail("container data");
        fclose(data);
        fprintf(stderr, "dace-ai-buffer %zu %p %zu\n", i, (void*) buffers[i], bytes);
    }
    size_t connectors = dace_ai_driver_count(job, "connectors");
    void** pointers = (void**) calloc(connectors + 1, sizeof(void*));
    for (size_t k = 0; k < connectors; ++k) {
        size_t container = 0, offset = 0;
        if (fscanf(job, "%zu %zu", &container, &offset) != 2 || container >= containers)
            dace_ai_driver_fail("connector");
        pointers[k] = buffers[container] + offset;
    }
    fclose(job);
    fprintf(stderr, "dace-ai-driver: calling the candidate\n");
    void* state = dace_ai_entry_init(symbols);
    dace_ai_entry_run(state, pointers, symbols, params);
    dace_ai_entry_exit(state, symbols);
    fprintf(stderr, "dace-ai-driver: the candidate returned\n");
    for (size_t i = 0; i < containers; ++i) free(buffers[i]);
    free(buffers);
    free(pointers);
    free(symbols);
    free(params);
    return 0;
}
"""
DRIVER_FILE = "dace_ai_sanitizers_driver.cpp"


# ----------------------------------------------------------------------------- tools
def sanitizer_compiler(settings: AISettings) -> str | None:
    """The clang++ to build with (setting ``sanitizers_compiler``), as a path, or None when it is not installed."""
    name = str(settings.sanitizers_compiler or COMPILER_SETTING.default).strip()
    return shutil.which(name) if name else None


@STATE.cached("checking.sanitize.llvm_lib_folder", maxsize=8)
def llvm_lib_folder(compiler: str) -> Path:
    """``<llvm>/lib`` of a clang++ (``/usr/lib/llvm-14/lib``): where its libomp and Archer live on Debian."""
    return Path(os.path.realpath(compiler)).parent.parent / "lib"


@STATE.cached("checking.sanitize.libomp_problem", maxsize=8)
def libomp_problem(compiler: str) -> str | None:
    """Why clang++ cannot build and run OpenMP code under ThreadSanitizer here, or None.

    It needs LLVM's OpenMP runtime (``omp.h``, ``libomp.so``) and Archer
    (``libarcher.so``), which tells TSan about OpenMP's synchronisation; without
    Archer, TSan reports races that are not there. All come with ``libomp-dev``.
    """
    lib = llvm_lib_folder(compiler)
    headers = [*lib.glob("clang/*/include/omp.h"), Path("/usr/include/omp.h"), Path("/usr/local/include/omp.h")]
    missing = []
    if not any(p.is_file() for p in headers):
        missing.append("omp.h")
    if not (lib / "libomp.so").exists() and not (lib / "libomp.so.5").exists():
        missing.append("libomp.so")
    if not archer_library(compiler):
        missing.append("libarcher.so")
    if not missing:
        return None
    return (
        f"LLVM's OpenMP runtime for {os.path.basename(compiler)} is incomplete ({', '.join(missing)} not found "
        f"under {lib}); install the Debian package `{LIBOMP_PACKAGE}`"
    )


def archer_library(compiler: str) -> str | None:
    """Path of Archer next to clang's libomp, or None."""
    path = llvm_lib_folder(compiler) / "libarcher.so"
    return str(path) if path.exists() else None


@STATE.cached("checking.sanitize.symbolizer", maxsize=8)
def symbolizer(compiler: str) -> str | None:
    """``llvm-symbolizer`` of the clang in use (reports need it to name file and line), or None."""
    own = Path(os.path.realpath(compiler)).parent / "llvm-symbolizer"
    return str(own) if own.is_file() else shutil.which("llvm-symbolizer")


@STATE.cached("checking.sanitize.fast_link_args", maxsize=8)
def fast_link_args(compiler: str, kind: str) -> tuple[str, ...]:
    """Link flags that halve a sanitized link: lld or gold where installed and, for the address run, the shared
    ASan runtime (found through an rpath) instead of the static one. (A shared TSan runtime crashes at start.)"""
    args = []
    if shutil.which("ld.lld"):
        args.append("-fuse-ld=lld")
    elif shutil.which("ld.gold"):
        args.append("-fuse-ld=gold")
    if kind != "address":
        return tuple(args)
    try:
        out = subprocess.run([compiler, "-print-resource-dir"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return tuple(args)
    runtime = Path(out.stdout.strip()) / "lib" / "linux"
    if out.stdout.strip() and list(runtime.glob("libclang_rt.asan-*.so")):
        args += ["-shared-libsan", f"-Wl,-rpath,{runtime}"]
    return tuple(args)


def uses_openmp_source(text: str) -> bool:
    """A guess from the unit's text (pragmas, ``omp_*`` calls), made before its object exists."""
    return bool(_OPENMP_SOURCE.search(text))


def clang_flags(flags: Sequence[str]) -> list[str]:
    """The main build's flags clang++ must share: language standard, machine (``-march``/``-m*``), macros, includes.

    Optimisation, warning and GCC-only flags are left out: the sanitized build has
    its own (``-O1 -g``), and a flag clang does not know would only stop it.
    """
    kept: list[str] = []
    i = 0
    while i < len(flags):
        flag = flags[i]
        if flag in ("-I", "-D", "-U", "-isystem") and i + 1 < len(flags):
            kept += [flag, flags[i + 1]]
            i += 2
            continue
        if flag.startswith(("-std=", "-D", "-U", "-I", "-isystem")) or (flag.startswith("-m") and len(flag) > 2):
            kept.append(flag)
        i += 1
    return kept


def sanitizer_flags(kind: str, build_flags: Sequence[str], openmp: bool) -> list[str]:
    """Compile flags of one run kind (``address`` or ``thread``) from the main build's flags."""
    own = THREAD_FLAGS if kind == "thread" else ADDRESS_FLAGS + (("-fopenmp",) if openmp else ())
    return [*clang_flags(build_flags), *own, *QUIET_FLAGS]


def _env_compile_args(request: CheckRequest) -> list[str]:
    """Include folders and macros of the answer's environments (as the main compile passes them)."""
    envs, _ = environment_classes(request.answer, request.environments)
    args = [f"-I{d}" for env in envs for d in (env.cmake_includes or [])]
    args += [f for env in envs for f in (env.cmake_compile_flags or []) if f.startswith(("-I", "-D", "-U"))]
    args += [f"-D{d}" for req in request.answer.environments for d in req.compile_definitions]
    return args


def _link_args(request: CheckRequest) -> list[str]:
    """Libraries of the answer's environments (as the verify stage links them)."""
    envs, _ = environment_classes(request.answer, request.environments)
    libs = [f"-l{lib}" for env in envs for lib in (env.cmake_libraries or []) if "/" not in lib]
    libs += [f for env in envs for f in (env.cmake_link_flags or [])]
    libs += [lib for env in envs for lib in (env.cmake_libraries or []) if "/" in lib]
    libs += [f"-l{lib}" for req in request.answer.environments for lib in req.libraries]
    return libs


def driver_object(compiler: str, flags: Sequence[str]) -> tuple[Path | None, str]:
    """The driver compiled once per compiler and flags under ``<build root>/ai-check/sanitize-driver/`` (and a note)."""
    from dace_ai.checking.units import run_tool
    from dace_ai.storage.files import ai_folder, lock_for
    from dace_ai.targets.build_flags import compiler_identity

    key = "\0".join([os.path.realpath(compiler), compiler_identity(compiler), *flags, DRIVER_SOURCE])
    folder = ai_folder("ai-check") / "sanitize-driver" / hashlib.sha256(key.encode()).hexdigest()[:20]
    built = folder / "driver.o"
    if built.is_file():
        return built, "driver reused"
    with lock_for(folder / "driver"):
        if built.is_file():
            return built, "driver reused"
        (folder / DRIVER_FILE).write_text(DRIVER_SOURCE, encoding="utf-8")
        tmp = folder / f".driver.{os.getpid()}.{threading.get_ident()}.o"
        result = run_tool(
            [compiler, *flags, "-c", DRIVER_FILE, "-o", tmp.name],
            cwd=folder,
            timeout=BUILD_TIMEOUT,
            env={"LC_ALL": "C"},
        )
        if not result.ok or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            return None, result.output
        os.replace(tmp, built)
        return built, "driver built"


# ----------------------------------------------------------------------------- builds (in the background)
@dataclass
class SanitizerBuild:
    """One sanitized build of the candidate's unit, run in a background thread beside the main compile.

    The thread precompiles ``dace.h`` and the driver when needed (once per flag
    set), then compiles the unit and links it with the driver into
    ``<workdir>/sanitize/<kind>/candidate``. :meth:`stop` kills the compiler's
    process group; :meth:`wait` returns the build's :class:`ToolResult`.
    """

    kind: str  #: "address" or "thread"
    compiler: str
    flags: list[str]
    folder: Path
    result: ToolResult | None = None
    pch: str = ""
    driver: str = ""
    #: Wall seconds of the build: precompiled header, driver, compile and link.
    seconds: dict[str, float] = field(default_factory=dict)
    #: A build whose compile must end before this one compiles (the thread build waits for the address
    #: build: with the main compile, two compilers at a time on a 2-core machine, not three).
    after: SanitizerBuild | None = None
    _thread: threading.Thread | None = None
    _proc: subprocess.Popen | None = None
    _stopped: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def executable(self) -> Path:
        return self.folder / "candidate"

    def start(self, unit: str, env_args: Sequence[str], link_args: Sequence[str]) -> SanitizerBuild:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.executable.unlink(missing_ok=True)
        (self.folder / UNIT_FILE).write_text(unit, encoding="utf-8")
        self._thread = threading.Thread(
            target=self._build,
            args=(list(env_args), list(link_args)),
            name=f"dace-ai-{self.kind}-sanitizer-build",
            daemon=True,
        )
        self._thread.start()
        return self

    def _build(self, env_args: list[str], link_args: list[str]) -> None:
        from dace_ai.checking.compile import ensure_pch
        from dace_ai.compat import dace_runtime_include

        start = time.perf_counter()
        try:
            pch_args, self.pch = ensure_pch([self.compiler], self.flags)
            self.seconds["pch"] = time.perf_counter() - start
            driver, self.driver = driver_object(self.compiler, self.flags)
            self.seconds["driver"] = time.perf_counter() - start - self.seconds["pch"]
            if driver is None:
                self.result = ToolResult((self.compiler,), 1, self.driver, time.perf_counter() - start)
                return
            if self.after is not None and self.after._thread is not None:
                self.after._thread.join()
            partial = f".candidate.{os.getpid()}"
            argv = [
                self.compiler,
                *self.flags,
                "-I",
                dace_runtime_include(),
                *env_args,
                *pch_args,
                UNIT_FILE,
                str(driver),
                "-o",
                partial,
                *fast_link_args(self.compiler, self.kind),
                *link_args,
            ]
            self.result = self._run(argv)
            if self.result.ok:
                os.replace(self.folder / partial, self.executable)
        except Exception as exc:  # noqa: BLE001 - reported as the build's result, read by the check
            self.result = ToolResult((self.compiler,), 1, f"{type(exc).__name__}: {exc}", time.perf_counter() - start)
        finally:
            self.seconds["total"] = time.perf_counter() - start

    def _run(self, argv: list[str]) -> ToolResult:
        """Run the compiler in a session of its own, so :meth:`stop` can kill it with its children (the linker)."""
        start = time.perf_counter()
        with self._lock:
            if self._stopped:
                return ToolResult(tuple(argv), -9, "stopped", 0.0)
            try:
                self._proc = subprocess.Popen(
                    argv,
                    cwd=self.folder,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env={**os.environ, "LC_ALL": "C"},
                )
            except OSError as exc:
                return ToolResult(tuple(argv), 127, f"{argv[0]}: {exc}", 0.0)
            try:  # the main compile and the verify run come first; this build has until they end
                os.setpriority(os.PRIO_PROCESS, self._proc.pid, BUILD_NICENESS)
            except OSError:
                pass
        try:
            output, _ = self._proc.communicate(timeout=BUILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._kill()
            output, _ = self._proc.communicate()
            return ToolResult(
                tuple(argv),
                -9,
                output.decode(errors="replace") + f"\nkilled after {BUILD_TIMEOUT:g} s",
                time.perf_counter() - start,
                timed_out=True,
            )
        self.seconds["compile"] = time.perf_counter() - start
        return ToolResult(
            tuple(argv), self._proc.returncode, output.decode(errors="replace"), time.perf_counter() - start
        )

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        """Kill the build (its compiler and linker); the result becomes "stopped"."""
        with self._lock:
            self._stopped = True
            self._kill()

    def wait(self) -> ToolResult:
        if self._thread is not None:
            self._thread.join()
        return self.result or ToolResult((self.compiler,), 1, "the build did not run", 0.0)


@dataclass
class SanitizerBuilds:
    """The background builds of one candidate (``request.shared[SANITIZER_BUILDS]``), by kind."""

    builds: dict[str, SanitizerBuild] = field(default_factory=dict)

    def stop(self) -> None:
        for build in self.builds.values():
            build.stop()


#: Where the background builds of a candidate live on ``request.shared``.
SANITIZER_BUILDS: SharedKey[SanitizerBuilds] = SharedKey("sanitizer_builds")


def wanted(request: CheckRequest) -> bool:
    """True when this checker is among the ones the stage runner chose for the request and may apply to it."""
    from dace_ai.checking.host import uses_host_compiler

    return NAME in request.shared.selected and uses_host_compiler(request)


def _shared_builds(request: CheckRequest) -> SanitizerBuilds:
    builds = request.shared.get(SANITIZER_BUILDS)
    if builds is None:
        builds = request.shared[SANITIZER_BUILDS] = SanitizerBuilds()
        request.shared.background.append(builds)
    return builds


def start_build(
    request: CheckRequest, kind: str, unit: str, build_flags: Sequence[str], openmp: bool, compiler: str
) -> SanitizerBuild:
    """Start (or reuse, when its flags match) the ``kind`` build of the candidate's unit (a thread build
    compiles after the address build)."""
    builds = _shared_builds(request)
    flags = sanitizer_flags(kind, build_flags, openmp)
    known = builds.builds.get(kind)
    if known is not None and known.flags == flags:
        return known
    if known is not None:
        known.stop()
        known.wait()
    build = SanitizerBuild(
        kind,
        compiler,
        flags,
        Path(request.workdir) / FOLDER / kind,
        after=builds.builds.get("address") if kind == "thread" else None,
    )
    builds.builds[kind] = build.start(unit, _env_compile_args(request), _link_args(request))
    return build


def start_sanitizer_builds(request: CheckRequest, unit: str, build_flags: Sequence[str]) -> None:
    """Start the sanitized builds beside the main compile (called by ``compile_candidate`` before it compiles).

    Only when the stage runner chose this checker for a host C++ candidate and
    clang++ is installed; the thread build only for code that looks like OpenMP
    (the check corrects the guess from the object's symbols). Never raises: the
    check itself reports what went wrong.
    """
    try:
        if not wanted(request):
            return
        compiler = sanitizer_compiler(request.settings)
        if compiler is None:
            return
        openmp = uses_openmp_source(unit)
        libomp = libomp_problem(compiler) is None
        start_build(request, "address", unit, build_flags, openmp and libomp, compiler)
        if openmp and libomp:
            start_build(request, "thread", unit, build_flags, True, compiler)
    except Exception:  # noqa: BLE001 - a background start is an optimisation; the check redoes it
        return


def stop_sanitizer_builds(request: CheckRequest) -> None:
    """Kill the candidate's background builds (the main compile failed: nothing will run them)."""
    builds = request.shared.get(SANITIZER_BUILDS)
    if builds is not None:
        builds.stop()


# ----------------------------------------------------------------------------- the run
def sanitizer_cases(request: CheckRequest) -> tuple[Case, Case]:
    """(case of the address run, case of the thread run): the ladder's first small case, and its first odd one
    (a bit more work per thread) or else the small one."""
    from dace_ai.checking.harness import make_case
    from dace_ai.checking.ladder import build_ladder

    ladder = build_ladder(request, None, seeds=(0,), rungs=("small", "odd"))
    planned = ladder.cases()
    if not planned:
        raise ValueError("; ".join(map(str, ladder.skipped)) or "no size")
    small = next((c for c in planned if c.rung != "odd"), planned[0])
    odd = next((c for c in planned if c.rung == "odd"), small)
    small_case, odd_case = (make_case(request, c.seed, c.sizes, c.point, c.rung, c.point_words) for c in (small, odd))
    return small_case, odd_case


def write_job(case: Case, request: CheckRequest, folder: Path, cpu_seconds: int = 60) -> Path:
    """The driver's job file and one raw data file per container (initial data of the case, outputs pre-filled).

    Format (whitespace separated): ``cpu_seconds n`` (the driver's own CPU-time
    limit), ``symbols n v...``, ``params n v...`` (doubles, in
    the entry points' order), ``containers n`` then ``bytes file`` per container,
    ``connectors n`` then ``container-index byte-offset`` per connector.
    """
    import numpy as np

    from dace_ai.checking.child.inputs import case_inputs
    from dace_ai.checking.units import scope_parameters

    data = case_inputs(case)
    values = case["values"]
    symbols = [float(values[s]) for s in request.node.symbols]
    params = [float(values[p]) for p in scope_parameters(request.node)]
    lines = [
        f"cpu_seconds {max(1, int(cpu_seconds))}",
        f"symbols {len(symbols)} " + " ".join(repr(v) for v in symbols),
        f"params {len(params)} " + " ".join(repr(v) for v in params),
        f"containers {len(case['containers'])}",
    ]
    index = {}
    for i, cont in enumerate(case["containers"]):
        array = np.ascontiguousarray(data[cont["name"]])
        array.tofile(folder / f"container-{i}.bin")
        index[cont["name"]] = (i, np.dtype(cont["dtype"]).itemsize)
        lines.append(f"{array.nbytes} container-{i}.bin")
    conns = {c["name"]: c for c in case["connectors"]}
    lines.append(f"connectors {len(request.node.connectors)}")
    for conn in request.node.connectors:
        where = conns[conn.name]
        i, item = index[where["container"]]
        lines.append(f"{i} {int(where['offset']) * item}")
    job = folder / "job.txt"
    job.write_text("\n".join(lines) + "\n", encoding="ascii")
    return job


def sanitizer_environment(kind: str, compiler: str, threads: int) -> dict[str, str]:
    """Environment of a run: the sanitizers' options, the thread count, Archer for the thread run."""
    sym = symbolizer(compiler)
    common = ["detect_leaks=0", "abort_on_error=0", "symbolize=1", "handle_abort=1"]
    if sym:
        common.append(f"external_symbolizer_path={sym}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASAN_", "UBSAN_", "TSAN_", "OMP_", "KMP_"))}
    env.pop("LD_PRELOAD", None)
    env.update(
        ASAN_OPTIONS=":".join([*common, f"exitcode={EXIT_ADDRESS}", "detect_stack_use_after_return=0"]),
        UBSAN_OPTIONS=":".join([*common, "print_stacktrace=1", f"exitcode={EXIT_UNDEFINED}"]),
        TSAN_OPTIONS=" ".join(
            [
                "ignore_noninstrumented_modules=1",
                "halt_on_error=1",
                f"exitcode={EXIT_THREAD}",
                "report_signal_unsafe=0",
                *(c for c in common if not c.startswith("detect_leaks")),
            ]
        ),
        OMP_NUM_THREADS=str(threads),
        OMP_DYNAMIC="false",
        LC_ALL="C",
    )
    if kind == "thread":
        archer = archer_library(compiler)
        env["ARCHER_OPTIONS"] = "verbose=1"
        if archer:
            env["OMP_TOOL_LIBRARIES"] = archer
    return env


@dataclass
class SanitizerRun:
    """What one sanitized run printed, and how it ended."""

    kind: str
    returncode: int
    output: str
    seconds: float
    timed_out: bool = False


def run_sanitized(build: SanitizerBuild, case: Case, request: CheckRequest, threads: int) -> SanitizerRun:
    """Run the sanitized executable on ``case`` in a sandboxed session of its own (wall and CPU time limits)."""
    from dace_ai.checking.sandbox import SandboxLimits, launch

    limits = SandboxLimits.from_settings(request.settings)
    job = write_job(case, request, build.folder, max(2, round(limits.cpu_seconds)) * max(1, threads))
    env = sanitizer_environment(build.kind, build.compiler, threads)
    argv = [str(build.executable), job.name]
    if build.kind == "thread" and shutil.which("setarch"):  # LLVM 14's TSan cannot map its shadow under some
        argv = ["setarch", platform.machine(), "-R", *argv]  # kernels' address randomisation: run without it
    run = launch(argv, cwd=build.folder, wall_seconds=limits.wall_seconds, env=env)
    return SanitizerRun(build.kind, run.returncode, run.output.decode(errors="replace"), run.seconds, run.timed_out)


# ----------------------------------------------------------------------------- reading a report
_FRAME = re.compile(
    r"^\s*#(\d+) .*?(?:^|[\s/(])(" + re.escape(UNIT_FILE) + r"|[\w.+-]+\.(?:cpp|cc|cxx|c|h|hpp)):"
    r"(\d+)(?::\d+)?",
    re.MULTILINE,
)
_BUFFER = re.compile(r"^dace-ai-buffer (\d+) (0x[0-9a-fA-F]+|\(nil\)) (\d+)$", re.MULTILINE)
_HEX = re.compile(r"\s*\b0x[0-9a-fA-F]{4,}\b")


@dataclass
class Finding:
    """The first report of a run, read: its class, where in the unit, and the words for the model."""

    sanitizer: str  #: "address", "undefined", "thread"
    kind: str  #: heap-buffer-overflow, signed integer overflow, data race, ...
    text: str  #: the sentence without place and case
    line: int | None  #: line of the unit (tasklet.cpp) of the first frame there
    hint: str = ""
    #: False for reports that say nothing certain about the code (a TSan "thread leak" of the OpenMP runtime).
    judged: bool = True


def buffers_of(output: str) -> list[tuple[int, int, int]]:
    """(container index, start address, bytes) of each buffer the driver allocated."""
    found = []
    for m in _BUFFER.finditer(output):
        start = 0 if m.group(2) == "(nil)" else int(m.group(2), 16)
        found.append((int(m.group(1)), start, int(m.group(3))))
    return found


def first_unit_line(report: str) -> int | None:
    """The unit's line in the first stack frame that is in the unit (inlined frames included)."""
    for m in _FRAME.finditer(report):
        if m.group(2) == UNIT_FILE:
            return int(m.group(3))
    return None


def _container_words(case: Case, index: int) -> str:
    name = case["containers"][index]["name"]
    conns = [c["name"] for c in case["connectors"] if c["container"] == name]
    return f"container {name}" + (f" (connector {', '.join(conns)})" if conns else "")


def _container_at(case: Case, buffers: list[tuple[int, int, int]], start: int) -> str | None:
    for index, begin, _ in buffers:
        if begin == start and index < len(case["containers"]):
            return _container_words(case, index)
    return None


def _no_addresses(text: str) -> str:
    return re.sub(r"\s+", " ", _HEX.sub("", text)).strip()


_UB_HINTS = (
    (
        "signed integer overflow",
        "compute in a wider type (long long) or in unsigned arithmetic where wrapping is meant",
    ),
    ("shift exponent", "a shift count must be below the width of the shifted type"),
    ("left shift of", "shift an unsigned value (a left shift of a negative or overflowing signed value is undefined)"),
    (
        "misaligned address",
        ("load through memcpy or unaligned intrinsics (_mm256_loadu_pd) where the address is not aligned for the type"),
    ),
    ("division by zero", "guard the divisor"),
    ("out of bounds", "index inside the array's bounds"),
    ("is outside the range of representable values", "clamp before converting a floating-point value to an integer"),
)


def _read_address(report: str, case: Case, buffers: list[tuple[int, int, int]]) -> Finding:
    head = re.search(r"ERROR: AddressSanitizer: ([\w-]+)", report)
    kind = head.group(1) if head else "error"
    access = re.search(r"^(READ|WRITE) of size (\d+)", report, re.MULTILINE)
    what = f"{access.group(1)} of {access.group(2)} byte{'s' if access.group(2) != '1' else ''}" if access else ""
    region = re.search(
        r"is located (\d+) bytes (to the right of|after|to the left of|before|inside of) "
        r"(\d+)-byte region \[(0x[0-9a-fA-F]+),",
        report,
    )
    place = ""
    if region:
        distance, side = int(region.group(1)), region.group(2)
        container = _container_at(case, buffers, int(region.group(4), 16))
        if container is None:
            container = f"a {region.group(3)}-byte block the code allocated itself"
        if side in ("to the right of", "after"):
            # ASan names the first bad byte of a small access, the last one of a wide (vector) access.
            place = (
                f"right after the end of {container}"
                if distance == 0
                else f"past the end of {container}, up to byte {distance} after its end"
            )
        elif side in ("to the left of", "before"):
            place = f"{distance} bytes before the start of {container}"
        else:
            place = f"inside {container}, which was already freed" if "use-after-free" in kind else f"in {container}"
    elif var := re.search(
        r"\[\d+, \d+\) '([^']+)'[^\n]*<== Memory access at offset \d+ (\w+(?: \w+)?) this variable", report
    ):
        place = f"{var.group(2)} the local variable '{var.group(1)}'"
    elif glob := re.search(r"is located (\d+) bytes (?:to the right of|after) global variable '([^']+)'", report):
        place = f"{glob.group(1)} bytes past the end of the global '{glob.group(2)}'"
    elif kind == "SEGV":
        cause = re.search(r"The signal is caused by a (READ|WRITE) memory access", report)
        zero = "zero page" in report
        what = f"a {cause.group(1)}" if cause else "an access"
        place = "of a null (or near-null) pointer" if zero else "of an address outside every buffer"
    text = f"AddressSanitizer: {kind}" + (f": {what}" if what else "") + (f" {place}" if place else "")
    hint = ""
    if "overflow" in kind:
        hint = (
            "every access must stay inside the data its connector covers, also when the value read is not used "
            "(a vector load of the last partial chunk, a[i + 1] at the last i)"
        )
    elif "after-free" in kind or "after-return" in kind or "after-scope" in kind:
        hint = "memory must not be used after it is freed or its variable went out of scope"
    return Finding("address", kind, text, first_unit_line(report), hint)


def _read_undefined(report: str) -> Finding:
    head = re.search(r"(?:^|/)(\S+?):(\d+):\d+: runtime error: ([^\n]+)", report)
    message = _no_addresses(head.group(3)) if head else "undefined behavior"
    hint = next((h for key, h in _UB_HINTS if key in message), "")
    kind = message.split(":")[0]
    line = first_unit_line(report)  # the stack (print_stacktrace=1); else the report's own place
    if line is None and head and os.path.basename(head.group(1)) == UNIT_FILE:
        line = int(head.group(2))
    return Finding("undefined", kind, f"UndefinedBehaviorSanitizer: {message}", line, hint)


def _read_thread(report: str, case: Case, buffers: list[tuple[int, int, int]]) -> Finding:
    head = re.search(r"WARNING: ThreadSanitizer: ([^\n(]+)", report)
    kind = head.group(1).strip() if head else "error"
    # Which thread TSan catches first, and so which access it names first, depends on the schedule; the words
    # must not (they become part of a cache key): no access kinds, the lowest line of the code among the accesses.
    blocks = re.split(
        r"^\s*(?:Previous )?(?:atomic )?(?:read|write) of size \d+ at ", report, flags=re.MULTILINE | re.IGNORECASE
    )[1:]
    lines = [line for line in (first_unit_line(block.split("\n\n")[0]) for block in blocks) if line is not None]
    words = " (unsynchronised accesses by different threads, at least one a write)" if len(blocks) >= 2 else ""
    where = ""
    if "Location is stack of" in report:
        where = " on a local variable of the calling thread that the threads share"
    elif heap := re.search(r"Location is heap block of size (\d+) at (0x[0-9a-fA-F]+)", report):
        where = " on " + (_container_at(case, buffers, int(heap.group(2), 16)) or "memory the code allocated itself")
    elif glob := re.search(r"Location is global '([^']+)'", report):
        where = f" on the global '{glob.group(1)}'"
    text = f"ThreadSanitizer: {kind} between threads{words}{where}"
    hint = (
        "use a reduction clause (reduction(+:s)), atomics, or per-thread partial results combined after the loop"
        if "race" in kind
        else ""
    )
    judged = "race" in kind or "after-free" in kind
    return Finding("thread", kind, text, min(lines) if lines else first_unit_line(report), hint, judged)


def read_report(run: SanitizerRun, case: Case) -> Finding | None:
    """The first sanitizer report of a run, or None when there is none."""
    out = run.output
    buffers = buffers_of(out)
    starts = [
        m.start()
        for m in (
            re.search(p, out) for p in (r"ERROR: AddressSanitizer:", r"runtime error:", r"WARNING: ThreadSanitizer:")
        )
        if m
    ]
    if not starts:
        return None
    first = min(starts)
    line_start = out.rfind("\n", 0, first) + 1
    report = out[line_start:]
    end = report.find("SUMMARY:")
    report = report[:end] if end > 0 else report
    if report[first - line_start :].startswith("ERROR: AddressSanitizer"):
        return _read_address(report, case, buffers)
    if "runtime error:" in report.splitlines()[0]:
        return _read_undefined(report)
    return _read_thread(report, case, buffers)


# ----------------------------------------------------------------------------- the check
#: Reasons that are the machine's, not the candidate's: said once per process, then ``told``.
MACHINE_REASONS = ("clang missing", "libomp missing", "sanitizer runtime missing")
_told: set[str] = STATE.register("checking.sanitize.told", set())
_told_lock = threading.Lock()


def tell_once(reason: str, message: str) -> None:
    """Warn once per process that a tool is missing (every candidate's report says it too, marked ``told``)."""
    import warnings

    from dace_ai.errors import InconclusiveCheckWarning

    with _told_lock:
        if reason in _told:
            return
        _told.add(reason)
    warnings.warn(
        f"dace-ai: {message} (The sanitizers checker says this once; answers are accepted without "
        "those runs, or refused with on_inconclusive=reject.)",
        InconclusiveCheckWarning,
        stacklevel=3,
    )


def applies(request: CheckRequest) -> bool:
    """Host C++ that DaCe builds, which the ``verify`` checker passed (its run is ``request.shared[SANDBOX_RUN]``).

    A candidate verify refused needs no second opinion; one it could not decide (no
    reference, a reference that fails on the generated inputs) may only be defined for
    inputs it never saw (a histogram's bins), and a sanitizer report on those would
    blame correct code. When ``verify`` is not selected the sanitizers run alone.
    """
    from dace_ai.checking.harness import SANDBOX_RUN
    from dace_ai.checking.host import uses_host_compiler

    if not uses_host_compiler(request):
        return False
    run = request.shared.get(SANDBOX_RUN)
    return run is None or run.get("status") == "passed"


def _first_error(output: str) -> str:
    """The first error line of a compiler's output (or its first line)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return next((line for line in lines if "error" in line), lines[0] if lines else "(no output)")


def _build_problem(build: SanitizerBuild, result: ToolResult) -> tuple[str, str]:
    """(reason, words) for a sanitized build that failed: libomp missing, or clang cannot compile the code."""
    out = result.output
    if re.search(r"omp\.h' file not found|cannot find -lomp|libomp|libarcher|undefined reference to .omp_", out):
        return "libomp missing", (
            f"the {build.kind} sanitizer build could not find LLVM's OpenMP runtime: "
            f"{_first_error(out)}; install the Debian package `{LIBOMP_PACKAGE}`"
        )
    if re.search(r"libclang_rt\.\w+", out):
        return "sanitizer runtime missing", (
            f"clang++ has no {build.kind} sanitizer runtime: {_first_error(out)}; "
            f"install the Debian package `{RUNTIME_PACKAGE}`"
        )
    if result.timed_out:
        return "build timeout", f"the {build.kind} sanitizer build did not finish within {BUILD_TIMEOUT:g} s"
    return "clang could not compile the code", (
        f"clang++ could not compile for the {build.kind} sanitizer run what the real build's compiler compiled "
        f"(a GCC extension?): {_first_error(out)}"
    )


@dataclass
class _Part:
    """The outcome of one sanitized run (address or thread)."""

    status: str  #: passed, failed, inconclusive
    reason: str = ""
    message: str = ""


def _judge_run(
    build: SanitizerBuild, run: SanitizerRun, case: Case, unit: str, answer_lines: int, threads: int | None
) -> _Part:
    """Passed, failed (a report in the answer's lines) or inconclusive (anything else) for one run."""
    from dace_ai.checking.ladder import case_place

    where = case_place(case)
    if build.kind == "thread":
        where = f"OpenMP, {threads} threads, {where}"
    if run.timed_out:
        return _Part("inconclusive", "timeout", f"the {build.kind} sanitizer run did not finish in time ({where})")
    finding = read_report(run, case)
    if finding is None:
        if run.returncode == 0:
            return _Part("passed")  # (without Archer TSan would only see more races, never fewer)
        tail = _no_addresses(stable_paths(run.output.strip().splitlines()[-1] if run.output.strip() else "", {}))
        return _Part(
            "inconclusive",
            "run",
            f"the {build.kind} sanitizer run ended with status {run.returncode} "
            f"without a sanitizer report ({where}): {tail[:300]}",
        )
    if build.kind == "thread" and ARCHER_ACTIVE not in run.output:
        # Without Archer TSan does not see OpenMP's own synchronisation: its races would not be trusted.
        return _Part(
            "inconclusive",
            "libomp missing",
            f"{finding.text} ({where}), but the run had no Archer (LLVM's OpenMP support for "
            f"ThreadSanitizer), so it is not trusted; install the Debian package `{LIBOMP_PACKAGE}`",
        )
    if not finding.judged:
        return _Part("inconclusive", "sanitizer warning", f"{finding.text} ({where}); not counted against the code")
    if finding.line is None:
        return _Part(
            "inconclusive",
            "outside the code",
            f"{finding.text} outside the candidate's code (in the check's driver or a library; {where}); "
            "not counted against the code",
        )
    place, in_answer = unit_place(unit, finding.line, answer_lines)
    if not in_answer:
        return _Part(
            "inconclusive",
            "outside the code",
            f"{finding.text} at {place}, in the check's own entry points, not in the candidate's code "
            f"({where}); not counted against the code",
        )
    message = f"{finding.text} at {place} ({where})" + (f": {finding.hint}" if finding.hint else ".")
    return _Part("failed", finding.sanitizer if finding.sanitizer != "thread" else "race", message)


def _answer_lines(request: CheckRequest, unit: str) -> int:
    """Lines of the unit that hold the answer (everything before our entry points)."""
    from dace_ai.checking.entry_code import entry_points

    return len(unit.splitlines()) - len(entry_points(request.node).splitlines())


def _overall(parts: list[_Part], details: dict[str, Any], thread_run: bool) -> tuple[Status, str, str]:
    """(status, reason, message) of the whole check from its runs; when one was inconclusive, ``details["passed"]``."""
    failed = [p for p in parts if p.status == "failed"]
    if failed:
        return "failed", failed[0].reason, failed[0].message
    unsure = [p for p in parts if p.status == "inconclusive"]
    if unsure:
        passed = details["passed"] = [b for b, p in zip(("address", "thread"), parts) if p.status == "passed"]
        lead = (
            f"Checked in part under the sanitizers (the {' and '.join(passed)} run passed): "
            if passed
            else "Not checked under the sanitizers: "
        )
        return "inconclusive", unsure[0].reason, lead + "; ".join(p.message for p in unsure) + "."
    ran = " + ".join(["AddressSanitizer", "UndefinedBehaviorSanitizer"] + (["ThreadSanitizer"] if thread_run else []))
    return "passed", "", f"no report from {ran}"


def sanitizers_check(request: CheckRequest) -> CheckReport:
    """Run the candidate once under ASan+UBSan (and TSan with Archer for OpenMP code) at a small size."""
    from dace_ai.checking.compile import compile_candidate
    from dace_ai.checking.runner import uses_openmp

    start = time.perf_counter()
    seconds: dict[str, float] = {}
    sizes: dict[str, dict[str, int]] = {}
    details: dict[str, Any] = {
        "sanitizers": ["address", "undefined"],
        "sanitizer_sizes": sizes,
        "threads": None,
        "seconds": seconds,
    }

    def report(status: Status, reason: str, message: str) -> CheckReport:
        told = status == "inconclusive" and reason in MACHINE_REASONS
        if told:
            tell_once(reason, message)
        seconds["check"] = time.perf_counter() - start
        return CheckReport(
            NAME,
            status,
            message,
            seconds["check"],
            details,
            stage="verify",
            reason=reason,
            told_user=told,
            sizes=list(sizes.values()),
        )

    compiler = sanitizer_compiler(request.settings)
    if compiler is None:
        name = request.settings.sanitizers_compiler or COMPILER_SETTING.default
        return report(
            "inconclusive",
            "clang missing",
            f"Not run under the sanitizers: {name!r} is not installed; install the Debian package "
            f"`{CLANG_PACKAGE}` (or name another clang++ with the setting {COMPILER_SETTING.name}).",
        )
    build = compile_candidate(request)
    if not build.ok or build.object is None:
        return report("inconclusive", "not compiled", "Not run under the sanitizers: the code did not compile.")
    try:
        small, odd = sanitizer_cases(request)
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        return report("inconclusive", "sizes", f"Not run under the sanitizers: no size to run ({exc}).")
    unit = build.unit.read_text(encoding="utf-8")
    answer_lines = _answer_lines(request, unit)
    openmp = uses_openmp(build.object)
    omp_problem = libomp_problem(compiler) if openmp else None
    address = start_build(request, "address", unit, build.flags, openmp and omp_problem is None, compiler)
    thread = start_build(request, "thread", unit, build.flags, True, compiler) if openmp and not omp_problem else None
    parts: list[_Part] = []
    sizes["address"] = dict(small["sizes"])
    parts.append(_run_part(request, address, small, unit, answer_lines, ADDRESS_THREADS if openmp else 1, seconds))
    if openmp and omp_problem:
        parts.append(_Part("inconclusive", "libomp missing", f"no thread sanitizer run: {omp_problem}"))
    elif thread is not None:
        details["sanitizers"].append("thread")
        details["threads"] = THREAD_COUNT
        sizes["thread"] = dict(odd["sizes"])
        if parts[0].status == "failed":
            thread.stop()
        else:
            parts.append(_run_part(request, thread, odd, unit, answer_lines, THREAD_COUNT, seconds))
    for kind, b in _shared_builds(request).builds.items():
        details.setdefault("pch", {})[kind] = b.pch
    return report(*_overall(parts, details, thread is not None))


def _run_part(
    request: CheckRequest,
    build: SanitizerBuild,
    case: Case,
    unit: str,
    answer_lines: int,
    threads: int,
    seconds: dict[str, float],
) -> _Part:
    """Wait for one build, run it, judge the run; timings go into ``seconds``."""
    waited = time.perf_counter()
    result = build.wait()
    seconds[f"{build.kind}_wait"] = time.perf_counter() - waited
    for step in ("pch", "driver", "compile"):  # the build's steps (pch and driver: reused when warm)
        seconds[f"{build.kind}_{step}"] = build.seconds.get(step, 0.0)
    seconds[f"{build.kind}_build"] = build.seconds.get("total", 0.0)
    if not result.ok or not build.executable.is_file():
        reason, words = _build_problem(build, result)
        return _Part("inconclusive", reason, stable_paths(words, {str(build.folder) + os.sep: ""}))
    run = run_sanitized(build, case, request, threads)
    seconds[f"{build.kind}_run"] = run.seconds
    return _judge_run(build, run, case, unit, answer_lines, threads if build.kind == "thread" else None)


def checker() -> Checker:
    """The registration (yielded by the verify checker's plugin module)."""
    return Checker(
        name=NAME,
        stage="verify",
        check=sanitizers_check,
        applies=applies,
        default=True,
        order=10,
        settings=(COMPILER_SETTING,),
        description="Runs the code once more at a small size built by clang++ with AddressSanitizer + "
        "UndefinedBehaviorSanitizer, and ThreadSanitizer with LLVM's OpenMP/Archer for "
        "OpenMP code (races found without a collision)",
    )


__all__ = [
    "NAME",
    "SanitizerBuild",
    "applies",
    "checker",
    "clang_flags",
    "libomp_problem",
    "read_report",
    "sanitizer_cases",
    "sanitizer_flags",
    "sanitizers_check",
    "start_sanitizer_builds",
    "stop_sanitizer_builds",
    "write_job",
]
