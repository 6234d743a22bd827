"""The checks of one candidate as a self-contained job: what travels to a worker and what comes back.

``generate`` and ``optimize`` ask the provider in the user's process (keys never leave
it) and hand each candidate's checks (compile, verify, bench: whatever
:func:`dace_ai.solving.checked_answer.check_answer` runs) to an executor plugin. A job's
payload is plain JSON data (:class:`CheckPayload`):

* the answer (its pydantic model dumped), the environment class paths it resolved to;
* the node's check inputs: its :class:`~dace_ai.context.types.NodeContext` without the live
  DaCe objects, and a one-node program (SDFG JSON) wired like the node in the user's
  program, from which the worker rebuilds the live SDFG, state and node the checkers use;
* the settings the checks read, without the provider's (no model, no endpoint, nothing
  that could hold a credential), and the build root the checks keep their builds under;
* for an ``AINode`` with ``reference=fn``, the user's function, pickled (it is the user's
  own code; the worker registers it like the node's process did).

A worker runs :func:`run_check_job` and returns a
:class:`~dace_ai.solving.check_results.CheckOutcome`; the user's process validates it
(:func:`~dace_ai.solving.check_results.read_outcome`) before anything is believed: a worker cannot say
"passed" without the reports and the details a local check would have.

Same process, same check: :func:`run_check_job` first looks the node up in a registry of
this process (:func:`register_live`), so a job that runs here (threads) checks the very
objects a local check would, and rebuilds them only in another process.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from dace_ai.errors import DaceAIError
from dace_ai.solving.check_results import CheckOutcome, ReportModel, WarningModel

if TYPE_CHECKING:
    from dace_ai.config.settings import AISettings
    from dace_ai.context.types import NodeContext
    from dace_ai.prompt.answer import Answer

#: Settings that configure the provider, not the checks: never sent to a worker.
PROVIDER_SETTINGS = frozenset(
    {
        "provider",
        "model",
        "base_url",
        "effort",
        "max_tokens",
        "timeout",
        "max_retries",
        "prompt_dir",
        "interactive",
        "max_concurrency",
        "extra_instructions",
        "executor",
        "executor_scheduler",
        "executor_workers",
        "node_concurrency",
    }
)


class KeyInPayload(DaceAIError):
    """A job payload would carry a credential; it is not sent."""


# ----------------------------------------------------------------------------- payload
class CheckPayload(BaseModel):
    """Everything a worker needs to check one candidate (plain data; see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    job: str
    answer: dict[str, Any]
    node: dict[str, Any]  #: NodeContext fields (no ``live``)
    program: str  #: one-node program, SDFG JSON
    settings: dict[str, Any]
    sources: dict[str, str] = Field(default_factory=dict)
    plugin_settings: dict[str, Any] = Field(default_factory=dict)
    environments: list[str] = Field(default_factory=list)
    build_root: str
    #: Set when no worker offers the node's target: run the compile stage only and say why.
    compile_only: str | None = None
    #: base64 of the pickled ``reference=`` function of an AINode (the user's own code).
    reference: str | None = None


def check_settings(settings: AISettings) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    """(values, sources, plugin values) of the settings a check reads: provider settings dropped."""
    from dace_ai.plugins.manager import get_plugin_manager
    from dace_ai.plugins.registrations import Executor, Provider

    values = {k: v for k, v in settings.model_dump(mode="json").items() if k not in PROVIDER_SETTINGS}
    sources = {k: v for k, v in settings.sources.items() if k in values}
    declared = get_plugin_manager().declared_settings()
    # Settings of providers and executors (a batch queue, a job prologue) are not the checks' business.
    plugin = {
        k: v
        for k, v in settings.plugin_values.items()
        if k in declared and not isinstance(declared[k][1], (Provider, Executor)) and k not in PROVIDER_SETTINGS
    }
    return values, sources, plugin


def _node_fields(ctx: NodeContext) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(ctx):
        if f.name == "live":
            continue
        value = getattr(ctx, f.name)
        out[f.name] = [_as_dict(v) for v in value] if isinstance(value, list) else _as_dict(value)
    return json.loads(json.dumps(out))


def _as_dict(value: Any) -> Any:
    """A dataclass instance (a connector, a container, ...) as its dict; any other value as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def carrier_program(ctx: NodeContext) -> str:
    """The node in a program of its own (SDFG JSON): its data, symbols and memlets as in the user's program."""
    import copy

    from dace_ai.checking.one_node import one_node_program

    live = ctx.live or {}
    node, live_sdfg = live.get("node"), live.get("sdfg")
    if node is None or live_sdfg is None:
        raise LookupError(f"node {ctx.name!r}: no live node to send (context collected without its SDFG)")

    def place(state: Any) -> Any:
        placed = copy.deepcopy(node)
        state.add_node(placed)
        return placed

    sdfg = one_node_program(
        f"ai_job_{_safe(ctx.name)}", ctx, place, lambda conn: copy.deepcopy(live_sdfg.arrays[conn.container])
    )
    return json.dumps(sdfg.to_json())


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)[:40] or "node"


def _pickled_reference(ctx: NodeContext) -> str | None:
    """The AINode's ``reference=`` function, pickled, when it has one (None otherwise)."""
    from dace_ai.checking.reference import implemented_node, reference_function

    key = getattr(implemented_node(ctx), "reference", None)
    function = reference_function(key) if isinstance(key, str) and key else None
    if function is None:
        return None
    try:
        import cloudpickle as pickler  # by value where needed (functions of a script, closures)
    except ImportError:  # pragma: no cover - dask brings cloudpickle; plain pickle works for module functions
        import pickle as pickler
    return base64.b64encode(pickler.dumps(function)).decode()


def make_payload(
    job_id: str,
    answer: Answer,
    ctx: NodeContext,
    settings: AISettings,
    environments: set[str],
    compile_only: str | None = None,
    program: str | None = None,
    in_process: bool = False,
) -> CheckPayload:
    """The payload of one candidate's checks; raises :class:`KeyInPayload` if a credential would travel.

    ``in_process``: the job runs in this process and finds the node in the registry
    (:func:`register_live`), so neither the program nor the reference function is packed.
    """
    from dace_ai.storage.files import build_root

    values, sources, plugin = check_settings(settings)
    payload = CheckPayload(
        job=job_id,
        answer=answer.model_dump(mode="json"),
        node=_node_fields(ctx),
        program="" if in_process else program if program is not None else carrier_program(ctx),
        settings=values,
        sources=sources,
        plugin_settings=plugin,
        environments=sorted(environments),
        build_root=str(build_root().resolve()),
        compile_only=compile_only,
        reference=None if in_process else _pickled_reference(ctx),
    )
    assert_key_free(payload.model_dump_json())
    return payload


def assert_key_free(text: str) -> None:
    """Refuse to send ``text`` when it holds a credential this process knows (API key variables, URL user info)."""
    from dace_ai.errors import redact

    if redact(text) != text:
        raise KeyInPayload(
            "a check job would carry a credential (an API key or a base URL's user info); "
            "it was not sent. Report this as a bug of dace-ai."
        )


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
    from dace_ai.config.settings import AISettings

    settings = AISettings.model_validate(payload.settings)
    settings._sources.update(payload.sources)
    settings._plugin_values.update(payload.plugin_settings)
    return settings


def _rebuild(payload: CheckPayload) -> NodeContext:
    """The NodeContext with live objects rebuilt from the one-node program."""
    import dace
    from pydantic import TypeAdapter

    from dace_ai.context.types import NodeContext

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
            import cloudpickle as pickler
        except ImportError:  # pragma: no cover
            import pickle as pickler
        from dace_ai.checking.reference import register_reference

        known = register_reference(pickler.loads(base64.b64decode(pickled)))
        with _live_lock:
            _reference_keys[pickled] = known
    return known


def _compile_stage_only(ctx: NodeContext, settings: AISettings) -> AISettings:
    """Settings that run only the compile-stage checkers the node would get."""
    from dace_ai.checking.stages import select_checkers

    chosen, _ = select_checkers(ctx, settings)
    names = [c.name for c in chosen if c.stage == "compile"]
    return settings.model_copy(update={"checkers": tuple(names) or None})


def run_check_job(data: dict[str, Any]) -> dict[str, Any]:
    """The job function (runs on a worker): check one candidate, return a :class:`CheckOutcome` as data."""
    import dace

    from dace_ai.checking.api import CheckReport
    from dace_ai.prompt.answer import Answer

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
    from dace_ai.checking.candidate_checks import check_candidate
    from dace_ai.solving.tasklet import tasklet_factory

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
