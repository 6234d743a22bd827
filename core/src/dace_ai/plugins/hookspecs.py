"""The hook specifications of dace-ai: one class of collection hooks.

Every hook takes no arguments and returns (or yields) registrations from
:mod:`dace_ai.plugins.registrations`, or None to register nothing (the plugin manager
reads None as an empty result). Hooks must not have side effects: the plugin manager
may call them more than once and in any order.
"""

from __future__ import annotations

from collections.abc import Iterable

import pluggy

from dace_ai.plugins.registrations import (
    BenchSuite,
    Checker,
    EnvironmentGenerator,
    Executor,
    PromptSection,
    Provider,
    Target,
)

PROJECT = "dace_ai"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class DaceAISpec:
    """Hook specifications. Implement any subset in a module named by an entry point
    in the ``dace_ai`` group::

        [project.entry-points.dace_ai]
        mylab = "mylab_dace_ai.plugin"
    """

    @hookspec
    def dace_ai_providers(self) -> Iterable[Provider] | None:
        """Providers that answer prompts.

        Example::

            @hookimpl
            def dace_ai_providers():
                yield Provider(name="echo", factory=lambda settings: EchoClient())
        """

    @hookspec
    def dace_ai_targets(self) -> Iterable[Target] | None:
        """Hardware targets (ISA/GPU packs) with detection, prompt text, compiler and checks.

        Example::

            @hookimpl
            def dace_ai_targets():
                yield Target(name="rvv", detect=lambda: Detection(False, "no"),
                             describe=lambda d: "RISC-V vector")
        """

    @hookspec
    def dace_ai_prompt_sections(self) -> Iterable[PromptSection] | None:
        """Sections of the prompt, rendered in ``order``.

        Example::

            @hookimpl
            def dace_ai_prompt_sections():
                yield PromptSection(name="house-rules", order=850,
                                    render=lambda ctx: "No OpenMP in tasklets.")
        """

    @hookspec
    def dace_ai_checkers(self) -> Iterable[Checker] | None:
        """Checkers of generated code, each at a stage: compile, verify or bench.

        Example::

            @hookimpl
            def dace_ai_checkers():
                yield Checker(name="clang-syntax", stage="compile", check=check_with_clang)
        """

    @hookspec
    def dace_ai_environment_generators(self) -> Iterable[EnvironmentGenerator] | None:
        """Generators of DaCe environments for external libraries.

        Example::

            @hookimpl
            def dace_ai_environment_generators():
                yield EnvironmentGenerator(name="openblas", offer=offer, generate=generate)
        """

    @hookspec
    def dace_ai_executors(self) -> Iterable[Executor] | None:
        """Executors that run check/verify/bench jobs (local processes, a cluster).

        Example::

            @hookimpl
            def dace_ai_executors():
                yield Executor(name="slurm", factory=make_slurm_runner)
        """

    @hookspec
    def dace_ai_bench_suites(self) -> Iterable[BenchSuite] | None:
        """Suites of evaluation tasks for ``dace-ai bench``.

        Example::

            @hookimpl
            def dace_ai_bench_suites():
                yield BenchSuite(name="weather", path=SUITE_FOLDER, module="weather_bench.programs")
        """
