"""Time a candidate against the node's native expansion, side by side, in a child process.

Two programs are built with DaCe (never loaded here): one holding only the
candidate tasklet, one holding a copy of the library node expanded with its
native implementation, both wired to the same containers, memlets and symbols
as the node in the user's SDFG. A child process
(:mod:`dace_ai.checking.timing_child`, CPU-time, wall-time and memory limits)
loads both, runs them on the same random inputs for two seeds, compares their
outputs, watches the bytes around every buffer, and times them interleaved
(warm-up, repeated samples, batches long enough for the timer's resolution).

The child takes a machine-wide lock around its timed runs, so two benches never
share the cores (building, loading and the correctness runs proceed in parallel).
The child needs only numpy and ctypes: the parent describes how to call each
library (:func:`dace_ai.compat.program_layout`), so no child imports DaCe.
The native program only depends on the node, so it is built once per node and
reused by every candidate.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import re
import resource
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dace_ai.checking.api import CheckRequest

CHILD = Path(__file__).with_name("timing_child.py")
#: Default working-set target per container when sizes are not given (elements).
DEFAULT_ELEMENTS = 2 ** 16


class TimingUnavailable(Exception):
    """The programs could not be built or run for reasons that are not the candidate's fault."""


@dataclass(frozen=True)
class Limits:
    """Limits of the child process that runs generated code."""

    wall_seconds: float = 120.0
    cpu_seconds: float = 240.0
    memory_bytes: int = 16 * 2 ** 30

    @classmethod
    def from_settings(cls, settings: Any) -> Limits:
        """The sandbox settings (``sandbox_cpu_seconds``, ``sandbox_wall_seconds``, ``sandbox_memory_mb``)."""
        from dace_ai.checking.sandbox import SandboxLimits

        own = SandboxLimits.from_settings(settings)
        return cls(wall_seconds=own.wall_seconds, cpu_seconds=own.cpu_seconds, memory_bytes=own.memory_bytes)


def parse_sizes(text: str | None) -> dict[str, int]:
    """``"N=4096, M=512"`` -> ``{"N": 4096, "M": 512}`` (the ``bench_sizes`` setting)."""
    sizes: dict[str, int] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip().isidentifier() or not value.strip().isdigit():
            raise ValueError(f"bench sizes: {part.strip()!r} is not SYMBOL=INTEGER")
        sizes[name.strip()] = int(value)
    return sizes


def default_sizes(sdfg: Any, given: dict[str, int]) -> dict[str, int]:
    """A value for every free symbol: ``given`` first, else about 2**16 elements per container."""
    values = dict(given)
    ranks: dict[str, int] = {}
    for desc in sdfg.arrays.values():
        rank = len(desc.shape)
        for dim in desc.shape:
            for sym in getattr(dim, "free_symbols", ()):
                ranks[str(sym)] = max(ranks.get(str(sym), 0), rank)
    for name in sorted(set(map(str, sdfg.free_symbols)) | set(sdfg.symbols)):
        if name in values:
            continue
        rank = ranks.get(name)
        values[name] = round(DEFAULT_ELEMENTS ** (1 / rank)) if rank else 0
    return values


def connector_bytes(request: CheckRequest, program: Any, values: dict[str, int]) -> int | None:
    """Bytes one call must read and write through its connectors (their memlet volumes), or None.

    A tasklet inside a map sees a tile of its containers, so the containers' sizes
    would overstate what one call streams.
    """
    from dace import symbolic

    total = 0
    for conn in request.node.connectors:
        desc = program.arrays.get(conn.container)
        if desc is None:
            return None
        try:
            volume = symbolic.pystr_to_symbolic(conn.volume or "1")
            scope = {str(s): values.get(str(s), 0) for s in getattr(volume, "free_symbols", ())}
            total += int(symbolic.evaluate(volume, scope)) * desc.dtype.bytes
        except Exception:  # noqa: BLE001 - an unknown volume: the bandwidth rule is not applied
            return None
    return total


def _open_arrays(sdfg: Any) -> None:
    """Every container becomes an argument of the program (the child passes all data).

    A scalar becomes a one-element array: DaCe passes non-transient scalars by value, so
    a scalar output would be written nowhere and its computation optimised away.
    """
    import dace

    for name, desc in list(sdfg.arrays.items()):
        if isinstance(desc, dace.data.Scalar):
            sdfg.remove_data(name, validate=False)
            sdfg.add_datadesc(name, dace.data.Array(desc.dtype, [1]))
        else:
            desc.transient = False


def candidate_program(request: CheckRequest) -> Any:
    """The program holding only the candidate tasklet (see :func:`dace_ai.checking.host.standalone_sdfg`)."""
    from dace_ai.checking.host import standalone_sdfg

    sdfg = standalone_sdfg(request)
    sdfg.name = "ai_bench_candidate_" + re.sub(r"\W", "_", request.node.name or "node")
    _open_arrays(sdfg)
    return sdfg


def native_program(candidate: Any, request: CheckRequest) -> Any | None:
    """The same program with a copy of the library node, expanded natively; None without a native one."""
    from dace.sdfg import nodes

    from dace_ai import compat
    from dace_ai.checking.reference import implemented_node, native_implementation

    live_node = implemented_node(request.node)
    if live_node is None:
        return None
    implementation = native_implementation(live_node)
    if implementation is None:
        return None
    sdfg = copy.deepcopy(candidate)
    sdfg.name = "ai_bench_native_" + re.sub(r"\W", "_", request.node.name or "node")
    state = sdfg.start_state
    [tasklet] = [n for n in state.nodes() if isinstance(n, nodes.Tasklet)]
    library_node = copy.deepcopy(live_node)
    library_node.implementation = implementation
    compat.replace_node(state, tasklet, library_node)
    return sdfg


def _build(sdfg: Any, folder: Path) -> None:
    from dace_ai.compat import build_in_folder

    sdfg.build_folder = str(folder)
    build_in_folder(sdfg)


def _built(folder: Path) -> bool:
    return (folder / "program.sdfg").is_file() and any((folder / "build").glob("lib*"))


def _native_folder(request: CheckRequest) -> Path:
    from dace_ai.storage.files import ai_folder

    node = request.node
    key = json.dumps([node.sdfg_name, node.key, node.node_type, list(node.target.flags),
                      [(c.name, c.ctype, c.container, c.subset, c.container_shape) for c in node.connectors]])
    return ai_folder("ai-check") / "native" / hashlib.sha256(key.encode()).hexdigest()[:20]


def build_programs(request: CheckRequest) -> tuple[Any, Path, Path | None]:
    """Build the candidate's program (in the check's workdir) and the native one (shared per node)."""
    from dace_ai.storage.files import lock_for

    candidate = candidate_program(request)
    candidate_folder = Path(request.workdir) / "bench-candidate"
    if not _built(candidate_folder):  # the workdir is keyed by node, target and answer
        _build(candidate, candidate_folder)
    native = native_program(candidate, request)
    if native is None:
        return candidate, candidate_folder, None
    folder = _native_folder(request)
    with lock_for(folder):
        if not _built(folder):
            try:
                _build(native, folder)
            except Exception as exc:
                raise TimingUnavailable(f"the native expansion could not be built: {type(exc).__name__}: "
                                        f"{str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}") from exc
    return candidate, candidate_folder, folder


def _limit(limits: Limits) -> Any:
    def apply() -> None:  # runs in the child before exec
        cpu = math.ceil(limits.cpu_seconds)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def run_side_by_side(request: CheckRequest, *, sizes: dict[str, int] | None = None, repeats: int = 7,
                     seeds: tuple[int, ...] = (1, 2), limits: Limits | None = None,
                     outputs_only: tuple[str, ...] | None = None,
                     baselines: dict[str, Path] | None = None) -> dict[str, Any]:
    """Build, then run candidate and native in the child; the child's findings as a dict.

    Keys: ``status`` (``ok``, ``crashed``, ``timeout``, ``error``), ``native`` and
    ``candidate`` (per-run seconds), ``mismatch``, ``input_independent``,
    ``inputs_modified``, ``writes_outside``, ``reads_outside``, ``bytes``,
    ``bandwidth`` (bytes/s at this working set), ``sizes``, ``batch``.
    Raises :class:`TimingUnavailable` when the native side cannot be built.
    ``baselines``: more built programs (label -> folder, see :mod:`dace_ai.checking.baselines`)
    timed interleaved with both sides; their per-run seconds come back under their labels.
    """
    from dace_ai.compat import program_layout
    from dace_ai.storage.files import ai_folder

    limits = limits or Limits.from_settings(request.settings)
    program, candidate_folder, native_folder = build_programs(request)
    values = default_sizes(program, sizes or {})
    spec = {
        "candidate": program_layout(str(candidate_folder), values),
        "native": program_layout(str(native_folder), values) if native_folder else None,
        "repeats": repeats, "seeds": list(seeds), "lock": str(ai_folder("ai-check") / "bench.lock"),
        "bytes": connector_bytes(request, program, values),
        "outputs": [c.container for c in request.node.outputs],
        "inputs": [c.container for c in request.node.inputs],
        "baselines": {label: program_layout(str(folder), values) for label, folder in (baselines or {}).items()},
    }
    result_path = Path(request.workdir) / f"bench-result-{os.getpid()}-{threading.get_ident()}.json"
    spec_path = result_path.with_name(result_path.name.replace("result", "spec"))
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    result_path.unlink(missing_ok=True)
    Path(str(result_path) + ".phase").unlink(missing_ok=True)
    from dace_ai.checking.sandbox import launch

    command = [sys.executable, "-I", str(CHILD), str(spec_path), str(result_path)]
    proc = launch(command, cwd=Path(request.workdir), wall_seconds=limits.wall_seconds, preexec_fn=_limit(limits))
    output = proc.output.decode(errors="replace")
    if proc.timed_out:
        return {"status": "timeout", "detail": f"the run did not finish within {limits.wall_seconds:.0f} s "
                                               "(an endless loop?)", "sizes": values}
    if result_path.is_file():
        result = json.loads(result_path.read_text(encoding="utf-8"))
        result["sizes"] = values
        return result
    phase_file = Path(str(result_path) + ".phase")
    phase = phase_file.read_text(encoding="utf-8") if phase_file.is_file() else "loading"
    side = {"native": "the native expansion", "candidate": "the candidate"}.get(phase, f"the child ({phase})")
    if proc.returncode < 0:
        import signal

        name = signal.Signals(-proc.returncode).name
        return {"status": "crashed", "signal": name, "sizes": values, "phase": phase,
                "detail": f"{side} crashed with {name} while running", "stderr": output[-2000:]}
    tail = output.strip().splitlines()[-5:]
    return {"status": "crashed" if proc.returncode else "error", "sizes": values, "phase": phase,
            "detail": f"{side} ended the timing run with exit status {proc.returncode}: " + " / ".join(tail)}
