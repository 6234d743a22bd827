"""The compiler and flags of the build that will compile the program: the one truth for checks and prompts.

DaCe builds a program's host code with CMake: the compiler is DaCe's
``compiler.cpu.executable`` (else ``$CXX``, else ``c++``), and the flags are
``compiler.cpu.args`` followed by what CMake adds: the flags of DaCe's build type
(``compiler.build_type``, ``RelWithDebInfo`` -> ``-O2 -g -DNDEBUG``, which come
*after* the configured ones and so win over an ``-O3`` there), ``-fPIC`` for the
shared library and OpenMP (``-fopenmp``). A check that compiles with anything
else accepts code the real build rejects (``std::clamp`` under ``-std=c++14``).

Targets that compile with the host's compiler (``host``, the x86 packs) add no
flags to this build: a DaCe program is one CMake project whose flags are shared
by every file, and a target cannot change them for one tasklet. Their own
``flags`` say which instructions their code may use (``-march=x86-64-v3``) and
narrow what the ISA check allows; the build's ``-march`` decides what compiles.
Debug information (``-g``) is left out of checks: it changes no verdict and
costs time. Cross and GPU targets (SVE, CUDA, HIP) are compiled in standalone
units with their own compilers and flags, which this module passes through.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import shutil
import subprocess
from typing import TYPE_CHECKING

from dace_ai import compat
from dace_ai.state import STATE

if TYPE_CHECKING:
    from dace_ai.targets.select import TargetInfo

#: Flags CMake adds for each build type (CMake's defaults for GCC and Clang).
BUILD_TYPE_FLAGS: dict[str, tuple[str, ...]] = {
    "release": ("-O3", "-DNDEBUG"),
    "relwithdebinfo": ("-O2", "-g", "-DNDEBUG"),
    "minsizerel": ("-Os", "-DNDEBUG"),
    "debug": ("-g",),
}
#: Flags of the real build left out of checks (they change no verdict).
NOT_IN_CHECKS = frozenset({"-g"})


def dace_compiler() -> str:
    """The C++ compiler DaCe's CMake build uses for host code."""
    from dace.config import Config

    return (Config.get("compiler", "cpu", "executable") or "").strip() or os.environ.get("CXX", "").strip() or "c++"


@STATE.cached("targets.build_flags.compiler_identity")
def compiler_identity(executable: str) -> str:
    """First line of ``--version`` (tells GCC from Clang; keys the precompiled header)."""
    try:
        out = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=60, check=False)
        text = out.stdout or out.stderr
        return text.splitlines()[0].strip() if text.strip() else executable
    except (OSError, subprocess.SubprocessError):
        return executable


@STATE.cached("targets.build_flags.compiler_machine")
def compiler_machine(executable: str) -> str | None:
    """The target triple a compiler produces code for (``-dumpmachine``), or None."""
    try:
        out = subprocess.run([executable, "-dumpmachine"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def is_clang(executable: str) -> bool:
    return "clang" in compiler_identity(executable).lower()


def dace_build_flags(compiler: str | None = None) -> list[str]:
    """The flags DaCe's CMake build compiles host code with (see the module docstring)."""
    from dace.config import Config

    compiler = compiler or dace_compiler()
    # The C++ standard: in compiler.cpu.args on DaCe 1.0, the compiler.cpp_standard setting on DaCe 2.
    flags = compat.cpp_standard_flags() + shlex.split(compat.host_cpu_args())
    build_type = str(Config.get("compiler", "build_type") or "").lower()
    flags += BUILD_TYPE_FLAGS.get(build_type, ())
    flags.append("-fPIC")
    flags.append("-fopenmp=libomp" if is_clang(compiler) else "-fopenmp")
    return flags


#: Architectures that start a target triple (``aarch64-linux-gnu``); a name starting otherwise is no triple.
_ARCH = (
    r"(?:x86_64|amd64|i[3-6]86|aarch64(?:_be)?|arm64|arm\w*|thumb\w*|riscv(?:32|64)|powerpc\w*|ppc\w*|s390x"
    r"|mips\w*|loongarch(?:32|64)|sparc\w*|wasm(?:32|64)|nvptx64|amdgcn|hexagon|xtensa|avr|msp430)"
)
#: ``<triple>-<tool>[-<version>]``: how cross compilers are named (``aarch64-linux-gnu-g++``, ``riscv64-unknown-elf-gcc-13``).
_TRIPLE_NAMED = re.compile(
    rf"^(?P<triple>{_ARCH}(?:-[A-Za-z0-9_.]+)+)-(?:g\+\+|c\+\+|gcc|cc|clang\+\+|clang)(?:-[0-9.]+)?$"
)
#: Spellings of one architecture in target triples and ``uname -m``.
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64", "i386": "i686", "i586": "i686"}


def _arch(triple: str | None) -> str | None:
    if not triple:
        return None
    arch = triple.split("-", 1)[0].lower()
    return _ARCH_ALIASES.get(arch, arch)


def named_machine(compiler: tuple[str, ...] | list[str]) -> str | None:
    """The target triple a compiler argv produces code for, known without running it, or None.

    From an explicit ``--target=<triple>`` / ``-target <triple>`` argument (Clang), else
    from a cross compiler's name (``aarch64-linux-gnu-g++`` -> ``aarch64-linux-gnu``).
    A plain name (``g++``, ``clang++``) names no other machine.
    """
    argv = list(compiler)
    for i, arg in enumerate(argv[1:], 1):
        if arg.startswith("--target="):
            return arg.split("=", 1)[1]
        if arg in ("-target", "--target") and i + 1 < len(argv):
            return argv[i + 1]
    if not argv:
        return None
    match = _TRIPLE_NAMED.match(os.path.basename(argv[0]))
    return match.group("triple") if match else None


def host_machine() -> str:
    """The triple (or at least the architecture) DaCe's host build compiles for."""
    return compiler_machine(dace_compiler()) or platform.machine()


def builds_with_dace(target: TargetInfo) -> bool:
    """True when code for ``target`` is compiled by DaCe's own host build (a CPU target for this machine).

    A target naming a compiler for another machine (a cross compiler) or a GPU
    target is checked in standalone units of its own instead, and the prompt names
    that compiler and its flags. The answer does not depend on what is installed
    here: a cross compiler that is missing is still a cross compiler (recognised by
    its ``--target`` argument or its triple-prefixed name), so the prompt stays
    honest and the checks report the missing compiler as inconclusive.
    """
    if target.kind != "cpu" or getattr(target, "language", "cpp") != "cpp":
        return False
    named = tuple(target.compiler or ())
    if not named or (len(named) == 1 and named[0] == dace_compiler()):
        return True  # no compiler of its own, or DaCe's own: the host build compiles it, installed or not
    machine = named_machine(named)
    if machine is None and shutil.which(named[0]) is not None:
        machine = compiler_machine(named[0])
    if machine is None:
        return True  # a plain compiler name (g++, clang++) compiles for the machine it runs on
    return _arch(machine) == _arch(host_machine())


def dace_build_command() -> tuple[list[str], list[str]]:
    """(compiler argv, flags) of DaCe's own host build as checks use them (without ``-g``)."""
    compiler = dace_compiler()
    return [compiler], [f for f in dace_build_flags(compiler) if f not in NOT_IN_CHECKS]


def build_command(target: TargetInfo) -> tuple[list[str], list[str]]:
    """(compiler argv, flags) that compile code for ``target`` as the real build does.

    For targets DaCe builds (:func:`builds_with_dace`): DaCe's compiler and flags,
    minus ``-g`` (:data:`NOT_IN_CHECKS`). Otherwise the target's own compiler and
    flags, unchanged. This is the pair every check compiles with and the prompt names.
    """
    if builds_with_dace(target):
        return dace_build_command()
    return list(target.compiler or ()), list(target.flags or ())


def runtime_standard_flag(at_least: str = "c++17") -> str:
    """The ``-std=`` flag for a standalone unit that includes DaCe's runtime headers.

    DaCe's own standard where it sets one (``compiler.cpp_standard``, C++20 on DaCe 2,
    whose headers need it), else ``-std=<at_least>``.
    """
    own = compat.cpp_standard_flags()
    return own[-1] if own else f"-std={at_least}"


def language_standard(flags: list[str]) -> str | None:
    """The ``-std=`` value among ``flags`` (the last one wins), or None."""
    found = [f.split("=", 1)[1] for f in flags if f.startswith("-std=")]
    return found[-1] if found else None
