"""The stable, author-facing module for plugin writers.

Everything a plugin needs is importable from here; the rest of dace-ai may be
reorganised without breaking plugins::

    from dace_ai.plugin import hookimpl, Provider, Target, PromptSection, Checker
"""

from __future__ import annotations

from .hookspecs import hookimpl
from .registrations import (
    STAGES,
    Checker,
    Detection,
    EnvironmentGenerator,
    PromptSection,
    Provenance,
    Provider,
    Registration,
    Target,
)

__all__ = [
    "STAGES",
    "Checker",
    "Detection",
    "EnvironmentGenerator",
    "PromptSection",
    "Provenance",
    "Provider",
    "Registration",
    "Target",
    "hookimpl",
]
