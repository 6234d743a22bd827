"""A compile checker from a separate distribution: the candidate compiled by ``clang++ -fsyntax-only``.

It is not a default checker; a site selects it with the ``checkers`` setting
(``DACE_ai_checkers=clang-syntax``), which shows that checkers are swapped by
configuration alone.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from dace_ai.plugin import (
    UNIT_FILE,
    Checker,
    CheckReport,
    dace_include_dir,
    hookimpl,
    host_unit,
    report_from_tool,
    run_tool,
    runtime_standard_flag,
)

COMPILER = "clang++"


def check(request) -> CheckReport:
    if shutil.which(COMPILER) is None:
        return CheckReport("clang-syntax", "inconclusive", f"{COMPILER} not found on PATH")
    folder = Path(request.workdir) / "clang"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / UNIT_FILE).write_text(host_unit(request.answer, request.node), encoding="utf-8")
    cmd = [
        COMPILER,
        runtime_standard_flag("c++14"),
        "-I",
        str(dace_include_dir()),
        "-include",
        "dace/dace.h",
        "-fsyntax-only",
        UNIT_FILE,
    ]
    return report_from_tool(
        "clang-syntax", run_tool(cmd, cwd=folder, timeout=300), folder, details={"compiler": COMPILER}
    )


def is_host_cpp(request) -> bool:
    node = request.node
    return node.target.kind == "cpu" and request.answer.language == "cpp" and not node.in_gpu_kernel


@hookimpl
def dace_ai_checkers():
    yield Checker(
        name="clang-syntax",
        stage="compile",
        check=check,
        applies=is_host_cpp,
        default=False,
        description="clang++ -fsyntax-only on the tasklet with DaCe's headers",
    )
