"""The two sanitizer builds of a candidate, started in the background beside its main compile.

They are the artefact :data:`SANITIZER_BUILDS`: the ``sanitizers`` checker needs it, so the
stage runner starts :func:`start_sanitizer_builds` before the compile stage (two cores overlap
the builds with the main compile and the verify stage) and stops them when the checks end or a
stage fails. The check corrects them (:func:`start_build`) once it has the compiled object.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dace_ai.checking.api import CheckRequest
from dace_ai.compat import dace_runtime_include
from dace_ai.compilation.compile import ensure_pch
from dace_ai.compilation.entry_code import entry_points
from dace_ai.compilation.host_target import runs_on_host
from dace_ai.compilation.units import UNIT_FILE, ToolResult, host_unit
from dace_ai.context.concurrency import runs_concurrently
from dace_ai.plugins.artefacts import Artefact
from dace_ai.sandbox.sanitizers.tools import (
    BUILD_NICENESS,
    BUILD_TIMEOUT,
    FOLDER,
    driver_object,
    env_compile_args,
    fast_link_args,
    libomp_problem,
    link_args,
    sanitizer_compiler,
    sanitizer_flags,
    uses_openmp_source,
)
from dace_ai.targets.build_flags import build_command


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
    """The background builds of one candidate (the artefact :data:`SANITIZER_BUILDS`), by kind: a handle on
    running work (its ``stop()`` is the stage runner's), not a record."""

    builds: dict[str, SanitizerBuild] = field(default_factory=dict)

    def stop(self) -> None:
        for build in self.builds.values():
            build.stop()


def start_build(
    request: CheckRequest,
    builds: SanitizerBuilds,
    kind: str,
    unit: str,
    build_flags: Sequence[str],
    openmp: bool,
    compiler: str,
) -> SanitizerBuild:
    """Start (or reuse, when its flags match) the ``kind`` build of the candidate's unit in ``builds`` (a
    thread build compiles after the address build)."""
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
    builds.builds[kind] = build.start(unit, env_compile_args(request), link_args(request))
    return build


def start_sanitizer_builds(request: CheckRequest) -> SanitizerBuilds | None:
    """Start the sanitized builds of the candidate's unit (the maker of :data:`SANITIZER_BUILDS`).

    Only for a host C++ candidate whose real compiler and clang++ are installed; the thread
    build only for code that looks like OpenMP (the check corrects the guess from the object's
    symbols) or a node whose calls can run at the same time
    (:func:`~dace_ai.context.concurrency.runs_concurrently`). None when nothing was started; never raises:
    the check itself reports what went wrong.
    """
    try:
        if not runs_on_host(request):
            return None
        compiler = sanitizer_compiler(request.settings)
        main, flags = build_command(request.node.target)
        if compiler is None or not main or shutil.which(main[0]) is None:
            return None
        unit = host_unit(request.answer, request.node, environments=request.environments)
        unit += entry_points(request.node)  # the very text of the main compile's unit
        builds = SanitizerBuilds()
        openmp = uses_openmp_source(unit)
        at_once = runs_concurrently(request.node, request.answer.state_fields)
        libomp = libomp_problem(compiler) is None
        start_build(request, builds, "address", unit, flags, openmp and libomp, compiler)
        if (openmp or at_once) and libomp:
            start_build(request, builds, "thread", unit, flags, True, compiler)
        return builds
    except Exception:  # noqa: BLE001 - a background start is an optimisation; the check redoes it
        return None


#: The candidate's sanitizer builds, started by the stage runner as soon as a selected checker needs them.
SANITIZER_BUILDS: Artefact[SanitizerBuilds] = Artefact("sanitizer_builds", make=start_sanitizer_builds, background=True)
