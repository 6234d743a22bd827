"""What a candidate is compared with: the node's native expansion, or an AINode's ``reference=``.

*Native.* Every standard library node (MatMul, Gemm, Dot, Reduce, Transpose, ...) has
an implementation DaCe ships. The reference program is a copy of the node in a
program of its own, wired to the same containers (shapes, strides, offsets, subsets)
through the same memlets, expanded with that implementation (recursively, never
with ``'ai'``), and built by DaCe once per node under
``<build root>/ai-check/reference/<hash>``. It is never loaded here: the sandbox child
loads it by its C entry points.

*AINode.* ``AINode(reference=fn)`` / ``dace_ai.ai(..., reference=fn)`` take a NumPy
function of the node's named inputs. It is the user's own code, so it runs in the
user's process (on the inputs the child will generate, see
:func:`dace_ai.sandbox.child.inputs.case_inputs`); the node only stores a key into a
process-local registry (functions cannot be saved with an SDFG). Call convention:
positional inputs ``_in0, _in1, ...`` are passed in order, keyword inputs ``_a`` as
``a=``; parameters named like a symbol (``N``) receive its value. It returns one array
for one output, a tuple in output order, or a dict keyed by connector or keyword.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import inspect
import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dace_ai.checking.api import CheckRequest
from dace_ai.compat import compile_without_loading, debugprint_off, expand_with, init_symbols
from dace_ai.compat import native_implementation as native
from dace_ai.compilation.one_node import one_node_program
from dace_ai.context.per_node import PerNode
from dace_ai.context.types import NodeContext
from dace_ai.storage.files import ai_folder, atomic_write_json, lock_for
from dace_ai.targets.build_flags import build_command

if TYPE_CHECKING:
    from dace_ai.sandbox.child.records import LibrarySpec

#: Implementations never used as a reference (accelerators, vendor libraries that may be absent).
_UNSUITABLE = ("ai", "cuda", "cublas", "rocblas", "fpga", "gpu", "mkl", "pblas", "cutensor", "cusolver", "cusparse")

_references: dict[str, Callable[..., Any]] = {}
_counter = itertools.count(1)
_lock = threading.Lock()


# ----------------------------------------------------------------------------- AINode references
def register_reference(function: Callable[..., Any]) -> str:
    """Keep ``function`` for this process and return the key an AINode stores."""
    if not callable(function):
        raise TypeError(f"reference must be a callable (a NumPy function of the inputs), got {type(function).__name__}")
    name = getattr(function, "__qualname__", type(function).__name__)
    with _lock:
        for key, known in _references.items():
            if known is function:
                return key
        key = f"{name}#{next(_counter)}"
        _references[key] = function
    return key


def reference_function(key: str) -> Callable[..., Any] | None:
    """The function registered under ``key`` in this process, or None."""
    return _references.get(key)


def call_reference(
    function: Callable[..., Any], inputs: dict[str, Any], symbols: dict[str, Any], outputs: list[str]
) -> dict[str, Any]:
    """Call an AINode reference with the inputs' views; its results by output connector."""
    positional = [
        inputs[name]
        for name in sorted((n for n in inputs if n[3:].isdigit() and n.startswith("_in")), key=lambda n: int(n[3:]))
    ]
    keywords = {
        name[1:]: value for name, value in inputs.items() if not (name.startswith("_in") and name[3:].isdigit())
    }
    try:
        parameters = inspect.signature(function).parameters
        accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        keywords.update({k: v for k, v in symbols.items() if k in parameters and k not in keywords})
        if not accepts_any:
            keywords = {k: v for k, v in keywords.items() if k in parameters or not parameters}
    except (TypeError, ValueError):
        pass
    result = function(*positional, **keywords)
    if isinstance(result, dict):
        return {name: result[name] if name in result else result[name[1:]] for name in outputs}
    if len(outputs) == 1:
        return {outputs[0]: result}
    if not isinstance(result, (tuple, list)) or len(result) != len(outputs):
        raise ValueError(
            f"the reference returned {type(result).__name__}, expected {len(outputs)} arrays for {', '.join(outputs)}"
        )
    return dict(zip(outputs, result))


# ----------------------------------------------------------------------------- native references
def implemented_node(node_ctx: NodeContext) -> Any:
    """The library node the code implements: the node itself, or, when a generated tasklet is
    revised (refine), the library node it replaced (``live["reference_node"]``)."""
    live = node_ctx.live or {}
    return live.get("reference_node") or live.get("node")


def reference_implementation(node: Any) -> str | None:
    """The implementation the node's native reference is built from: DaCe's own implementation of ``node``
    that runs on this CPU without extra libraries, if any.

    The same preference as the native fallback (``pure`` first, then the class's or
    library's default), skipping accelerator and vendor-library expansions.
    """
    return native(node, exclude=_UNSUITABLE)


@dataclass(frozen=True)
class NativeReference:
    library: Path
    name: str  #: program name: entry points ``__dace_init_<name>`` etc.
    init: list[tuple[str, str]]  #: (symbol, ctypes type name) passed to ``__dace_init``
    args: list[tuple[str, str]]  #: (name, "array" or ctypes type name) passed to ``__program``
    implementation: str
    seconds: float  #: 0 when reused

    def spec(self) -> LibrarySpec:
        return {
            "kind": "program",
            "library": str(self.library),
            "name": self.name,
            "init": [list(a) for a in self.init],
            "args": [list(a) for a in self.args],
        }


def as_array(desc: Any) -> Any:
    """A non-transient host array for the reference's signature (scalars become one-element arrays)."""
    import dace

    if isinstance(desc, dace.data.Scalar):
        return dace.data.Array(desc.dtype, [1])
    return dace.data.Array(
        desc.dtype,
        list(desc.shape),
        strides=list(desc.strides),
        offset=list(desc.offset),
        total_size=desc.total_size,
        start_offset=desc.start_offset,
        alignment=desc.alignment,
    )


def reference_sdfg(request: CheckRequest, implementation: str | None = None) -> tuple[Any, str]:
    """(program holding a copy of the node wired like the original, implementation name).

    ``implementation`` defaults to the native one; another name (``'OpenBLAS'``) builds
    a baseline (:mod:`dace_ai.sandbox.baselines`) the same way.
    """

    node_ctx = request.node
    live_node, live_sdfg = implemented_node(node_ctx), (node_ctx.live or {}).get("sdfg")
    if live_node is None or live_sdfg is None:
        raise LookupError("the node is not available in this process")
    implementation = implementation or reference_implementation(live_node)
    if implementation is None:
        raise LookupError(f"{type(live_node).__name__} has no native implementation")
    own: str | None = implementation
    if implementation not in (getattr(type(live_node), "implementations", None) or {}):
        # a node that only specializes (MatMul -> Gemm, Gemv, ...): its own native expansion,
        # then the library implementation for the nodes it becomes (see _expand_natively)
        if not _specializes(type(live_node)):
            raise LookupError(f"{type(live_node).__name__} has no implementation {implementation!r}")
        own = reference_implementation(live_node)

    def place(state: Any) -> Any:
        node = copy.deepcopy(live_node)
        node.implementation = own
        state.add_node(node)
        return node

    sdfg = one_node_program("ai_reference", node_ctx, place, lambda conn: as_array(live_sdfg.arrays[conn.container]))
    return sdfg, implementation


def _specializes(node_class: type) -> bool:
    """True for a node class whose only implementations are its native one (and 'ai'): it becomes other nodes."""
    names = set(getattr(node_class, "implementations", None) or {}) - {"ai"}
    return len(names) <= 1


def _expand_natively(sdfg: Any, top: str | None = None, nested: bool = False) -> None:
    """Expand every library node with a native implementation, nested ones too (never 'ai').

    ``top``: the implementation of the program's own node (a baseline's library expansion);
    with ``nested``, also of every node it becomes that has one of that name (a MatMul's
    Gemm, for a baseline of a node that only specializes).
    """
    from dace.sdfg import nodes

    for _ in range(50):
        pending = [(parent, node) for node, parent in sdfg.all_nodes_recursive() if isinstance(node, nodes.LibraryNode)]
        if not pending:
            return
        for state, node in pending:
            own = top and (nested or state.sdfg is sdfg) and top in (getattr(type(node), "implementations", None) or {})
            choice = top if own else reference_implementation(node)
            if choice is None:
                raise LookupError(f"{type(node).__name__} (inside the reference) has no native implementation")
            expand_with(state.sdfg, state, node, choice)
    raise RuntimeError("library nodes kept expanding into library nodes")


def without_ids(value: Any) -> Any:
    """The SDFG's JSON without per-object ids (``guid``), so equal programs hash equal across runs."""
    if isinstance(value, dict):
        return {k: without_ids(v) for k, v in value.items() if k not in ("guid", "cfg_list_id")}
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    return value


def _ctype_name(dtype: Any) -> str:
    return dtype.as_ctypes().__name__


def build_native_reference(request: CheckRequest, implementation: str | None = None) -> NativeReference:
    """The node's native program, built once per node (content-hashed folder, cross-process lock).

    ``implementation`` names another of DaCe's implementations of the node (a baseline,
    see :mod:`dace_ai.sandbox.baselines`); its program is built and cached the same way.
    """
    import time

    import dace

    known = _BUILT(request.node)
    reuse = (implementation, str(ai_folder("ai-check")), json.dumps(build_command(request.node.target)))
    found = known.get(reuse)
    if found is not None and found.library.is_file():  # this node's program, found before under this build root
        return found
    baseline = implementation is not None  # another of DaCe's implementations: nested nodes take it too
    sdfg, implementation = reference_sdfg(request, implementation)
    key = json.dumps(
        ["spec 2", without_ids(sdfg.to_json()), implementation, dace.__version__, build_command(request.node.target)],
        sort_keys=True,
        default=str,
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    folder = ai_folder("ai-check") / "reference" / digest
    sdfg.name = f"ai_reference_{digest[:8]}"
    spec_file = folder / "reference.json"
    start = time.perf_counter()
    with lock_for(folder):
        if spec_file.is_file():
            spec = json.loads(spec_file.read_text())
            if Path(spec["library"]).is_absolute() and Path(spec["library"]).is_file():
                known[reuse] = NativeReference(
                    Path(spec["library"]),
                    spec["name"],
                    [(symbol, ctype) for symbol, ctype in spec["init"]],
                    [(arg, kind) for arg, kind in spec["args"]],
                    implementation,
                    0.0,
                )
                return known[reuse]
        _expand_natively(sdfg, top=implementation, nested=baseline)
        sdfg.build_folder = str(folder / "program")
        with debugprint_off():
            # Absolute: the spec is read from other working directories (other processes, the sandbox child).
            library = Path(compile_without_loading(sdfg)).resolve()
        spec = program_spec(sdfg, library)

        atomic_write_json(spec_file, spec)
    built = NativeReference(
        Path(library),
        spec["name"],
        [(symbol, ctype) for symbol, ctype in spec["init"]],
        [(arg, kind) for arg, kind in spec["args"]],
        implementation,
        time.perf_counter() - start,
    )
    known[reuse] = dataclasses.replace(built, seconds=0.0)
    return built


#: The native programs each node context was given (by implementation, build root and build command): a node's
#: next candidates skip rebuilding its program text and hashing it.
_BUILT: PerNode[dict[tuple[str | None, str, str], NativeReference]] = PerNode(lambda node: {})


def program_spec(sdfg: Any, library: str | Path) -> LibrarySpec:
    """How the sandbox child calls a program DaCe built: its entry points' name and arguments.

    ``init``: what ``__dace_init_<name>`` receives (:func:`dace_ai.compat.init_symbols`,
    with ctypes type names); ``args``: what ``__program_<name>`` receives after the
    state, ``"array"`` for a pointer. ``kind: program`` tells the child it is not an
    entry-point library of the one compile.
    """
    import dace

    arglist = sdfg.arglist()
    names = sdfg.signature_arglist(with_types=False, arglist=arglist)
    args = [
        (n, "array" if isinstance(arglist[n], dace.data.Array) else _ctype_name(arglist[n].dtype))
        for n in names
        if n not in sdfg.constants
    ]
    init = [(n, _ctype_name(sdfg.symbols[n])) for n in init_symbols(sdfg)]
    name = Path(library).stem.removeprefix("lib")  # the built program's name (entry points)
    return {
        "kind": "program",
        "library": str(library),
        "name": name,
        "init": [list(a) for a in init],
        "args": [list(a) for a in args],
    }


def reference_kind(request: CheckRequest) -> tuple[str | None, Any]:
    """("native", None), ("function", fn), or (None, reason) for the node of ``request``."""

    node = implemented_node(request.node)
    if node is None:
        return None, "the node is not available in this process"
    key = getattr(node, "reference", None)
    if isinstance(key, str) and key:
        function = reference_function(key)
        if function is None:
            return None, f"reference function {key.split('#')[0]!r} is not registered in this process"
        return "function", function
    if reference_implementation(node) is not None:
        return "native", None
    return None, "no reference"
