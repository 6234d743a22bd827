"""Built-in plugin: the ``gpu-sanitizers`` checker (stage ``verify``, after ``gpu-verify``): the GPU rung of the sanitizers.

Where an NVIDIA GPU, ``compute-sanitizer`` and DaCe's GPU build are all present, the
device program ``gpu-verify`` ran (:func:`dace_ai.sandbox.device_program.device_program`)
runs once more, in the same sandbox child, at the ladder's first (small) size and one
seed, under each of compute-sanitizer's tools (:data:`TOOLS`): ``memcheck`` (out-of-bounds
and misaligned accesses to global, local and shared memory, hardware exceptions),
``racecheck`` (shared-memory hazards between the threads of a block), ``initcheck``
(reads of device memory never written) and ``synccheck`` (barriers not every thread
reaches). The tool writes its report to a file of its own (``--log-file``); its first
error becomes one message naming the tool, the access, the kernel and the thread and
block (:func:`read_report`). It applies only to candidates ``gpu-verify`` passed, and is
off with ``checkers = "-gpu-sanitizers"``. A tool's run counts as clean only on positive
evidence (:func:`judge_tool_run`): the child exited with its verdict ``passed`` and the
tool's report ends with its summary of 0 errors. A crash, a kill, an internal error of the
sanitizer or a report without its summary is inconclusive, with the reason, as is a
missing compute-sanitizer (the level then says ``no sanitizers: ...``, as on the CPU
without clang).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Checker
from dace_ai.sandbox.device_program import build_device_program, runs_on_gpu
from dace_ai.sandbox.harness import run_against_reference
from dace_ai.sandbox.ladder import build_ladder
from dace_ai.sandbox.sandbox_run import GPU_RUN

CHECKER = "gpu-sanitizers"
#: compute-sanitizer's tools, in the order they run (each a run of its own).
TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
_LINE = "========="
_ERROR = re.compile(
    r"^=+ (Invalid __\w+__ (?:read|write|atomic)[^\n]*|Uninitialized __\w+__ memory read[^\n]*"
    r"|Error: Race reported between[^\n]*|Barrier error detected[^\n]*|Program hit [^\n]*"
    r"|Malformed [^\n]*|Misaligned [^\n]*|Out-of-range [^\n]*)$",
    re.M,
)
_KERNEL = re.compile(
    r"^=+\s+(?:at|and \w+ access at)\s+(?:0x[0-9a-f]+ in )?(.+?)(?:\+0x[0-9a-f]+)?(?: in (\S+))?$", re.M
)
_THREAD = re.compile(r"by thread \((\d+,\d+,\d+)\) in block \((\d+,\d+,\d+)\)")
_ADDRESS = re.compile(r"Address 0x[0-9a-f]+ (is [^\n]+)")
_SUMMARY = re.compile(
    r"^=+ (?:ERROR SUMMARY: (\d+) errors?|RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?)", re.M
)


def compute_sanitizer() -> str | None:
    """The ``compute-sanitizer`` of this machine (PATH, ``$CUDA_HOME/bin``, beside nvcc), or None."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    homes = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", "")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        homes.append(str(Path(os.path.realpath(nvcc)).parent.parent))
    for home in filter(None, homes):
        for candidate in (
            Path(home) / "bin" / "compute-sanitizer",
            Path(home) / "compute-sanitizer" / "compute-sanitizer",
        ):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


@dataclass(frozen=True)
class GpuFinding:
    """The first error of one tool's report: what happened, where (kernel, source), by which thread."""

    tool: str
    what: str
    kernel: str = ""
    source: str = ""
    thread: str = ""
    block: str = ""
    detail: str = ""
    errors: int = 1

    def words(self) -> str:
        where = f" in kernel {self.kernel}" if self.kernel else ""
        where += f" ({self.source})" if self.source else ""
        who = f" by thread ({self.thread}) of block ({self.block})" if self.thread else ""
        detail = f": the address {self.detail}" if self.detail else ""
        more = f" ({self.errors} errors in all)" if self.errors > 1 else ""
        return f"compute-sanitizer {self.tool}: {self.what}{where}{who}{detail}{more}"


def read_report(tool: str, text: str) -> GpuFinding | None:
    """The first error in a compute-sanitizer report (``--log-file`` contents), or None when it has none."""
    first = _ERROR.search(text)
    summary = _SUMMARY.search(text)
    total = 0
    if summary is not None:
        total = int(next(g for g in summary.groups() if g is not None) or 0)
        if summary.group(3) is not None:
            total = int(summary.group(3))
    if first is None:
        return None if total == 0 else GpuFinding(tool, f"{total} error(s) reported", errors=total)
    block = text[first.end() : first.end() + 1500].split(f"\n{_LINE}\n", 1)[0]
    kernel = _KERNEL.search(block)
    thread = _THREAD.search(block)
    address = _ADDRESS.search(block)
    return GpuFinding(
        tool=tool,
        what=first.group(1).strip().rstrip("."),
        kernel=kernel.group(1).strip() if kernel else "",
        source=(kernel.group(2) or "") if kernel else "",
        thread=thread.group(1) if thread else "",
        block=thread.group(2) if thread else "",
        detail=address.group(1).strip() if address else "",
        errors=max(total, 1),
    )


#: Lines compute-sanitizer writes when the tool itself failed: its report says nothing of the code.
_TOOL_FAILED = re.compile(
    r"^=+ (?:Internal Sanitizer Error[^\n]*|Error: (?!Race reported)[^\n]*|Target application terminated[^\n]*"
    r"|Error: process didn't terminate successfully[^\n]*)$",
    re.M,
)


def judge_tool_run(
    tool: str, text: str, status: str, reason: str | None, message: str
) -> GpuFinding | tuple[str, str] | None:
    """One tool's run, judged: its first error (a finding); else, where it proves nothing, (reason, message)
    for an inconclusive report; else None (clean: the child passed and the summary counts 0 errors)."""
    finding = read_report(tool, text)
    if finding is not None:
        return finding
    said = message[:300] or "no message"
    if not text.strip():
        return f"{tool} wrote no report", f"compute-sanitizer {tool} wrote no report ({said})"
    failed = _TOOL_FAILED.search(text)
    if failed is not None:
        return f"{tool} failed", f"compute-sanitizer {tool} failed: {failed.group(0).lstrip('= ').strip()[:300]}"
    if status != "passed":
        return (
            f"{tool} run ended without a verdict",
            f"the run under compute-sanitizer {tool} ended without a verdict of its own ({reason or status}: {said})",
        )
    if _SUMMARY.search(text) is None:
        return f"{tool} report has no summary", f"compute-sanitizer {tool}'s report has no summary (it did not finish)"
    return None


def applies(request: CheckRequest) -> bool:
    """Where ``gpu-verify`` applies and passed (a GPU DaCe can build for)."""
    run = request.artefacts.get(GPU_RUN)
    passed = run is None or run.status == "passed"
    return passed and runs_on_gpu(request)


def gpu_sanitizers_check(request: CheckRequest) -> CheckReport:
    """Run the device program under each tool at the ladder's first size; the first tool's error fails it."""

    tool_path = compute_sanitizer()
    if tool_path is None:
        return CheckReport(
            CHECKER,
            "inconclusive",
            "compute-sanitizer was not found (PATH, $CUDA_HOME/bin, beside nvcc): the GPU code ran without "
            "memcheck, racecheck, initcheck and synccheck; it comes with the CUDA toolkit",
            stage="verify",
            reason="compute-sanitizer missing",
            supplements_verify=True,
            details={"sanitizers": []},
        )
    rung = build_ladder(request).rungs[0]
    folder = Path(request.workdir) / "gpu-sanitizers"
    folder.mkdir(parents=True, exist_ok=True)
    seconds = 0.0
    for tool in TOOLS:
        log = folder / f"{tool}.log"
        log.unlink(missing_ok=True)
        wrapper = [tool_path, "--tool", tool, "--log-file", str(log), "--print-limit", "5"]
        result = run_against_reference(
            request,
            mode="verify",
            seeds=[rung.seeds[0]],
            sizes=[dict(rung.sizes)],
            device=build_device_program,
            wrapper=wrapper,
        )
        seconds += float(result.seconds.get("total", 0.0))
        text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
        judged = judge_tool_run(tool, text, result.status, result.reason, result.message)
        sizes = ", ".join(f"{k}={v}" for k, v in rung.sizes.items())
        if isinstance(judged, GpuFinding):
            return CheckReport(
                CHECKER,
                "failed",
                f"{judged.words()} (sizes {sizes}, seed {rung.seeds[0]}): every access must stay inside the data "
                "its connector covers and every thread of a block must reach each barrier",
                stage="verify",
                reason=f"gpu {tool}",
                supplements_verify=True,
                details={"sanitizers": [tool], "tool": tool, "seconds": seconds},
            )
        if judged is not None:
            return CheckReport(
                CHECKER,
                "inconclusive",
                judged[1],
                stage="verify",
                reason=judged[0],
                supplements_verify=True,
                details={"sanitizers": [], "tool": tool},
            )
    return CheckReport(
        CHECKER,
        "passed",
        f"compute-sanitizer {', '.join(TOOLS)}: no errors at sizes {', '.join(f'{k}={v}' for k, v in rung.sizes.items())}",
        stage="verify",
        supplements_verify=True,
        details={"sanitizers": list(TOOLS), "seconds": seconds},
    )


@hookimpl
def dace_ai_checkers():
    yield Checker(
        name=CHECKER,
        stage="verify",
        check=gpu_sanitizers_check,
        applies=applies,
        needs=(GPU_RUN,),
        description="Runs the GPU program of gpu-verify once more under compute-sanitizer's memcheck, racecheck, "
        "initcheck and synccheck at a small size (where compute-sanitizer and a GPU are present)",
    )
