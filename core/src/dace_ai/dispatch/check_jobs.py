"""The checks of one candidate as a self-contained job: what a worker runs and the registry of this process.

``generate`` and ``optimize`` ask the provider in the user's process (keys never leave
it) and hand each candidate's checks (compile, verify, bench: whatever
:func:`dace_ai.solving.checked_answer.check_answer` runs) to an executor plugin. A job's
payload is plain JSON data (:class:`~dace_ai.solving.check_records.CheckPayload`, made by
:func:`~dace_ai.solving.check_records.make_payload`): the answer, the node's context without its
live DaCe objects and the node in a program of its own, from which the worker rebuilds the live
SDFG, state and node the checkers use, the settings the checks read (none of the provider's) and,
for an ``AINode`` with ``reference=fn``, the user's function, pickled (the worker registers it like
the node's process did).

A worker runs :func:`run_check_job` and returns a
:class:`~dace_ai.dispatch.check_results.CheckOutcome`; the user's process validates it
(:func:`~dace_ai.dispatch.check_results.read_outcome`) before anything is believed: a worker cannot say
"passed" without the reports and the details a local check would have.

Same process, same check: :func:`run_check_job` first looks the node up in a registry of
this process (:func:`register_live`), so a job that runs here (threads) checks the very
objects a local check would, and rebuilds them only in another process.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import warnings
from typing import Any

import dace
from pydantic import TypeAdapter

from dace_ai.checking.api import CheckReport
from dace_ai.checking.candidate_checks import check_candidate
from dace_ai.checking.stages import select_checkers
from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.dispatch.check_results import CheckOutcome, WarningModel
from dace_ai.prompt.answer import Answer
from dace_ai.sandbox.reference import register_reference
from dace_ai.solving.check_records import CheckPayload, ReportModel
from dace_ai.solving.tasklet import tasklet_factory

# ----------------------------------------------------------------------------- same-process registry
_live: dict[str, tuple[NodeContext, AISettings]] = {}
_live_lock = threading.Lock()


def register_live(job_id: str, ctx: NodeContext, settings: AISettings) -> None:
    """Keep ``ctx`` (with its live objects) and the settings for a job that may run in this very process."""
    with _live_lock:
        _live[job_id] = (ctx, settings)


def forget_live(job_id: str) -> None:
    with _live_lock:
        _live.pop(job_id, None)


# ----------------------------------------------------------------------------- worker side
def _settings(payload: CheckPayload) -> AISettings:
    settings = AISettings.model_validate(payload.settings)
    settings._sources.update(payload.sources)
    settings._plugin_values.update(payload.plugin_settings)
    return settings


def _rebuild(payload: CheckPayload) -> NodeContext:
    """The NodeContext with live objects rebuilt from the one-node program."""
    ctx = TypeAdapter(NodeContext).validate_python(payload.node)
    sdfg = dace.SDFG.from_json(json.loads(payload.program))
    state = next(iter(sdfg.states()))  # a list on DaCe 1.0, a generator on DaCe 2
    node = next(n for n in state.nodes() if isinstance(n, dace.nodes.LibraryNode))
    if payload.reference:
        node.reference = _reference_key(payload.reference)
    ctx.live = {"sdfg": sdfg, "state": state, "node": node, "root": sdfg}
    return ctx


_reference_keys: dict[str, str] = {}


def _reference_key(pickled: str) -> str:
    """Register a shipped reference function in this worker once (every candidate of a node sends the same)."""
    with _live_lock:
        known = _reference_keys.get(pickled)
    if known is None:
        try:
            import cloudpickle as pickler  # optional dependency (dask brings it)
        except ImportError:  # pragma: no cover
            import pickle as pickler
        known = register_reference(pickler.loads(base64.b64decode(pickled)))
        with _live_lock:
            _reference_keys[pickled] = known
    return known


def _compile_stage_only(ctx: NodeContext, settings: AISettings) -> AISettings:
    """Settings that run only the compile-stage checkers the node would get."""
    chosen, _ = select_checkers(ctx, settings)
    names = [c.name for c in chosen if c.stage == "compile"]
    return settings.model_copy(update={"checkers": tuple(names) or None})


def run_check_job(data: dict[str, Any]) -> dict[str, Any]:
    """The job function (runs on a worker): check one candidate, return a :class:`CheckOutcome` as data."""
    started = time.perf_counter()
    payload = CheckPayload.model_validate(data)
    with _live_lock:
        here = _live.get(payload.job)
    if here is None:
        dace.Config.set("default_build_folder", value=payload.build_root)
        ctx, settings = _rebuild(payload), _settings(payload)
    else:
        ctx, settings = here
    answer = Answer.model_validate(payload.answer)
    check_settings_ = _compile_stage_only(ctx, settings) if payload.compile_only else settings
    factory = tasklet_factory(answer, ctx)
    # Identical answers for one node share a check folder: the stage runner checks them one at a time.
    if here is not None:  # this process: warnings go out as from a local check (catch_warnings is not thread-safe)
        caught: list[Any] = []
        reports = check_candidate(answer, ctx, check_settings_, set(payload.environments), factory)
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            reports = check_candidate(answer, ctx, check_settings_, set(payload.environments), factory)
    if payload.compile_only:
        reports.append(
            CheckReport(
                "routing",
                "inconclusive",
                f"Not run: {payload.compile_only}.",
                stage="verify",
                reason=payload.compile_only,
                details={"compile_only": True},
                compile_only=True,
            )
        )
    return CheckOutcome(
        reports=[ReportModel.model_validate(r.record()) for r in reports],
        warnings=[WarningModel(category=w.category.__name__, message=str(w.message)) for w in caught],
        seconds=time.perf_counter() - started,
        check_seconds=sum(r.seconds for r in reports),
        in_process=here is not None,
    ).model_dump(mode="json")
