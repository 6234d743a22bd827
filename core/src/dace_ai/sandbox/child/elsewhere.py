"""The child's process as another place: other environment variables, working directory, resource limits
and CPU affinity, for one call, then put back.

Code that asks where it runs (a variable the sandbox sets, its folder, a finite limit, the CPUs it may use)
answers differently here than in the first call; its output then differs from the reference's, and the
call is refused as depending on where it runs. Only what can be changed safely inside the sandbox changes:
limits are only lowered, affinity only narrowed.
"""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import tempfile
from collections.abc import Iterator

#: Words in the names of environment variables hidden for the call (the harness's own and the test runner's).
HIDDEN = ("DACE_AI", "SANDBOX", "PYTEST", "OMP_")


def _environment() -> dict[str, str | None]:
    """The changes made to ``os.environ``: hidden variables removed, a new one set (name -> new value or None)."""
    changes: dict[str, str | None] = {name: None for name in os.environ if any(w in name for w in HIDDEN)}
    changes[f"DACE_AI_ELSEWHERE_{secrets.token_hex(4).upper()}"] = "1"
    changes["TMPDIR"] = tempfile.gettempdir()
    changes["LANG"] = "C.UTF-8" if os.environ.get("LANG") != "C.UTF-8" else "C"
    return changes


@contextlib.contextmanager
def elsewhere() -> Iterator[list[str]]:
    """Within the block the process has other environment variables, working directory, limits (open files,
    core size) and CPU affinity (one CPU of those allowed); yields what changed, in words."""
    changed: list[str] = []
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_limits = {k: resource.getrlimit(k) for k in (resource.RLIMIT_NOFILE, resource.RLIMIT_CORE)}
    saved_affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    with tempfile.TemporaryDirectory(prefix="elsewhere-") as folder:
        try:
            for name, value in _environment().items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            changed.append("environment variables")
            os.chdir(folder)
            changed.append("working directory")
            for kind, (soft, hard) in saved_limits.items():
                lower = max(0, min(soft if soft != resource.RLIM_INFINITY else 1 << 16, 1 << 16) // 2)
                with contextlib.suppress(ValueError, OSError):
                    resource.setrlimit(kind, (lower, hard))
            changed.append("resource limits")
            if saved_affinity and len(saved_affinity) > 1:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(0, {max(saved_affinity)})
                    changed.append("CPU affinity")
            yield changed
        finally:
            os.chdir(saved_cwd)
            for kind, limits in saved_limits.items():
                with contextlib.suppress(ValueError, OSError):
                    resource.setrlimit(kind, limits)
            if saved_affinity:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(0, saved_affinity)
            os.environ.clear()
            os.environ.update(saved_env)
