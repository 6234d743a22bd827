"""The one compile of a candidate: its host unit built to an object file exactly as the real build compiles.

Every check of a candidate that needs it compiled shares this one compile per
candidate (the core's ``probe``, the x86 pack's ISA check, the ``verify`` stage,
which links the object, entry points included, into the sandbox's library): :func:`compile_candidate` compiles
:func:`~dace_ai.compilation.units.host_unit` with
:func:`~dace_ai.targets.build_flags.build_command` (DaCe's compiler, standard
and flags) to ``<workdir>/compile/tasklet.o``. The compile is the artefact
:data:`COMPILED`, made by the stage runner on its first read, so the second checker gets it
for free; a checker that calls :func:`compile_candidate` declares ``needs=(COMPILED,)``.

``dace/dace.h`` is precompiled once per compiler and flags under
``<build root>/ai-check/pch/``, which makes a compile cost a fraction of a DaCe build.

When the stage runner chose the ``sanitizers`` checker, the same unit's clang++
sanitizer builds start in the background before the compile stage (the artefact
``SANITIZER_BUILDS`` of :mod:`dace_ai.sandbox.sanitizers.builds`, started by the runner), so
two cores overlap them; a failed stage stops them.

The compile also writes the compiler's vectoriser remarks (no change to the code it
generates, no second compile); :meth:`CandidateBuild.remarks` reads those on the
answer's own loops (:mod:`dace_ai.compilation.remarks`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

from dace_ai.checking.api import CheckRequest
from dace_ai.compat import dace_runtime_include
from dace_ai.compilation.diagnostics import summarize_output
from dace_ai.compilation.entry_code import entry_points
from dace_ai.compilation.remarks import candidate_remarks, remark_flags, remark_kind
from dace_ai.compilation.units import UNIT_FILE, ToolResult, environment_classes, host_unit, run_tool
from dace_ai.plugins.artefacts import Artefact
from dace_ai.storage.files import ai_folder, lock_for
from dace_ai.targets.build_flags import build_command, builds_with_dace, compiler_identity, is_clang

#: Seconds a single compiler run may take.
COMPILE_TIMEOUT = 300.0
#: Object file next to the unit.
OBJECT_FILE = "tasklet.o"


class OutputClaim:
    """Which checker put the compiler's diagnostics in its report (the first to claim them; thread-safe)."""

    def __init__(self) -> None:
        self._by: str | None = None
        self._lock = threading.Lock()

    def claim(self, checker: str) -> bool:
        with self._lock:
            if self._by is None or self._by == checker:
                self._by = checker
                return True
            return False

    @property
    def by(self) -> str | None:
        return self._by


@dataclass(frozen=True)
class CandidateBuild:
    """The outcome of compiling a candidate's host unit (the artefact :data:`COMPILED`, read by every
    checker of the candidate that needs it)."""

    compiler: list[str]
    flags: list[str]
    command: list[str]  #: the full argv, run in ``folder``
    folder: Path
    result: ToolResult
    pch: str  #: how dace.h was included ("pch built", "pch reused", "pch not built: ...")
    #: Whose vectoriser remarks the compile asked for ("gcc", "clang"), None when none were.
    remark_kind: str | None = None
    #: Lines of the unit that hold the answer (the sandbox's entry points follow them).
    answer_lines: int = 0
    #: Who reports the compiler's diagnostics (:meth:`claim_output`); the one part that changes.
    output_claim: OutputClaim = field(default_factory=OutputClaim, compare=False, repr=False)

    @property
    def reported_by(self) -> str | None:
        """Name of the checker that put the compiler's diagnostics in its report (the others refer to it)."""
        return self.output_claim.by

    @property
    def ok(self) -> bool:
        return self.result.ok

    @property
    def unit(self) -> Path:
        return self.folder / UNIT_FILE

    @property
    def object(self) -> Path | None:
        """The object file, when the compile succeeded."""
        path = self.folder / OBJECT_FILE
        return path if self.ok and path.is_file() else None

    @property
    def missing_compiler(self) -> bool:
        return self.result.returncode == 127

    @property
    def diagnostics(self) -> str:
        """The compiler's errors (with notes and excerpts), as the model should read them."""
        return summarize_output(self.result.output)

    def remarks(self) -> list[str]:
        """The compiler's remarks on the answer's own loops, one line each (empty when the compile failed)."""
        if not self.ok or not self.unit.is_file():
            return []
        return candidate_remarks(
            self.remark_kind, self.folder, self.result.output, self.unit.read_text(encoding="utf-8"), self.answer_lines
        )

    def claim_output(self, checker: str) -> bool:
        """True for the first checker that reports the compiler's diagnostics (so they are sent once)."""
        return self.output_claim.claim(checker)


def pch_folder(compiler: list[str], flags: list[str]) -> Path:
    """``<build root>/ai-check/pch/<hash of compiler, its version, flags, DaCe headers>``."""
    import dace

    exe = shutil.which(compiler[0]) or compiler[0]
    key = "\0".join(
        [
            os.path.realpath(exe),
            compiler_identity(compiler[0]),
            *compiler[1:],
            "--",
            *flags,
            dace.__version__,
            dace_runtime_include(),
        ]
    )
    return ai_folder("ai-check") / "pch" / hashlib.sha256(key.encode()).hexdigest()[:20]


def ensure_pch(compiler: list[str], flags: list[str]) -> tuple[list[str], str]:
    """Arguments that pre-include ``dace/dace.h`` (precompiled when possible) and a note on how.

    The header is built once under a cross-process lock and reused while the compiler
    and flags are the same. If precompiling fails the unit includes the plain header.
    """
    folder = pch_folder(compiler, flags)
    header = folder / "dace_pch.h"
    clang = is_clang(compiler[0])
    built = folder / ("dace_pch.h.pch" if clang else "dace_pch.h.gch")
    use = ["-include-pch", str(built)] if clang else ["-include", str(header), "-Winvalid-pch"]
    if built.is_file():
        return use, "pch reused"
    with lock_for(folder / "dace_pch"):
        if built.is_file():
            return use, "pch reused"
        header.write_text("#include <dace/dace.h>\n", encoding="utf-8")
        tmp = built.with_name(built.name + f".{os.getpid()}.tmp")
        cmd = [*compiler, *flags, "-I", dace_runtime_include(), "-x", "c++-header", str(header), "-o", str(tmp)]
        result = run_tool(cmd, cwd=folder, timeout=COMPILE_TIMEOUT)
        if not result.ok or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            return ["-include", "dace/dace.h"], "pch not built: " + summarize_output(result.output, max_lines=20)
        os.replace(tmp, built)
        return use, "pch built"


def compile_candidate(request: CheckRequest) -> CandidateBuild:
    """The candidate's one compile (the artefact :data:`COMPILED`; the caller declares it in its needs).

    The first read for a candidate compiles; later ones (other checkers of the same
    candidate) return the same :class:`CandidateBuild`. A missing compiler is a
    result with return code 127 (checkers report it as inconclusive).
    """
    return request.artefacts[COMPILED]


def _compile(request: CheckRequest) -> CandidateBuild:
    """Compile the candidate's host unit to an object file with the real build's compiler and flags."""
    compiler, flags = build_command(request.node.target)
    folder = Path(request.workdir) / "compile"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / OBJECT_FILE).unlink(missing_ok=True)
    # The sandbox's entry points come last, so the answer's line numbers are the unit's own.
    unit = host_unit(request.answer, request.node, prelude=request.prelude, environments=request.environments)
    (folder / UNIT_FILE).write_text(unit + entry_points(request.node), encoding="utf-8")
    envs, _ = environment_classes(request.answer, request.environments)
    env_args = [f"-I{d}" for env in envs for d in (env.cmake_includes or [])]
    env_args += [f for env in envs for f in (env.cmake_compile_flags or [])]
    env_args += [f"-D{d}" for req in request.answer.environments for d in req.compile_definitions]
    if not compiler or shutil.which(compiler[0]) is None:
        name = compiler[0] if compiler else "(none)"
        result = ToolResult((name,), 127, f"compiler {name!r} not found on PATH", 0.0)
        build = CandidateBuild(compiler, flags, [name], folder, result, "no compiler")
    else:
        if builds_with_dace(request.node.target):
            pch_args, pch_note = ensure_pch(compiler, flags)
        else:  # a cross compiler's precompiled dace.h is not reliable (GCC 12: spurious ambiguities in arm_sve.h)
            pch_args, pch_note = ["-include", "dace/dace.h"], "no pch for a cross compiler"
        remarks = remark_flags(compiler, folder)
        command = [
            *compiler,
            *flags,
            "-I",
            dace_runtime_include(),
            *env_args,
            *pch_args,
            *remarks,
            "-c",
            UNIT_FILE,
            "-o",
            OBJECT_FILE,
        ]
        result = run_tool(command, cwd=folder, timeout=COMPILE_TIMEOUT, env={"LC_ALL": "C"})
        build = CandidateBuild(
            compiler,
            flags,
            command,
            folder,
            result,
            pch_note,
            remark_kind=remark_kind(compiler[0]) if remarks else None,
            answer_lines=len(unit.splitlines()),
        )
    return build


#: The candidate's one compile, made by the stage runner on its first read (:func:`compile_candidate`).
COMPILED: Artefact[CandidateBuild] = Artefact("compiled", make=_compile)
