"""Check one candidate answer for one node: the public entry to the checks.

:func:`check_candidate` builds the :class:`~dace_ai.checking.api.CheckRequest` (with its
private work folder, :func:`~dace_ai.checking.stages.check_workdir`) and runs the stages
(:func:`~dace_ai.checking.stages.run_checks`). The expansion calls it for every candidate,
in its own process or on an executor's worker (:mod:`dace_ai.dispatch.check_jobs`);
anything else that has an answer and a node context (a test, an evaluation) can call it
the same way.

It knows nothing of the expansion, which sits a layer above: whoever has the live node
passes ``make_tasklet``, the factory that builds the very tasklet the expansion would
place (the checks that build a DaCe program use it; without one they rebuild what they
need from the context).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.checking.stages import check_workdir, run_checks
from dace_ai.context.types import NodeContext
from dace_ai.prompt.answer import Answer

if TYPE_CHECKING:
    from dace_ai.config.settings import AISettings


def check_candidate(
    answer: Answer,
    node_ctx: NodeContext,
    settings: AISettings,
    environments: Iterable[str] | None = None,
    make_tasklet: Callable[[set[str], Any], Any] | None = None,
) -> list[CheckReport]:
    """The check reports of ``answer`` for node ``node_ctx``, checked here and now.

    ``settings``: an :class:`~dace_ai.config.settings.AISettings` (``compile_check=false``
    checks nothing: no reports). ``environments``: the class paths of the DaCe environments
    the answer resolved to (resolving them is the caller's job). ``make_tasklet``: builds the
    tasklet to check from environment class paths (see the module docstring).
    """
    if not settings.compile_check:
        return []

    return run_checks(
        CheckRequest(
            answer=answer,
            node=node_ctx,
            settings=settings,
            workdir=check_workdir(node_ctx, answer),
            make_tasklet=make_tasklet,
            environments=set(environments or ()),
        )
    )
