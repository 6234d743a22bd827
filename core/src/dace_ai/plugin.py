"""The one public door for plugin authors: every type and helper a plugin needs.

Shipped packs import nothing from dace-ai but this module, and the rest of the
core may be reorganised without breaking them. By hook:

* every hook: :data:`hookimpl`, the registrations (:class:`Provider`, :class:`Target`,
  :class:`PromptSection`, :class:`Checker`, :class:`EnvironmentGenerator`), :class:`Setting`
  for settings a plugin owns, :func:`resolve_settings` / :class:`AISettings` to read them;
* providers: :class:`ProviderRequest` in, :class:`ProviderReply` (with :class:`Usage`) out,
  :class:`ProviderError` for failures, the SDK helpers (:func:`provider_failure`,
  :func:`cut_off_error`, :func:`chat_completion_reply`, :func:`strict_json_schema`,
  :func:`json_only_instruction`) and :func:`current_node` for providers that name files after nodes;
* targets and prompt sections: :class:`NodeContext` (with :class:`ConnectorInfo`,
  :class:`ScopeInfo`, :class:`TargetInfo`, :class:`EnvironmentInfo`), :func:`read_cpu`;
* environment generators (library packs): the answer's :class:`EnvironmentRequest` in,
  an :class:`EnvironmentSpec` (data only) out, :func:`detect_library` / :func:`find_header` /
  :func:`find_shared_library` for ``detect``;
* executors: :class:`Executor` registrations whose runners take :class:`Job` objects (run them
  with :func:`run_job`, honour :meth:`Job.resources`) and yield :class:`JobResult`;
  :class:`ExecutorOptions` says where (workers, scheduler);
* bench suites: :class:`BenchSuite` (a folder of task files and the module of their programs);
* checkers: :class:`CheckRequest` in, :class:`CheckReport` out, the :class:`Answer` under
  check, and the standalone-unit kit (:func:`host_unit`, :func:`device_unit`,
  :func:`run_tool`, :func:`report_from_tool`, :func:`check_gpu_unit`, ...) and :class:`GpuPack`,
  the one base of GPU target packs (target, detection, architecture, unit compile); the compiler and
  flags of the real build (:func:`build_command`) and the one shared compile of a candidate
  (:func:`compile_candidate` -> :class:`CandidateBuild` with the object file, the artefact
  :data:`COMPILED`); what checkers of one candidate hand on is an :class:`Artefact` a checker
  declares in ``Checker(needs=..., gives=...)``, read on ``request.artefacts`` and given with
  :meth:`CheckReport.give`: the core's :data:`COMPILED`, :data:`SANDBOX_RUN` (the ``verify``
  checker's frozen :class:`SandboxRun`) and :data:`GPU_RUN`, or a plugin's own; typed results on the
  report: :class:`BenchFigures` (``bench``) and :class:`SpeedOfLight` (``speed_of_light``).

Example::

    from dace_ai.plugin import hookimpl, PromptSection, NodeContext

    def render(ctx: NodeContext) -> str | None:
        return "Use 64-byte aligned loads." if ctx.target.kind == "cpu" else None

    @hookimpl
    def dace_ai_prompt_sections():
        yield PromptSection(name="alignment", order=850, render=render)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from dace_ai.checkers.gpu_pack import GpuPack
from dace_ai.checking.api import CheckReport, CheckRequest, Status, stable_paths
from dace_ai.checking.artefacts import ArtefactView, UndeclaredArtefact
from dace_ai.compilation.compile import COMPILED, CandidateBuild, compile_candidate
from dace_ai.compilation.gpu_build import CMAKE_CANNOT, check_gpu_build
from dace_ai.compilation.gpu_toolchain import gpu_build_blocker, gpu_compute_capability, nvcc_version
from dace_ai.compilation.units import (
    GPU_THREAD_SCHEDULES,
    TASKLET_FUNCTION,
    UNIT_FILE,
    ToolResult,
    answer_headers,
    check_gpu_unit,
    connector_declaration,
    dace_include_dir,
    device_unit,
    environment_flags,
    host_unit,
    init_symbols,
    report_from_tool,
    run_tool,
    scope_parameters,
    state_struct,
    touches_gpu,
)
from dace_ai.config.settings import AISettings, resolve_settings
from dace_ai.context.types import ConnectorInfo, EnvironmentInfo, NodeContext, ScopeInfo, TargetInfo
from dace_ai.environments.installed import detect_library, find_header, find_shared_library
from dace_ai.environments.spec import EnvironmentSpec
from dace_ai.errors import AnswerError, CheckFailed, DaceAIError, PluginError, ProviderError, SettingsError
from dace_ai.execution.jobs import (
    BENCH_RESOURCE,
    CORES_RESOURCE,
    ExecutorOptions,
    ExecutorUnavailable,
    Job,
    JobResult,
    environment_without_secrets,
    machine_resources,
    run_job,
    target_resource,
    worker_name,
)
from dace_ai.performance.records import BenchFigures, SpeedOfLight
from dace_ai.plugins.artefacts import Artefact
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import (
    STAGES,
    BenchSuite,
    Checker,
    Detection,
    EnvironmentGenerator,
    Executor,
    PluginOrigin,
    PromptSection,
    Provider,
    Registration,
    Setting,
    Target,
    VendorPeaks,
)
from dace_ai.prompt.answer import Answer, EnvironmentRequest
from dace_ai.providers.api import (
    Message,
    ProviderClient,
    ProviderReply,
    ProviderRequest,
    Usage,
    cached_fallback,
    current_node,
)
from dace_ai.providers.sdk import (
    RETRIED_STATUS,
    chat_completion_reply,
    cut_off_error,
    describe_failure,
    json_only_instruction,
    provider_failure,
    strict_json_schema,
)
from dace_ai.sandbox.sandbox_run import BENCH_RUN, GPU_RUN, SANDBOX_RUN, SandboxRun
from dace_ai.solving.check_records import KeyInPayload, assert_key_free
from dace_ai.state import STATE
from dace_ai.targets.build_flags import build_command, builds_with_dace, runtime_standard_flag
from dace_ai.targets.cpu import CpuInfo, read_cpu

R = TypeVar("R")


def machine_fact(name: str, maxsize: int | None = 1) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Cache a fact of this machine a plugin reads (a detection, a tool's version) until
    ``dace_ai.state.reset()``: :func:`functools.lru_cache` registered as ``plugin.<name>``."""
    return STATE.cached(f"plugin.{name}", maxsize)


__all__ = [
    "Artefact",
    "ArtefactView",
    "BENCH_RUN",
    "COMPILED",
    "GPU_RUN",
    "CMAKE_CANNOT",
    "BENCH_RESOURCE",
    "CORES_RESOURCE",
    "GPU_THREAD_SCHEDULES",
    "RETRIED_STATUS",
    "STAGES",
    "TASKLET_FUNCTION",
    "UNIT_FILE",
    "AISettings",
    "Answer",
    "AnswerError",
    "BenchFigures",
    "BenchSuite",
    "CandidateBuild",
    "CheckFailed",
    "CheckReport",
    "CheckRequest",
    "Checker",
    "ConnectorInfo",
    "CpuInfo",
    "DaceAIError",
    "Detection",
    "EnvironmentGenerator",
    "EnvironmentInfo",
    "EnvironmentRequest",
    "EnvironmentSpec",
    "Executor",
    "ExecutorOptions",
    "ExecutorUnavailable",
    "Job",
    "JobResult",
    "KeyInPayload",
    "Message",
    "NodeContext",
    "PluginError",
    "PromptSection",
    "PluginOrigin",
    "Provider",
    "ProviderClient",
    "ProviderError",
    "ProviderReply",
    "ProviderRequest",
    "Registration",
    "ScopeInfo",
    "Setting",
    "SettingsError",
    "SpeedOfLight",
    "GpuPack",
    "machine_fact",
    "SandboxRun",
    "SANDBOX_RUN",
    "UndeclaredArtefact",
    "Status",
    "Target",
    "TargetInfo",
    "ToolResult",
    "Usage",
    "VendorPeaks",
    "answer_headers",
    "assert_key_free",
    "build_command",
    "runtime_standard_flag",
    "builds_with_dace",
    "cached_fallback",
    "chat_completion_reply",
    "check_gpu_build",
    "check_gpu_unit",
    "gpu_build_blocker",
    "gpu_compute_capability",
    "nvcc_version",
    "compile_candidate",
    "connector_declaration",
    "current_node",
    "cut_off_error",
    "dace_include_dir",
    "describe_failure",
    "detect_library",
    "device_unit",
    "environment_flags",
    "find_header",
    "find_shared_library",
    "hookimpl",
    "host_unit",
    "init_symbols",
    "json_only_instruction",
    "environment_without_secrets",
    "machine_resources",
    "provider_failure",
    "read_cpu",
    "report_from_tool",
    "resolve_settings",
    "run_job",
    "run_tool",
    "scope_parameters",
    "stable_paths",
    "state_struct",
    "strict_json_schema",
    "target_resource",
    "touches_gpu",
    "worker_name",
]
