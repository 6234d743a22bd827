"""How writing the prompts of a program scales with its number of AI nodes.

Times the path a user runs: ``dace_ai.generate_prompts(sdfg, folder)`` on the SDFG of a
real ``@dace.program`` with 20 and with 200 ``dace_ai.ai(...)`` calls (a chain: each node
reads the previous one's output; every fourth one inside a ``dace.map`` over rows). That
includes copying the SDFG, expanding its other library nodes, collecting every node's
context, rendering the prompts through the installed prompt sections and writing the
files. Parsing the program (DaCe's frontend, not dace-ai) is left out. Collection must be
linear in the nodes (one inferred copy per SDFG, not one per node), so t200 / t20 should
stay near 10; the target is at most 12.

Run: ``.venv/bin/python bench/prompt_scaling.py``
"""

from __future__ import annotations

import gc
import importlib.util
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPEATS = 3


def program_source(count: int) -> str:
    """A module with one program of ``count`` AI nodes, as a user would write it."""
    lines = [
        "import dace",
        "import dace_ai",
        "",
        "N = dace.symbol('N')",
        "",
        "",
        "@dace.program",
        f"def scaling_{count}(A: dace.float64[N, 8]):",
        "    X0 = A",
    ]
    for k in range(count):
        if k % 4 == 3:
            lines += [
                f"    X{k + 1} = dace.define_local([N, 8], dace.float64)",
                "    for i in dace.map[0:N]:",
                (
                    f"        X{k + 1}[i] = dace_ai.ai('Row i: write _in0 scaled by {k + 1} into _out.', "
                    f"X{k}[i], name='ai{k}')"
                ),
            ]
        else:
            lines.append(f"    X{k + 1} = dace_ai.ai('Write _in0 plus {k + 1} into _out.', X{k}, name='ai{k}')")
    lines.append(f"    return X{count}")
    return "\n".join(lines) + "\n"


def load_sdfg(count: int, folder: Path):
    """The SDFG of the program (parsed once; each timed run gets it from a fresh load)."""
    path = folder / f"scaling_{count}.py"
    path.write_text(program_source(count))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    sdfg = getattr(module, f"scaling_{count}").to_sdfg()
    sdfg.save(str(folder / f"scaling_{count}.sdfg"))
    return folder / f"scaling_{count}.sdfg"


def timed(saved: Path, count: int, work: Path) -> float:
    """Best of ``REPEATS`` wall times of generate_prompts (a freshly loaded SDFG and an empty folder each time)."""
    import dace
    import dace_ai

    best = float("inf")
    for repeat in range(REPEATS):
        sdfg = dace.SDFG.from_file(str(saved))
        folder = work / f"prompts-{count}-{repeat}"
        gc.collect()  # start each run from the same heap, so earlier garbage is not billed to it
        start = time.perf_counter()
        written = dace_ai.generate_prompts(sdfg, folder)
        best = min(best, time.perf_counter() - start)
        assert len(written) == count, (len(written), count)
        assert len({p.prompt.read_text() for p in written}) == count
        shutil.rmtree(folder)
    return best


def main() -> None:
    import dace_ai  # noqa: F401 - registers the ai expansion before programs are parsed

    work = Path(tempfile.mkdtemp(prefix="dace-ai-prompt-scaling-"))
    try:
        saved = {count: load_sdfg(count, work) for count in (2, 20, 200)}
        timed(saved[2], 2, work)  # once-per-process costs: plugin loading, target detection, environments
        t20 = timed(saved[20], 20, work)
        t200 = timed(saved[200], 200, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("dace_ai.generate_prompts(sdfg, folder) on a @dace.program with N dace_ai.ai() calls")
    print(f"t20  = {t20 * 1000:8.1f} ms  ({t20 / 20 * 1000:.2f} ms per node)")
    print(f"t200 = {t200 * 1000:8.1f} ms  ({t200 / 200 * 1000:.2f} ms per node)")
    ratio = t200 / t20
    print(f"t200/t20 = {ratio:.2f} (target <= 12: {'ok' if ratio <= 12 else 'TOO HIGH'})")


if __name__ == "__main__":
    main()
