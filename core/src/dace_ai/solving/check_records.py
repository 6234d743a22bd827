"""One candidate's checks as plain data: what they depend on (:class:`CheckPayload`) and what they report
(:class:`ReportModel`).

:func:`make_payload` gathers what a check reads, without live DaCe objects and without a key:

* the answer (its pydantic model dumped), the environment class paths it resolved to;
* the node's :class:`~dace_ai.context.types.NodeContext` without the live DaCe objects, and a
  one-node program (SDFG JSON, :func:`carrier_program`) wired like the node in the user's program;
* the settings the checks read, without the provider's (no model, no endpoint, nothing that could
  hold a credential), and the build root the checks keep their builds under;
* for an ``AINode`` with ``reference=fn``, the user's function, pickled (it is the user's own code).

The round engine digests it to reuse checks while nothing they depend on changed
(:mod:`dace_ai.solving.check_reuse`); check jobs carry it to an executor's worker
(:mod:`dace_ai.dispatch.check_jobs`). A report as data is validated by :class:`ReportModel` the way
a local check's would hold up (the fields of :meth:`~dace_ai.checking.api.CheckReport.record`, no
others), whether it comes back from a worker or from the answer cache.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dace_ai.compilation.one_node import one_node_program
from dace_ai.errors import DaceAIError, redact
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.plugins.registrations import STAGES, Executor, Provider
from dace_ai.sandbox.reference import implemented_node, reference_function
from dace_ai.storage.files import build_root

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
    key = getattr(implemented_node(ctx), "reference", None)
    function = reference_function(key) if isinstance(key, str) and key else None
    if function is None:
        return None
    try:
        import cloudpickle as pickler  # optional dependency (dask brings it): by value where needed
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
    (:func:`~dace_ai.dispatch.check_jobs.register_live`), so neither the program nor the reference function is packed.
    """
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
    if redact(text) != text:
        raise KeyInPayload(
            "a check job would carry a credential (an API key or a base URL's user info); "
            "it was not sent. Report this as a bug of dace-ai."
        )


# ----------------------------------------------------------------------------- reports
class ReportModel(BaseModel):
    """One check report as data (a worker's result, a recorded check); a ``passed`` report must carry what a
    local one carries."""

    model_config = ConfigDict(extra="forbid")

    checker: str = Field(min_length=1)
    status: Literal["passed", "failed", "inconclusive"]
    diagnostics: str = ""
    seconds: float = Field(ge=0)
    stage: str
    reason: str = ""
    rule: str = ""
    told_user: bool = False
    seeds: int = Field(default=0, ge=0)
    sizes: list[dict[str, int]] = Field(default_factory=list)
    static: bool = False
    supplements_verify: bool = False
    compile_only: bool = False
    coverage: dict[str, Any] | None = None  #: a :class:`~dace_ai.checking.api.Coverage` record
    details: dict[str, Any]

    @field_validator("stage")
    @classmethod
    def _stage(cls, stage: str) -> str:
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        return stage

    @model_validator(mode="after")
    def _passed_has_evidence(self) -> ReportModel:
        stage = self.stage
        if self.status == "passed" and stage == "verify" and self.checker == "verify":
            if self.seeds < 1 or not self.sizes:
                raise ValueError(f"a passed verify report of {self.checker!r} without its seeds and sizes")
        if self.status == "passed" and stage == "bench" and self.details.get("candidate_seconds") is not None:
            times = self.details["candidate_seconds"]
            if not isinstance(times, list) or not all(isinstance(t, (int, float)) and t > 0 for t in times):
                raise ValueError(f"a passed bench report of {self.checker!r} with malformed timings")
        return self
