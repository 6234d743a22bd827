"""Run generated code in a child process with limits, and say what happened to it.

Generated code never runs in the user's process: :func:`run_child` starts
``python -I dace_ai/sandbox/child/__main__.py JOB.json`` in a new session. The parent
enforces wall time, CPU time and resident memory by watching the child (``/proc``) and
kills the child's whole process group when it runs over, so the child has no limits of
its own that code could read and recognise as a sandbox (only no core files, as most
user processes); where ``/proc`` cannot be read the child sets CPU-time and
address-space limits itself (``resource.setrlimit``). What comes back is a :class:`ChildOutcome`: the child's
result, or how it died (signal, limit, fault address mapped to a buffer) with the
step it was in, so "the candidate wrote past the end of C" can be told apart from
"the candidate crashed" and from "the reference crashed".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dace_ai.config.settings import AISettings

if TYPE_CHECKING:
    from dace_ai.sandbox.child.records import Limits, SandboxJob

#: The entry file of the sandbox child (it loads the other files of its folder itself).
CHILD = Path(__file__).with_name("child") / "__main__.py"
#: A fault this far past a buffer's end (beyond its guard pages) is attributed to that buffer.
NEAR_BYTES = 4 << 20


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one child process (all cases of one candidate together)."""

    cpu_seconds: float = 20.0
    wall_seconds: float = 60.0
    memory_bytes: int = 4 << 30

    @classmethod
    def from_settings(cls, settings: AISettings) -> SandboxLimits:
        return cls(
            cpu_seconds=settings.sandbox_cpu_seconds,
            wall_seconds=settings.sandbox_wall_seconds,
            memory_bytes=settings.sandbox_memory_mb << 20,
        )

    def as_job(self) -> Limits:
        return {"cpu_seconds": max(1, round(self.cpu_seconds)), "memory_bytes": self.memory_bytes}


@dataclass
class ChildOutcome:
    """How a child run ended.

    ``status``: ``finished`` (``result`` holds its JSON), ``crashed`` (a signal;
    ``fault`` says where when known), ``timeout`` (wall time), ``cpu_time``,
    ``memory``, or ``error`` (the child could not run, ``output`` says why).
    ``phase`` is the last step the child announced (who ran, seed, sizes, buffers).
    """

    status: str
    returncode: int
    seconds: float
    result: dict[str, Any] | None = None
    phase: dict[str, Any] = field(default_factory=dict)
    fault: dict[str, Any] | None = None
    signal: str = ""
    output: str = ""

    @property
    def who(self) -> str:
        """Which side was running when the child stopped: candidate, reference or loader."""
        return str(self.phase.get("who", "loader"))


def _last_phase(path: Path) -> dict[str, Any]:
    try:
        lines = path.read_text(encoding="utf-8").strip().splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    return {}


def locate_fault(address: int, buffers: list[dict[str, Any]]) -> dict[str, Any]:
    """Where ``address`` lies relative to the child's buffers (guard page, slack, or nowhere)."""
    for buf in buffers:
        if buf["guard"][0] <= address < buf["guard"][1]:
            return {"container": buf["name"], "where": "after", "bytes": address - buf["end"]}
        if buf["lead"] <= address < buf["start"]:
            return {"container": buf["name"], "where": "before", "bytes": buf["start"] - address}
        if buf["start"] <= address < buf["end"]:
            return {"container": buf["name"], "where": "inside", "bytes": address - buf["start"]}
    after = [b for b in buffers if b["end"] <= address < b["end"] + NEAR_BYTES]
    if after:  # beyond the guard page: still most likely an overrun of the closest buffer below
        buf = max(after, key=lambda b: b["end"])
        return {"container": buf["name"], "where": "after", "bytes": address - buf["end"]}
    return {"container": None, "where": "null" if address < 65536 else "elsewhere", "bytes": 0}


def _read_fault(path: Path, buffers: list[dict[str, Any]]) -> dict[str, Any] | None:
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip().splitlines()
    except OSError:
        return None
    for line in reversed(text):
        parts = line.split()
        if len(parts) == 4 and parts[0] == "fault":
            address = int(parts[2], 16)
            write = {"1": True, "0": False}.get(parts[3])
            return {"signal": int(parts[1]), "address": address, "write": write, **locate_fault(address, buffers)}
    return None


@dataclass
class Launched:
    """How a launched child ended: exit status (negative: the signal), its output, whether it ran out of time,
    and the limit the parent killed it for (``cpu_time``, ``memory`` or None)."""

    returncode: int
    output: bytes
    timed_out: bool
    seconds: float
    over: str | None = None


#: Seconds between two looks at a watched child's CPU time and memory.
WATCH_SECONDS = 0.02
_PROC = Path("/proc")


def watched_from_outside() -> bool:
    """True where the parent can read a child's CPU time and memory (Linux ``/proc``): the child then runs
    without limits of its own that code could read (``getrlimit`` sees what the user's process sees)."""
    return (_PROC / "self" / "stat").is_file()


def _usage(pid: int) -> tuple[float, int] | None:
    """CPU seconds (all threads) and resident bytes of process ``pid``, or None once it is gone."""
    try:
        fields = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        pages = int((_PROC / str(pid) / "statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks, pages * os.sysconf("SC_PAGE_SIZE")


def _watch(proc: subprocess.Popen[bytes], deadline: float, cpu_seconds: float | None, memory_bytes: int | None) -> str:
    """Wait for ``proc``; what it ran over (``timeout``, ``cpu_time``, ``memory``) or "" when it ended."""
    while True:
        try:
            proc.wait(timeout=WATCH_SECONDS)
            return ""
        except subprocess.TimeoutExpired:
            pass
        if time.perf_counter() > deadline:
            return "timeout"
        usage = _usage(proc.pid) if (cpu_seconds or memory_bytes) else None
        if usage is not None:
            if cpu_seconds and usage[0] > cpu_seconds:
                return "cpu_time"
            if memory_bytes and usage[1] > memory_bytes:
                return "memory"


def launch(
    argv: list[str],
    *,
    cwd: Path,
    wall_seconds: float,
    env: dict[str, str] | None = None,
    preexec_fn: Any = None,
    cpu_seconds: float | None = None,
    memory_bytes: int | None = None,
) -> Launched:
    """Run ``argv`` in a session of its own; past ``wall_seconds`` its whole process group is killed.

    ``cpu_seconds`` and ``memory_bytes`` (resident) are enforced from here, by watching the
    child (:func:`watched_from_outside`), so it needs no limits of its own. The one way every
    child that runs generated code is started (the verify sandbox, the bench stage's timing
    runs), so a candidate that forks leaves nothing behind.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=preexec_fn,
    )
    chunks: list[bytes] = []
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read() if proc.stdout else b""), daemon=True)
    reader.start()
    over = _watch(proc, start + wall_seconds, cpu_seconds, memory_bytes)
    if over:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    reader.join()
    output = b"".join(chunks)
    timed_out = over == "timeout"
    return Launched(
        proc.returncode, output, timed_out, time.perf_counter() - start, over if over and not timed_out else None
    )


def run_child(
    job: SandboxJob,
    folder: Path,
    limits: SandboxLimits,
    *,
    threads: int | None = None,
    wrapper: Sequence[str] = (),
) -> ChildOutcome:
    """Write ``job`` to ``folder``, run the child on it under ``limits``, and read what happened.

    ``threads``: ``OMP_NUM_THREADS`` of the child (the all-core count of the job), set
    before anything loads the OpenMP runtime, which reads it once. ``wrapper``: a tool the
    child runs under (``compute-sanitizer --tool memcheck ...``); the child then limits its own
    CPU time (the tool's child is not watched from here), the wall time is watched.
    """
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        name: folder / f"{name}.{ext}"
        for name, ext in (("job", "json"), ("result", "json"), ("phase", "jsonl"), ("fault", "txt"))
    }
    for name in ("result", "phase", "fault"):
        files[name].unlink(missing_ok=True)
    job_limits, watched = _split_limits(limits, threads, wrapped=bool(wrapper))
    job = {
        **job,
        "limits": job_limits,
        "result_file": str(files["result"]),
        "phase_file": str(files["phase"]),
        "fault_file": str(files["fault"]),
    }
    files["job"].write_text(json.dumps(job), encoding="utf-8")
    env = {**os.environ, "MALLOC_ARENA_MAX": "2", "PYTHONFAULTHANDLER": ""}
    env.pop("PYTHONFAULTHANDLER")
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), OMP_DYNAMIC="false")
    argv = [*wrapper, sys.executable, "-I", str(CHILD), str(files["job"])]
    run = launch(
        argv,
        cwd=folder,
        wall_seconds=limits.wall_seconds,
        env=env,
        cpu_seconds=watched.get("cpu_seconds"),
        memory_bytes=watched.get("memory_bytes"),
    )
    return _outcome(run, files)


def _split_limits(limits: SandboxLimits, threads: int | None, *, wrapped: bool) -> tuple[Limits, Limits]:
    """(what the child limits itself to, what the parent watches) for ``limits``."""
    job_limits = limits.as_job()
    if threads:  # CPU time counts every thread: the limit is per thread of the all-core count
        job_limits["cpu_seconds"] = job_limits["cpu_seconds"] * max(1, int(threads))
    if wrapped:  # the tool's child is not watched: it limits its CPU time itself (no address-space limit:
        return {"cpu_seconds": job_limits.get("cpu_seconds", 0), "memory_bytes": 0}, {}  # CUDA reserves a lot)
    if watched_from_outside():  # enforced by watching the child: nothing in the child that code could read
        return {"cpu_seconds": 0, "memory_bytes": 0}, job_limits
    return job_limits, {}


def _outcome(run: Launched, files: dict[str, Path]) -> ChildOutcome:
    """How the child's run ended, from its exit, its output and the files it wrote."""
    text = run.output.decode(errors="replace")[-4000:]
    phase = _last_phase(files["phase"])
    outcome = ChildOutcome("error", run.returncode, run.seconds, phase=phase, output=text)
    if run.timed_out:
        outcome.status = "timeout"
        return outcome
    if run.over is not None:
        outcome.status = run.over
        outcome.signal = "SIGKILL"
        return outcome
    if run.returncode < 0:
        signum = -run.returncode
        outcome.signal = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else str(signum)
        if signum == signal.SIGXCPU:
            outcome.status = "cpu_time"
        elif signum == signal.SIGABRT and "bad_alloc" in text:
            outcome.status = "memory"
        else:
            outcome.status = "crashed"
            outcome.fault = _read_fault(files["fault"], phase.get("buffers", []))
        return outcome
    if files["result"].is_file():
        result = json.loads(files["result"].read_text(encoding="utf-8"))
        outcome.result = result
        if result.get("error") == "memory":
            outcome.status = "memory"
        elif result.get("error"):
            outcome.status = "error"
            outcome.output = result.get("message", "") + ("\n" + text if text else "")
        else:
            outcome.status = "finished"
        return outcome
    if "bad_alloc" in text or "MemoryError" in text:
        outcome.status = "memory"
    return outcome
