"""The candidate as a shared library the sandbox child can call, from its one compile.

The unit every host check compiles (:func:`dace_ai.compilation.compile.compile_candidate`:
:func:`dace_ai.compilation.units.host_unit`, the answer's code as DaCe runs it on the
host, with the real build's compiler and flags) ends with the C entry points of
:mod:`dace_ai.compilation.entry_code`.

The verify stage only links that object into ``candidate.so`` (with the answer's
environments' libraries). The library is only ever loaded by the child.
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from dace_ai.checking.api import CheckRequest
from dace_ai.compilation.compile import compile_candidate
from dace_ai.compilation.units import ToolResult, environment_classes, run_tool

if TYPE_CHECKING:
    from dace_ai.compilation.compile import CandidateBuild

LIBRARY = "candidate.so"


@functools.lru_cache(maxsize=8)
def _gold(compiler: tuple[str, ...]) -> list[str]:
    """``-fuse-ld=gold`` where the compiler's GNU gold is installed (it links a candidate in a third of the
    default linker's time), else nothing. GCC only: clang picks its linkers otherwise."""
    name = Path(compiler[0]).name if compiler else ""
    if "clang" in name or not name.endswith(("g++", "gcc", "c++")):
        return []
    prefix = name[: -len("g++")] if name.endswith("g++") else name[: -len("gcc")] if name.endswith("gcc") else ""
    return ["-fuse-ld=gold"] if shutil.which(f"{prefix}ld.gold") else []


def candidate_library(request: CheckRequest) -> tuple[Path | None, CandidateBuild, ToolResult | None]:
    """``<workdir>/sandbox/candidate.so``: the candidate's one shared compile, linked as a shared library.

    The object comes from :func:`dace_ai.compilation.compile.compile_candidate` (the
    compile stage's own compile with the real build's flags, whose unit already holds
    the entry points above), so verification adds a link, not a compile. Returns
    (library or None, the compile, the link run or None when reused).
    """

    build = compile_candidate(request)
    folder = Path(request.workdir) / "sandbox"
    folder.mkdir(parents=True, exist_ok=True)
    if not build.ok or build.object is None:
        return None, build, None
    envs, _ = environment_classes(request.answer, request.environments)  # the pipeline's resolved ones too
    libs = [f"-l{lib}" for env in envs for lib in (env.cmake_libraries or []) if "/" not in lib]
    libs += [f for env in envs for f in (env.cmake_link_flags or [])]
    libs += [lib for env in envs for lib in (env.cmake_libraries or []) if "/" in lib]
    libs += [f"-l{lib}" for req in request.answer.environments for lib in req.libraries]
    library = folder / LIBRARY
    # Linked under a private name and renamed into place: identical answers share this folder, and a
    # child loading candidate.so must never see a half-written file (nor one a killed linker left).
    partial = folder / f".{LIBRARY}.{os.getpid()}.{threading.get_ident()}"
    argv = [*build.compiler, *build.flags, "-shared", str(build.object), "-o", str(partial), *libs]
    gold = _gold(tuple(build.compiler))
    result = run_tool([*argv, *gold], cwd=folder, timeout=300, env={"LC_ALL": "C"})
    if not result.ok and gold:  # the default linker's own words for what does not link
        result = run_tool(argv, cwd=folder, timeout=300, env={"LC_ALL": "C"})
    if not result.ok:
        partial.unlink(missing_ok=True)
        return None, build, result
    os.replace(partial, library)
    return library, build, result
