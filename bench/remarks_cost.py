"""What the vectoriser remarks add to a candidate's compile: the same compile with and without them, interleaved.

The compile stage asks the compiler for its remarks on the candidate's loops
(:mod:`dace_ai.compilation.remarks`) in its one compile. This script takes the real
compile of ``bench/check_cost.py``'s candidates (the 1-D ``reference=`` node and the
OpenMP Gemm), then runs that very command ``--repeats`` times with the remark flags
and as many times without, alternating, so both sides see the same load; it also times
reading the remarks (:meth:`~dace_ai.compilation.compile.CandidateBuild.remarks`). It
prints the ratio with/without (median of the pairs) of the compiler's CPU time (user +
system, which a loaded machine hardly changes) and of wall time, with the absolute figures:

    python bench/remarks_cost.py [--repeats 15]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dace
from dace_ai.compilation.compile import compile_candidate
from dace_ai.compilation.remarks import REMARKS_FILE
from dace_ai.config.settings import resolve_settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_cost import _request, gemm_candidate, gemm_context, node_context, scale_candidate


def _seconds(command: list[str], folder: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one compile; the compiler's CPU time (user + system) hardly depends on the load."""
    (folder / REMARKS_FILE).unlink(missing_ok=True)  # GCC appends
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        command,
        cwd=folder,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "LC_ALL": "C"},
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(label: str, ctx, answer, repeats: int) -> None:
    request = _request(ctx, resolve_settings({"checkers": "probe"}), answer)
    request.workdir.mkdir(parents=True, exist_ok=True)
    build = compile_candidate(request)
    if not build.ok:
        sys.exit(f"{label}: the candidate did not compile:\n{build.diagnostics}")
    remark_args = {a for a in build.command if a.startswith(("-fopt-info", "-Rpass"))}
    if not remark_args:
        sys.exit(f"{label}: the compiler {build.compiler[0]!r} was asked for no remarks (neither GCC nor Clang)")
    plain = [a for a in build.command if a not in remark_args]
    with_remarks, without = [], []
    for _ in range(repeats):
        without.append(_seconds(plain, build.folder))
        with_remarks.append(_seconds(build.command, build.folder))
    start = time.perf_counter()
    lines = build.remarks()
    parse = time.perf_counter() - start
    size = (build.folder / REMARKS_FILE).stat().st_size if (build.folder / REMARKS_FILE).is_file() else 0
    print(f"\n{label}: {len(lines)} remark line(s) on the answer's loops; remarks file {size / 1024:.0f} KiB")
    for index, kind in ((1, "CPU"), (0, "wall")):
        plain_s = [t[index] for t in without]
        remarks_s = [t[index] for t in with_remarks]
        ratios = [w / p for w, p in zip(remarks_s, plain_s) if p > 0]
        print(
            f"  {kind:<4} compile without / with remarks  median {statistics.median(plain_s):.3f} s / "
            f"{statistics.median(remarks_s):.3f} s; with / without {statistics.median(ratios):.3f}x "
            f"(pairs {min(ratios):.2f}-{max(ratios):.2f})"
        )
    print(f"  reading the remarks       {parse * 1e3:.1f} ms")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        dace.Config.set("default_build_folder", value=str(Path(tmp) / ".dacecache"))
        settings = resolve_settings({"checkers": "probe"})
        print(
            f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
            f"{args.repeats} compiles each way, alternating"
        )
        measure("1-D reference=", node_context(settings), scale_candidate(0), args.repeats)
        measure("Gemm (OpenMP)", gemm_context(settings), gemm_candidate(0), args.repeats)


if __name__ == "__main__":
    main()
