"""What a generated tasklet says about itself: the ``// dace-ai: key=value ...`` first line.

The comment is part of the tasklet's code, so it survives ``sdfg.save()`` and
``SDFG.from_file()`` in another process and shows in generated C++. Its fields:
``node`` (the library node it replaced), ``provider``, ``model``, ``source``,
``cache_key``, ``session=ai-sessions/<session id>/round-<n>`` (the session and the
round whose answer this is), ``bench`` (the speedup over native), ``sol`` (the
fraction of this machine's speed of light the bench reached, e.g. ``sol=0.33``; see
:mod:`dace_ai.performance`) and ``optimize`` (the winning candidate), when set
``pinned=true``, and ``verification``, the level the checks reached. Values never
contain spaces, except the level
(``verified (3 seeds, 5 sizes, ...)``), which is therefore always written last and
read to the end of the line. Fields this version does not know are kept, in order,
so a tasklet written by a newer version keeps them when this one pins it.

:class:`Provenance` is the one type that writes and reads the line: every writer
(expansion, optimize, refine, rollback, build repairs, pin) goes through
:meth:`Provenance.to_comment`, every reader through :meth:`Provenance.parse`.

:func:`accepted_provenance` is the line of a tasklet holding an accepted answer, written from
that answer's own check reports (the bench figures and the level they reached).

:func:`is_pinned` is the one question every code path that changes tasklets
asks first (build repairs, refine, optimize): a pinned tasklet is left alone.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dace_ai.compat.gpu_host import answer_text
from dace_ai.performance.speed_of_light import provenance_field
from dace_ai.runtime_check.instrument import strip
from dace_ai.storage.session_store import session_by_id

if TYPE_CHECKING:
    from dace_ai.performance.records import BenchFigures, SpeedOfLight
    from dace_ai.providers.api import ProviderReply

_PROVENANCE = re.compile(r"^\s*//\s*dace-ai:(?P<fields>.*)$")
_SESSION = re.compile(r"^ai-sessions/(?P<id>[^/]+)/round-(?P<round>\d+)$")
_TRUE = ("1", "true", "yes")
#: The one field whose value may contain spaces: written last, read to the end of the line.
LAST_FIELD = "verification"


@dataclass(frozen=True)
class Provenance:
    """The fields of a generated tasklet's first line (see the module docstring)."""

    node: str = ""
    provider: str = ""
    model: str = ""
    source: str = ""  #: "cache", the provider's name, or "supplied"
    cache_key: str = ""
    session: str = ""  #: ``ai-sessions/<session id>/round-<n>``
    bench: str = ""  #: ``1.84x(1.71-1.95)_vs_native`` or the candidate's own time
    sol: str = ""  #: the bench's fraction of this machine's speed of light (``0.33``)
    optimize: str = ""  #: the winning candidate of ``dace_ai.optimize`` (``r1s0``)
    pinned: bool = False
    verification: str = ""  #: the verification level (may contain spaces: written last)
    #: Fields this version does not know (``energy=1.2J``), kept in their order.
    extra: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any] | Iterable[Any]) -> Provenance:
        """From ``{field: value}`` or ``[[field, value], ...]`` (a session's record); None values are left out."""
        pairs = list(fields.items() if isinstance(fields, Mapping) else fields)
        known = {f.name for f in dataclasses.fields(cls)} - {"extra", "pinned"}
        values: dict[str, Any] = {}
        extra: dict[str, str] = {}
        for key, value in pairs:
            key = str(key)
            if value is None or key == "extra":
                continue
            if key == "pinned":
                values["pinned"] = value is True or str(value).lower() in _TRUE
            elif key in known:
                values[key] = str(value)
            else:
                extra[key] = str(value)
        return cls(**values, extra=tuple(extra.items()))

    @classmethod
    def parse(cls, code: str | None) -> Provenance | None:
        """The provenance of ``code`` (a tasklet's code or just its first line), or None when it has none."""
        first_line = code.lstrip().split("\n", 1)[0] if code else ""
        m = _PROVENANCE.match(first_line)
        if not m:
            return None
        text = " " + m.group("fields")
        text, found, level = text.partition(f" {LAST_FIELD}=")
        pairs = [part.split("=", 1) for part in text.split() if "=" in part]
        if found:
            pairs.append([LAST_FIELD, level.strip()])
        return cls.from_fields(pairs)

    def fields(self) -> dict[str, str]:
        """``{field: value}`` in the order written: known fields, unknown ones, the level last; empty ones left out."""
        out: dict[str, str] = {}
        for f in dataclasses.fields(self):
            if f.name in ("extra", LAST_FIELD):
                continue
            value = getattr(self, f.name)
            if f.name == "pinned":
                value = "true" if value else ""
            if value:
                out[f.name] = _one_word(str(value))
        for key, value in self.extra:
            if value and key not in out:
                out[_one_word(key)] = _one_word(value)
        if self.verification:
            out[LAST_FIELD] = " ".join(self.verification.split())  # one line, whatever the level says
        return out

    def pairs(self) -> list[list[str]]:
        """``[[field, value], ...]``: how a session records it (JSON keeps the order)."""
        return [[k, v] for k, v in self.fields().items()]

    def to_comment(self) -> str:
        """The first line of the tasklet's code, newline included."""
        return "// dace-ai: " + " ".join(f"{k}={v}" for k, v in self.fields().items()) + "\n"

    def replace(self, **changes: Any) -> Provenance:
        """A copy with ``changes`` (known or unknown fields; None removes a field)."""
        return Provenance.from_fields({**self.fields(), **changes})

    @property
    def session_round(self) -> tuple[str, int] | None:
        """(session id, round) named by the ``session`` field, or None."""
        m = _SESSION.match(self.session)
        if not m or m.group("id") in (".", ".."):  # provenance is text in a tasklet: stay inside the build root
            return None
        return m.group("id"), int(m.group("round"))


def bench_report(reports: Sequence[Any]) -> Any | None:
    """The bench checker's report among ``reports`` that timed something (None when nothing was timed)."""
    for report in reports:
        fig = report.bench
        if report.stage == "bench" and fig is not None and (fig.speedup, fig.candidate_median) != (None, None):
            return report
    return None


def bench_figures(reports: Sequence[Any]) -> BenchFigures | None:
    """The bench checker's figures among ``reports`` (None when nothing was timed)."""
    found = bench_report(reports)
    return found.bench if found is not None else None


def bench_provenance(figures: BenchFigures | None) -> str:
    """Short provenance text: ``1.84x(1.71-1.95)_vs_native`` or the candidate's own time."""
    if figures is None:
        return ""
    if figures.speedup is not None:
        low, high = figures.speedup_range or (figures.speedup, figures.speedup)
        return f"{figures.speedup:.2f}x({low:.2f}-{high:.2f})_vs_native"
    if figures.candidate_median is None:
        return ""
    return f"{figures.candidate_median * 1e6:.1f}us_per_call"


def sol_provenance(sol: SpeedOfLight | None) -> str:
    """The provenance's ``sol`` field: the fraction of speed of light of the bench (``0.33``), or ""."""
    return provenance_field(sol.record() if sol is not None else None)


def accepted_provenance(
    node: str,
    provider: str,
    reply: ProviderReply,
    source: str,
    key: str,
    session_id: str,
    round_number: int,
    reports: Sequence[Any],
    level: str,
    *,
    optimize: str | None = None,
) -> Provenance:
    """The first line of a tasklet holding an accepted answer: where it came from, what its checks measured and
    the level they reached (:class:`Provenance`); ``optimize`` names the winning candidate of ``dace_ai.optimize``.

    The expansion, ``refine`` and build repairs write it from the answer's own reports, so a
    tasklet never carries the level or the figures of code it no longer holds.
    """
    timed = bench_report(reports)
    return Provenance.from_fields(
        {
            "node": node,
            "provider": provider,
            "model": reply.model or "",
            "source": source,
            "cache_key": key[:16],
            "session": f"ai-sessions/{session_id}/round-{round_number}",
            "bench": bench_provenance(timed.bench if timed is not None else None),
            "sol": sol_provenance(timed.speed_of_light if timed is not None else None),
            "optimize": optimize,
            "verification": level,
        }
    )


def _one_word(value: str) -> str:
    """Values other than the level are single words (a space would end them early when read)."""
    return "_".join(value.split())


def _code(tasklet: Any) -> str | None:
    code = getattr(getattr(tasklet, "code", None), "as_string", None)
    return code if isinstance(code, str) else None


def of(tasklet: Any) -> Provenance | None:
    """The provenance of a generated tasklet, or None for any other node."""
    return Provenance.parse(_code(tasklet))


def provenance(tasklet: Any) -> dict[str, str] | None:
    """The fields of a generated tasklet's provenance (:meth:`Provenance.fields`), or None for any other node."""
    found = of(tasklet)
    return found.fields() if found is not None else None


def level_from_code(code: str) -> str | None:
    """The verification level recorded in a generated tasklet's code, or None."""
    found = Provenance.parse(code)
    return (found.verification or None) if found is not None else None


def body(tasklet: Any) -> str:
    """The tasklet's code without its provenance line (what a model or a person wrote).

    For a host tasklet whose code was routed into the GPU file, the code it calls
    (:func:`dace_ai.compat.gpu_host.answer_text`).
    """
    return answer_text(strip(_below_provenance(tasklet)))[0]


def _below_provenance(tasklet: Any) -> str:
    """The tasklet's code after its provenance line, as it is."""
    code = _code(tasklet) or ""
    stripped = code.lstrip()
    if _PROVENANCE.match(stripped.split("\n", 1)[0]):
        return stripped.split("\n", 1)[1] if "\n" in stripped else ""
    return code


def session_round(fields: dict[str, str] | Provenance | None) -> tuple[str, int] | None:
    """(session id, round) named by the ``session`` field, or None."""
    if fields is None:
        return None
    return (fields if isinstance(fields, Provenance) else Provenance.from_fields(fields)).session_round


def with_fields(tasklet: Any, **changes: Any) -> None:
    """Rewrite the provenance line with ``changes`` (None removes a field); the code below is kept."""
    import dace

    changed = (of(tasklet) or Provenance()).replace(**changes)
    tasklet.code = dace.properties.CodeBlock(changed.to_comment() + _below_provenance(tasklet), dace.Language.CPP)


def is_pinned(tasklet: Any) -> bool:
    """True when the tasklet must be left as it is: ``pinned=true`` in its provenance, or its session pinned.

    Anything that would change a generated tasklet (build repairs, refine, optimize)
    asks this first. Any other node (no provenance) is not pinned.
    """
    found = of(tasklet)
    if found is None:
        return False
    if found.pinned:
        return True
    where = found.session_round
    if where is None:
        return False

    try:
        return session_by_id(where[0]).pinned
    except (OSError, ValueError):
        return False
