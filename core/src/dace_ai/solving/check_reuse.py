"""Checks an answer already passed, reused while nothing they depend on has changed.

``dace_ai.generate`` checks every answer before it caches it; the expansion that
follows (``sdfg.compile()``) is served the same answer from the cache and, until now,
checked it a second time; so did every later run of the program. A check is a pure
function of what a check job carries to a worker
(:class:`~dace_ai.solving.check_records.CheckPayload`: the answer, the node's context, the
node in a program of its own, the settings the checks read, the environments) and of
the code that checks it. :func:`fingerprint` digests all of that:

* the payload, with the user's ``reference=`` function digested from its code, constants,
  defaults and closure (not pickled: a pickle differs between processes);
* every checker the node would get, with its stage, plugin, distribution and version,
  and a digest of the source file of its ``check`` function;
* the source of the ``dace_ai`` package itself (an edited or upgraded check is a new check),
  and the versions of DaCe, NumPy and Python;
* the compiler command and flags the checks compile with, and the file (size and
  modification time) of that compiler and of every tool the checkers declare.

An accepted answer's cache entry keeps its reports under that fingerprint
(:func:`record`); :func:`reuse` gives them back only when the fingerprint is the same and
every report still validates as a worker's result would
(:class:`~dace_ai.solving.check_records.ReportModel`). Anything else (another fingerprint,
an old entry, a damaged record) means: check again. Reused reports go through the same
acceptance rule, and a check that could not decide is warned about again (the warning a
checker gave once per program was given in the run that checked it).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dace_ai.checking.api import CheckReport
from dace_ai.checking.stages import select_checkers
from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.prompt.answer import Answer
from dace_ai.sandbox.reference import implemented_node, reference_function, without_ids
from dace_ai.solving.check_records import ReportModel, carrier_program, make_payload
from dace_ai.state import STATE
from dace_ai.targets.build_flags import build_command

#: Bumped when what the fingerprint covers changes, so older records are never matched.
FORMAT = 1


def fingerprint(answer: Answer, ctx: NodeContext, settings: AISettings, environments: set[str]) -> str:
    """The digest of everything ``answer``'s checks for node ``ctx`` depend on (see the module docstring)."""
    payload = make_payload("", answer, ctx, settings, environments, in_process=True).model_dump(mode="json")
    for volatile in ("job", "sources"):  # a job's name; where each setting came from (not its value)
        payload.pop(volatile, None)
    material = {
        "format": FORMAT,
        "payload": payload,
        "program": _program(ctx),
        "reference": _reference(ctx),
        "checkers": _checkers(ctx, settings),
        "code": _package_digest(),
        "tools": _tools(ctx, settings),
        "versions": _versions(),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


def record(fingerprint_: str, reports: list[CheckReport], level: str) -> dict[str, Any]:
    """What an accepted answer's cache entry keeps about its checks (``checked``)."""
    return {"fingerprint": fingerprint_, "level": level, "reports": [r.record() for r in reports]}


def reuse(checked: object, fingerprint_: str) -> list[CheckReport] | None:
    """The recorded reports when they were made under ``fingerprint_`` and still validate; None: check again."""
    if not isinstance(checked, dict) or checked.get("fingerprint") != fingerprint_:
        return None
    rows = checked.get("reports")
    if not isinstance(rows, list) or not rows:
        return None
    try:
        models = [ReportModel.model_validate(row) for row in rows]
    except ValidationError:
        return None
    reports = []
    for model in models:
        report = CheckReport.from_record(model.model_dump())
        report.told_user = False  # warned in the run that checked: this run warns again
        report.details["reused"] = True
        reports.append(report)
    return reports


def _program(ctx: NodeContext) -> Any:
    """The node in a program of its own, without the ids DaCe gives objects (they differ between copies)."""
    try:
        return without_ids(json.loads(carrier_program(ctx)))
    except LookupError:
        return None


def _reference(ctx: NodeContext) -> Any:
    """A digest of an AINode's ``reference=`` function: its code, constants, defaults and closure."""
    key = getattr(implemented_node(ctx), "reference", None)
    function = reference_function(key) if isinstance(key, str) and key else None
    if function is None:
        return None
    code = getattr(function, "__code__", None)
    cells = [getattr(cell, "cell_contents", None) for cell in (getattr(function, "__closure__", None) or ())]
    return {
        "name": getattr(function, "__qualname__", repr(function)),
        "code": _code_digest(code),
        "defaults": repr(getattr(function, "__defaults__", None)),
        "kwdefaults": repr(getattr(function, "__kwdefaults__", None)),
        "closure": repr(cells),
    }


def _code_digest(code: Any) -> str:
    if code is None:
        return ""
    parts = [code.co_code.hex(), repr(code.co_names)]
    parts += [_code_digest(c) if inspect.iscode(c) else repr(c) for c in code.co_consts]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _checkers(ctx: NodeContext, settings: AISettings) -> list[Any]:
    chosen, missing = select_checkers(ctx, settings)
    rows: list[Any] = [[r.checker, r.status] for r in missing]
    for checker in chosen:
        where = checker.provenance
        rows.append(
            [
                checker.name,
                checker.stage,
                checker.order,
                list(checker.tools),
                [where.plugin, where.distribution, where.version] if where is not None else None,
                _file_digest(_source_file(checker.check)),
                _file_digest(_source_file(checker.applies)),
            ]
        )
    return rows


def _source_file(function: Callable[..., object] | None) -> str | None:
    try:
        return inspect.getsourcefile(function) if function is not None else None
    except TypeError:
        return None


@STATE.cached("solving.check_reuse.file_digests", maxsize=256)
def _file_digest(path: str | None) -> str:
    if not path:
        return ""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


@STATE.cached("solving.check_reuse.package_digest", maxsize=1)
def _package_digest() -> str:
    """The source of ``dace_ai`` (Python, C++ and the child): an edited or upgraded check is another check."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".py", ".cpp", ".h", ".json")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _tools(ctx: NodeContext, settings: AISettings) -> list[Any]:
    """The compile command and flags, and the file behind the compiler and every tool the checkers declare."""
    compiler, flags = build_command(ctx.target)
    names = set(compiler[:1])
    for checker in select_checkers(ctx, settings)[0]:
        names.update(checker.tools)
    return [compiler, flags, [[name, _tool_file(name)] for name in sorted(names)]]


def _tool_file(name: str) -> Any:
    found = shutil.which(name)
    if found is None:
        return None
    try:
        stat = Path(found).resolve().stat()
    except OSError:
        return found
    return [str(Path(found).resolve()), stat.st_size, stat.st_mtime_ns]


def _versions() -> dict[str, str]:
    import dace
    import numpy

    return {"dace": dace.__version__, "numpy": numpy.__version__, "python": sys.version}
