"""Files under the build-folder root: atomic writes, cross-process locks, folders.

Layout under ``<build root>`` (``.dacecache`` by default)::

    ai-cache/         answers, keyed by everything that determines them
    ai-sessions/      per node: every round's prompt, answer and check logs
    ai-environments/  generated DaCe environment modules
    ai-check/         build folders of checks (precompiled headers, probes)
    ai-prompts/       manual-provider prompt and response files
    ai-roofline/      this machine's measured peaks, per compiler and flags

Writes go to a temporary file in the same folder and are renamed into place,
so a reader never sees half a file, and two processes never corrupt each other.
A process killed mid-write leaves only its hidden temporary file
(``.<name>.<pid>.<random>.tmp``), which the next write of the same file removes
once that process is gone (``dace-ai cache verify --fix`` removes them too).
Nothing written here may contain an API key.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock

from dace_ai.compat import build_folder_root

FOLDERS = ("ai-cache", "ai-sessions", "ai-environments", "ai-check", "ai-prompts", "ai-roofline")


def build_root() -> Path:
    return Path(build_folder_root()).resolve()


def ai_folder(kind: str, root: Path | None = None) -> Path:
    """The folder of one kind (one of :data:`FOLDERS`), created on demand."""
    if kind not in FOLDERS:
        raise ValueError(f"unknown storage folder {kind!r}; known: {', '.join(FOLDERS)}")
    folder = (root or build_root()) / kind
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def atomic_write(path: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, then rename)."""

    def write(tmp: Path) -> None:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")

    return atomic_write_with(path, write)


def atomic_write_with(path: Path, write: Callable[[Path], Any]) -> Path:
    """Let ``write(temp_path)`` produce the file, then rename it onto ``path`` (same folder, atomic).

    Also for writers that want a file name rather than data (``SDFG.save``). The
    temporary file carries this process's pid, so a later write removes those of
    writers that were killed mid-write; on any error it is removed and ``path`` is
    untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
        remove_orphans(path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_orphans(path: Path) -> int:
    """Remove temporary files of writes to ``path`` whose process died (killed mid-write); return how many."""
    removed = 0
    for leftover in Path(path).parent.glob(f".{Path(path).name}.*.tmp"):
        pid_text = leftover.name[len(Path(path).name) + 2 :].split(".", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _alive(int(pid_text)):
            continue
        try:
            leftover.unlink()
            removed += 1
        except OSError:
            pass
    return removed


def atomic_write_json(path: Path, obj: Any) -> Path:
    return atomic_write(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def lock_for(path: Path, timeout: float = 600.0) -> FileLock:
    """A cross-process lock guarding ``path`` (the lock file sits beside it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path) + ".lock", timeout=timeout)
