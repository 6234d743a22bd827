"""Typed artefacts: what one checker of a candidate gives and another needs.

An :class:`Artefact` is a typed key, declared once at module level next to the type of
its value::

    SANDBOX_RUN: Artefact[SandboxRun] = Artefact("sandbox_run")

Artefacts are compared by identity (two artefacts with one name are two artefacts);
``name`` labels them in errors. A :class:`~dace_ai.plugins.registrations.Checker` declares
the artefacts it ``needs`` and ``gives``; the stage runner orders the checkers by them and
hands each checker exactly what it declared (:mod:`dace_ai.checking.artefacts`).

An artefact may also say how the runner makes it when no selected checker gives it
(``make``): on first read (a compile every checker may share), or, with
``background=True``, as soon as a selected checker needs it, so the work overlaps the
checks before it (the sanitizer builds); the runner stops background work (its value's
``stop()``) when the checks end or a stage fails.

It lives at the bottom of the package (the plugin layer) because registrations name it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")


class Stoppable(Protocol):
    """Work left running in the background (a build): the stage runner stops it when the checks end."""

    def stop(self) -> None: ...


class Artefact(Generic[T]):
    """A typed key for a value one checker gives and another needs (identity-compared).

    ``make(request)`` (optional) makes the value when no selected checker gives it, given a
    request whose artefacts are this artefact's ``needs``; it may return None (nothing to give).
    ``background=True``: the runner starts ``make`` as soon as a selected checker needs the
    artefact (and its own needs are given) and stops the value (its ``stop()``) when the checks end.
    """

    __slots__ = ("background", "make", "name", "needs")

    def __init__(
        self,
        name: str,
        *,
        make: Callable[[Any], T | None] | None = None,
        needs: tuple[Artefact[Any], ...] = (),
        background: bool = False,
    ) -> None:
        if background and make is None:
            raise ValueError(f"Artefact({name!r}): background=True needs a make function")
        self.name = name
        self.make = make
        self.needs = tuple(needs)
        self.background = background

    def __repr__(self) -> str:
        return f"Artefact({self.name!r})"
