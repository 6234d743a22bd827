"""What crosses the process boundary, as TypedDicts: the job the parent writes, the result the child writes back.

Defined here, once: the child imports nothing of dace_ai (it runs under ``python -I``), and
the parents (:mod:`dace_ai.sandbox.harness`, :mod:`dace_ai.evaluation.task_run`) import
them from here (``from dace_ai.sandbox.child.records import SandboxJob``). Standard library only.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Connector(TypedDict):
    """How one connector sees its container: element offset, shape and strides in elements."""

    name: str
    container: str
    direction: str  #: "in" or "out"
    offset: int
    shape: list[int]
    strides: list[int]
    wcr: Any  #: the write-conflict resolution of an accumulating output, or None


class Container(TypedDict):
    """One data container of the node: flat element count and NumPy dtype string."""

    name: str
    dtype: str
    input: bool
    output: bool
    elements: int


class Case(TypedDict, total=False):
    """One call of the candidate: its sizes, seed, containers and connectors, and how its inputs are drawn."""

    id: int | str
    seed: int
    sizes: dict[str, int]
    values: dict[str, int]  #: sizes and the enclosing maps' parameters
    containers: list[Container]
    connectors: list[Connector]
    rtol: dict[str, float]  #: per output connector
    rung: str
    point: dict[str, int]
    point_words: str
    threads: list[int]  #: thread counts of its runs (OpenMP code)
    distribution: str  #: see :data:`DISTRIBUTIONS`
    magnitude: float
    group: str
    unfit: str  #: why the reference is not defined at these inputs
    again: Case  #: other inputs for a second call on the same buffers
    repeat: int  #: calls more on the same inputs before one judged call with the outputs poisoned again
    elsewhere: bool  #: one more call on the same inputs with the process made another place (``elsewhere.py``)
    concurrent: list[Case]  #: one case per thread, called at the same time on one state (same sizes, other seeds)
    concurrent_repeats: int  #: calls each thread makes at least (more when a call is short)
    concurrent_team: bool  #: the code calls OpenMP: the calls at once are made by an OpenMP team (``at_once.py``)
    in_place: list[Case]  #: the same buffers called again after each of these inputs' changes in place
    changes: list[Change]  #: changes made to the drawn inputs, in order (a case of ``in_place``)
    expected: dict[str, str]  #: files of a reference function's outputs
    inputs: dict[str, str]  #: files of the initial data
    reference_cache: dict[str, str]  #: files of the native reference's outputs
    judge: Any


class Change(TypedDict, total=False):
    """One change of inputs in place: ``element`` (one element of ``container`` moved by ``by``), ``shift``
    (every element of every input plus ``by``) or ``scale`` (times ``by``)."""

    kind: str
    container: str
    connector: str
    element: int  #: flat index in the container
    index: list[int]  #: the same element in the connector's view
    by: float


class Problem(TypedDict, total=False):
    """What went wrong in a case, as data: the parent words it for the model.

    ``kind``: ``unwritten``, ``read_before_write``, ``read_outside``, ``mismatch``,
    ``outside_subset``, ``outside_buffer``, ``late_write``, ``stale``, ``repeated``, ``elsewhere``,
    ``nondeterministic``, ``concurrent`` (wrong only when calls overlap) or ``kept`` (wrong after inputs
    changed in place).
    """

    kind: str
    calls: int  #: for ``repeated``: the calls on the same inputs up to the wrong one
    connector: str  #: the output connector (element problems)
    container: str  #: the container (problems outside the connectors' data)
    index: list[int]  #: the first wrong element, in the connector's shape
    element: int  #: the first wrong element, in the flat container
    count: int
    elements: int
    expected: Any
    got: Any
    max_error: float | str
    rtol: float
    not_finite: int
    scale: float
    who: str
    side: str  #: "before" or "after" the buffer
    input: bool
    threads: Any
    runs: int
    single_ok: bool
    was: str  #: the kind it had before it was found to be stale, repeated or nondeterministic
    again: bool
    changed: list[str]  #: for ``elsewhere``: what was changed about the process for the call
    first_seed: int
    seed: int
    wrong_calls: int  #: for ``concurrent``: how many of the ``calls`` were wrong
    change: Change  #: for ``kept``: the change of the inputs before the wrong call
    value: Any  #: for ``kept`` of an ``element`` change: the element's new value
    unchanged: bool  #: for ``kept``: the outputs were bit for bit what the call before had left


class CaseRecord(TypedDict, total=False):
    """The child's record of one case, in the order of the job's cases."""

    seed: int
    sizes: dict[str, int]
    skipped: str
    problem: Problem
    call_seconds: list[float]
    candidate_seconds: list[float]
    reference_seconds: list[float]
    reads_outside: list[str]
    bench: bool
    outputs: dict[str, Any]  #: inside the child only (removed before the record is written)
    returned: dict[str, Any]  #: inside the child only


class LibrarySpec(TypedDict, total=False):
    """A shared library the child loads: the candidate's entry points or a program DaCe built.

    The candidate (``kind`` absent): ``symbols``, ``params`` and ``connectors`` name the
    values and pointers its entry point takes, in order. A program (``kind="program"``):
    ``name`` of its ``__dace_init_<name>``/``__program_<name>``/``__dace_exit_<name>``,
    ``init`` and ``args`` its arguments as ``[name, ctypes type or "array"]``.
    """

    kind: str
    library: str
    symbols: list[str]
    params: list[str]
    connectors: list[str]
    name: str
    init: list[list[str]]
    args: list[list[str]]


class BaselineSpec(TypedDict, total=False):
    """One more side of the bench timing: a DaCe library implementation or a task's NumPy reference.

    ``kind="program"``: ``program`` (a :class:`LibrarySpec`); ``kind="python"``: ``function``
    (``"module:function"`` of the suite's own module), ``arrays`` (name -> shape) and
    ``scalars``. ``timing``: the file of its samples, reused by the node's next candidate.
    """

    label: str
    kind: str
    program: LibrarySpec
    function: str
    arrays: dict[str, list[int]]
    scalars: dict[str, Any]
    timing: str | None


class BenchJob(TypedDict, total=False):
    """The job's bench section: its cases at the bench sizes and how to time them."""

    cases: list[Case]
    time: bool  #: time the candidate against the native reference and the baselines (else only the run rules)
    repeats: int  #: interleaved samples per side (fewer for slow sides, at least 3)
    lock: str | None  #: the machine-wide lock file around the timed runs
    bytes: int | None  #: bytes one call streams (the bandwidth rule)
    baselines: list[BaselineSpec]
    #: the file of the native reference's samples, reused by the node's next candidate (None: its
    #: outputs are not cached, so neither are its samples)
    native_timing: str | None


class Limits(TypedDict, total=False):
    """What the child limits itself to before it loads anything."""

    cpu_seconds: float
    memory_bytes: int


class SandboxJob(TypedDict, total=False):
    """The JSON job the parent writes for one child run (see :func:`dace_ai_child.job.run_job`)."""

    mode: str  #: "verify" or "time"
    repeats: int  #: samples per side of the ``time`` mode
    warmup: int  #: calls before the ``time`` mode's samples
    threads: int
    candidate: LibrarySpec
    reference: LibrarySpec | None
    cases: list[Case]
    bench: BenchJob | None
    save_outputs: str
    phase_file: str
    fault_file: str
    result_file: str
    limits: Limits


class Timed(TypedDict):
    """Per-call seconds of each side of one timing (:func:`dace_ai_child.timing.time_calls`)."""

    samples: dict[str, list[float]]  #: per side, one figure per sample
    batch: dict[str, int]  #: per side, the calls of each sample
    timer_resolution: float


class BenchResult(TypedDict, total=False):
    """The bench section's figures: what the run rules of :mod:`dace_ai.sandbox.deception` read, and the timing."""

    bytes: int | None
    reads_outside: list[str]  #: output containers holding the poison read from outside a buffer
    call_seconds: list[float]  #: the first bench case's first call
    input_independent: bool  #: the same outputs for inputs whose references differ
    candidate: list[float]
    native: list[float] | None
    native_reused: bool  #: the native samples come from an earlier candidate of the node
    batch: dict[str, int]
    timer_resolution: float
    baselines: dict[str, list[float]]
    baselines_reused: list[str]
    bandwidth: float  #: bytes per second NumPy streams here
    seconds: float  #: the bench section's own wall time
    after_timing: Problem  #: what one more call after the timed ones got wrong (poisoned outputs, new call)
    timed_call: Problem  #: what the outputs of one timed sample, chosen at random, got wrong


class ThreadsInfo(TypedDict):
    """The all-core thread count of the child and the OpenMP runtime it found (None: no OpenMP loaded)."""

    count: int
    runtime: str | None


class ChildResult(TypedDict, total=False):
    """What the child writes back: the case records, the bench section's figures, or an error."""

    mode: str
    cases: list[CaseRecord]
    bench: BenchResult | None
    threads: ThreadsInfo
    error: str
    message: str
