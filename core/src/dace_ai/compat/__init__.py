"""Everything that touches DaCe internals, in one package (DaCe 1.0.x and 2.0).

Other modules call these functions instead of reaching into DaCe internals, so
support for another DaCe version means changing this package only. What is the
same on every supported version lives here; what differs lives in one module per
major version (:mod:`~dace_ai.compat.dace1`, :mod:`~dace_ai.compat.dace2`),
chosen once, at import, from ``dace.__version__``.

May import ``errors`` and ``state`` only: every other package builds on it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

import dace
from dace.config import Config

DACE_VERSION = dace.__version__
#: DaCe's major version (1 or 2), which picks the version module below.
DACE_MAJOR = int(DACE_VERSION.split(".", 1)[0])


class DaceVersionModule(Protocol):
    """What each version module provides: :mod:`~dace_ai.compat.dace1` and :mod:`~dace_ai.compat.dace2` are
    checked against it, so the rest of the package can rely on either."""

    HAS_BUILTIN_AI: bool

    def config_store(self) -> tuple[dict[str, Any], dict[str, Any]]: ...
    def config_snapshot(self) -> Any: ...
    def use_config(self, snapshot: Any) -> None: ...
    def cpp_standard_flags(self) -> list[str]: ...
    def host_cpu_args(self) -> str: ...
    def patch_expand_spellings(self) -> None: ...
    def builtin_library(self) -> Any: ...
    def builtin_node_class(self) -> type[Any] | None: ...
    def route_reserved_implementation(self, expansion_for: Any) -> None: ...
    def replace_library_functions(self, functions: dict[str, Any]) -> None: ...
    def replaced(self) -> list[str]: ...
    def serialize_by_class_path(self, type_name: str) -> None: ...


def _version_module() -> DaceVersionModule:
    """The module for the installed DaCe; only that one is imported (the other may not import at all)."""
    if DACE_MAJOR >= 2:
        from dace_ai.compat import dace2

        return dace2
    from dace_ai.compat import dace1

    return dace1


version = _version_module()

#: True when DaCe ships its own AI library (``dace.libraries.ai``, DaCe 2.0 on).
HAS_BUILTIN_AI: bool = version.HAS_BUILTIN_AI
patch_expand_spellings = version.patch_expand_spellings
cpp_standard_flags = version.cpp_standard_flags
host_cpu_args = version.host_cpu_args
#: Worker threads adopt the caller's DaCe configuration (``ThreadPoolExecutor(initializer=use_config,
#: initargs=(config_snapshot(),))``): DaCe 2.0 keeps it per thread.
config_snapshot = version.config_snapshot
use_config = version.use_config
builtin_library = version.builtin_library
builtin_node_class = version.builtin_node_class
route_reserved_implementation = version.route_reserved_implementation
replace_library_functions = version.replace_library_functions
replaced = version.replaced
serialize_by_class_path = version.serialize_by_class_path


def register_ai_config(definitions: Any) -> None:
    """Register keys of the ``ai`` category in DaCe's config schema so ``dace.Config.get('ai', key)`` works.

    ``definitions`` are settings definitions (objects with ``key``, ``dace_type``,
    ``default``, ``description``). Called again with more definitions (plugin-owned
    settings, once plugins load) it adds the new keys and keeps the existing ones and
    any value already set (from ``.dace.conf`` or ``Config.set``).
    """
    metadata, values = version.config_store()
    required = metadata.setdefault("required", {})
    category = required.setdefault(
        "ai",
        {
            "type": "dict",
            "title": "AI implementations (dace-ai)",
            "description": "Settings of dace-ai; see `dace-ai config`.",
            "required": {},
        },
    )
    for d in definitions:
        category["required"].setdefault(
            d.key,
            {
                "type": d.dace_type,
                "default": "" if d.default is None else d.default,
                "title": d.key,
                "description": d.description,
            },
        )
    current = values.setdefault("ai", {})
    for key, entry in category["required"].items():
        current.setdefault(key, entry["default"])


def adopt_ai_defaults(definitions: Any) -> None:
    """Make dace-ai's defaults those of ``ai`` keys DaCe defines too (DaCe 2, when dace-ai implements them).

    Only values still at DaCe's default change, so one set in ``.dace.conf``, a
    ``DACE_ai_*`` variable or ``Config.set`` keeps its meaning; afterwards setting a key to
    what DaCe's default was (``provider = "anthropic"``) counts as a choice.
    """
    metadata, values = version.config_store()
    entries = metadata.get("required", {}).get("ai", {}).get("required", {})
    current = values.setdefault("ai", {})
    for d in definitions:
        entry = entries.get(d.key)
        if entry is None:
            continue
        default = "" if d.default is None else d.default
        if current.get(d.key) == entry.get("default"):
            current[d.key] = default
        entry["default"] = default


def dace_config_overrides() -> dict[str, Any]:
    """Values of the ``ai`` category that differ from the registered defaults.

    Read directly (not via ``Config.get``) because DaCe's getter would also return
    ``DACE_ai_*`` environment variables, which are a separate, higher source.
    """
    metadata, values = version.config_store()
    category = metadata.get("required", {}).get("ai")
    if category is None:  # registered by ``import dace_ai``; nothing can be set before that
        return {}
    schema = category["required"]
    current = values.get("ai", {})
    return {k: v for k, v in current.items() if k in schema and v != schema[k]["default"]}


def build_folder_root() -> str:
    """DaCe's build-folder root (``.dacecache`` by default)."""
    return Config.get("default_build_folder")


# --------------------------------------------------------------------------------------------
# The reserved 'ai' implementation and expansion hooks.
# --------------------------------------------------------------------------------------------


def library_node_base() -> type[Any]:
    """DaCe's library node base class."""
    from dace.sdfg.nodes import LibraryNode

    return LibraryNode


def library_node_classes() -> list[type[Any]]:
    """Every library node class defined so far (all subclasses, recursively)."""
    base = library_node_base()
    seen: list[type[Any]] = []
    stack: list[type[Any]] = list(base.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls not in seen:
            seen.append(cls)
            stack.extend(cls.__subclasses__())
    return seen


def make_expansion_class(name: str, base: type[Any], node_class: type[Any]) -> type[Any]:
    """A per-node-class expansion class (DaCe matches expansions by ``_match_node``, one class each)."""
    import dace.library

    cls = type(name, (base,), {"environments": [], "__module__": base.__module__})
    cls = dace.library.expansion(cls)
    cls._match_node = node_class  # what registering sets; DaCe 2's reserved 'ai' is never registered
    return cls


def own_implementations(node_class: type[Any]) -> dict[str, Any]:
    """The class's own implementations dict (a subclass without one would otherwise share its parent's)."""
    if "implementations" not in node_class.__dict__:
        node_class.implementations = dict(getattr(node_class, "implementations", {}) or {})
    return node_class.implementations


def register_node_implementation(node_class: type[Any], name: str, expansion: type[Any]) -> None:
    """``NodeClass.register_implementation`` (sets ``_match_node``); DaCe's module-level helper does not."""
    own_implementations(node_class)
    node_class.register_implementation(name, expansion)


_subclass_hooks: list[Callable[[type[Any]], object]] = []


def on_library_node_class(callback: Callable[[type[Any]], object]) -> None:
    """Call ``callback(cls)`` for every existing library node class and for every one defined later.

    Later classes are caught in ``LibraryNode.__init_subclass__``, which runs before
    ``@dace.library.node`` rebuilds the implementations dict; the decorator then
    re-registers what it finds, the callback's addition included.
    """
    base: Any = library_node_base()  # its ``__init_subclass__`` is replaced below
    if not _subclass_hooks:
        previous = base.__dict__.get("__init_subclass__")

        def __init_subclass__(cls: type, **kwargs: Any) -> None:  # noqa: N807
            if previous is not None:
                previous.__func__(cls, **kwargs)
            else:
                super(base, cls).__init_subclass__(**kwargs)
            for hook in list(_subclass_hooks):
                hook(cls)

        base.__init_subclass__ = classmethod(__init_subclass__)
    _subclass_hooks.append(callback)
    for cls in library_node_classes():
        callback(cls)


def is_unregistered_library_node(node_class: type[Any]) -> bool:
    from dace.sdfg.nodes import UnregisteredLibraryNode

    return issubclass(node_class, UnregisteredLibraryNode)


_pass_hooks: list[Any] = []


def wrap_expand_library_nodes(context_manager: Any) -> None:
    """Run every (outermost) ``SDFG.expand_library_nodes`` inside ``context_manager()``.

    dace-ai uses this to collect the context of an SDFG once per expansion pass
    rather than once per node.
    """
    if _pass_hooks:
        return
    from dace.sdfg.sdfg import SDFG

    original = SDFG.expand_library_nodes

    def expand_library_nodes(self: Any, *args: Any, **kwargs: Any) -> Any:
        with context_manager():
            return original(self, *args, **kwargs)

    expand_library_nodes.__doc__ = original.__doc__
    expand_library_nodes.__wrapped__ = original  # type: ignore[attr-defined]  # functools' convention, not a declared attribute
    SDFG.expand_library_nodes = expand_library_nodes
    _pass_hooks.append(context_manager)


def replace_node(state: Any, old: Any, new: Any) -> None:
    """Put ``new`` where ``old`` is: same edges (connectors kept), then remove ``old``."""
    from dace.sdfg import utils as sdutil

    state.add_node(new)
    sdutil.change_edge_dest(state, old, new)
    sdutil.change_edge_src(state, old, new)
    state.remove_node(old)


def restore_node_order(state: Any, order: list[Any]) -> None:
    """Put the nodes of ``state`` back in ``order`` (nodes not in it last): DaCe numbers nodes by position,
    and node ids name sessions, so a node put back after a failed run keeps its id."""
    nodes = state._nodes  # an OrderedDict in DaCe's ordered graphs
    listed = {id(n) for n in order}
    for node in [n for n in order if n in nodes] + [n for n in list(nodes) if id(n) not in listed]:
        nodes.move_to_end(node)


def register_frontend_call(func: Any, names: list[str]) -> None:
    """Make ``func`` the frontend replacement of each name (``@oprepo.replaces``)."""
    from dace.frontend.common import op_repository as oprepo

    for name in names:
        oprepo.Replacements._rep[name] = func


def syntax_error_class() -> type[Any]:
    """The frontend's syntax error (carries the call's file and line)."""
    from dace.frontend.python.common import DaceSyntaxError

    return DaceSyntaxError


def string_literal_class() -> type[Any]:
    from dace.frontend.python.common import StringLiteral

    return StringLiteral


# --------------------------------------------------------------------------- checks and builds
def dace_runtime_include() -> str:
    """The folder that holds ``dace/dace.h`` (DaCe's runtime headers)."""
    import os

    return os.path.join(os.path.dirname(os.path.abspath(dace.__file__)), "runtime", "include")


class debugprint_off:
    """Turn ``debugprint`` off for a block and restore it after.

    With ``debugprint`` on, DaCe 1.0.2 raises ``CompilationError('Compiler failure')``
    without the compiler's output, so diagnostics cannot be parsed.
    """

    def __enter__(self) -> "debugprint_off":
        import os

        # ``Config.get`` reads ``DACE_debugprint`` before the stored value, so both must go.
        self._env = os.environ.pop("DACE_debugprint", None)
        self._previous = version.config_store()[1].get("debugprint")
        Config.set("debugprint", value=False)
        return self

    def __exit__(self, *exc: object) -> None:
        import os

        Config.set("debugprint", value=self._previous)
        if self._env is not None:
            os.environ["DACE_debugprint"] = self._env


def compilation_error_types() -> tuple[type[Exception], type[Exception]]:
    """(CompilationError, CompilerConfigurationError) of this DaCe version."""
    from dace.codegen.exceptions import CompilationError, CompilerConfigurationError

    return CompilationError, CompilerConfigurationError


def compile_without_loading(sdfg: Any) -> str:
    """Build an SDFG's library in its build folder without loading it into this process; its path.

    Loading would run the generated code's static initialisers here; checks must not.
    ``SDFG.compile`` is not used: with DaCe's compiler cache on (``compiler.use_cache``)
    it loads a library already in the build folder, and on a code-generation error it
    writes ``_dacegraphs/failing.sdfgz`` into the current folder. These are its
    remaining steps (deep copy, scope connectors, code generation, CMake build). DaCe's
    code generation keeps global state, so it runs under a lock; the C++ compiler (the
    slow part) runs outside it, so several programs build at once.
    """
    import copy

    from dace.codegen import codegen, compiler

    with _CODEGEN_LOCK:
        generated = copy.deepcopy(sdfg)
        generated.build_folder = sdfg.build_folder
        generated.fill_scope_connectors()
        program_objects = codegen.generate_code(generated, validate=True)
        program_folder = compiler.generate_program_folder(generated, program_objects, sdfg.build_folder)
    return compiler.configure_and_compile(program_folder, generated.name)


_CODEGEN_LOCK = threading.Lock()


def init_symbols(sdfg: Any) -> list[str]:
    """The symbols ``__dace_init_<program>`` receives, in order: the root program's used symbols.

    A tasklet's ``code_init`` is emitted into that function (``code_exit`` into
    ``__dace_exit_<program>``, which receives only ``__state``), so these are the only
    symbols init code can use. Mirrors the frame code generator's
    ``sdfg.init_signature(free_symbols=sdfg.used_symbols(all_symbols=False))``.
    """
    root = sdfg
    while getattr(root, "parent_sdfg", None) is not None:
        root = root.parent_sdfg
    return [k for k in sorted(root.used_symbols(all_symbols=False)) if not k.startswith("__dace")]


def generated_code(sdfg: Any) -> tuple[Any, list[tuple[str, str]]]:
    """The SDFG copy code is generated from, and (path relative to the build folder, code with markers).

    Same steps as ``SDFG.compile`` (deep copy, scope connectors, code generation), so the
    lines match the files on disk, where the ``////__DACE:cfg:state:node`` markers are
    stripped with line numbers kept. Marker ids refer to the returned copy (library
    nodes expanded during code generation shift ids); nodes keep their ``guid``.
    """
    import copy
    import os

    from dace.codegen import codegen

    generated = copy.deepcopy(sdfg)
    generated.fill_scope_connectors()
    files = []
    for obj in codegen.generate_code(generated):
        folder = os.path.join("src", obj.target.target_name, *([obj.target_type] if obj.target_type else []))
        files.append((os.path.join(folder, f"{obj.name}.{obj.language}"), obj.code))
    return generated, files


def node_at_marker(sdfg: Any, cfg_id: int, state_id: int, node_id: int) -> tuple[Any, Any] | None:
    """(state, node) that a ``////__DACE:cfg:state:node`` marker names, or None."""
    try:
        state = sdfg.cfg_list[cfg_id].node(state_id)
        return state, state.node(node_id)
    except (IndexError, KeyError, AttributeError, TypeError):
        return None


def element_types() -> dict[str, Any]:
    """C++ and DaCe spellings of element types -> typeclass (``double`` and ``float64`` -> dace.float64)."""
    table: dict[str, Any] = {}
    for tc in (
        dace.bool,
        dace.int8,
        dace.int16,
        dace.int32,
        dace.int64,
        dace.uint8,
        dace.uint16,
        dace.uint32,
        dace.uint64,
        dace.float16,
        dace.float32,
        dace.float64,
        dace.complex64,
        dace.complex128,
    ):
        table[tc.ctype] = tc
        table[tc.to_string()] = tc
    table.update(
        {
            "long": dace.int64,
            "long long": dace.int64,
            "unsigned int": dace.uint32,
            "size_t": dace.uint64,
            "int32_t": dace.int32,
            "int8_t": dace.int8,
            "int16_t": dace.int16,
            "uint16_t": dace.uint16,
            "uint32_t": dace.uint32,
            "std::complex<double>": dace.complex128,
            "std::complex<float>": dace.complex64,
        }
    )
    return table


# --------------------------------------------------------------------------- context collection
#: Schedules under which code runs on a GPU device (inside a kernel).
GPU_KERNEL_SCHEDULES: frozenset[str] = frozenset(s.name for s in dace.dtypes.GPU_SCHEDULES)
#: Storage that GPU device code cannot dereference.
HOST_ONLY_STORAGE: frozenset[str] = frozenset({"CPU_Heap", "CPU_ThreadLocal"})
#: Storage that lives in GPU memory (host code cannot dereference it).
GPU_STORAGE: frozenset[str] = frozenset({"GPU_Global", "GPU_Shared"})


def inferred_copy(sdfg: Any) -> tuple[Any, list[str]]:
    """One deep copy of ``sdfg`` with connector types, schedules and storage inferred.

    Inference mutates what it touches, so it runs on a copy; the copy keeps the
    original's node order, which is how nodes of the original are found in it.
    Failures are returned as notes (the context then falls back to memlet rules).
    """
    import copy

    from dace.sdfg import infer_types

    inferred = copy.deepcopy(sdfg)
    inferred.reset_cfg_list()
    notes: list[str] = []
    try:
        infer_types.infer_connector_types(inferred)
    except Exception as exc:  # noqa: BLE001 - partial inference is still useful
        notes.append(f"connector type inference failed: {type(exc).__name__}: {exc}")
    try:
        infer_types.set_default_schedule_and_storage_types(inferred, None)
    except Exception as exc:  # noqa: BLE001
        notes.append(f"schedule/storage inference failed: {type(exc).__name__}: {exc}")
    return inferred, notes


def lift_state_machine_loops(sdfg: Any) -> list[str]:
    """Turn guard-state loops (what DaCe 1.0.2's frontend emits) into ``LoopRegion`` s, in place.

    Only ever applied to the inferred copy, so enclosing loops can be reported
    without changing the user's SDFG. States keep their identity when moved.
    """
    from dace.transformation.interstate.loop_lifting import LoopLifting

    try:
        sdfg.apply_transformations_repeated([LoopLifting], validate=False)
    except Exception as exc:  # noqa: BLE001
        return [f"loop detection failed: {type(exc).__name__}: {exc}"]
    return []


def loop_description(region: Any) -> tuple[str, str, str] | None:
    """(label, loop variable, 'init; condition; update') of a loop region, else None."""
    from dace.sdfg.state import LoopRegion

    if not isinstance(region, LoopRegion):
        return None

    def text(block: Any) -> str:
        return block.as_string.strip() if block is not None else ""

    header = "; ".join((text(region.init_statement), text(region.loop_condition), text(region.update_statement)))
    return region.label, region.loop_variable or "", header


def schedule_name(node: Any) -> str:
    """A node's schedule by name; ``Default`` for nodes without one (a nested SDFG on DaCe 2)."""
    schedule = getattr(node, "schedule", None)
    return schedule.name if schedule is not None else "Default"


def cpp_offset(desc: Any, subset: Any) -> str:
    """C++ element offset of ``subset``'s first element in ``desc`` (as DaCe's code generator writes it)."""
    from dace.codegen.targets.cpp import cpp_offset_expr

    return cpp_offset_expr(desc, subset)


def cpp_expr(expr: Any) -> str:
    """A symbolic expression in C++ syntax."""
    from dace.codegen.common import sym2cpp

    return str(sym2cpp(expr))


def node_library(node: Any) -> str | None:
    """The library module a library node class belongs to (its own module for unregistered classes)."""
    import dace.library

    name = getattr(type(node), "_dace_library_name", None)
    module = dace.library._DACE_REGISTERED_LIBRARIES.get(name) if name else None
    return module.__name__ if module is not None else type(node).__module__


#: DaCe's bundled libraries; importing them registers their environments.
_BUNDLED_LIBRARIES = ("blas", "lapack", "linalg", "standard", "sparse", "fft", "mpi", "pblas")


def registered_environments() -> dict[str, Any]:
    """Every DaCe environment registered in this process (full class path -> class).

    DaCe registers an environment when its module is imported, so the bundled
    libraries are imported first (once) to make the list complete.
    """
    import importlib
    import warnings

    import dace.library

    for name in _BUNDLED_LIBRARIES:
        try:
            with warnings.catch_warnings():  # e.g. "MKL was not found": the check below says so
                warnings.simplefilter("ignore")
                importlib.import_module(f"dace.libraries.{name}")
        except Exception:  # noqa: BLE001, S110 - a broken optional library only hides its environments
            pass
    try:  # code generation imports it (LIKWID); import it now so the list is the same before and during compile
        importlib.import_module("dace.codegen.instrumentation")
    except Exception:  # noqa: BLE001, S110
        pass
    return dict(dace.library._DACE_REGISTERED_ENVIRONMENTS)


#: The fields DaCe 1.0.2 requires of an environment class.
ENVIRONMENT_FIELDS = (
    "cmake_minimum_version",
    "cmake_packages",
    "cmake_variables",
    "cmake_includes",
    "cmake_libraries",
    "cmake_compile_flags",
    "cmake_link_flags",
    "cmake_files",
    "headers",
    "state_fields",
    "init_code",
    "finalize_code",
    "dependencies",
)


def define_environment(module: str, class_name: str, fields: dict[str, Any]) -> Any:
    """Build and register a DaCe environment class from plain values; return the class.

    ``module`` must be an imported module with a file: DaCe records that file and names
    the environment ``<module>.<class_name>``. The class is also set as an attribute of
    the module so the path resolves like any other. Missing fields get DaCe's empty values.
    """
    import sys

    import dace.library

    defaults: dict[str, Any] = {
        "cmake_minimum_version": None,
        "cmake_variables": {},
        "init_code": "",
        "finalize_code": "",
    }
    values = {name: fields.get(name, defaults.get(name, [])) for name in ENVIRONMENT_FIELDS}
    unknown = set(fields) - set(ENVIRONMENT_FIELDS)
    if unknown:
        raise ValueError(f"not DaCe environment fields: {sorted(unknown)}")
    cls = type(class_name, (), {**values, "__module__": module, "__doc__": f"DaCe environment {class_name}."})
    cls = dace.library.environment(cls)
    setattr(sys.modules[module], class_name, cls)
    return cls


def registered_environment(path: str) -> Any | None:
    """The environment registered under ``path`` in this process, or None."""
    import dace.library

    return dace.library._DACE_REGISTERED_ENVIRONMENTS.get(path)


def environment_file(env: Any) -> str | None:
    """The module file that defined an environment (its relative headers are resolved from there)."""
    return getattr(env, "_dace_file_path", None)


def add_library_node_methods(**methods: Any) -> None:
    """Add methods to every library node (``node.generate_prompt(state)``, ...); existing ones are kept."""
    base = library_node_base()
    for name, function in methods.items():
        if not hasattr(base, name):
            setattr(base, name, function)


def name_unnamed_connectors(state: Any, node: Any) -> list[str]:
    """Give connectors to edges of ``node`` that have none (e.g. DaCe's ``Reduce``).

    Generated code can only address data through connectors. A single input
    becomes ``_in`` and a single output ``_out`` (the names DaCe's own expansions
    use); several become ``_in0, _in1, ...``. Returns the names added.
    """
    added: list[str] = []
    for edges, prefix, inward in ((state.in_edges(node), "_in", True), (state.out_edges(node), "_out", False)):
        unnamed = [e for e in edges if (e.dst_conn if inward else e.src_conn) is None and not e.data.is_empty()]
        taken = set(node.in_connectors if inward else node.out_connectors)
        for i, edge in enumerate(unnamed):
            name = prefix if len(unnamed) == 1 and prefix not in taken else f"{prefix}{i}"
            while name in taken:
                name += "_"
            taken.add(name)
            if inward:
                node.add_in_connector(name)
                edge.dst_conn = name
            else:
                node.add_out_connector(name)
                edge.src_conn = name
            added.append(name)
    return added


def resolved_implementation(node: Any) -> str | None:
    """The implementation DaCe would pick for ``node`` (node, class, library, config), or None."""
    if node.implementation is not None:
        return node.implementation
    cls = type(node)
    if cls.default_implementation is not None:
        return cls.default_implementation
    try:
        import dace.library

        library = dace.library._DACE_REGISTERED_LIBRARIES.get(getattr(cls, "_dace_library_name", ""))
        if library is not None and library.default_implementation is not None:
            return library.default_implementation
        from dace.config import Config

        return Config.get("library", cls._dace_library_name, "default_implementation")
    except Exception:
        return None


# --------------------------------------------------------------------------- sessions
def node_guid(node: Any) -> str | None:
    """A node's ``guid``: kept by ``deepcopy`` and by ``save``/``from_file``, distinct between nodes.

    Sessions are named after it, so a node keeps its session across compiles and
    processes, and two programs that share a name never share one.
    """
    guid = getattr(node, "guid", None)
    return str(guid) if guid else None


def discard_build_folder(sdfg: Any) -> None:
    """Remove the SDFG's build folder so the next ``compile()`` generates and builds everything again.

    With ``compiler.use_cache`` DaCe would otherwise reuse a library built from old code.
    """
    import shutil

    folder = getattr(sdfg, "build_folder", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


def load_sdfg(path: Any) -> Any:
    """An SDFG read from a ``.sdfg`` / ``.sdfgz`` file."""
    return dace.SDFG.from_file(str(path))


def save_sdfg(sdfg: Any, path: Any, compress: bool = False) -> None:
    """Write ``sdfg`` to ``path`` (DaCe's JSON, gzip-compressed when ``compress``)."""
    sdfg.save(str(path), compress=compress)


#: The reserved implementation name dace-ai registers on every library node class.
AI_IMPLEMENTATION = "ai"


def native_implementation(node: Any, reserved: str = AI_IMPLEMENTATION, exclude: tuple[str, ...] = ()) -> str | None:
    """DaCe's own implementation of ``node`` to use instead of ``reserved`` ('ai'), or None.

    DaCe's portable ``pure`` expansion when the class has one (it needs no external
    library), else the class's or the library's default, else ``specialize``, else the
    first other one; names containing any of ``exclude`` (e.g. "cuda", "mkl") are
    skipped. None for nodes that are not library nodes.
    """
    cls = type(node)
    available = [
        name
        for name in getattr(cls, "implementations", None) or ()
        if name != reserved and not any(word in name.lower() for word in exclude)
    ]
    if not available:
        return None
    import dace.library

    library = dace.library._DACE_REGISTERED_LIBRARIES.get(getattr(cls, "_dace_library_name", ""))
    for choice in ("pure", cls.default_implementation, getattr(library, "default_implementation", None), "specialize"):
        if choice in available:
            return choice
    return available[0]


def expand_with(sdfg: Any, state: Any, node: Any, implementation: str) -> None:
    """Expand ``node`` now with ``implementation``, whatever its ``implementation`` property says.

    The transformation is applied directly (as ``LibraryNode.expand`` does after
    choosing), so DaCe's library-level overrides cannot send it back to 'ai'.
    """
    transformation_type = type(node).implementations[implementation]
    subgraph = {transformation_type._match_node: state.node_id(node)}
    transformation = transformation_type()
    transformation.setup_match(sdfg, sdfg.cfg_id, sdfg.nodes().index(state), subgraph, 0)
    node.implementation = implementation
    transformation.apply(state, sdfg)


#: The SDFG DaCe writes into a program's build folder: ``program.sdfg`` on DaCe 1.0, compressed on 2.0.
PROGRAM_FILES = ("program.sdfg", "program.sdfgz")


def program_file(folder: Any) -> Any:
    """The SDFG file in a program's build folder (a ``Path``; the first name when none exists yet)."""
    from pathlib import Path

    candidates = [Path(folder) / name for name in PROGRAM_FILES]
    return next((path for path in candidates if path.is_file()), candidates[0])


def program_layout(folder: str, sizes: dict[str, int]) -> dict[str, Any]:
    """How to call a built program without DaCe: library, entry points, arguments in call order.

    A sandboxed child loads the library with ``ctypes`` from this description alone
    (importing DaCe there would cost seconds per run). Each argument is an array
    (numpy dtype, shape, strides and total size evaluated at ``sizes``) or a scalar
    (ctypes type and value); ``init`` lists the arguments the init function takes.
    """
    import os

    from dace import data, symbolic
    from dace.sdfg import SDFG

    sdfg = SDFG.from_file(str(program_file(folder)))
    suffix = Config.get("compiler", "library_extension")
    arglist = sdfg.arglist()
    order = sdfg.signature_arglist(with_types=False, arglist=arglist)
    free = set(map(str, sdfg.free_symbols))

    def np_name(dtype: Any) -> str:
        import numpy

        return numpy.dtype(dtype).name

    def value(expr: Any) -> int:
        return int(symbolic.evaluate(expr, sizes)) if symbolic.issymbolic(expr) else int(expr)

    args = []
    for name in order:
        desc = arglist[name]
        if isinstance(desc, data.Array):
            args.append(
                {
                    "name": name,
                    "array": True,
                    "dtype": np_name(desc.dtype.as_numpy_dtype()),
                    "shape": [value(d) for d in desc.shape],
                    "strides": [value(d) for d in desc.strides],
                    "total": value(desc.total_size),
                }
            )
        else:
            args.append(
                {"name": name, "array": False, "ctype": desc.dtype.as_ctypes().__name__, "value": sizes.get(name, 0)}
            )
    return {
        "library": os.path.join(folder, "build", f"lib{sdfg.name}.{suffix}"),
        "name": sdfg.name,
        "args": args,
        "init": [a["name"] for a in args if a["name"] in free],
    }


def library_node_from_json(data: dict[str, Any], sdfg: Any, state: Any) -> Any:
    """A library node rebuilt from its ``to_json`` record (a session's ``node.json``), not placed anywhere."""
    return dace.serialize.from_json(data, context={"sdfg": sdfg, "sdfg_state": state})


def viewed_subsets(sdfg: Any, state: Any, container: str, depth: int = 8) -> list[tuple[str, str, tuple[Any, ...]]]:
    """What a view container looks into, following chains of views: (viewed container, subset, its shape).

    A frontend slice ``A[:, 0:K]`` becomes a view ``A_0`` (shape ``M x K``, strides
    of ``A``) fed by the memlet ``A[0:M, 0:K]``; the subset must fit ``A``'s own
    shape at the sizes a check runs, which the view's shape alone does not say.
    Empty for a container that is not a view.
    """
    from dace import data
    from dace.sdfg import utils as sdutil

    view_edge = getattr(sdutil, "get_view_edge", None)
    found: list[tuple[str, str, tuple[Any, ...]]] = []
    if view_edge is None:
        return found
    seen = {container}
    for _ in range(depth):
        if not isinstance(sdfg.arrays.get(container), data.View):
            break
        edge = next(
            (e for n in state.data_nodes() if n.data == container for e in [view_edge(state, n)] if e is not None), None
        )
        if edge is None or edge.data.data is None:
            break
        memlet = edge.data
        viewed = memlet.data if memlet.data != container else None
        subset = memlet.subset if viewed is not None else None
        if viewed is None:  # the memlet is written from the view's side: the other subset is the viewed one
            other = edge.src if edge.dst.data == container else edge.dst
            viewed, subset = other.data, memlet.other_subset
        if viewed in seen or viewed not in sdfg.arrays or subset is None:
            break
        seen.add(viewed)
        found.append((viewed, str(subset), tuple(sdfg.arrays[viewed].shape)))
        container = viewed
    return found


def register_compiled_call_hook(hook: Callable[[Any, Any], Any]) -> None:
    """Run ``hook(compiled_sdfg, args)`` (a context manager) around every call of a compiled program."""
    import dace.hooks

    dace.hooks.register_compiled_sdfg_call_hook(context_manager=hook)


def program_function(compiled: Any, name: str, restype: Any, argtypes: list[Any]) -> Any:
    """The C function ``name`` of a compiled program's loaded library (ctypes), or None when it has none."""
    import ctypes

    library = getattr(compiled, "_lib", None)
    handle = getattr(library, "_lib", None)
    stub = getattr(library, "_stub", None)
    if handle is None or stub is None:
        return None
    address = stub.get_symbol(handle, ctypes.c_char_p(name.encode()))
    if not address:
        return None
    return ctypes.CFUNCTYPE(restype, *argtypes)(address)


def program_handle(compiled: Any) -> int | None:
    """The handle of a compiled program's loaded library (changes when DaCe loads it again), or None."""
    handle = getattr(getattr(compiled, "_lib", None), "_lib", None)
    return getattr(handle, "value", None)
