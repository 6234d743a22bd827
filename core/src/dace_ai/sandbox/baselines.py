"""What a candidate is timed against: every implementation of its node that runs on this machine.

A speedup over DaCe's ``pure`` loop nest (61x for a Gemm) tells a user little: their
alternative is DaCe's own library implementations (``OpenBLAS``, ``MKL``, ``cuBLAS``
for BLAS nodes) or NumPy. So a node's *baselines* are

* its native expansion (the reference the verify stage uses, usually ``pure``);
* every other implementation DaCe registers for the node's class whose environments
  are installed here (DaCe's own ``is_installed()`` or header/library detection, see
  :mod:`dace_ai.environments.installed`) and that suits the target (no GPU library
  for CPU code, no FPGA or MPI expansions);
* for tasks that have one, a NumPy/SciPy reference (``kind="numpy"``), timed by the
  runner that owns the task's inputs.

Each DaCe-implementation baseline is built once per node, exactly like the native
reference (:func:`dace_ai.sandbox.reference.build_native_reference`, same content-hashed
folder scheme), never loaded here: a child loads it by its C entry points and times it
on the same inputs as the candidate, interleaved, with the same threads. The
*strongest* baseline is the fastest one measured; speedups are reported against it
(KernelBench's convention) and against the native expansion, each naming its baseline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from dace_ai.checking.api import CheckRequest
from dace_ai.environments.installed import environment_infos
from dace_ai.sandbox.reference import _specializes, build_native_reference, implemented_node, reference_implementation

if TYPE_CHECKING:
    from dace_ai.sandbox.child.records import LibrarySpec
    from dace_ai.sandbox.reference import NativeReference

#: Implementation names never used as a baseline on a CPU target (devices, clusters, 'ai' itself).
_NOT_CPU = ("ai", "fpga", "pblas", "cuda", "gpu", "rocblas", "cublas", "cutensor", "cusolver", "cusparse")
#: At most this many DaCe implementations besides the native one are timed per node (bounded cost).
MAX_DACE_BASELINES = 3

#: Libraries behind DaCe environment classes, by class name (for labels such as "OpenBLAS (DaCe 'OpenBLAS')").
_LIBRARY_NAMES = {
    "OpenBLAS": "OpenBLAS",
    "IntelMKL": "MKL",
    "cuBLAS": "cuBLAS",
    "rocBLAS": "rocBLAS",
    "FFTW": "FFTW",
    "cuFFT": "cuFFT",
}


@dataclass(frozen=True)
class Baseline:
    """One implementation a candidate is timed against."""

    name: str  #: short key: the DaCe implementation name, or "numpy"
    label: str  #: how figures name it: "OpenBLAS (DaCe 'OpenBLAS')", "DaCe pure", "NumPy"
    kind: Literal["dace-implementation", "numpy"]
    implementation: str | None = None  #: DaCe implementation name (kind "dace-implementation")
    environments: tuple[str, ...] = ()  #: full class paths of the DaCe environments it links
    native: bool = False  #: the node's own native expansion (the verify stage's reference)
    function: str | None = None  #: "module:attribute" of the NumPy reference (kind "numpy")


@dataclass(frozen=True)
class Unavailable:
    """An implementation that is not a baseline here, and why (shown, never timed)."""

    name: str
    reason: str


@dataclass(frozen=True)
class NodeBaselines:
    """The baselines of one node: the ones to time and the ones left out with their reasons."""

    available: tuple[Baseline, ...]
    unavailable: tuple[Unavailable, ...] = ()

    @property
    def native(self) -> Baseline | None:
        return next((b for b in self.available if b.native), None)

    @property
    def others(self) -> tuple[Baseline, ...]:
        return tuple(b for b in self.available if not b.native)


def _label(implementation: str, environments: Sequence[str], native: bool) -> str:
    if native:
        return f"DaCe {implementation}"
    libraries = [_LIBRARY_NAMES.get(path.rsplit(".", 1)[-1], path.rsplit(".", 1)[-1]) for path in environments]
    if libraries:
        return f"{'+'.join(libraries)} (DaCe '{implementation}')"
    return f"DaCe '{implementation}'"


def _environment_paths(expansion: Any) -> tuple[str, ...]:
    paths = []
    for env in getattr(expansion, "environments", None) or ():
        path = env if isinstance(env, str) else getattr(env, "full_class_path", lambda: None)()
        if path:
            paths.append(str(path))
    return tuple(paths)


def _library_implementations(node_class: type) -> dict[str, Any]:
    """The implementations of the other node classes of ``node_class``'s library (``dace.libraries.blas.nodes``).

    A node that only specializes (MatMul) becomes one of them (Gemm, Gemv, BatchedMatMul),
    so their library implementations are its baselines; the first class (by name) that has
    an implementation of a name gives its expansion (environments). Native ones are skipped.
    """
    import importlib
    import inspect

    from dace.sdfg import nodes

    package = node_class.__module__.rsplit(".", 1)[0]
    try:
        module = importlib.import_module(package)
    except ImportError:
        return {}
    found: dict[str, Any] = {}
    for _name, cls in sorted(inspect.getmembers(module, inspect.isclass), key=lambda item: item[0]):
        if cls is node_class or not issubclass(cls, nodes.LibraryNode) or _specializes(cls):
            continue
        default = getattr(cls, "default_implementation", None)
        for name, expansion in (getattr(cls, "implementations", None) or {}).items():
            if name not in (default, "pure", "specialize") and name not in found:
                found[name] = expansion
    return found


def node_baselines(node: Any, target_kind: str = "cpu") -> NodeBaselines:
    """The baselines of library node ``node`` on this machine for a ``target_kind`` ("cpu"/"gpu") target."""
    implementations = dict(getattr(type(node), "implementations", None) or {})
    native = reference_implementation(node)
    if _specializes(type(node)):  # MatMul: the implementations of the nodes it becomes (Gemm's OpenBLAS, ...)
        implementations = {**_library_implementations(type(node)), **implementations}
    available: list[Baseline] = []
    unavailable: list[Unavailable] = []
    if native is not None:
        available.append(
            Baseline(
                native,
                _label(native, (), True),
                "dace-implementation",
                implementation=native,
                environments=_environment_paths(implementations.get(native)),
                native=True,
            )
        )
    infos = {info.name: info for info in environment_infos()}
    for name, expansion in sorted(implementations.items()):
        if name == native or name == "ai":
            continue
        if target_kind == "cpu" and any(word in name.lower() for word in _NOT_CPU):
            unavailable.append(Unavailable(name, f"not for {target_kind} code"))
            continue
        paths = _environment_paths(expansion)
        missing = [p for p in paths if p not in infos or not infos[p].available]
        if missing:
            reasons = "; ".join(
                f"{p.rsplit('.', 1)[-1]}: {infos[p].reason if p in infos else 'not registered'}" for p in missing
            )
            unavailable.append(Unavailable(name, f"environment not installed ({reasons})"))
            continue
        if target_kind == "cpu" and any(infos[p].gpu for p in paths):
            unavailable.append(Unavailable(name, "needs a GPU library"))
            continue
        if len(available) > MAX_DACE_BASELINES:
            unavailable.append(Unavailable(name, f"more than {MAX_DACE_BASELINES} implementations; not timed"))
            continue
        available.append(
            Baseline(name, _label(name, paths, False), "dace-implementation", implementation=name, environments=paths)
        )
    return NodeBaselines(tuple(available), tuple(unavailable))


def numpy_baseline(function: str, label: str = "NumPy") -> Baseline:
    """The NumPy/SciPy reference ``"module:attribute"`` of a task as a baseline."""
    return Baseline("numpy", label, "numpy", function=function)


def build_baseline(request: CheckRequest, baseline: Baseline) -> NativeReference:
    """Build a DaCe-implementation baseline of ``request``'s node once per node (a ``NativeReference``).

    Same folder scheme, lock and entry points as the native reference; raises what the
    build raises (the caller reports the baseline as not timed).
    """

    if baseline.kind != "dace-implementation" or baseline.implementation is None:
        raise ValueError(f"baseline {baseline.label!r} is not a DaCe implementation; nothing to build")
    return build_native_reference(request, implementation=baseline.implementation)


# ----------------------------------------------------------------------------- figures
@dataclass(frozen=True)
class Speedup:
    """A candidate's speedup over one baseline, named: ``1.12x vs OpenBLAS (DaCe 'OpenBLAS')``."""

    baseline: str  #: the baseline's label
    value: float  #: baseline time / candidate time (medians)
    baseline_seconds: float
    candidate_seconds: float

    def text(self) -> str:
        return f"{self.value:.2f}x vs {self.baseline}"


@dataclass(frozen=True)
class Comparison:
    """A candidate against all its baselines: the strongest one (fastest) and the native expansion."""

    candidate_seconds: float
    speedups: tuple[Speedup, ...] = field(default_factory=tuple)
    native_label: str | None = None

    @property
    def strongest(self) -> Speedup | None:
        """The speedup over the fastest baseline (the smallest speedup)."""
        return min(self.speedups, key=lambda s: s.baseline_seconds) if self.speedups else None

    @property
    def native(self) -> Speedup | None:
        return next((s for s in self.speedups if s.baseline == self.native_label), None)

    def text(self) -> str:
        """``0.83x vs NumPy (strongest); 61.0x vs DaCe pure``."""
        strongest = self.strongest
        if strongest is None:
            return "no baseline timed"
        return "; ".join([strongest.text() + " (strongest)"] + [s.text() for s in self.speedups if s is not strongest])

    def as_dict(self) -> dict[str, Any]:
        strongest, native = self.strongest, self.native
        return {
            "candidate_seconds": self.candidate_seconds,
            "baselines": {s.baseline: s.baseline_seconds for s in self.speedups},
            "strongest": strongest.baseline if strongest else None,
            "speedup_strongest": strongest.value if strongest else None,
            "native": self.native_label,
            "speedup_native": native.value if native else None,
        }


def compare_times(candidate: float, baselines: Mapping[str, float], native_label: str | None = None) -> Comparison:
    """A :class:`Comparison` from median seconds per call (baselines by label; non-positive ones dropped)."""
    speedups = tuple(
        Speedup(label, seconds / candidate, seconds, candidate)
        for label, seconds in baselines.items()
        if seconds and seconds > 0 and candidate > 0
    )
    return Comparison(candidate, speedups, native_label)


# ----------------------------------------------------------------------------- the bench stage's wiring
def bench_programs(
    request: CheckRequest, build: bool = True
) -> tuple[str | None, dict[str, LibrarySpec], list[Unavailable]]:
    """(native label, built baseline programs by label -> the sandbox child's program spec, baselines not
    timed and why).

    The one place the bench stage asks for baselines: every DaCe implementation of the
    node besides the native one that is installed here, built once per node. A baseline
    that does not build is left out with its reason (it says nothing about the candidate).
    """

    node = implemented_node(request.node)
    if node is None:
        return None, {}, []
    found = node_baselines(node, getattr(request.node.target, "kind", "cpu"))
    folders: dict[str, LibrarySpec] = {}
    left_out = list(found.unavailable)
    for baseline in found.others:
        if not build:
            left_out.append(Unavailable(baseline.name, "not timed: setting bench_baselines is off"))
            continue
        try:
            built = build_baseline(request, baseline)
        except Exception as exc:  # noqa: BLE001 - DaCe's own expansion failed to build here
            text = str(exc).strip().splitlines()
            left_out.append(
                Unavailable(
                    baseline.name, f"could not be built: {type(exc).__name__}: {text[-1] if text else ''}"[:300]
                )
            )
            continue
        folders[baseline.label] = built.spec()  # loaded by the sandbox child by its C entry points
    return (found.native.label if found.native else None), folders, left_out


def bench_comparison(
    candidate: float | None,
    native: float | None,
    baseline_seconds: Mapping[str, Sequence[float]],
    native_label: str | None,
) -> dict[str, Any]:
    """The bench figures' baseline part from the candidate's and the native reference's median seconds per call:
    medians by label, strongest, both speedups (the keys of :class:`~dace_ai.performance.records.BenchFigures`)."""
    import statistics

    if not candidate:
        return {}
    medians = {label: statistics.median(times) for label, times in baseline_seconds.items() if times}
    if native_label and native:
        medians = {native_label: native, **medians}
    figures = compare_times(candidate, medians, native_label).as_dict()
    figures.pop("candidate_seconds")  # the bench figures keep the per-run list under that key
    return figures
