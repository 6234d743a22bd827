"""One base for GPU target packs (CUDA, HIP): a :class:`GpuPack` describes the vendor's GPUs,
compiler and guidance; the target, its detection, the architecture and the standalone-unit
compile follow from it, so a pack holds only what differs.

A pack yields ``pack.target()`` from ``dace_ai_targets`` and ``pack.checker(check)`` and
``pack.twin_checker()`` from ``dace_ai_checkers``; its ``check`` calls :meth:`GpuPack.check_build`:
DaCe's own GPU build with the pack's :attr:`~GpuPack.dace_backend` where DaCe can build it here, else
:meth:`GpuPack.check_unit` with the reason. The twin checker (``cuda-cpu-twin``, ``hip-cpu-twin``,
stage ``verify``) runs device tasklets on their CPU twin (:mod:`dace_ai.sandbox.cpu_twin`), the same for
every pack.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.compilation.gpu_build import CMAKE_CANNOT, check_gpu_build
from dace_ai.compilation.gpu_toolchain import gpu_build_blocker
from dace_ai.compilation.units import check_gpu_unit, touches_gpu
from dace_ai.plugins.registrations import Checker, Detection, Target
from dace_ai.sandbox.cpu_twin import check_cpu_twin, has_reference


def _unchanged(arch: str) -> str:
    return arch


@dataclass(frozen=True, kw_only=True)
class GpuPack:
    """What a GPU target pack says about its GPUs; :meth:`target` and :meth:`checker` are its registrations."""

    #: The target's name and language ("cuda"), and its checker's name ("cuda-nvcc").
    name: str
    language: str
    checker_name: str
    #: How the GPUs are called in texts ("NVIDIA GPU") and the tool that finds them ("nvidia-smi").
    vendor: str
    found_by: str
    #: This machine's first GPU as (name, architecture), or None; ``missing`` says why there is none.
    find_gpu: Callable[[], tuple[str, str] | None]
    missing: str
    #: The compiler, its architecture flag (``"-arch={arch}"``), the stream type, the unit's suffix.
    compiler: str
    arch_flag: str
    stream_type: str
    suffix: str
    #: The setting naming the architecture ("cuda_arch"), the default, and how a setting's value is spelled.
    arch_setting: str
    default_arch: str
    spell_arch: Callable[[str], str] = _unchanged
    #: The prompt's target section after the GPU's name: language, warp/wavefront, block limits.
    limits: str
    guidance: str
    priority: int
    description: str
    checker_description: str
    #: Environment variables the compiler runs with (``HIP_PLATFORM=amd``).
    compiler_env: Mapping[str, str] = field(default_factory=dict)
    #: DaCe's GPU backend for this pack's code (``compiler.cuda.backend``: "cuda", "hip"); "" when DaCe has none.
    dace_backend: str = ""

    def detect(self) -> Detection:
        """Matched with the GPU's name and architecture, or not with :attr:`missing`."""
        gpu = self.find_gpu()
        if gpu is None:
            return Detection(False, self.missing)
        what = gpu[0] if gpu[0] == gpu[1] else f"{gpu[0]} ({gpu[1]})"
        return Detection(True, f"{self.found_by} reports {what}", {"gpu": gpu[0], "arch": gpu[1]})

    def describe(self, detection: Detection) -> str:
        """The prompt's target section: the GPU found (or the architecture compiled for) and :attr:`limits`."""
        if detection.matched:
            gpu, arch = detection.details["gpu"], detection.details["arch"]
            head = (
                f"{self.vendor}, architecture {arch}." if gpu == arch else f"{self.vendor}: {gpu}, architecture {arch}."
            )
        else:
            head = (
                f"{self.vendor} (none on this machine): code is compiled for the configured "
                f"{self.arch_setting} or {self.default_arch}."
            )
        return f"{head}\n{self.limits}"

    def flags(self, detection: Detection) -> tuple[str, ...]:
        return ("-O3", self.arch_flag.format(arch=detection.details.get("arch", self.default_arch)))

    def resolve_arch(self, settings: object) -> tuple[str, str]:
        """(architecture, where it came from): the setting, this machine's GPU, or the default."""
        configured = getattr(settings, self.arch_setting, None)
        if configured:
            source = getattr(settings, "source", lambda key: "settings")(self.arch_setting)
            return self.spell_arch(configured), f"setting {self.arch_setting} ({source})"
        gpu = self.find_gpu()
        if gpu is not None:
            return gpu[1], f"{self.found_by} ({gpu[0]})"
        return self.default_arch, (
            f"default {self.default_arch} (no GPU found by {self.found_by} and no {self.arch_setting} setting)"
        )

    def applies(self, request: CheckRequest) -> bool:
        """GPU code (in a GPU kernel or over GPU data) for this target or written in this language."""
        return touches_gpu(request.node) and (
            request.node.target.name == self.name or request.answer.language == self.language
        )

    @property
    def twin_checker_name(self) -> str:
        """``cuda-cpu-twin``: the name of the pack's CPU twin checker."""
        return f"{self.name}-cpu-twin"

    def runs_on_twin(self, request: CheckRequest) -> bool:
        """A device tasklet (inside a GPU map) of this pack with a reference to run its CPU twin against."""
        if not (request.node.in_gpu_kernel and self.applies(request)):
            return False
        return has_reference(request)

    def check_twin(self, request: CheckRequest) -> CheckReport:
        """Verify the device tasklet on its CPU twin (:func:`dace_ai.sandbox.cpu_twin.check_cpu_twin`)."""
        return check_cpu_twin(request, self.twin_checker_name)

    def check_unit(self, request: CheckRequest, *, prelude: str) -> CheckReport:
        """Compile the tasklet alone with :attr:`compiler` for the resolved architecture."""
        arch, arch_source = self.resolve_arch(request.settings)
        report = check_gpu_unit(
            self.checker_name,
            request.answer,
            request.node,
            request.workdir,
            compiler=self.compiler,
            arch_flag=self.arch_flag.format(arch=arch),
            arch=arch,
            arch_source=arch_source,
            prelude=prelude,
            stream_type=self.stream_type,
            suffix=self.suffix,
            env=dict(self.compiler_env) or None,
            environments=request.environments,
        )
        report.details.setdefault("built_by", "standalone unit")
        report.details.setdefault("compiler", self.compiler)
        return report

    def check_build(self, request: CheckRequest, *, prelude: str) -> CheckReport:
        """DaCe's own GPU build with :attr:`dace_backend` where DaCe can build it here; else
        :meth:`check_unit`, with why the program does not build in ``details["program_builds"]``."""
        if not self.dace_backend:
            blocker: str | None = f"DaCe has no GPU backend for {self.name}"
        else:
            blocker = gpu_build_blocker(self.dace_backend)
        if blocker is None and not (request.node.live or {}).get("sdfg"):
            blocker = "no program holds the node (a context read back from disk), so DaCe has nothing to build"
        if blocker is None:
            built = check_gpu_build(request, self.checker_name, self.dace_backend)
            if built.reason != CMAKE_CANNOT:
                return built
            blocker = built.diagnostics
        report = self.check_unit(request, prelude=prelude)
        report.details["built_by"] = "standalone unit"
        report.details["program_builds"] = blocker
        if report.status == "passed":
            report.diagnostics += f"; compiled in a standalone unit only: {blocker}"
        return report

    def target(self) -> Target:
        return Target(
            name=self.name,
            kind="gpu",
            priority=self.priority,
            detect=self.detect,
            describe=self.describe,
            guidance=self.guidance,
            compiler=(self.compiler,),
            flags=self.flags,
            checkers=(self.checker_name, self.twin_checker_name),
            language=self.language,
            description=self.description,
        )

    def checker(self, check: Callable[[Any], CheckReport]) -> Checker:
        return Checker(
            name=self.checker_name,
            stage="compile",
            check=check,
            applies=self.applies,
            description=self.checker_description,
        )

    def twin_checker(self) -> Checker:
        return Checker(
            name=self.twin_checker_name,
            stage="verify",
            check=self.check_twin,
            applies=self.runs_on_twin,
            description=f"Runs {self.language.upper()} device tasklets on their CPU twin (the same code at the same "
            "map points, built by the host compiler with dace-ai's header for device names) against the node's "
            "reference in the sandbox: the size ladder, seeds, distributions; not on a GPU",
        )
