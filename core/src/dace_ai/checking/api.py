"""What checkers receive and return.

A checker's ``check(request: CheckRequest) -> CheckReport`` judges one candidate
answer for one node. ``failed`` diagnostics are sent back to the model in a
repair round, so they should be the compiler's own words with temporary paths
replaced by stable names (see :func:`stable_paths`). ``inconclusive`` means the
checker could not decide (a missing tool or header) and never counts as failure;
:func:`dace_ai.checking.verdict.judge` then accepts the answer with a warning
(``on_inconclusive=warn``) unless the report says ``told_user`` (the checker told
the user itself, e.g. once per program), or refuses it (``on_inconclusive=reject``).

What every stage reports is a field of :class:`CheckReport` (``stage``, ``reason``,
``rule``, ``told_user``, ``seeds``, ``sizes``); ``details`` holds what only one checker
knows (bench figures, remarks, the ladder). Reports travel as :meth:`CheckReport.record`
(sessions' ``checks.json``, check jobs' results, the answer cache) and come back with
:meth:`CheckReport.from_record`, so one shape is written and read everywhere.

The checkers of one candidate share work on ``request.shared``, a :class:`SharedWork`: the
stage runner's own fields (``selected``, ``background``) and typed slots, each under a
:class:`SharedKey` that the module filling it declares next to its type (``COMPILED`` in
:mod:`~dace_ai.checking.compile`, ``SANDBOX_RUN`` in :mod:`~dace_ai.checking.harness`,
``SANITIZER_BUILDS`` in :mod:`~dace_ai.checking.sanitize`). A key says what its value is, so
a reader gets that type back without checking it, and two modules (or plugins) can never
meet on a string by chance: keys are told apart by identity, their names only label them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar, cast, overload

from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.prompt.answer import Answer

Status = Literal["passed", "failed", "inconclusive"]

T = TypeVar("T")
D = TypeVar("D")


class SharedKey(Generic[T]):
    """A typed slot of :class:`SharedWork`, declared once at module level next to its type::

        COMPILED: SharedKey[CandidateBuild] = SharedKey("compile")

    Keys are compared by identity (two keys with one name are two slots); ``name`` labels
    the key in reprs and errors.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"SharedKey({self.name!r})"


class Stoppable(Protocol):
    """Work a checker left running in the background (a build): stopped when the checks end."""

    def stop(self) -> None: ...


class SharedWork:
    """What the checkers of one candidate share, so work is done once (``request.shared``).

    ``selected`` and ``background`` belong to the stage runner; the rest are typed slots
    (``shared[COMPILED]``, ``shared.get(SANDBOX_RUN)``), each under a :class:`SharedKey`.
    """

    __slots__ = ("background", "selected", "_slots")

    def __init__(self) -> None:
        #: Names of the checkers the stage runner chose for the candidate, in run order
        #: (so a compile can start work for a later checker beside it).
        self.selected: list[str] = []
        #: Work started in the background (objects with ``stop()``), stopped when the checks end.
        self.background: list[Stoppable] = []
        self._slots: dict[SharedKey[Any], object] = {}

    def __setitem__(self, key: SharedKey[T], value: T) -> None:
        self._slots[key] = value

    def __getitem__(self, key: SharedKey[T]) -> T:
        """The value under ``key``; ``KeyError`` naming the key when nothing was shared under it."""
        try:
            return cast(T, self._slots[key])
        except KeyError:
            raise KeyError(f"nothing shared under {key!r} for this candidate") from None

    @overload
    def get(self, key: SharedKey[T]) -> T | None: ...
    @overload
    def get(self, key: SharedKey[T], default: D) -> T | D: ...

    def get(self, key: SharedKey[Any], default: object = None) -> object:
        """The value under ``key``, or ``default`` (None) when nothing was shared under it."""
        return self._slots.get(key, default)

    def setdefault(self, key: SharedKey[T], default: T) -> T:
        """The value under ``key``; when there is none, ``default``, stored under it first."""
        return cast(T, self._slots.setdefault(key, default))

    def __contains__(self, key: SharedKey[Any]) -> bool:
        return key in self._slots

    def __repr__(self) -> str:
        names = ", ".join(key.name for key in self._slots)
        return f"SharedWork(selected={self.selected!r}, background={len(self.background)}, slots=[{names}])"


@dataclass
class CheckRequest:
    answer: Answer
    node: NodeContext
    settings: AISettings
    workdir: Path  #: a private folder under ``<build root>/ai-check/`` for this check
    #: Builds the very DaCe tasklet the expansion would place, given environment class paths
    #: (set by the pipeline; checks that build a DaCe program use it, others ignore it).
    make_tasklet: Callable[[set[str], Any], Any] | None = None
    #: Class paths of the DaCe environments the answer resolved to (registered ones it names
    #: and generated ones it requested), set by the pipeline.
    environments: set[str] = field(default_factory=set)
    #: What checkers of one candidate share so work is done once (e.g. the compiled unit,
    #: see :func:`dace_ai.checking.compile.compile_candidate`): typed slots under :class:`SharedKey`.
    shared: SharedWork = field(default_factory=SharedWork)


@dataclass
class CheckReport:
    """One checker's finding about one candidate.

    The first five fields may be given by position (``CheckReport(name, "failed", text)``);
    the rest by keyword. ``stage`` is filled by the stage runner from the checker's
    registration when the checker leaves it empty.
    """

    checker: str
    status: Status
    diagnostics: str = ""
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    #: The stage the checker ran in: ``compile``, ``verify`` or ``bench``.
    stage: str = field(default="", kw_only=True)
    #: Why it could not decide or refused, in a few words ("no reference", "mismatch", "clang missing").
    reason: str = field(default="", kw_only=True)
    #: The bench rule that refused the candidate: ``gate`` (too slow), ``deception``, ``native-library``, ...
    rule: str = field(default="", kw_only=True)
    #: The checker has told the user about this itself (once per program): :func:`judge` warns no second time.
    told_user: bool = field(default=False, kw_only=True)
    #: How many seeds a comparison with the reference ran (0: none).
    seeds: int = field(default=0, kw_only=True)
    #: The sizes it ran, one mapping of symbol values per size.
    sizes: list[dict[str, int]] = field(default_factory=list, kw_only=True)

    def __post_init__(self) -> None:
        self.fields_from_details()

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def fields_from_details(self) -> CheckReport:
        """Move what an older checker put into ``details`` by convention into the typed fields.

        The keys ``stage``, ``reason``, ``rule``, ``seeds``, ``sizes`` and ``told`` (now
        ``told_user``); a new report and the stage runner (for details filled in later) call
        this, so a plugin written before the fields still reports its stage and reasons.
        A value already set in a field wins; ``details["sizes"]`` becomes ``sizes`` only
        when it is a list of mappings (a bench figure's one mapping stays a figure).
        """
        d = self.details
        if not self.stage and isinstance(d.get("stage"), str):
            self.stage = d.pop("stage")
        if not self.reason and d.get("reason"):
            self.reason = str(d.pop("reason"))
        if not self.rule and d.get("rule"):
            self.rule = str(d.pop("rule"))
        if "told" in d:
            self.told_user = self.told_user or bool(d.pop("told"))
        if not self.seeds and isinstance(d.get("seeds"), int) and not isinstance(d["seeds"], bool):
            self.seeds = d.pop("seeds")
        sizes = d.get("sizes")
        if not self.sizes and isinstance(sizes, list) and all(isinstance(s, dict) for s in sizes):
            self.sizes = [dict(s) for s in d.pop("sizes")]
        return self

    def record(self) -> dict[str, Any]:
        """The report as JSON data: what sessions, check jobs and the answer cache store."""
        return {
            "checker": self.checker,
            "status": self.status,
            "diagnostics": self.diagnostics,
            "seconds": float(self.seconds),
            "stage": self.stage,
            "reason": self.reason,
            "rule": self.rule,
            "told_user": self.told_user,
            "seeds": self.seeds,
            "sizes": [dict(s) for s in self.sizes],
            "details": json.loads(json.dumps(self.details, default=str)),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CheckReport:
        """A report from :meth:`record`'s data (or from a record written before the typed fields)."""
        report = cls(
            str(record["checker"]),
            record["status"],
            str(record.get("diagnostics") or ""),
            float(record.get("seconds") or 0.0),
            dict(record.get("details") or {}),
            stage=str(record.get("stage") or ""),
            reason=str(record.get("reason") or ""),
            rule=str(record.get("rule") or ""),
            told_user=bool(record.get("told_user")),
            seeds=int(record.get("seeds") or 0),
            sizes=[dict(s) for s in record.get("sizes") or []],
        )
        return report.fields_from_details()


def stable_paths(text: str, replacements: dict[str, str]) -> str:
    """Replace temporary folders in compiler output by stable names.

    Prompts and cache keys must be byte-stable across runs, so diagnostics like
    ``/tmp/abc123/probe.cpp:12:3: error`` become ``candidate.cpp:12:3: error``.
    Longer paths are replaced first.
    """
    for path in sorted(replacements, key=len, reverse=True):
        text = text.replace(path, replacements[path])
    return re.sub(r"/tmp/[A-Za-z0-9_.\-]+/", "", text)
