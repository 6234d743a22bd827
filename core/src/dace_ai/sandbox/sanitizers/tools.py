"""The sanitizer builds' tools and flags: clang++, LLVM's OpenMP runtime and Archer, the symbolizer, the
flags of each kind of build and the fixed driver (``driver.cpp``, our code, never the model's), compiled once
per flag set."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dace_ai.checking.api import CheckRequest
from dace_ai.compilation.units import environment_classes, run_tool
from dace_ai.config.settings import AISettings
from dace_ai.plugins.registrations import Setting
from dace_ai.state import STATE
from dace_ai.storage.files import ai_folder, lock_for
from dace_ai.targets.build_flags import compiler_identity

if TYPE_CHECKING:
    pass


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
#: Flags of the thread run. A loop that copies or fills (``scratch[j] = a[j]``) stays a loop of loads and stores,
#: which TSan checks one by one: turned into a ``memcpy``/``memset`` call, its race with another thread's plain
#: accesses went unreported (LLVM 14).
THREAD_FLAGS = (
    "-fsanitize=thread",
    "-fopenmp",
    "-fno-builtin-memcpy",
    "-fno-builtin-memset",
    "-fno-builtin-memmove",
    "-g",
    "-O1",
)
#: Warnings are the main compile's business: clang's own, and GCC-only warning options, stay quiet.
QUIET_FLAGS = ("-Wno-unknown-warning-option", "-w")
#: Threads of the thread run (more than the cores is fine: TSan needs no collision).
THREAD_COUNT = 4
#: Rounds of calls at once in the thread run of a node whose calls can run at the same time (``THREAD_COUNT``
#: threads each round, one OpenMP team, on one state).
AT_ONCE_ROUNDS = 3
#: What the driver prints before its calls at once (a report after it is about calls sharing state).
AT_ONCE_MARK = "dace-ai-driver: calling the candidate at once"
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
DRIVER_SOURCE = (Path(__file__).with_name("driver.cpp")).read_text(encoding="utf-8")
DRIVER_FILE = "dace_ai_sanitizers_driver.cpp"


# ----------------------------------------------------------------------------- tools
def sanitizer_compiler(settings: AISettings) -> str | None:
    """The clang++ to build with (setting ``sanitizers_compiler``), as a path, or None when it is not installed."""
    name = str(settings.sanitizers_compiler or COMPILER_SETTING.default).strip()
    return shutil.which(name) if name else None


@STATE.cached("sandbox.sanitizers.llvm_lib_folder", maxsize=8)
def llvm_lib_folder(compiler: str) -> Path:
    """``<llvm>/lib`` of a clang++ (``/usr/lib/llvm-14/lib``): where its libomp and Archer live on Debian."""
    return Path(os.path.realpath(compiler)).parent.parent / "lib"


@STATE.cached("sandbox.sanitizers.libomp_problem", maxsize=8)
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


@STATE.cached("sandbox.sanitizers.symbolizer", maxsize=8)
def symbolizer(compiler: str) -> str | None:
    """``llvm-symbolizer`` of the clang in use (reports need it to name file and line), or None."""
    own = Path(os.path.realpath(compiler)).parent / "llvm-symbolizer"
    return str(own) if own.is_file() else shutil.which("llvm-symbolizer")


@STATE.cached("sandbox.sanitizers.fast_link_args", maxsize=8)
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


def env_compile_args(request: CheckRequest) -> list[str]:
    """Include folders and macros of the answer's environments (as the main compile passes them)."""
    envs, _ = environment_classes(request.answer, request.environments)
    args = [f"-I{d}" for env in envs for d in (env.cmake_includes or [])]
    args += [f for env in envs for f in (env.cmake_compile_flags or []) if f.startswith(("-I", "-D", "-U"))]
    args += [f"-D{d}" for req in request.answer.environments for d in req.compile_definitions]
    return args


def link_args(request: CheckRequest) -> list[str]:
    """Libraries of the answer's environments (as the verify stage links them)."""
    envs, _ = environment_classes(request.answer, request.environments)
    libs = [f"-l{lib}" for env in envs for lib in (env.cmake_libraries or []) if "/" not in lib]
    libs += [f for env in envs for f in (env.cmake_link_flags or [])]
    libs += [lib for env in envs for lib in (env.cmake_libraries or []) if "/" in lib]
    libs += [f"-l{lib}" for req in request.answer.environments for lib in req.libraries]
    return libs


def driver_object(compiler: str, flags: Sequence[str]) -> tuple[Path | None, str]:
    """The driver compiled once per compiler and flags under ``<build root>/ai-check/sanitize-driver/`` (and a note)."""
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
