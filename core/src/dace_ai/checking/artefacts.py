"""The artefacts of one candidate's checks: what each checker may read, and the order they give.

A checker declares what it ``needs`` and ``gives`` (:class:`~dace_ai.plugins.artefacts.Artefact`
objects, on its :class:`~dace_ai.plugins.registrations.Checker`). The stage runner
(:func:`dace_ai.checking.stages.run_checks`):

* orders the selected checkers by that graph (:func:`order_checkers`): stages still run
  compile -> verify -> bench; within a stage a checker that needs X runs after the one
  that gives X, ``order`` breaks ties. An artefact given by two selected checkers, a need
  whose giver runs in a later stage, or a cycle is a :class:`CheckerGraphError` naming them;
* hands each checker a :class:`ArtefactView` on ``request.artefacts`` limited to its
  ``needs`` (an undeclared read raises :class:`UndeclaredArtefact`; a declared need no
  checker gave reads as absent, ``None`` through ``.get``);
* takes back what its report gives (:meth:`~dace_ai.checking.api.CheckReport.give`), refusing
  an artefact the checker did not declare (its report becomes inconclusive);
* makes the artefacts that say how (``make``) when no selected checker gives them: on first
  read, or at once for ``background`` work, which it stops when the checks end
  (:class:`Artefacts`).

A request made outside the runner (a test calling a checker) gets :meth:`ArtefactView.standalone`:
every artefact may be read, none was given, and those with ``make`` are made on first read.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, TypeVar, cast, overload

from dace_ai.errors import DaceAIError
from dace_ai.plugins.artefacts import Artefact, Stoppable
from dace_ai.plugins.registrations import STAGES, Checker

T = TypeVar("T")
D = TypeVar("D")


class _Carrier(Protocol):
    """What carries a view: a :class:`~dace_ai.checking.api.CheckRequest` (not named here: it names this module)."""

    artefacts: ArtefactView


R = TypeVar("R", bound=_Carrier)

__all__ = [
    "Artefact",
    "ArtefactView",
    "Artefacts",
    "CheckerGraphError",
    "Stoppable",
    "UndeclaredArtefact",
    "order_checkers",
]


class CheckerGraphError(DaceAIError, ValueError):
    """The selected checkers' needs and gives cannot be ordered (a cycle, a second giver, a later giver)."""


class UndeclaredArtefact(DaceAIError, LookupError):
    """A checker read an artefact it did not declare in its ``needs`` (not a ``KeyError``, so a checker's
    ``except KeyError`` never hides it)."""


class Artefacts:
    """The runner's store for one candidate: what checkers gave, what was made, the background work."""

    def __init__(self) -> None:
        self.given: dict[Artefact[Any], object] = {}
        self.made: dict[Artefact[Any], object] = {}
        self.background: list[Stoppable] = []
        #: The checkers the runner selected for the candidate, in run order (none outside the runner).
        self.selected: tuple[Checker, ...] = ()
        self._lock = threading.RLock()

    def get(self, key: Artefact[T]) -> T | None:
        """What was given or made under ``key`` so far (None when nothing was): for the runner's caller."""
        return cast("T | None", self.given.get(key, self.made.get(key)))

    def __getitem__(self, key: Artefact[T]) -> T:
        found = self.get(key)
        if found is None:
            raise KeyError(f"nothing was given or made under {key!r}")
        return found

    def value(self, request: _Carrier, key: Artefact[Any]) -> object:
        """What was given under ``key``; else, when ``key`` says how, what it makes (once); else None."""
        if key in self.given:
            return self.given[key]
        if key.make is None:
            return None
        with self._lock:
            if key not in self.made:
                made = key.make(self.request_for(request, f"the maker of {key!r}", key.needs))
                self.made[key] = made
                if key.background and made is not None:
                    self.background.append(cast(Stoppable, made))
            return self.made[key]

    def request_for(self, request: R, who: str, needs: Iterable[Artefact[Any]]) -> R:
        """A copy of ``request`` with a view limited to ``needs`` for ``who`` (a checker's name)."""
        view = ArtefactView(who, frozenset(needs), self)
        limited = copy.copy(request)
        limited.artefacts = view
        view.bind(limited)
        return limited

    def stop_background(self) -> None:
        """Stop the background work started for the candidate (best effort: a broken stop is ignored)."""
        with self._lock:
            background, self.background = self.background, []
        for work in background:
            try:
                work.stop()
            except Exception:  # noqa: BLE001, S110 - stopping is best effort; a checker's bug must not hide reports
                pass


class ArtefactView:
    """A checker's read-only view of the artefacts it declared (``request.artefacts``)."""

    __slots__ = ("_needs", "_owner", "_request", "_store")

    def __init__(self, owner: str, needs: frozenset[Artefact[Any]] | None, store: Artefacts) -> None:
        self._owner = owner
        self._needs = needs
        self._store = store
        self._request: _Carrier | None = None

    @classmethod
    def standalone(cls) -> ArtefactView:
        """The view of a request made outside the runner: any artefact, none given, made ones made once."""
        return cls("a request outside the stage runner", None, Artefacts())

    def bind(self, request: _Carrier) -> None:
        """Attach the view to the request that carries it (the request its makers are given); once."""
        if self._request is None:
            self._request = request

    def _value(self, key: Artefact[Any]) -> object:
        if not isinstance(key, Artefact):
            raise TypeError(f"{self._owner}: artefacts are read by Artefact, got {key!r}")
        if self._needs is not None and key not in self._needs:
            declared = ", ".join(sorted(a.name for a in self._needs)) or "none"
            raise UndeclaredArtefact(
                f"checker {self._owner!r} read {key!r}, which it does not declare in its needs "
                f"(declared: {declared}); add it to Checker(needs=...)"
            )
        if self._request is None:
            raise RuntimeError(f"{self!r} is not attached to a request")
        return self._store.value(self._request, key)

    def __getitem__(self, key: Artefact[T]) -> T:
        """The value given (or made) under ``key``; ``KeyError`` naming it when there is none."""
        found = self._value(key)
        if found is None:
            raise KeyError(f"no selected checker gave {key!r} to {self._owner!r}")
        return cast(T, found)

    @overload
    def get(self, key: Artefact[T]) -> T | None: ...
    @overload
    def get(self, key: Artefact[T], default: D) -> T | D: ...

    def get(self, key: Artefact[Any], default: object = None) -> object:
        """The value given (or made) under ``key``, or ``default`` (None) when there is none."""
        found = self._value(key)
        return default if found is None else found

    def __contains__(self, key: Artefact[Any]) -> bool:
        return self.get(key) is not None

    def wanted(self, key: Artefact[Any]) -> bool:
        """True when a selected checker that applies to this candidate needs ``key``: its giver may then
        do the extra work (``verify`` times its run only when ``bench`` will judge the timing). False
        outside the stage runner, where nothing else runs; a checker whose ``applies`` raises wants nothing."""
        if self._request is None:
            raise RuntimeError(f"{self!r} is not attached to a request")
        for checker in self._store.selected:
            if key not in checker.needs:
                continue
            try:
                limited = self._store.request_for(self._request, checker.name, checker.needs)
                if checker.applies is None or checker.applies(limited):
                    return True
            except Exception:  # noqa: BLE001, S112 - the runner reports a broken applies() when it runs it
                continue
        return False

    def __repr__(self) -> str:
        needs = "any" if self._needs is None else ", ".join(sorted(a.name for a in self._needs))
        return f"ArtefactView({self._owner!r}, needs=[{needs}])"


def _names(checkers: Iterable[Checker]) -> str:
    return ", ".join(repr(c.name) for c in checkers)


def order_checkers(checkers: Sequence[Checker]) -> list[Checker]:
    """``checkers`` in run order: by stage, then givers before their needers, then ``order``, then as given.

    Raises :class:`CheckerGraphError` naming the checkers when one artefact has two givers, a checker
    needs what a later stage gives, or needs and gives form a cycle.
    """
    givers: dict[Artefact[Any], Checker] = {}
    for checker in checkers:
        for artefact in checker.gives:
            other = givers.setdefault(artefact, checker)
            if other is not checker:
                raise CheckerGraphError(
                    f"checkers {other.name!r} ({other.origin}) and {checker.name!r} ({checker.origin}) both give "
                    f"{artefact!r}; select one of them"
                )
    for checker in checkers:
        for artefact in checker.needs:
            giver = givers.get(artefact)
            if giver is not None and STAGES.index(giver.stage) > STAGES.index(checker.stage):
                raise CheckerGraphError(
                    f"checker {checker.name!r} (stage {checker.stage}) needs {artefact!r}, which "
                    f"{giver.name!r} gives only in the later stage {giver.stage}"
                )
    ordered: list[Checker] = []
    for stage in STAGES:
        waiting = sorted((c for c in checkers if c.stage == stage), key=lambda c: c.order)  # stable
        placed: set[str] = set()
        while waiting:
            ready = next(
                (
                    c
                    for c in waiting
                    if all(
                        givers[a].name in placed or givers[a].stage != stage or givers[a] is c
                        for a in c.needs
                        if a in givers
                    )
                ),
                None,
            )
            if ready is None:
                raise CheckerGraphError(
                    f"checkers {_names(waiting)} (stage {stage}) need each other's artefacts in a cycle: "
                    + "; ".join(
                        f"{c.name!r} needs {', '.join(repr(a) for a in c.needs if a in givers)}"
                        for c in waiting
                        if any(a in givers for a in c.needs)
                    )
                )
            waiting.remove(ready)
            placed.add(ready.name)
            ordered.append(ready)
    return ordered
