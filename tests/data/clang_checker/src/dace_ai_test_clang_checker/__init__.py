"""A compile checker from a separate distribution: the candidate compiled by ``clang++ -fsyntax-only``.

It is not a default checker; a site selects it with the ``checkers`` setting
(``DACE_ai_checkers=clang-syntax``), which shows that checkers are swapped by
configuration alone.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from dace_ai.checking.api import CheckReport
from dace_ai.checking.diagnostics import summarize_output
from dace_ai.checking.host import PROBE_FILE, is_host_cpp, probe_source
from dace_ai.compat import dace_runtime_include
from dace_ai.plugin import Checker, hookimpl

COMPILER = "clang++"


def check(request) -> CheckReport:
    if shutil.which(COMPILER) is None:
        return CheckReport("clang-syntax", "inconclusive", f"{COMPILER} not found on PATH")
    folder = Path(request.workdir) / "clang"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PROBE_FILE).write_text(probe_source(request), encoding="utf-8")
    cmd = [COMPILER, "-std=c++14", "-I", dace_runtime_include(), "-include", "dace/dace.h",
           "-fsyntax-only", PROBE_FILE]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=300, check=False)
    status = "passed" if proc.returncode == 0 else "failed"
    return CheckReport("clang-syntax", status, "" if status == "passed" else summarize_output(proc.stderr),
                       time.perf_counter() - start, {"compiler": COMPILER})


@hookimpl
def dace_ai_checkers():
    yield Checker(name="clang-syntax", stage="compile", check=check, applies=is_host_cpp, default=False,
                  description="clang++ -fsyntax-only on the tasklet with DaCe's headers")
