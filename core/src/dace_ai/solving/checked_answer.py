"""Check an answer as the expansion does: resolve its environments, reuse recorded checks, run the rest.

Every path that judges an answer (the expansion, ``dace_ai.generate``, ``dace_ai.optimize``,
refine, build repairs, ``dace-ai bench``) goes through :func:`check_answer`, or
:func:`check_recorded` when the answer came from the cache with the checks it passed:

* the environments the answer names or requests are resolved here (a refusal goes back
  to the model like a failed check);
* the checks run here (:func:`dace_ai.checking.candidate_checks.check_candidate`, with
  the factory of the tasklet the expansion would place) or elsewhere (``run``: an
  executor's worker, :mod:`dace_ai.dispatch.dispatcher`);
* a cached answer's recorded checks are reused while nothing they depend on changed
  (:mod:`dace_ai.solving.check_reuse`), and :class:`CheckedAnswer` says what the cache
  keeps so that a later run may reuse them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dace_ai.checking.api import CheckReport
from dace_ai.checking.candidate_checks import check_candidate
from dace_ai.checking.stages import failed
from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.environments.resolve import Resolution, resolve_environments
from dace_ai.prompt.answer import Answer
from dace_ai.solving import check_reuse
from dace_ai.solving.tasklet import tasklet_factory

#: Runs the checks of an answer elsewhere (an executor's worker): ``run(answer, ctx, settings, environments)``.
CheckRun = Callable[[Answer, NodeContext, AISettings, set[str]], list[CheckReport]]


@dataclass
class CheckedAnswer:
    """An answer's check reports, the environments it resolved to, and what a later run may reuse."""

    answer: Answer
    ctx: NodeContext
    settings: AISettings
    reports: list[CheckReport]
    environments: set[str]
    #: The reports were recorded by an earlier run under the same fingerprint (no check ran now).
    reused: bool = False
    fingerprint: str = ""

    def record(self, level: str) -> dict[str, Any] | None:
        """What the cache keeps so that a later run may reuse these checks (None when checks are off)."""
        if not self.settings.compile_check or not self.settings.cache:
            return None
        if not self.fingerprint:
            self.fingerprint = check_reuse.fingerprint(self.answer, self.ctx, self.settings, self.environments)
        return check_reuse.record(self.fingerprint, self.reports, level)


def check_recorded(
    answer: Answer,
    ctx: NodeContext,
    settings: AISettings,
    recorded: dict[str, Any] | None = None,
    run: CheckRun | None = None,
) -> CheckedAnswer:
    """:func:`check_answer`, reusing the ``recorded`` checks of a cached answer when nothing they depend on
    changed (:mod:`dace_ai.solving.check_reuse`)."""
    digest = ""
    if recorded and settings.compile_check:
        resolution = answer_environments(answer, ctx)
        if not resolution.problems:
            environments = set(resolution.paths)
            digest = check_reuse.fingerprint(answer, ctx, settings, environments)
            reports = check_reuse.reuse(recorded, digest)
            if reports is not None:
                return CheckedAnswer(answer, ctx, settings, reports, environments, True, digest)
    reports, environments = check_answer(answer, ctx, settings, run)
    return CheckedAnswer(answer, ctx, settings, reports, environments, fingerprint=digest)


def check_answer(
    answer: Answer, ctx: NodeContext, settings: AISettings, run: CheckRun | None = None
) -> tuple[list[CheckReport], set[str]]:
    """The check reports of ``answer`` and, when it passed, the environment class paths it resolved to.

    Refused environment requests go back to the model like a failed check. ``run``
    (``run(answer, ctx, settings, environments) -> reports``) runs the checks elsewhere,
    e.g. :meth:`dace_ai.dispatch.dispatcher.CheckDispatcher.check` on an executor; the
    environments are resolved here either way.
    """
    resolution = answer_environments(answer, ctx)
    if resolution.problems:
        return [CheckReport("environments", "failed", "\n".join(resolution.problems), stage="compile")], set()
    if run is not None and settings.compile_check:
        reports = run(answer, ctx, settings, set(resolution.paths))
    else:
        reports = check_candidate(answer, ctx, settings, resolution.paths, tasklet_factory(answer, ctx))
    return reports, (set() if failed(reports) else set(resolution.paths))


def answer_environments(answer: Answer, ctx: NodeContext) -> Resolution:
    """The environments the answer uses (registered ones by name, requested ones generated), or refusals."""
    if not answer.environments and not answer.use_environments:
        return Resolution()
    return resolve_environments(answer, ctx)
