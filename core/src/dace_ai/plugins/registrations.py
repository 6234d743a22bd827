"""Typed registrations that plugins return from their hooks.

Every hook of dace-ai returns an iterable of these frozen dataclasses and has no
side effects: the plugin manager collects them, validates them, detects
duplicate names and stamps each with its :class:`Provenance` (which plugin,
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

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")

#: The stages of the verification cascade, in the order they run.
STAGES: tuple[str, ...] = ("compile", "verify", "bench")


@dataclass(frozen=True)
class Provenance:
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


@dataclass(frozen=True, kw_only=True)
class Registration:
    """Common base: a unique ``name`` and the provenance filled in by the collector."""

    name: str
    description: str = ""
    provenance: Provenance | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(
                f"{type(self).__name__}: name {self.name!r} is not allowed "
                "(letters, digits, '_', '.', '-'; must start with a letter or digit)"
            )

    def with_provenance(self, provenance: Provenance) -> Registration:
        return dataclasses.replace(self, provenance=provenance)

    @property
    def origin(self) -> str:
        """Human-readable provenance, for listings and error messages."""
        return str(self.provenance) if self.provenance else "unregistered"


@dataclass(frozen=True, kw_only=True)
class Provider(Registration):
    """A source of answers: Anthropic, OpenAI, LiteLLM, a manual file exchange, ...

    ``factory(settings)`` returns a client with ``complete(request) -> ProviderReply``
    (see :mod:`dace_ai.providers.api`). Heavy SDKs must be imported inside the
    factory, never at module import time.

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

    factory: Callable[[Any], Any]
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

    def __post_init__(self) -> None:
        super().__post_init__()
        _require_callable(self, "factory", self.factory)
        _require_callable(self, "available", self.available, optional=True)
        if isinstance(self.key_env, str):
            object.__setattr__(self, "key_env", (self.key_env,))


@dataclass(frozen=True)
class Detection:
    """The result of a target's detection on this machine, with the reason shown to users."""

    matched: bool
    reason: str
    details: Mapping[str, Any] = field(default_factory=dict)


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

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kind not in ("cpu", "gpu"):
            raise ValueError(f"Target({self.name!r}): kind must be 'cpu' or 'gpu', got {self.kind!r}")
        _require_callable(self, "detect", self.detect)
        _require_callable(self, "describe", self.describe)
        object.__setattr__(self, "compiler", tuple(self.compiler))
        object.__setattr__(self, "checkers", tuple(self.checkers))

    def resolved_flags(self, detection: Detection) -> tuple[str, ...]:
        flags = self.flags(detection) if callable(self.flags) else self.flags
        return tuple(flags)


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
    render: Callable[[Any], str | None]
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

    ``check(request)`` returns a :class:`dace_ai.checking.stages.CheckReport` with status
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
    check: Callable[[Any], Any]
    applies: Callable[[Any], bool] | None = None
    #: Run by default (when the ``checkers`` setting does not list checkers explicitly).
    default: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.stage not in STAGES:
            raise ValueError(f"Checker({self.name!r}): stage must be one of {STAGES}, got {self.stage!r}")
        _require_callable(self, "check", self.check)
        _require_callable(self, "applies", self.applies, optional=True)


@dataclass(frozen=True, kw_only=True)
class EnvironmentGenerator(Registration):
    """Offers an external library (OpenBLAS, FFTW, cuBLAS, ...) as a DaCe environment.

    ``offer(ctx)`` returns a text for the prompt describing what the model may use
    (or ``None`` when the library is not usable here); ``generate(request)``
    materialises the DaCe environment the answer asked for.

    Example::

        from dace_ai.plugin import hookimpl, EnvironmentGenerator

        @hookimpl
        def dace_ai_environment_generators():
            yield EnvironmentGenerator(name="openblas", offer=offer_openblas,
                                       generate=make_openblas_environment)
    """

    offer: Callable[[Any], str | None]
    generate: Callable[[Any], Any]

    def __post_init__(self) -> None:
        super().__post_init__()
        _require_callable(self, "offer", self.offer)
        _require_callable(self, "generate", self.generate)


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
