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
``rule``, ``told_user``, ``seeds``, ``sizes``); typed results are fields too (``coverage``, the bench's
``bench`` figures and ``speed_of_light``: :mod:`dace_ai.performance.records`); ``details`` holds what
only one checker knows (remarks, the ladder). Reports travel as :meth:`CheckReport.record`
(sessions' ``checks.json``, check jobs' results, the answer cache) and come back with
:meth:`CheckReport.from_record`, so one shape is written and read everywhere.

What a checker needs from another (the verify stage's sandboxed run, the candidate's one
compile) comes as typed, frozen records under :class:`~dace_ai.plugins.artefacts.Artefact` keys
that the checker declares (``Checker(needs=..., gives=...)``): it reads them on
``request.artefacts`` (:class:`~dace_ai.checking.artefacts.ArtefactView`, limited to its
``needs``) and gives its own back with :meth:`CheckReport.give`. The stage runner orders the
checkers by what they need and give (:mod:`dace_ai.checking.artefacts`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from dace_ai.checking.artefacts import ArtefactView
from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.performance.records import BenchFigures, SpeedOfLight
from dace_ai.plugins.artefacts import Artefact
from dace_ai.prompt.answer import Answer

Status = Literal["passed", "failed", "inconclusive"]

T = TypeVar("T")


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
    #: Fixed text dace-ai puts before the answer in the host unit the candidate's one compile builds
    #: (the CPU twin's header, :mod:`dace_ai.compilation.cpu_twin`); never the model's.
    prelude: str = ""
    #: The artefacts the checker declared in its ``needs`` (set by the stage runner; a request made
    #: outside it may read any artefact, and none was given): ``request.artefacts.get(SANDBOX_RUN)``.
    artefacts: ArtefactView = field(default_factory=ArtefactView.standalone, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.artefacts.bind(self)


@dataclass(frozen=True)
class Coverage:
    """What a passed comparison with the reference varied beyond its seeds and sizes (read by
    :mod:`dace_ai.checking.levels` to word the verification level)."""

    #: The thread counts its runs used (``(1, 2)``: one thread, then two).
    threads: tuple[int, ...] = ()
    #: The input distributions it ran.
    distributions: tuple[str, ...] = ()
    #: The GPU it ran on ("" on the CPU).
    device: str = ""
    #: The bench sizes its bench section ran, when it timed the candidate too.
    bench_sizes: dict[str, int] | None = None
    #: It ran device code on its CPU twin (:mod:`dace_ai.compilation.cpu_twin`), not on a GPU.
    twin: bool = False

    def record(self) -> dict[str, Any]:
        return {
            "threads": list(self.threads),
            "distributions": list(self.distributions),
            "device": self.device,
            "bench_sizes": dict(self.bench_sizes) if self.bench_sizes is not None else None,
            **({"twin": True} if self.twin else {}),  # only when set: older records read the same
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Coverage:
        bench = record.get("bench_sizes")
        return cls(
            threads=tuple(int(n) for n in record.get("threads") or ()),
            distributions=tuple(str(d) for d in record.get("distributions") or ()),
            device=str(record.get("device") or ""),
            bench_sizes={str(k): int(v) for k, v in bench.items()} if isinstance(bench, Mapping) else None,
            twin=bool(record.get("twin")),
        )

    @classmethod
    def from_details(cls, details: Mapping[str, Any]) -> Coverage:
        """The coverage a verify report written before this record kept in its ``details``."""
        runs = (details.get("threads") or {}).get("runs") if isinstance(details.get("threads"), Mapping) else None
        counts = sorted({int(n) for run in runs or [] for n in run.get("threads") or []})
        ran = (
            (details.get("distributions") or {}).get("ran")
            if isinstance(details.get("distributions"), Mapping)
            else None
        )
        bench = details.get("bench_sizes")
        return cls(
            threads=tuple(counts),
            distributions=tuple(str(d) for d in ran or ()),
            device=str(details.get("device") or ""),
            bench_sizes=dict(bench) if isinstance(bench, Mapping) else None,
            twin=details.get("twin") is True,
        )


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
    #: Judged from the code's text alone, nothing compiled or run (it makes no verification level of its own).
    static: bool = field(default=False, kw_only=True)
    #: A verify-stage report that adds to the ``verify`` comparison rather than making one (the sanitizer runs).
    supplements_verify: bool = field(default=False, kw_only=True)
    #: Not run because the check was routed to the compile stage only (no worker for the target, or this host
    #: cannot run code for the target).
    compile_only: bool = field(default=False, kw_only=True)
    #: What a comparison with the reference varied (threads, distributions, device, bench sizes).
    coverage: Coverage | None = field(default=None, kw_only=True)
    #: What the bench stage measured (timings, speedups, baselines, sizes).
    bench: BenchFigures | None = field(default=None, kw_only=True)
    #: The timing against this machine's roofline.
    speed_of_light: SpeedOfLight | None = field(default=None, kw_only=True)
    #: What the checker gives to the checkers after it (:meth:`give`); taken by the stage runner,
    #: never recorded.
    artefacts: dict[Artefact[Any], object] = field(default_factory=dict, kw_only=True, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.fields_from_details()

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def give(self, artefact: Artefact[T], value: T) -> CheckReport:
        """Give ``value`` under ``artefact`` to the checkers that need it (declared in ``gives``); returns self."""
        self.artefacts[artefact] = value
        return self

    def fields_from_details(self) -> CheckReport:
        """Move what an older checker put into ``details`` by convention into the typed fields.

        The keys ``stage``, ``reason``, ``rule``, ``seeds``, ``sizes`` and ``told`` (now
        ``told_user``), and, left in place, ``static``, ``sanitizers`` (``supplements_verify``),
        ``compile_only`` and a comparison's ``threads``/``distributions``/``device``/``bench_sizes``
        (``coverage``); a new report, the stage runner (for details filled in later) and
        :meth:`from_record` (records written before the fields) call this, so a plugin written
        before the fields still reports its stage, reasons and level.
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
        # Flags and coverage the levels read, kept in ``details`` by convention before the fields (not moved:
        # the details stay the checker's own record).
        self.static = self.static or d.get("static") is True
        self.supplements_verify = self.supplements_verify or "sanitizers" in d
        self.compile_only = self.compile_only or bool(d.get("compile_only"))
        compared = isinstance(d.get("threads"), Mapping) or isinstance(d.get("distributions"), Mapping)
        if self.coverage is None and not self.supplements_verify and (compared or "device" in d or "bench_sizes" in d):
            self.coverage = Coverage.from_details(d)
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
            "static": self.static,
            "supplements_verify": self.supplements_verify,
            "compile_only": self.compile_only,
            "coverage": self.coverage.record() if self.coverage is not None else None,
            "details": json.loads(json.dumps({**self.details, **self._results()}, default=str)),
        }

    def _results(self) -> dict[str, Any]:
        """The typed results as JSON data, keyed as ``details`` held them before their records."""
        out = self.bench.record() if self.bench is not None else {}
        if self.speed_of_light is not None:
            out["speed_of_light"] = self.speed_of_light.record()
        return out

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CheckReport:
        """A report from :meth:`record`'s data (or from a record written before the typed fields); the bench
        figures and speed of light it keeps in ``details`` become ``bench`` and ``speed_of_light``."""
        details = dict(record.get("details") or {})
        sol = details.pop("speed_of_light", None)
        report = cls(
            str(record["checker"]),
            record["status"],
            str(record.get("diagnostics") or ""),
            float(record.get("seconds") or 0.0),
            details,
            stage=str(record.get("stage") or ""),
            reason=str(record.get("reason") or ""),
            rule=str(record.get("rule") or ""),
            told_user=bool(record.get("told_user")),
            seeds=int(record.get("seeds") or 0),
            sizes=[dict(s) for s in record.get("sizes") or []],
            static=bool(record.get("static")),
            supplements_verify=bool(record.get("supplements_verify")),
            compile_only=bool(record.get("compile_only")),
            coverage=Coverage.from_record(record["coverage"]) if record.get("coverage") else None,
            speed_of_light=SpeedOfLight.from_record(sol) if isinstance(sol, Mapping) else None,
        )
        report.fields_from_details()
        if report.stage == "bench" and BenchFigures.in_details(details):
            report.bench = BenchFigures.from_record(details)
            for key in BenchFigures.KEYS:
                details.pop(key, None)
        return report


def stable_paths(text: str, replacements: dict[str, str]) -> str:
    """Replace temporary folders in compiler output by stable names.

    Prompts and cache keys must be byte-stable across runs, so diagnostics like
    ``/tmp/abc123/probe.cpp:12:3: error`` become ``candidate.cpp:12:3: error``.
    Longer paths are replaced first.
    """
    for path in sorted(replacements, key=len, reverse=True):
        text = text.replace(path, replacements[path])
    return re.sub(r"/tmp/[A-Za-z0-9_.\-]+/", "", text)
