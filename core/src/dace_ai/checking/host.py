"""Built-in plugin: compile checkers for host (CPU, C++) code.

``probe`` (default): the candidate alone in a translation unit that sees what a
DaCe tasklet sees (``dace/dace.h``, its global code at file scope, its connectors
and symbols as parameters), compiled ``-fsyntax-only`` with the target's compiler
and flags. ``dace.h`` is precompiled once per compiler and flags under
``<build root>/ai-check/pch/`` so a probe costs a fraction of a DaCe build.

``faithful`` (opt-in via the ``checkers`` setting): a program holding only the
generated tasklet with the node's containers, memlets, symbols and environments,
built by DaCe itself. Slower, but it sees exactly what DaCe will generate.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
import shutil
import subprocess
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.checking.diagnostics import errors_with_notes, parse_diagnostics, summarize_output
from dace_ai.context.types import ConnectorInfo, TargetInfo
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker

#: File name of the probe unit; diagnostics name it, so it must not change.
PROBE_FILE = "tasklet.cpp"
PROBE_FUNCTION = "__dace_ai_tasklet"
#: Seconds a single compiler run may take.
COMPILE_TIMEOUT = 300.0


# ----------------------------------------------------------------------------- shared helpers
def is_host_cpp(request: CheckRequest) -> bool:
    """Host checkers judge C++ code for a CPU target outside GPU kernels."""
    node = request.node
    return (node.target.kind == "cpu" and node.target.language == "cpp" and request.answer.language == "cpp"
            and not node.in_gpu_kernel)


def compiler_and_flags(target: TargetInfo) -> tuple[list[str], list[str]]:
    """The target's compiler and flags as the probe uses them (DaCe's host compiler when none is named).

    The flags include what DaCe's build adds for host code (OpenMP with GCC), so this
    pair also keys the precompiled header.
    """
    if target.compiler:
        compiler, flags = list(target.compiler), list(target.flags)
    else:
        from dace_ai.targets.host import host_compiler

        default_compiler, default_flags = host_compiler()
        compiler, flags = list(default_compiler), list(target.flags or default_flags)
    return compiler, _base_flags(compiler, flags)


@lru_cache(maxsize=32)
def compiler_identity(executable: str) -> str:
    """First line of ``--version`` (distinguishes GCC from Clang and keys the PCH)."""
    try:
        out = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=60, check=False)
        return (out.stdout or out.stderr).splitlines()[0].strip() if (out.stdout or out.stderr) else executable
    except (OSError, subprocess.SubprocessError):
        return executable


def _is_clang(executable: str) -> bool:
    return "clang" in compiler_identity(executable).lower()


def _environment_classes(answer: Any, resolved: Any = ()) -> tuple[list[Any], list[str]]:
    """DaCe environment classes the answer uses (``resolved`` class paths first), and unknown names."""
    import dace.library

    found, unknown = [], []
    for name in dict.fromkeys([*sorted(resolved), *answer.use_environments]):
        try:
            found.append(dace.library.get_environment(name))
        except Exception:  # noqa: BLE001 - DaCe raises several kinds for unknown names
            unknown.append(name)
    return list(dict.fromkeys(found)), unknown


def _environment_headers(env: Any) -> list[str]:
    headers = env.headers() if callable(env.headers) else env.headers
    if isinstance(headers, dict):
        headers = headers.get("frame", [])
    return list(headers or [])


# ----------------------------------------------------------------------------- probe
def _param(ctype: str, name: str) -> str:
    ctype = ctype.strip()
    return f"{ctype}{'' if ctype.endswith(('*', '&')) else ' '}{name}"


def probe_source(request: CheckRequest) -> str:
    """The probe unit: environments' headers, state struct, global code, then the tasklet as a function.

    Section comments tell the model which part of its answer a diagnosed line came from.
    """
    answer, node = request.answer, request.node
    envs, _ = _environment_classes(answer, request.environments)
    headers = [h for env in envs for h in _environment_headers(env)]
    headers += [h for req in answer.environments for h in req.headers]
    params: dict[str, str] = {"__state": f"{PROBE_FUNCTION}_state_t *__state"}
    for conn in node.connectors:
        params.setdefault(conn.name, _param(conn.ctype, conn.name))
    for name, ctype in node.symbols.items():
        params.setdefault(name, _param(ctype, name))
    symbols = ", ".join(f"{_param(t, n)}" for n, t in node.symbols.items())
    lines = ["// Candidate tasklet checked in a unit of its own (dace/dace.h is pre-included)."]
    lines += [f'#include "{h}"' if not h.startswith("<") else f"#include {h}" for h in headers]
    lines += [f"struct {PROBE_FUNCTION}_state_t {{", *answer.state_fields, "};",
              "// ---- code_global ----", answer.code_global,
              f"void {PROBE_FUNCTION}({', '.join(params.values())}) {{",
              "// ---- code ----", answer.code, "}"]
    if answer.code_init.strip():
        lines += [f"void {PROBE_FUNCTION}_init({PROBE_FUNCTION}_state_t *__state{', ' if symbols else ''}{symbols}) {{",
                  "// ---- code_init ----", answer.code_init, "}"]
    if answer.code_exit.strip():
        lines += [f"void {PROBE_FUNCTION}_exit({PROBE_FUNCTION}_state_t *__state) {{",
                  "// ---- code_exit ----", answer.code_exit, "}"]
    return "\n".join(lines) + "\n"


def _base_flags(compiler: list[str], flags: list[str]) -> list[str]:
    """Flags as DaCe builds host code: the target's, plus OpenMP for GCC (DaCe's CMake adds it)."""
    extra = ["-fopenmp"] if not _is_clang(compiler[0]) and "-fopenmp" not in flags else []
    return [*flags, *extra]


def pch_folder(compiler: list[str], flags: list[str]) -> Path:
    """``<build root>/ai-check/pch/<hash of compiler, its version, flags, DaCe headers>``."""
    import dace

    from dace_ai.compat import dace_runtime_include
    from dace_ai.storage.files import ai_folder

    exe = shutil.which(compiler[0]) or compiler[0]
    key = "\0".join([os.path.realpath(exe), compiler_identity(compiler[0]), *compiler[1:], "--", *flags,
                     dace.__version__, dace_runtime_include()])
    return ai_folder("ai-check") / "pch" / hashlib.sha256(key.encode()).hexdigest()[:20]


def ensure_pch(compiler: list[str], flags: list[str]) -> tuple[list[str], str]:
    """Arguments that pre-include ``dace/dace.h`` (precompiled when possible) and a note on how.

    The header is built once under a cross-process lock and reused while the compiler
    and flags are the same. If precompiling fails the probe includes the plain header.
    """
    from dace_ai.compat import dace_runtime_include
    from dace_ai.storage.files import lock_for

    folder = pch_folder(compiler, flags)
    header = folder / "dace_pch.h"
    clang = _is_clang(compiler[0])
    built = folder / ("dace_pch.h.pch" if clang else "dace_pch.h.gch")
    use = (["-include-pch", str(built)] if clang else ["-include", str(header), "-Winvalid-pch"])
    if built.is_file():
        return use, "pch reused"
    with lock_for(folder / "dace_pch"):
        if built.is_file():
            return use, "pch reused"
        header.write_text("#include <dace/dace.h>\n", encoding="utf-8")
        tmp = built.with_name(built.name + f".{os.getpid()}.tmp")
        cmd = [*compiler, *flags, "-I", dace_runtime_include(), "-x", "c++-header", str(header), "-o", str(tmp)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return ["-include", "dace/dace.h"], f"pch not built: {exc}"
        if proc.returncode != 0 or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            return ["-include", "dace/dace.h"], "pch not built: " + summarize_output(proc.stderr, max_lines=20)
        os.replace(tmp, built)
        return use, "pch built"


_MISSING_HEADER = re.compile(r"(?:'|‘|\")?([^'‘’\"\s]+)(?:'|’|\")? ?(?:file not found|: No such file or directory)")


def _only_missing_declared_headers(output: str, declared: set[str]) -> bool:
    """True when every error is a header the answer declared through an environment.

    The probe cannot know where a generated or CMake-found environment puts its
    headers, so such a failure is undecidable here, not the model's fault.
    """
    errors = [d for d in errors_with_notes(parse_diagnostics(output)) if d.is_error]
    if not errors:
        return False
    for diag in errors:
        m = _MISSING_HEADER.search(diag.message)
        if not m or m.group(1).strip("<>\"") not in declared:
            return False
    return True


def probe_check(request: CheckRequest) -> CheckReport:
    """Compile the candidate syntax-only in a standalone unit with DaCe's runtime headers."""
    from dace_ai.compat import dace_runtime_include

    compiler, flags = compiler_and_flags(request.node.target)
    if shutil.which(compiler[0]) is None:
        return CheckReport("probe", "inconclusive", f"compiler {compiler[0]!r} not found on PATH",
                           details={"compiler": compiler})
    include = dace_runtime_include()
    if not os.path.isfile(os.path.join(include, "dace", "dace.h")):
        return CheckReport("probe", "inconclusive", f"DaCe runtime header dace/dace.h not found under {include}")
    pch_args, pch_note = ensure_pch(compiler, flags)
    envs, _ = _environment_classes(request.answer, request.environments)
    env_args = [f"-I{d}" for env in envs for d in (env.cmake_includes or [])]
    env_args += [f for env in envs for f in (env.cmake_compile_flags or []) if f.startswith(("-D", "-I"))]
    env_args += [f"-D{d}" for req in request.answer.environments for d in req.compile_definitions]
    folder = Path(request.workdir) / "probe"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PROBE_FILE).write_text(probe_source(request), encoding="utf-8")
    cmd = [*compiler, *flags, "-I", include, *env_args, *pch_args, "-fsyntax-only", PROBE_FILE]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=COMPILE_TIMEOUT,
                              env={**os.environ, "LC_ALL": "C"}, check=False)
    except FileNotFoundError as exc:
        return CheckReport("probe", "inconclusive", f"compiler could not be started: {exc}")
    except subprocess.TimeoutExpired:
        return CheckReport("probe", "failed", f"the compiler did not finish within {COMPILE_TIMEOUT:.0f} s")
    seconds = time.perf_counter() - start
    details = {"command": cmd, "pch": pch_note, "returncode": proc.returncode}
    output = proc.stderr + proc.stdout
    if proc.returncode == 0:
        return CheckReport("probe", "passed", "", seconds, details)
    declared = {h.strip("<>\"") for env in envs for h in _environment_headers(env)}
    declared |= {h.strip("<>\"") for req in request.answer.environments for h in req.headers}
    if _only_missing_declared_headers(output, declared):
        return CheckReport("probe", "inconclusive", summarize_output(output), seconds, details)
    return CheckReport("probe", "failed", summarize_output(output), seconds, details)


# ----------------------------------------------------------------------------- faithful
@lru_cache(maxsize=None)
def _compiler_machine(executable: str) -> str | None:
    """The target triple a compiler produces code for (``-dumpmachine``), or None."""
    try:
        out = subprocess.run([executable, "-dumpmachine"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def uses_host_compiler(request: CheckRequest) -> bool:
    """Host C++ whose target compiler builds for this machine.

    Cross-compiling targets (ARM SVE, RISC-V, ...) bring their own compile
    checkers: a precompiled ``dace.h`` from a cross compiler is not reliable
    (GCC 12 reports spurious overload ambiguities in ``arm_sve.h`` with it), and
    DaCe's own build cannot produce code for them. A compiler that cannot be
    found still applies, so the check reports it as inconclusive.
    """
    if not is_host_cpp(request):
        return False
    from dace_ai.targets.host import host_compiler

    target_compiler = request.node.target.compiler
    if not target_compiler or shutil.which(target_compiler[0]) is None:
        return True
    return _compiler_machine(target_compiler[0]) == _compiler_machine(host_compiler()[0][0])


def _descriptor(conn: ConnectorInfo, live_sdfg: Any) -> Any:
    import dace

    from dace_ai.compat import element_types

    if live_sdfg is not None and conn.container in live_sdfg.arrays:
        return copy.deepcopy(live_sdfg.arrays[conn.container])
    dtype = element_types().get(conn.dtype.strip(), None)
    if dtype is None:
        raise ValueError(f"connector {conn.name!r}: unknown element type {conn.dtype!r}")
    shape = [dace.symbolic.pystr_to_symbolic(s) for s in conn.container_shape] or [1]
    strides = [dace.symbolic.pystr_to_symbolic(s) for s in conn.container_strides] or None
    return dace.data.Array(dtype, shape, strides=strides if strides and len(strides) == len(shape) else None,
                           transient=conn.transient)


def _memlet(conn: ConnectorInfo, live: dict[str, Any]) -> Any:
    import dace

    state, node = live.get("state"), live.get("node")
    if state is not None and node is not None:
        edges = (state.in_edges_by_connector(node, conn.name) if conn.direction == "in"
                 else state.out_edges_by_connector(node, conn.name))
        for edge in edges:
            return copy.deepcopy(edge.data)
    return dace.Memlet(data=conn.container, subset=conn.subset, wcr=conn.wcr)


def standalone_sdfg(request: CheckRequest) -> Any:
    """A program that holds only the candidate tasklet, wired like the node it replaces."""
    import dace

    from dace_ai.compat import element_types

    answer, node = request.answer, request.node
    live = node.live or {}
    live_sdfg = live.get("sdfg")
    name = "ai_check_" + re.sub(r"\W", "_", node.name or "node")
    sdfg = dace.SDFG(name)
    types = element_types()
    for sym, ctype in node.symbols.items():
        if live_sdfg is not None and sym in live_sdfg.symbols:
            sdfg.add_symbol(sym, live_sdfg.symbols[sym])
        else:
            sdfg.add_symbol(sym, types.get(ctype.strip(), dace.int64))
    state = sdfg.add_state("check")
    envs, _ = _environment_classes(answer, request.environments)
    environments = {env.full_class_path() for env in envs}
    if request.make_tasklet is not None:  # the very tasklet the expansion would place, typed the same way
        tasklet = request.make_tasklet(environments)
        state.add_node(tasklet)
    else:
        tasklet = state.add_tasklet(
            node.name or "tasklet", {c.name for c in node.inputs}, {c.name for c in node.outputs}, answer.code,
            language=dace.Language.CPP, code_global=answer.code_global, code_init=answer.code_init,
            code_exit=answer.code_exit, state_fields=list(answer.state_fields),
            side_effects=answer.side_effects or None)
        tasklet.environments = environments
    for conn in node.connectors:
        if conn.container not in sdfg.arrays:
            sdfg.add_datadesc(conn.container, _descriptor(conn, live_sdfg))
        memlet = _memlet(conn, live)
        if conn.direction == "in":
            state.add_edge(state.add_read(conn.container), None, tasklet, conn.name, memlet)
        else:
            state.add_edge(tasklet, conn.name, state.add_write(conn.container), None, memlet)
    for sym in sorted(map(str, sdfg.free_symbols - set(sdfg.symbols))):
        sdfg.add_symbol(sym, dace.int64)  # map parameters seen by the memlets
    return sdfg


def faithful_check(request: CheckRequest) -> CheckReport:
    """Build the tasklet-only program with DaCe in ``<workdir>/program`` (never loaded here)."""
    from dace_ai.compat import compilation_error_types, compile_without_loading, debugprint_off

    compilation_error, configuration_error = compilation_error_types()
    try:
        sdfg = standalone_sdfg(request)
    except Exception as exc:  # noqa: BLE001 - the node could not be rebuilt: undecidable, not the model's fault
        return CheckReport("faithful", "inconclusive", f"could not rebuild the node as a program: {exc}")
    folder = Path(request.workdir) / "program"
    sdfg.build_folder = str(folder)
    start = time.perf_counter()
    try:
        with debugprint_off():
            compile_without_loading(sdfg)
    except compilation_error as exc:
        output = str(exc).replace(str(folder) + os.sep, "")
        return CheckReport("faithful", "failed", summarize_output(output), time.perf_counter() - start,
                           {"program": sdfg.name})
    except configuration_error as exc:
        return CheckReport("faithful", "inconclusive", f"DaCe could not configure the build: {exc}")
    except Exception as exc:  # noqa: BLE001 - code generation of the rebuilt program failed
        return CheckReport("faithful", "inconclusive", f"DaCe could not generate the program: "
                           f"{type(exc).__name__}: {exc}")
    return CheckReport("faithful", "passed", "", time.perf_counter() - start, {"program": sdfg.name})


@hookimpl
def dace_ai_checkers():
    yield Checker(name="probe", stage="compile", check=probe_check, applies=uses_host_compiler, default=True,
                  description="C++ syntax check of the tasklet alone with DaCe's headers (precompiled)")
    yield Checker(name="faithful", stage="compile", check=faithful_check, applies=uses_host_compiler, default=False,
                  description="DaCe build of a program holding only the tasklet with the node's data")
