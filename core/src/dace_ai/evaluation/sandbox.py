"""Run a task's candidate in a child process with time and memory limits (see :mod:`.child`)."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

#: Limits of the child: wall seconds, CPU seconds, address space bytes.
WALL_SECONDS = 600
CPU_SECONDS = 900
MEMORY_BYTES = 16 * 2**30


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def run_task(spec: dict[str, Any], *, wall_seconds: float = WALL_SECONDS) -> dict[str, Any]:
    """The child's result for ``spec``, or ``{"error": ...}`` saying how it died."""
    with tempfile.TemporaryDirectory(prefix="dace-ai-bench-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "result.json"
        spec_path.write_text(json.dumps(spec))
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        try:
            proc = subprocess.run([sys.executable, "-m", "dace_ai.evaluation.child", str(spec_path), str(out_path)],
                                  capture_output=True, text=True, timeout=wall_seconds, check=False, preexec_fn=_limits, env=env)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {wall_seconds:.0f} s (wall)"}
        if proc.returncode < 0:
            name = signal.Signals(-proc.returncode).name
            return {"error": f"the candidate's process died of {name}", "stderr": proc.stderr[-2000:]}
        if not out_path.is_file():
            return {"error": f"the child exited with {proc.returncode} and no result", "stderr": proc.stderr[-2000:]}
        return json.loads(out_path.read_text())
