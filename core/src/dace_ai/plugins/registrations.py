"""Typed registrations that plugins return from their hooks.

Every hook of dace-ai returns an iterable of these frozen dataclasses and has no
side effects: the plugin manager collects them, validates them, detects
duplicate names and stamps each with its :class:`PluginOrigin` (which plugin,
which distribution, which version), so listings, errors and traces can always
say where a registration came from.

Validation happens at construction (``__post_init__``), so a plugin author sees
a mistake on the line that makes the registration, not when a node is expanded.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from dace_ai.plugins.artefacts import Artefact
from dace_ai.plugins.types import (
    CheckReportView,
    EnvironmentRequestView,
    EnvironmentSpecView,
    NodeView,
    ProviderClientView,
    SettingsView,
)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")

#: The stages of the verification cascade, in the order they run.
STAGES: tuple[str, ...] = ("compile", "verify", "bench")


@dataclass(frozen=True)
class PluginOrigin:
    """Where a registration came from: entry-point name, distribution and its version."""

    plugin: str
    distribution: str
    version: str

    def __str__(self) -> str:
        return f"{self.distribution} {self.version} (plugin {self.plugin!r})"


def _require_callable(owner: object, field_name: str, value: Any, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not callable(value):
        raise TypeError(
            f"{type(owner).__name__}({getattr(owner, 'name', '?')!r}): field {field_name!r} must be "
            f"callable, got {type(value).__name__}"
        )


_SETTING_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_SETTING_TYPES: dict[type, str] = {str: "str", int: "int", float: "float", bool: "bool"}


@dataclass(frozen=True)
class Setting:
    """A setting owned by a plugin, declared in any of its registrations.

    It behaves like a core setting: resolved from ``DACE_ai_<name>``, DaCe's
    configuration (``dace.Config.set('ai', name, value=...)``), a ``[tool.dace-ai]``
    table or ``dace-ai.toml``, listed by ``dace-ai config`` with its source and
    ``help``, and read as ``settings.<name>`` from the :class:`AISettings` the
    plugin receives. Prefix ``name`` with the plugin's name (``openai_api``) so it
    cannot clash with another plugin's.

    Example::

        Setting("mylab_route", str, "fast", "Gateway route: fast or careful", choices=("fast", "careful"))
    """

    name: str
    type: type = str
    default: Any = None
    help: str = ""
    #: Allowed values; empty allows any value of ``type``.
    choices: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _SETTING_NAME.match(self.name):
            raise ValueError(
                f"Setting {self.name!r}: a setting name is lower case letters, digits and '_', starting with a letter"
            )
        if self.type not in _SETTING_TYPES:
            raise TypeError(f"Setting {self.name!r}: type must be one of str, int, float, bool, got {self.type!r}")
        object.__setattr__(self, "choices", tuple(self.choices))
        if self.choices and self.default is not None and self.default not in self.choices:
            raise ValueError(f"Setting {self.name!r}: default {self.default!r} is not one of {self.choices}")

    @property
    def dace_type(self) -> str:
        """The type's name in DaCe's config schema."""
        return _SETTING_TYPES[self.type]

    @property
    def description(self) -> str:
        """The help text, with the allowed values when there is a fixed set."""
        if not self.choices:
            return self.help
        return f"{self.help} (one of: {', '.join(map(str, self.choices))})".strip()


@dataclass(frozen=True, kw_only=True)
class Registration:
    """Common base: a unique ``name``, the settings and tools it declares, and its provenance.

    ``settings`` are the plugin-owned :class:`Setting` s this registration reads;
    ``tools`` the commands it runs (``dace-ai doctor`` reports whether each is on ``PATH``).
    """

    name: str
    description: str = ""
    settings: tuple[Setting, ...] = ()
    tools: tuple[str, ...] = ()
    provenance: PluginOrigin | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(
                f"{type(self).__name__}: name {self.name!r} is not allowed "
                "(letters, digits, '_', '.', '-'; must start with a letter or digit)"
            )
        object.__setattr__(self, "settings", tuple(self.settings))
        object.__setattr__(self, "tools", (self.tools,) if isinstance(self.tools, str) else tuple(self.tools))
        for setting in self.settings:
            if not isinstance(setting, Setting):
                raise TypeError(
                    f"{type(self).__name__}({self.name!r}): settings must be Setting objects, "
                    f"got {type(setting).__name__}"
                )

    def with_provenance(self, provenance: PluginOrigin) -> Registration:
        return dataclasses.replace(self, provenance=provenance)

    @property
    def origin(self) -> str:
        """Human-readable provenance, for listings and error messages."""
        return str(self.provenance) if self.provenance else "unregistered"


@dataclass(frozen=True, kw_only=True)
class Provider(Registration):
    """A source of answers: Anthropic, OpenAI, LiteLLM, a manual file exchange, ...

    ``factory(settings)`` receives the resolved :class:`~dace_ai.config.settings.AISettings`
    (plugin-owned settings included) and returns a :class:`~dace_ai.providers.api.ProviderClient`:
    an object with ``complete(request: ProviderRequest) -> ProviderReply``, called from
    worker threads. Heavy SDKs must be imported inside the factory, never at module
    import time. ``available()`` says whether it can be used unconfigured (SDK importable,
    key set) for automatic selection.

    Example::

        from dace_ai.plugin import hookimpl, Provider

        @hookimpl
        def dace_ai_providers():
            def factory(settings):
                from my_sdk_client import Client   # imported only when used
                return Client(settings)
            yield Provider(name="mylab", factory=factory, key_env=("MYLAB_KEY",),
                           sdk="mylab-sdk", description="Our in-house model gateway")
    """

    factory: Callable[[SettingsView], ProviderClientView]
    key_env: tuple[str, ...] = ()
    sdk: str | None = None
    #: Higher ranks are preferred when no provider is configured and this one is usable.
    auto_rank: int = 0
    #: Returns True when the provider can be used without configuration (SDK importable, key set).
    available: Callable[[], bool] | None = None
    #: A provider that needs no network or key (the manual exchange).
    offline: bool = False
    #: Its answers are cheap and may be edited by a person (response files): ask it before
    #: the cache, and use a cached answer only when it has none.
    answers_before_cache: bool = False
    #: The model the client uses when the ``model`` setting is empty. Part of the answer
    #: cache key, so a new default model never replays answers of the old one.
    default_model: str | None = None
    #: The endpoint the client uses when ``base_url`` is empty, and the variables its SDK
    #: reads first (e.g. ``ANTHROPIC_BASE_URL``); both enter the cache key the same way.
    default_base_url: str | None = None
    base_url_env: tuple[str, ...] = ()

    def effective_model(self, model: str | None) -> str:
        """The model a request with ``model`` actually goes to ("" when the provider does not say)."""
        return model or self.default_model or ""

    def effective_base_url(self, base_url: str | None) -> str:
        """The endpoint a request with ``base_url`` actually goes to ("" when the provider does not say)."""
        import os

        if base_url:
            return base_url
        for variable in self.base_url_env:
            if os.environ.get(variable):
                return os.environ[variable]
        return self.default_base_url or ""

    def __post_init__(self) -> None:
        super().__post_init__()
        _require_callable(self, "factory", self.factory)
        _require_callable(self, "available", self.available, optional=True)
        if isinstance(self.key_env, str):
            object.__setattr__(self, "key_env", (self.key_env,))
        if isinstance(self.base_url_env, str):
            object.__setattr__(self, "base_url_env", (self.base_url_env,))


@dataclass(frozen=True)
class Detection:
    """The result of a target's detection on this machine, with the reason shown to users."""

    matched: bool
    reason: str
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class VendorPeaks:
    """What a target's vendor says its hardware can do, shown beside the measured roofline.

    ``peak_gflops`` by element type (``{"float32": 333.0, "float64": 166.0}``) for
    ``threads`` threads (None: all cores), ``bandwidth_gbs`` from memory when known, and
    ``source`` saying where the figures come from (a data sheet, a formula).
    """

    peak_gflops: Mapping[str, float]
    bandwidth_gbs: float | None = None
    threads: int | None = None
    source: str = ""

    def __post_init__(self) -> None:
        bad = [
            f"{k}={v!r}"
            for k, v in dict(self.peak_gflops).items()
            if not isinstance(k, str) or not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0
        ]
        if bad or (self.bandwidth_gbs is not None and not self.bandwidth_gbs > 0):
            raise ValueError(
                f"VendorPeaks: peaks must be positive numbers by element type name "
                f"({', '.join(bad) or f'bandwidth_gbs={self.bandwidth_gbs!r}'})"
            )


@dataclass(frozen=True, kw_only=True)
class Target(Registration):
    """A hardware target pack: x86 AVX2/AVX-512, ARM SVE, CUDA, HIP, ...

    ``detect()`` says whether this machine is such a target (the result is cached
    by the core and overridden by the ``target`` setting); ``describe(detection)``
    returns the text of the prompt's target section; ``guidance`` is what the
    vendor wants the model to follow; ``flags`` may depend on the detection.

    Example::

        from dace_ai.plugin import hookimpl, Target, Detection

        @hookimpl
        def dace_ai_targets():
            yield Target(
                name="rvv", kind="cpu", priority=10,
                detect=lambda: Detection(False, "not a RISC-V machine"),
                describe=lambda d: "RISC-V 64 with the V extension (VLEN unknown)",
                guidance="Use <riscv_vector.h> intrinsics with vsetvl loops.",
                compiler=("riscv64-linux-gnu-g++",), flags=("-march=rv64gcv", "-O3"),
                checkers=("rvv-cross-compile",),
            )
    """

    kind: Literal["cpu", "gpu"] = "cpu"
    detect: Callable[[], Detection]
    describe: Callable[[Detection], str]
    guidance: str = ""
    compiler: tuple[str, ...] = ()
    flags: Sequence[str] | Callable[[Detection], Sequence[str]] = ()
    checkers: tuple[str, ...] = ()
    #: Among targets that match this machine, the highest priority is chosen.
    priority: int = 0
    #: Language of the code this target expects ("cpp", "cuda", "hip").
    language: str = "cpp"
    #: The vendor's peak figures (:class:`VendorPeaks`, or a function of the detection giving them or None),
    #: shown beside the measured roofline by ``dace-ai targets --roofline``.
    peaks: VendorPeaks | Callable[[Detection], VendorPeaks | None] | None = None
    #: CPU features (``/proc/cpuinfo`` flags) code for this target needs to run; the host checkers run it
    #: only where this CPU has them all, and otherwise say it was compiled, not run.
    cpu_features: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kind not in ("cpu", "gpu"):
            raise ValueError(f"Target({self.name!r}): kind must be 'cpu' or 'gpu', got {self.kind!r}")
        _require_callable(self, "detect", self.detect)
        _require_callable(self, "describe", self.describe)
        if self.peaks is not None and not isinstance(self.peaks, VendorPeaks) and not callable(self.peaks):
            raise TypeError(
                f"Target({self.name!r}): field 'peaks' must be a VendorPeaks or a function of the "
                f"detection returning one, got {type(self.peaks).__name__}"
            )
        object.__setattr__(self, "compiler", tuple(self.compiler))
        object.__setattr__(self, "checkers", tuple(self.checkers))

    def resolved_flags(self, detection: Detection) -> tuple[str, ...]:
        flags = self.flags(detection) if callable(self.flags) else self.flags
        return tuple(flags)

    def resolved_peaks(self, detection: Detection) -> VendorPeaks | None:
        """The vendor's peaks for this machine (``TypeError`` naming the target when the function returns junk)."""
        peaks = self.peaks(detection) if callable(self.peaks) else self.peaks
        if peaks is not None and not isinstance(peaks, VendorPeaks):
            raise TypeError(
                f"Target({self.name!r}): peaks() must return a VendorPeaks or None, got {type(peaks).__name__}"
            )
        return peaks


@dataclass(frozen=True, kw_only=True)
class PromptSection(Registration):
    """One section of the prompt, rendered from the node's context.

    Sections are ordered by ``order`` (then name). ``render(ctx)`` returns the
    section's text or ``None`` to leave it out for this node. A section with
    ``replace=True`` replaces the registered section of the same name (a lab's
    house rules replacing the default style guide); without it, a second section
    of the same name is an error.

    Example::

        from dace_ai.plugin import hookimpl, PromptSection

        @hookimpl
        def dace_ai_prompt_sections():
            yield PromptSection(name="house-rules", order=850, title="House rules",
                                render=lambda ctx: "Never use OpenMP pragmas inside tasklets.")
    """

    order: int
    render: Callable[[NodeView], str | None]
    title: str = ""
    replace: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.order, int):
            raise TypeError(f"PromptSection({self.name!r}): order must be an int, got {self.order!r}")
        _require_callable(self, "render", self.render)


@dataclass(frozen=True, kw_only=True)
class Checker(Registration):
    """A check of generated code at one stage of the cascade (compile, verify, bench).

    ``check(request: CheckRequest)`` returns a :class:`~dace_ai.checking.api.CheckReport` with status
    ``passed``, ``failed`` (diagnostics go back to the model) or ``inconclusive``
    (the checker could not decide; never counted as failure). ``applies(request)``
    lets a checker skip candidates it cannot judge.

    Example::

        from dace_ai.plugin import hookimpl, Checker

        @hookimpl
        def dace_ai_checkers():
            yield Checker(name="clang-syntax", stage="compile",
                          check=my_clang_check, description="clang -fsyntax-only")
    """

    stage: Literal["compile", "verify", "bench"]
    #: Called with a :class:`dace_ai.checking.api.CheckRequest` (which satisfies
    #: :class:`CheckRequestView`). Its parameter is left open: a checker is written against the
    #: full request, and a callable taking that narrower type is not a ``Callable[[CheckRequestView], ...]``.
    check: Callable[[Any], CheckReportView]
    applies: Callable[[Any], bool] | None = None  #: same argument as ``check``
    #: Run by default (when the ``checkers`` setting does not list checkers explicitly).
    default: bool = True
    #: The artefacts it reads (``request.artefacts[X]``): it runs after the checker that gives each (a
    #: need given by no selected checker reads as absent, ``None`` through ``.get``). Reading one it did
    #: not declare is an error naming it.
    needs: tuple[Artefact[Any], ...] = ()
    #: The artefacts it gives back on its report (``report.give(X, value)``); giving one it did not
    #: declare makes its report inconclusive. One artefact has at most one giver among the selected.
    gives: tuple[Artefact[Any], ...] = ()
    #: Tie-break within its stage, once needs and gives have ordered it: lower runs first; equal orders
    #: keep the selection's order (name order for the defaults, the setting's order for a list).
    order: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.stage not in STAGES:
            raise ValueError(f"Checker({self.name!r}): stage must be one of {STAGES}, got {self.stage!r}")
        if not isinstance(self.order, int) or isinstance(self.order, bool):
            raise TypeError(f"Checker({self.name!r}): order must be an int, got {self.order!r}")
        for what in ("needs", "gives"):
            value = getattr(self, what)
            value = (value,) if isinstance(value, Artefact) else tuple(value)
            object.__setattr__(self, what, value)
            bad = [a for a in value if not isinstance(a, Artefact)]
            if bad:
                raise TypeError(f"Checker({self.name!r}): {what} must be Artefact objects, got {bad[0]!r}")
        _require_callable(self, "check", self.check)
        _require_callable(self, "applies", self.applies, optional=True)


@dataclass(frozen=True, kw_only=True)
class EnvironmentGenerator(Registration):
    """Offers an external library (OpenBLAS, FFTW, cuBLAS, ...) as a DaCe environment.

    ``detect()`` (optional) says whether the library is really installed here (header
    and shared library found); when it does not match, the generator is neither offered
    nor used, and a request for it is refused with its reason. ``offer(ctx)`` returns
    the prompt text for the node (how to request it, calling convention, where to make
    plans and handles), or ``None`` when it does not suit the node (e.g. a GPU library
    for CPU code). ``generate(request)`` returns an ``EnvironmentSpec`` (data only:
    headers, libraries, flags, ...) for the answer's request, or raises ``ValueError``
    with a reason for the model; the core stores and registers it.

    Example::

        from dace_ai.plugin import hookimpl, EnvironmentGenerator, EnvironmentSpec, detect_library

        @hookimpl
        def dace_ai_environment_generators():
            yield EnvironmentGenerator(
                name="zlib", detect=lambda: detect_library(["zlib.h"], ["z"]),
                offer=lambda ctx: 'Request {"name": "zlib", "generator": "zlib"} to use zlib.',
                generate=lambda request: EnvironmentSpec(name="zlib", generator="zlib",
                                                         headers=["zlib.h"], libraries=["z"]))
    """

    offer: Callable[[NodeView], str | None]
    generate: Callable[[EnvironmentRequestView], EnvironmentSpecView]
    detect: Callable[[], Detection] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _require_callable(self, "offer", self.offer)
        _require_callable(self, "generate", self.generate)
        _require_callable(self, "detect", self.detect, optional=True)


@dataclass(frozen=True, kw_only=True)
class Executor(Registration):
    """Runs jobs (check/verify/bench of one candidate) somewhere: local processes, a cluster.

    ``factory(options)`` returns a runner, a context manager with
    ``run(jobs) -> Iterator[JobResult]`` yielding one result per job as they finish
    (see :mod:`dace_ai.execution.jobs`). Jobs are self-contained and picklable: a
    module-level function and plain data, never live DaCe objects. A runner retries a
    job whose worker was lost and says so in the result (``retries``, ``lost_workers``).

    Example::

        from dace_ai.plugin import hookimpl, Executor

        @hookimpl
        def dace_ai_executors():
            yield Executor(name="slurm", factory=lambda options: SlurmRunner(options),
                           description="one job per Slurm step")
    """

    factory: Callable[[Any], Any]

    def __post_init__(self) -> None:
        super().__post_init__()
        _require_callable(self, "factory", self.factory)


@dataclass(frozen=True, kw_only=True)
class BenchSuite(Registration):
    """A suite of evaluation tasks for ``dace-ai bench``.

    ``path`` is a folder with ``tasks/*.toml`` (one small file per task) and optionally
    ``answers/*.json`` (recorded answers replayed by ``dace-ai bench --offline``);
    ``module`` is the dotted name of the module holding the tasks' programs and NumPy
    references, named by the task files (imported by name in each worker).

    Example::

        from dace_ai.plugin import hookimpl, BenchSuite

        @hookimpl
        def dace_ai_bench_suites():
            yield BenchSuite(name="weather", path=Path(__file__).parent / "suite",
                             module="weather_bench.programs", description="stencils of our model")
    """

    path: Any
    module: str

    def __post_init__(self) -> None:
        super().__post_init__()
        from pathlib import Path

        object.__setattr__(self, "path", Path(self.path))
        if not isinstance(self.module, str) or not self.module:
            raise TypeError(f"BenchSuite({self.name!r}): module must be a dotted module name, got {self.module!r}")


#: The registration type each hook must yield, by hook name.
HOOK_TYPES: dict[str, type[Registration]] = {
    "dace_ai_providers": Provider,
    "dace_ai_targets": Target,
    "dace_ai_prompt_sections": PromptSection,
    "dace_ai_checkers": Checker,
    "dace_ai_environment_generators": EnvironmentGenerator,
    "dace_ai_executors": Executor,
    "dace_ai_bench_suites": BenchSuite,
}
