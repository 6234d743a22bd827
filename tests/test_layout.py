"""The house rules of the code base: one package per concern, imports pointing one way,
and shipped packs that use only the public door ``dace_ai.plugin``."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "core" / "src" / "dace_ai"


@functools.cache
def _core_modules() -> tuple[tuple[Path, str, ast.Module], ...]:
    """Every module of the core package, in path order: its file, dotted name and parsed tree (parsed once)."""
    return tuple(
        (
            path,
            ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts),
            ast.parse(path.read_text(encoding="utf-8")),
        )
        for path in sorted(PACKAGE.rglob("*.py"))
    )


#: Concern packages by layer: a package may import its own layer's packages (without
#: cycles) and lower layers, never a higher one.
LAYERS: list[set[str]] = [
    {"errors", "state"},
    {"compat"},
    {"plugins"},
    {"config"},
    {"storage"},
    {"targets", "environments", "context", "prompt", "providers", "execution", "performance"},
    # The check rooms, low to high: the protocol, building a candidate, running it, the checkers.
    {"checking"},
    {"compilation"},
    {"sandbox"},
    {"checkers"},
    {"runtime_check"},
    {"solving"},
    # Checks sent as jobs to executors: above the round engine, whose checks they run on a worker.
    {"dispatch"},
    {"expansion"},
    {"evaluation", "workflows"},
    {"cli"},
]
#: Modules that face outwards and may import any layer.
DOORS = {"plugin", "testing", "__init__"}
CONCERNS = {
    "plugins",
    "config",
    "context",
    "prompt",
    "providers",
    "checking",
    "compilation",
    "sandbox",
    "checkers",
    "targets",
    "environments",
    "expansion",
    "solving",
    "workflows",
    "storage",
    "cli",
    "execution",
    "dispatch",
    "evaluation",
    "runtime_check",
    "performance",
}


def _layer(unit: str) -> int:
    return next(i for i, names in enumerate(LAYERS) if unit in names)


def _unit(module: str) -> str | None:
    """``dace_ai.compilation.units`` -> ``checking``; ``dace_ai.compat`` -> ``compat``."""
    parts = module.split(".")
    if parts[0] != "dace_ai":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _is_type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): imports for annotations only, never run."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk_run_time(tree: ast.AST):
    """Like :func:`ast.walk`, but without the bodies of ``if TYPE_CHECKING:`` blocks (their ``else`` stays)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _imports(path: Path) -> set[str]:
    """Every dace_ai module imported at run time in ``path`` (function-level imports included;
    imports under ``if TYPE_CHECKING:`` are for annotations and never executed)."""
    found: set[str] = set()
    for node in _walk_run_time(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "dace_ai" or name.startswith("dace_ai.")}


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        source = _unit("dace_ai." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts))
        if source in DOORS:
            continue
        for module in _imports(path):
            target = _unit(module)
            if (
                target
                and target != source
                and target not in DOORS
                and (target in CONCERNS or target in {"compat", "errors", "state"})
            ):
                edges.setdefault(source, set()).add(target)
    return edges


def test_top_level_is_a_few_modules_and_one_folder_per_concern():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 8, top
    for concern in CONCERNS:
        assert (PACKAGE / concern / "__init__.py").is_file(), concern


def test_every_package_says_what_it_is_for_and_what_it_may_import():
    """A package's ``__init__`` docstring is its room's sign: what it holds and which packages it may import."""
    vague = []
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if len(doc.split()) < 12 or "May import" not in doc:
            vague.append(f"{init.parent.name}: {doc!r}")
    assert not vague, "package docstrings without purpose and imports:\n" + "\n".join(vague)


def test_imports_point_one_way():
    wrong = [f"{a} -> {b}" for a, targets in _edges().items() for b in targets if _layer(b) > _layer(a)]
    assert not wrong, "imports against the layering: " + ", ".join(sorted(wrong))


def test_no_import_cycle_between_concerns():
    edges = _edges()
    seen: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if seen.get(nxt) == 1:
                pytest.fail(
                    "import cycle: " + " -> ".join([*path[path.index(nxt) :], nxt])
                    if nxt in path
                    else f"import cycle through {nxt}"
                )
            if nxt not in seen:
                visit(nxt, [*path, nxt])
        seen[node] = 2

    for start in sorted(edges):
        if start not in seen:
            visit(start, [start])


#: The rooms of checking one candidate, low to high (see ``LAYERS``).
CHECK_ROOMS = ("checking", "compilation", "sandbox", "checkers")


def _may_import(package: str) -> set[str]:
    """The packages ``package``'s ``__init__`` says it may import: those its "May import" sentence names and,
    where it says "every package below them", every package of a layer below the lowest one named."""
    doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text(encoding="utf-8"))) or ""
    sentence = " ".join(doc.split("May import", 1)[1].split()).split("never", 1)[0]
    named = set(re.findall(r"``(\w+)``", sentence))
    allowed = set(named)
    if "every package below them" in sentence:
        lowest = min(_layer(name) for name in named)
        allowed |= {name for layer in LAYERS[:lowest] for name in layer}
    return allowed


def _room_imports(package: str) -> dict[str, set[str]]:
    """``dace_ai.<package>.<module>`` -> the dace_ai modules it imports anywhere (function bodies too)."""
    return {
        module: _imports(path)
        for path, module, _ in _core_modules()
        if module.split(".")[1] == package and len(module.split(".")) > 2
    }


def test_each_check_room_imports_only_what_its_sign_allows():
    """``checking``, ``compilation``, ``sandbox`` and ``checkers`` import only the packages their
    ``__init__``'s "May import" line names (and those below), imports inside functions included."""
    offenders = []
    for room in CHECK_ROOMS:
        allowed = _may_import(room) | {room}
        assert allowed - {room}, f"{room}: no 'May import' line"
        for module, imported in sorted(_room_imports(room).items()):
            for target in sorted({_unit(name) for name in imported} - allowed - DOORS - {None}):
                offenders.append(f"{module} -> {target}")
    assert not offenders, "imports a room's sign does not allow:\n" + "\n".join(offenders)


def test_the_check_rooms_signs_say_what_the_layers_hold():
    assert _may_import("checking") >= {"context", "prompt", "config", "compat"}
    assert "compilation" not in _may_import("checking") and "checkers" not in _may_import("sandbox")
    assert {"checking", "compilation", "sandbox"} <= _may_import("checkers")


def test_no_checker_imports_another_checker():
    """Checkers hand work on only through declared artefacts: no module of ``checkers`` imports another
    (imports inside functions included); what two checkers share lives in ``compilation`` or ``sandbox``."""
    offenders = [
        f"{module} -> {name}"
        for module, imported in sorted(_room_imports("checkers").items())
        for name in sorted(imported)
        if name.startswith("dace_ai.checkers.") or name == "dace_ai.checkers"
    ]
    assert not offenders, "checkers importing checkers:\n" + "\n".join(offenders)


def test_packs_import_only_the_public_door():
    offenders = []
    for path in (ROOT / "plugins").rglob("*.py"):
        if ".egg-info" in str(path):
            continue
        for module in _imports(path):
            if module not in ("dace_ai.plugin",) and not module.startswith("dace_ai.plugin."):
                offenders.append(f"{path.relative_to(ROOT)}: {module}")
    assert not offenders, "packs must import only dace_ai.plugin:\n" + "\n".join(sorted(offenders))


def test_type_checking_imports_are_skipped_and_nothing_else():
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from dace_ai.cli.main import main\n"
        "else:\n    from dace_ai.workflows.build import build\n"
        "if True:\n    from dace_ai.prompt.render import render_prompt\n"
        "def f():\n    import dace_ai.storage.cache\n"
    )
    seen = {
        n.module if isinstance(n, ast.ImportFrom) else n.names[0].name
        for n in _walk_run_time(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
    }
    assert seen == {"typing", "dace_ai.workflows.build", "dace_ai.prompt.render", "dace_ai.storage.cache"}


def test_public_door_exports_what_it_lists():
    import dace_ai.plugin as door

    missing = [name for name in door.__all__ if not hasattr(door, name)]
    assert not missing


def _private_uses(tree: ast.AST, unit: str) -> list[tuple[int, str]]:
    """``(line, name)`` for every private name of another concern package used in ``tree``.

    ``from dace_ai.<pkg>.<mod> import _name`` and ``<module>._name`` where ``<module>`` was
    imported from ``dace_ai.<pkg>`` (``from dace_ai.expansion import pipeline``, ``import
    dace_ai.storage.cache as cache``, ``import dace_ai.storage.cache``), for ``<pkg>`` other
    than ``unit``. Dunder names are public.
    """

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    found: list[tuple[int, str]] = []
    modules: dict[str, str] = {}  # local name -> the dace_ai module (or name in it) it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("dace_ai"):
            for alias in node.names:
                if private(alias.name) and _unit(node.module) != unit:
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dace_ai"):
                    modules[alias.asname or "dace_ai"] = alias.name if alias.asname else "dace_ai"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            chain, base = [], node.value
            while isinstance(base, ast.Attribute):
                chain.insert(0, base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in modules:
                owner = ".".join([modules[base.id], *chain])
                if _unit(owner) not in (unit, "__init__"):
                    found.append((node.lineno, f"{owner}.{node.attr}"))
    return found


def test_no_module_uses_a_private_name_of_another_package():
    """A leading underscore means "this package only": another package asks for a public name instead."""
    offenders = []
    for path, module, tree in _core_modules():
        for line, name in _private_uses(tree, _unit(module)):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    assert not offenders, "private names used across packages:\n" + "\n".join(offenders)


def test_private_uses_are_found_in_every_spelling():
    tree = ast.parse(
        "from dace_ai.providers.api import _current_node, current_node\n"
        "from dace_ai.expansion import pipeline\n"
        "import dace_ai.storage.cache as cache\n"
        "import dace_ai.storage.files\n"
        "from dace_ai.checking.stages import _run_one\n"
        "def f():\n"
        "    pipeline._node_record(1); cache._lock; dace_ai.storage.files._tmp(); pipeline.__doc__\n"
    )
    found = sorted(name for _, name in _private_uses(tree, "checking"))
    assert found == [
        "dace_ai.expansion.pipeline._node_record",
        "dace_ai.providers.api._current_node",
        "dace_ai.storage.cache._lock",
        "dace_ai.storage.files._tmp",
    ]


#: The longest a function or method under ``core/src`` may be, decorators and docstring included.
MAX_FUNCTION_LINES = 80


def _long_functions(tree: ast.AST, module: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``module:function (N lines)`` for every function or method (nested ones too) longer than ``limit``."""
    return [
        f"{module}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > limit
    ]


def test_no_function_in_core_is_longer_than_80_lines():
    """A long function does several jobs; split it into helpers named for them (no behaviour change)."""
    offenders = []
    for _, module, tree in _core_modules():
        offenders += _long_functions(tree, module)
    assert not offenders, "functions over 80 lines:\n" + "\n".join(offenders)


def test_long_functions_are_measured_from_def_to_last_line():
    body = "".join(f"        x{i} = {i}\n" for i in range(80))
    tree = ast.parse("def short():\n    pass\n\nclass C:\n    def long(self):\n" + body)
    assert _long_functions(tree, "m", limit=80) == ["m:long (81 lines)"]
    assert _long_functions(tree, "m", limit=81) == []


def test_each_class_name_in_core_means_one_thing():
    """Two classes of one name (a plugin's origin and a tasklet's provenance, the sandbox's job and an
    executor's) make every import and docstring ambiguous; each name is defined once in core."""
    defined: dict[str, list[str]] = {}
    for _, module, tree in _core_modules():
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                defined.setdefault(node.name, []).append(module)
    twice = {name: modules for name, modules in defined.items() if len(modules) > 1}
    assert not twice, f"class names defined more than once: {twice}"


#: Parameters and fields that always hold one of the project's own types; ``Any`` is for DaCe's
#: objects (an SDFG, a state, a node) and JSON values, whose shape the project does not own.
PROJECT_TYPED = {
    "ctx": "NodeContext",
    "settings": "AISettings",
    "session": "Session",
    "provider": "Provider",
    "task": "Task",
    "manager": "PluginManager",
    "dispatcher": "CheckDispatcher",
    "verdict": "Verdict",
    "answer": "Answer",
    "candidate": "CandidateLibrary",
    "prepared": "a program's prepared arguments",
}


def _any_annotated(tree: ast.Module, names: Iterable[str]) -> list[str]:
    """``function(name)`` / ``Class.name`` for every parameter or field of ``names`` annotated plain ``Any``."""
    wanted, found = set(names), []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            found += [
                f"{node.name}({a.arg})"
                for a in arguments
                if a.arg in wanted and a.annotation is not None and ast.unparse(a.annotation).strip("'\"") == "Any"
            ]
        elif isinstance(node, ast.ClassDef):
            found += [
                f"{node.name}.{item.target.id}"
                for item in node.body
                if isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and item.target.id in wanted
                and ast.unparse(item.annotation).strip("'\"") == "Any"
            ]
    return found


#: ``# type: ignore[code]  # why``: the error silenced and the reason, on the same line.
IGNORE_WITH_REASON = re.compile(r"#\s*type:\s*ignore\[[a-z-]+(,\s*[a-z-]+)*\]\s+#\s*\S")


def _unexplained_ignores(text: str) -> list[int]:
    """Line numbers of ``type: ignore`` comments that do not name their error code and say why."""
    return [
        number
        for number, line in enumerate(text.splitlines(), start=1)
        if "type: ignore" in line and not IGNORE_WITH_REASON.search(line)
    ]


def test_every_type_ignore_names_its_code_and_reason():
    """A silenced type error is a decision: the next reader sees which error and why it stays."""
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path, _, _ in _core_modules()
        for number in _unexplained_ignores(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "type: ignore without [code] and a reason:\n" + "\n".join(offenders)


def test_unexplained_ignores_are_found():
    text = (
        "a = 1  # type: ignore\n"
        "b = 2  # type: ignore[misc]\n"
        "c = 3  # type: ignore[misc]  # DaCe's class, found at run time\n"
        "d = 4  # type: ignore[attr-defined, misc]  # a module loaded by path\n"
    )
    assert _unexplained_ignores(text) == [1, 2]


def test_project_types_are_not_annotated_any():
    """A node context, the settings, a session, a provider, ... are typed where they pass (under
    ``TYPE_CHECKING`` where only an annotation needs them), so a reader and a type checker know them."""
    offenders = []
    for path, _, tree in _core_modules():
        offenders += [f"{path.relative_to(PACKAGE)}: {where}" for where in _any_annotated(tree, PROJECT_TYPED)]
    assert not offenders, "annotated Any, expected their type:\n" + "\n".join(offenders)


def test_any_annotations_are_found_in_parameters_and_fields():
    tree = ast.parse(
        "def f(ctx: Any, settings: 'Any' = None, sdfg: Any = None): ...\n"
        "class C:\n    session: Any = None\n    other: Any\n"
        "def g(ctx: NodeContext): ...\n"
    )
    assert _any_annotated(tree, PROJECT_TYPED) == ["f(ctx)", "f(settings)", "C.session"]


def _module_names() -> dict[str, Path]:
    """``dace_ai.checking.api`` -> its file, for every module of the package (packages by their ``__init__``)."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _load_time_imports(tree: ast.Module, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that importing ``module`` imports or names for its annotations.

    Counted: imports at module level, in class bodies and under ``if``/``try`` (``if TYPE_CHECKING:``
    included: a type checker follows it like an import). Not counted: imports inside function
    bodies, which run on first use, after every module is loaded. ``from pkg import sub`` where
    ``sub`` is a module depends on ``pkg.sub``, not on ``pkg``'s ``__init__`` (which Python runs
    before any of its modules anyway); ``from pkg import name`` depends on ``pkg``.
    """
    found: set[str] = set()

    def resolve(name: str) -> None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if not name or name == module:
            return
        found.add(name)
        parts = name.split(".")
        for i in range(1, len(parts)):  # importing a.b.c first runs a and a.b, unless they hold the importer
            ancestor = ".".join(parts[:i])
            if ancestor in known and not module.startswith(ancestor + "."):
                found.add(ancestor)

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    resolve(alias.name)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = module.split(".") if is_package else module.split(".")[:-1]
                    base = ".".join([*here[: len(here) - node.level + 1], *([node.module] if node.module else [])])
                for alias in node.names:
                    resolve(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
            else:
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return found


def _import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts (more than one module) of ``graph``: each an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return circles


def test_no_import_circle_between_modules_even_for_annotations():
    """No module needs, to load or to be type-checked, a module that needs it back.

    Imports under ``if TYPE_CHECKING:`` count; imports inside functions do not (see
    :func:`_load_time_imports`). The types plugins' callables receive are protocols at the
    bottom (``dace_ai.plugins.types``), so the plugin layer names nothing above it.
    """
    known = _module_names()
    graph = {
        name: _load_time_imports(
            ast.parse(path.read_text(encoding="utf-8")), name, path.name == "__init__.py", set(known)
        )
        for name, path in known.items()
    }
    circles = _import_circles(graph)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def _all_imports(tree: ast.Module, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules ``module`` imports anywhere, inside functions too (:func:`_load_time_imports` of them all)."""
    every = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    return _load_time_imports(ast.Module(body=every, type_ignores=[]), module, is_package, known)


def _pack_modules() -> dict[str, Path]:
    """``dace_ai_cuda.checker`` -> its file, for every module of the shipped packs."""
    names = {}
    for source in sorted(ROOT.glob("plugins/*/*/src")):
        for path in source.rglob("*.py"):
            if ".egg-info" in str(path):
                continue
            parts = path.relative_to(source).with_suffix("").parts
            names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def test_no_import_circle_even_inside_functions():
    """No module of the core or of a shipped pack needs one that needs it back, even where an import
    waits inside a function.

    A function-body import is for load time (``import dace_ai`` stays light, a provider's SDK is
    imported when the provider is used), never a way around a circle: shared pieces live in small
    modules of their own (who implements ``'ai'``: :mod:`~dace_ai.expansion.charge`; the generated
    tasklets and their sessions: :mod:`~dace_ai.workflows.generated`; a pack's defaults).
    """
    circles = []
    for known in (_module_names(), _pack_modules()):
        graph = {
            name: _all_imports(
                ast.parse(path.read_text(encoding="utf-8")), name, path.name == "__init__.py", set(known)
            )
            for name, path in known.items()
        }
        circles += _import_circles(graph)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_all_imports_count_function_bodies():
    known = {"p", "p.c", "p.d"}
    graph = {
        "p.c": _all_imports(ast.parse("def f():\n    from p.d import D\n"), "p.c", False, known),
        "p.d": _all_imports(ast.parse("from p.c import C\n"), "p.d", False, known),
    }
    assert graph == {"p.c": {"p.d"}, "p.d": {"p.c"}}
    assert _import_circles(graph) == [["p.c", "p.d"]]


def test_import_circles_count_annotations_but_not_function_bodies():
    known = {"p", "p.a", "p.b", "p.c", "p.d"}
    sources = {
        "p.a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.b import B\n",
        "p.b": "from p import a\n",
        "p.c": "def f():\n    from p.d import D\n",
        "p.d": "from p.c import C\n",
    }
    graph = {name: _load_time_imports(ast.parse(text), name, False, known) for name, text in sources.items()}
    assert graph == {"p.a": {"p.b"}, "p.b": {"p.a"}, "p.c": set(), "p.d": {"p.c"}}
    assert _import_circles(graph) == [["p.a", "p.b"]]


#: The round engine: the one module that plays a round's steps (:mod:`dace_ai.solving.rounds`).
ROUNDS = "dace_ai.solving.rounds"

#: A round's steps that are functions, by the module defining them.
ROUND_STEP_FUNCTIONS = {
    "dace_ai.solving.answer_source.ask_for_node": "asking the provider",
    "dace_ai.prompt.answer.parse_answer": "parsing an answer",
    "dace_ai.solving.checked_answer.check_answer": "running the checks",
    "dace_ai.solving.checked_answer.check_recorded": "running the checks",
    "dace_ai.checking.verdict.judge": "judging",
    "dace_ai.solving.provenance.accepted_provenance": "writing provenance",
}

#: A round's steps that are methods: name -> (the modules it may be called from besides the engine, the
#: receiver's name ends with, the step). The answer cache is written by ``AnswerSource.keep`` only.
ROUND_STEP_METHODS = {
    "reply": (("dace_ai.solving.answer_source",), "", "asking the provider (AnswerSource.reply)"),
    "check": (("dace_ai.dispatch.dispatcher",), "dispatcher", "dispatching check jobs (CheckDispatcher.check)"),
    "record_round": (("dace_ai.storage.session_store",), "", "recording the round (Session.record_round)"),
    "keep": (("dace_ai.solving.answer_source",), "", "writing the answer cache (AnswerSource.keep)"),
    "put": (
        ("dace_ai.storage.cache", "dace_ai.solving.answer_source"),
        "cache",
        "writing the answer cache (AnswerCache.put)",
    ),
    "update_round": (("dace_ai.storage.session_store",), "", "writing provenance (Session.update_round(provenance=))"),
}

#: Calls of a round's step that are no round, with the reason.
NOT_A_ROUND = {
    ("dace_ai.providers.manual", "parse_answer"): "refuses a response file a person wrote before it becomes a reply",
    ("dace_ai.expansion.exchange", "parse_answer"): "refuses a malformed reply before the expansion plays it",
    ("dace_ai.evaluation.campaign", "ask_for_node"): "samples the answers that the bench's attempts play later",
}


def _imported_names(tree: ast.Module) -> dict[str, str]:
    """Every name a module binds by an import (at the top or in a function) -> the dotted name it stands for."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
    return names


def _round_step_calls(modules: Iterable[tuple[str, ast.Module]]) -> list[str]:
    """Calls of a round's steps (:data:`ROUND_STEP_FUNCTIONS`, :data:`ROUND_STEP_METHODS`) outside the round
    engine and the modules defining them, except :data:`NOT_A_ROUND`: ``module:line: name (step)``."""
    found = []
    for module, tree in modules:
        if module == ROUNDS:
            continue
        imported = _imported_names(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func, step, name, homes = node.func, "", "", ()
            if isinstance(func, ast.Name) and imported.get(func.id) in ROUND_STEP_FUNCTIONS:
                home, name = imported[func.id].rsplit(".", 1)
                homes, step = (home,), ROUND_STEP_FUNCTIONS[imported[func.id]]
            elif isinstance(func, ast.Attribute):
                dotted = f"{imported.get(ast.unparse(func.value), ast.unparse(func.value))}.{func.attr}"
                if dotted in ROUND_STEP_FUNCTIONS:
                    name, step = func.attr, ROUND_STEP_FUNCTIONS[dotted]
                    homes = (dotted.rsplit(".", 1)[0],)
                elif func.attr in ROUND_STEP_METHODS:
                    homes, receiver, words = ROUND_STEP_METHODS[func.attr]
                    keywords = {k.arg for k in node.keywords}
                    if ast.unparse(func.value).lower().endswith(receiver) and (
                        func.attr != "update_round" or "provenance" in keywords
                    ):
                        name, step = func.attr, words
            if step and module not in homes and (module, name) not in NOT_A_ROUND:
                found.append(f"{module}:{node.lineno}: {name} ({step})")
    return found


def test_a_round_is_played_by_the_round_engine_only():
    """Asking, parsing, checking, judging, recording, caching and provenance: one round, written once.

    The expansion, refine and build repairs, ``optimize``, ``generate`` and the bench's attempt
    drive :mod:`dace_ai.solving.rounds`; none of them calls a round's steps itself.
    """
    modules = [(name, tree) for _, name, tree in _core_modules()]
    found = _round_step_calls([(name.removesuffix(".__init__"), tree) for name, tree in modules])
    assert not found, "round steps called outside dace_ai.solving.rounds:\n" + "\n".join(found)


def test_round_steps_are_found_in_every_spelling():
    sources = {
        ROUNDS: "from dace_ai.prompt.answer import parse_answer\nparse_answer('x')\n",
        "dace_ai.prompt.answer": "def parse_answer(text):\n    return text\nparse_answer('y')\n",
        "dace_ai.other": (
            "import dace_ai.checking.verdict as v\n"
            "def f(session, table, queue):\n"
            "    from dace_ai.prompt.answer import parse_answer as parse\n"
            "    parse('x')\n"
            "    v.judge([], None)\n"
            "    session.record_round(1)\n"
            "    table.answers.cache.put(1)\n"
            "    queue.put(1)\n"
            "    session.update_round(1, provenance=[])\n"
            "    session.update_round(1, runtime_check='wrong')\n"
            "    self.dispatcher.check(1)\n"
        ),
    }
    found = _round_step_calls((name, ast.parse(text)) for name, text in sources.items())
    assert found == [
        "dace_ai.other:4: parse_answer (parsing an answer)",
        "dace_ai.other:5: judge (judging)",
        "dace_ai.other:6: record_round (recording the round (Session.record_round))",
        "dace_ai.other:7: put (writing the answer cache (AnswerCache.put))",
        "dace_ai.other:9: update_round (writing provenance (Session.update_round(provenance=)))",
        "dace_ai.other:11: check (dispatching check jobs (CheckDispatcher.check))",
    ]


def test_process_state_is_registered_and_reset_in_one_place():
    """Every module-level cache or once-only notice is registered with ``dace_ai.state``, and reset empties it."""
    import dace_ai.checkers.sanitizers
    import dace_ai.config.settings
    import dace_ai.dispatch.check_results
    import dace_ai.environments.installed
    import dace_ai.environments.resolve
    import dace_ai.evaluation.tasks
    import dace_ai.expansion.pipeline
    import dace_ai.runtime_check.hook
    import dace_ai.sandbox.harness
    import dace_ai.sandbox.run_report
    import dace_ai.sandbox.sanitizers
    import dace_ai.solving.check_reuse
    import dace_ai.targets.build_flags
    import dace_ai.targets.cpu
    import dace_ai.targets.select
    from dace_ai import state

    # Packs register their machine facts as plugin.<name> (dace_ai.plugin.machine_fact) when loaded.
    assert [name for name in state.STATE.names() if not name.startswith("plugin.")] == [
        "checkers.sanitizers.told",
        "config.settings.warned",
        "dispatch.check_results.said",
        "environments.installed.detected",
        "environments.installed.include_dirs",
        "environments.resolve.detections",
        "evaluation.tasks.suites",
        "expansion.pipeline.gpu_build_told",
        "runtime_check.done",
        "runtime_check.told",
        "runtime_check.tracks",
        "sandbox.harness.expected_memo",
        "sandbox.run_report.told",
        "sandbox.sanitizers.fast_link_args",
        "sandbox.sanitizers.libomp_problem",
        "sandbox.sanitizers.llvm_lib_folder",
        "sandbox.sanitizers.symbolizer",
        "solving.check_reuse.file_digests",
        "solving.check_reuse.package_digest",
        "targets.build_flags.compiler_identity",
        "targets.build_flags.compiler_machine",
        "targets.cpu.this_cpu",
        "targets.select.detections",
    ]
    told = dace_ai.sandbox.run_report._told
    told.add("program")
    dace_ai.targets.select._detections[("x", "y")] = None
    # A machine fact cached by a function (is clang's OpenMP runtime installed?) is forgotten too.
    libomp_problem = dace_ai.sandbox.sanitizers.libomp_problem
    libomp_problem("/no/such/clang++")
    assert libomp_problem.cache_info().currsize == 1
    state.reset()
    assert dace_ai.sandbox.run_report._told is told and not told
    assert not dace_ai.targets.select._detections
    assert libomp_problem.cache_info().currsize == 0
    with pytest.raises(ValueError, match="registered already"):
        state.STATE.register("sandbox.run_report.told", set())


def _dace_ai_imports(path: Path) -> list[tuple[int, str, str]]:
    """``(line, module, name)`` for every ``from dace_ai... import name`` in ``path``, function bodies included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "dace_ai":
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
    return found


def test_benchmarks_and_samples_import_names_that_exist():
    """The scripts no test runs whole (bench/, samples/) still find what they import from dace_ai after a move."""
    import importlib

    missing = []
    scripts = [*(ROOT / "bench").glob("*.py"), *(ROOT / "samples").rglob("*.py")]
    for path in sorted(scripts):
        for line, module, name in _dace_ai_imports(path):
            try:
                found = importlib.import_module(module)
            except ImportError as exc:
                missing.append(f"{path.relative_to(ROOT)}:{line}: {module} ({exc})")
                continue
            if name != "*" and not hasattr(found, name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    missing.append(f"{path.relative_to(ROOT)}:{line}: {module}.{name}")
    assert len(scripts) > 10 and not missing, "imports that no longer resolve:\n" + "\n".join(missing)


#: The most imports of dace_ai modules that may wait inside a function (each says why on its line).
MOST_LOCAL_IMPORTS = 40


def _local_imports(tree: ast.Module, lines: list[str]) -> list[tuple[int, str]]:
    """(line, the import's text with its comment) of every import of a dace_ai module inside a function."""
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if any(n == "dace_ai" or n.startswith("dace_ai.") for n in names):
                found.append((node.lineno, "\n".join(lines[node.lineno - 1 : node.end_lineno])))
    return sorted(set(found))


def test_imports_wait_inside_functions_only_with_their_reason_and_few():
    """Imports between dace_ai modules sit at module top; the few that wait inside a function (the cost of
    ``import dace_ai`` or of a command's start, the installed DaCe's own module) say why: ``# local: <why>``."""
    waiting, unexplained = [], []
    for path, _, tree in _core_modules():
        for line, text in _local_imports(tree, path.read_text(encoding="utf-8").splitlines()):
            where = f"{path.relative_to(PACKAGE.parent)}:{line}"
            waiting.append(where)
            if not re.search(r"# local: \S", text):
                unexplained.append(where)
    assert not unexplained, "imports inside functions without '# local: <why>':\n" + "\n".join(unexplained)
    assert len(waiting) <= MOST_LOCAL_IMPORTS, f"{len(waiting)} imports wait inside functions:\n" + "\n".join(waiting)


def test_local_imports_are_found_in_every_spelling():
    source = (
        "import dace_ai.a\n"
        "def f():\n    import dace_ai.b  # local: why\n"
        "def g():\n    def h():\n        from dace_ai import c\n"
        "async def k():\n    from dace_ai.d import (\n        x,\n    )  # local: why\n"
        "def m():\n    import numpy\n    from . import rel\n"
    )
    found = _local_imports(ast.parse(source), source.splitlines())
    assert [line for line, _ in found] == [3, 6, 8]
    assert [bool(re.search(r"# local: \S", text)) for _, text in found] == [True, False, True]
