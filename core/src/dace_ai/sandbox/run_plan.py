"""What one sandboxed run of a candidate does besides the verify cases: thread runs and the bench section.

The candidate is compiled once and linked once (:mod:`dace_ai.compilation.candidate`);
one run of the child (:mod:`dace_ai.sandbox.child`) then verifies it and, when the
bench stage is on, times that very library against the node's native reference.
This module plans those runs for :func:`dace_ai.sandbox.harness.run_against_reference`:

* *threads*: the all-core count (setting ``check_threads``; 0 means the cores this
  process may use), and which cases run with 1 thread and then twice with all
  threads (the larger sizes: a race needs work to collide on);
* *the bench section* (:class:`BenchPlan`): cases at the bench sizes (two seeds,
  for the input-independence rule), whether they are timed, bytes per call for the
  bandwidth rule, and the machine-wide lock file;
* *reference outputs cached per case* next to the node's native reference, so the
  next candidate of the node does not run a slow native loop again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dace_ai.checking.api import CheckRequest
from dace_ai.config.settings import AISettings
from dace_ai.performance.store import usable_cores
from dace_ai.sandbox.baselines import bench_programs
from dace_ai.sandbox.bench_sizes import connector_bytes, parse_sizes
from dace_ai.sandbox.child.records import BaselineSpec, BenchJob, Case
from dace_ai.sandbox.ladder import bench_sizes
from dace_ai.sandbox.reference import reference_kind
from dace_ai.storage.files import ai_folder

#: Cases with at least this many elements in their largest container get the thread runs.
THREAD_RUN_ELEMENTS = 4096
#: Names the outputs' fill pattern in the reference outputs' cache key (what unwritten elements hold).
OUTPUT_FILL = "signalling-nan-a5"
#: Seeds of the bench section's cases: two, so outputs that ignore the inputs show.
BENCH_SEEDS = (1, 2)


def all_cores(settings: AISettings | None = None) -> int:
    """The all-core thread count: setting ``check_threads`` if set, else the cores this process may use."""
    given = settings.check_threads if settings is not None else 0
    return given if given > 0 else usable_cores()


def thread_counts(count: int) -> list[int]:
    """Runs of a thread-checked case: one thread (compared with the reference), then all cores twice."""
    return [1, count, count]


def uses_openmp(library: Path) -> bool:
    """True when the linked candidate calls the OpenMP runtime (GCC's ``GOMP_*``, LLVM's ``__kmpc_*``, ``omp_*``).

    Code without OpenMP gives the same result whatever ``OMP_NUM_THREADS`` says, so
    its thread runs are skipped (the native reference may load the runtime anyway,
    so the child cannot tell from what is loaded).
    """
    try:
        data = Path(library).read_bytes()
    except OSError:
        return True
    return any(tag in data for tag in (b"GOMP_", b"__kmpc_", b"omp_get_", b"omp_set_"))


def _largest(case: Case) -> int:
    return max([c["elements"] for c in case["containers"]] or [1])


def plan_threads(cases: list[Case], count: int) -> None:
    """Mark the cases that run with 1 and then all threads: the first seed of every size with at least
    :data:`THREAD_RUN_ELEMENTS` elements, or else of the largest size (no point at N=13)."""
    if not cases:
        return
    first_seed = cases[0]["seed"]
    chosen = [c for c in cases if c["seed"] == first_seed and _largest(c) >= THREAD_RUN_ELEMENTS]
    if not chosen:
        chosen = [max((c for c in cases if c["seed"] == first_seed), key=_largest)]
    for case in chosen:
        case["threads"] = thread_counts(count)


@dataclass
class BenchPlan:
    """The bench section of a sandboxed run: where, whether timed, and with what.

    ``time``: time candidate (and native reference, interleaved) under the lock;
    false for a node with nothing to compare against, which only records the
    per-call time of the run it had anyway.
    """

    sizes: dict[str, int]
    time: bool
    repeats: int = 7
    seeds: tuple[int, ...] = BENCH_SEEDS
    lock: str | None = None
    bytes: int | None = None
    #: More sides timed with the candidate and the native reference (same inputs, interleaved, same
    #: threads): ``{"label", "kind": "program", "program": <program spec>}`` per DaCe library
    #: implementation of the node (:func:`dace_ai.sandbox.baselines.bench_programs`).
    baselines: list[BaselineSpec] = field(default_factory=list)
    #: How figures name the native reference (``DaCe pure``), and the baselines not timed with their reason.
    native_label: str | None = None
    baselines_left_out: dict[str, str] = field(default_factory=dict)

    def job(self, cases: list[Case]) -> BenchJob:
        """The job's bench section for ``cases`` (the child's :class:`~dace_ai.sandbox.child.records.BenchJob`)."""
        return {
            "cases": cases,
            "time": self.time,
            "repeats": self.repeats,
            "lock": self.lock,
            "bytes": self.bytes,
            "baselines": [b.copy() for b in self.baselines] if self.time else [],
        }


def bench_plan(request: CheckRequest, *, native: bool, sizes: dict[str, int] | None = None) -> BenchPlan:
    """The bench section for ``request``: timed when there is a native reference, or when the user asked
    (``bench_sizes`` given, or ``bench=gate``)."""
    settings = request.settings
    given = dict(sizes) if sizes is not None else parse_sizes(settings.bench_sizes)
    asked = bool(given) or settings.bench == "gate"

    values = bench_sizes(request, given)
    return BenchPlan(
        sizes=values,
        time=native or asked,
        repeats=settings.bench_repeats,
        lock=str(ai_folder("ai-check") / "bench.lock"),
        bytes=connector_bytes(request, values),
    )


def bench_plan_with_baselines(request: CheckRequest) -> BenchPlan:
    """The bench section for ``request``'s sandboxed run, with the node's baselines when it is timed (raises
    ``ValueError`` for a bad ``bench_sizes``): what the ``verify`` and ``bench`` checkers run."""
    kind, _ = reference_kind(request)
    bench = bench_plan(request, native=kind == "native")
    if bench.time:
        native_label, programs, left_out = bench_programs(request, build=request.settings.bench_baselines)
        bench.native_label = native_label
        bench.baselines = [{"label": label, "kind": "program", "program": spec} for label, spec in programs.items()]
        bench.baselines_left_out = {u.name: u.reason for u in left_out}
    return bench


# ----------------------------------------------------------------------------- reference outputs cache
def case_key(case: Case) -> str:
    """What determines a case's reference outputs: seed, inputs drawn (and changed), symbol values,
    containers, views, fill."""
    what: dict[str, Any] = {
        "seed": case["seed"],
        "values": case["values"],
        "containers": case["containers"],
        "connectors": case["connectors"],
    }
    what.update(distribution=case.get("distribution") or "unit", magnitude=case.get("magnitude"), fill=OUTPUT_FILL)
    if case.get("changes"):  # inputs changed in place after they were drawn
        what["changes"] = case["changes"]
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:20]


def cache_reference_outputs(cases: list[Case], library: Path) -> None:
    """Give each case the files of its reference outputs, next to the node's native reference.

    The reference's folder is keyed by everything that determines the program (node,
    memlets, symbols, DaCe version, compiler and flags), and a case by its seed,
    symbol values and layout, so a file found there holds the very outputs the
    reference would compute.
    """
    folder = library.parent
    while folder.name != "program" and folder != folder.parent:
        folder = folder.parent
    folder = (folder.parent if folder.name == "program" else library.parent) / "outputs"
    folder.mkdir(parents=True, exist_ok=True)
    for case in cases:
        key = case_key(case)
        case["reference_cache"] = {
            c["name"]: str(folder / f"{key}-{c['name']}.npy") for c in case["containers"] if c["output"]
        }


def baseline_timing_file(library: str | Path, case: Case, threads: int) -> str:
    """Where a baseline's timing at a bench case is kept for the node's next candidates (next to its library).

    The baseline's folder is keyed like the native reference's (node, implementation, DaCe
    version, compiler), so the file holds that very program's samples: the node's first
    candidate times the baseline interleaved with itself, the next ones reuse its samples.
    """
    return str(Path(library).with_name(f"timing-{case_key(case)}-{threads}threads.json"))


def native_timing_file(case: Case, threads: int) -> str | None:
    """Where the native reference's timing at a bench case is kept for the node's next candidates.

    A slow native (:data:`dace_ai.sandbox.child.reuse.REUSE_NATIVE_SECONDS` per call or more) is
    timed by the first candidate only: its samples are keyed like its outputs, plus
    the thread count.
    """
    files = list((case.get("reference_cache") or {}).values())
    if not files:
        return None
    return str(Path(files[0]).with_name(f"{case_key(case)}-timing-{threads}threads.json"))
