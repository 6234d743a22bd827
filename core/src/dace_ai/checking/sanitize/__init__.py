"""Built-in checker ``sanitizers`` (stage ``verify``, on by default): the candidate once more, under clang's sanitizers.

The verify stage runs the candidate on guarded buffers: an access past a buffer's
guard page faults, but one that stays inside the slack before it (a vector load of
the last partial chunk, ``_a[i + 1]`` at ``i = N - 1``) goes unseen when its value
is not used, and a data race is only found when threads happen to collide. This
checker builds the very unit of the candidate's one compile
(:func:`dace_ai.checking.compile.compile_candidate`) a second time with ``clang++``
and runs it once at a small size, in a process of its own:

* **AddressSanitizer + UndefinedBehaviorSanitizer** (``-fsanitize=address,undefined
  -fno-sanitize-recover=all -O1 -g``): every container is allocated with exactly its
  byte count, so ASan's redzone starts right after it; out-of-bounds accesses,
  misaligned typed loads, signed overflow, over-wide shifts, ... end the run with a
  report. Sizes: the ladder's first ``small`` case.
* **ThreadSanitizer** with LLVM's OpenMP runtime and Archer (``-fsanitize=thread
  -fopenmp``), for code that uses OpenMP: 4 threads even on 2 cores, at the ``odd``
  rung's size (else ``small``). TSan sees two unsynchronised accesses whether or not
  they overlap in time, so a shared accumulator without a reduction fails every time;
  Archer tells TSan about OpenMP's own synchronisation, so a correct reduction or a
  parallel loop writing disjoint elements passes.

Both builds are started beside the main compile (:func:`start_sanitizer_builds`, the maker of
the artefact ``SANITIZER_BUILDS`` this checker needs: the stage runner starts it before the
compile stage and kills its compiler processes when a stage fails or the checks end), so a
2-core machine overlaps them.
``dace/dace.h`` is precompiled for clang once per flag set
(:func:`dace_ai.checking.compile.ensure_pch`) and the fixed C++ driver
(``driver.cpp``, our code, never the model's) is compiled once per flag set, so a
warm sanitizer build is one short compile and link.

The driver reads a plain job file (symbol values, enclosing-map parameters, per
container its byte size and a raw data file, per connector its container and byte
offset, in the entry points' order; see :func:`write_job`), allocates each container
with exactly its byte count (64-byte aligned, as the verify child aligns its buffers),
calls ``dace_ai_entry_init/run/exit`` and prints each buffer's address range first,
so a report's address is mapped to the container. The first report becomes one short
message naming the class, the container and the answer's line::

    AddressSanitizer: heap-buffer-overflow: READ of 8 bytes right after the end of container A
    (connector _a) at tasklet.cpp:27: `double next = _a[i + 1];` (line 2 of your code) (seed 0,
    sizes N=13 (the small odd size)): every access must stay inside the data its connector covers, ...

Reports: ``CheckReport("sanitizers", "passed" | "failed" | "inconclusive", diagnostics,
stage="verify", reason=..., sizes=[address run's, thread run's], details={"sanitizers":
["address", "undefined"(, "thread")], "sanitizer_sizes": {"address": {...}, "thread": {...}},
"threads": 4 | None, "seconds": {...}, "pch": {...}})`` (``"passed": [...]``: the runs that passed when
another was inconclusive). Inconclusive (never failed) when clang++ is missing (Debian
package ``clang``), when LLVM's OpenMP runtime or Archer is missing for the thread
run (``libomp-dev``; the address run still counts), when clang has no sanitizer
runtime (``libclang-rt-dev``) - these three are the machine's, said once per process
and marked ``told`` -, when clang cannot compile what the real build's compiler
compiled (a GCC extension: clang's first error is quoted), and when a report is not
in the candidate's code (the driver, our entry points). The checker applies only to
candidates the ``verify`` checker passed (inputs it could not judge may lie outside
what the node is defined for), and it runs after ``verify`` in its stage (it needs ``SANDBOX_RUN``).
``checkers = "-sanitizers"`` turns it off; the setting ``sanitizers_compiler`` names the clang++ to use.
"""

from dace_ai.checking.sanitize.builds import (
    SANITIZER_BUILDS,
    SanitizerBuild,
    SanitizerBuilds,
    start_sanitizer_builds,
)
from dace_ai.checking.sanitize.check import applies, checker, sanitizers_check
from dace_ai.checking.sanitize.reports import read_report
from dace_ai.checking.sanitize.runs import SanitizerRun, sanitizer_cases, write_job
from dace_ai.checking.sanitize.tools import NAME, clang_flags, libomp_problem, sanitizer_flags

__all__ = [
    "NAME",
    "SANITIZER_BUILDS",
    "SanitizerBuild",
    "SanitizerBuilds",
    "SanitizerRun",
    "applies",
    "checker",
    "clang_flags",
    "libomp_problem",
    "read_report",
    "sanitizer_cases",
    "sanitizer_flags",
    "sanitizers_check",
    "start_sanitizer_builds",
    "write_job",
]
