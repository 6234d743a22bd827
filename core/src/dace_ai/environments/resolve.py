"""From an answer's environment fields to DaCe environment class paths, or reasons to refuse.

Two ways in: ``use_environments`` names registered DaCe environments (only those
installed here and suited to the node's target are accepted), and ``environments``
asks a generator (a library pack, or ``generic``) for a new one. Generators return
data (:class:`~dace_ai.environments.spec.EnvironmentSpec`); it is stored and turned
into a class by :func:`~dace_ai.environments.generated.materialise`.

Refusals are collected as short sentences, not raised, so the pipeline can send
them back to the model in a repair round like any failed check.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dace_ai.environments.generated import HOME_MODULE, materialise
from dace_ai.environments.installed import EnvironmentInfo, environment_infos, find_header, suits
from dace_ai.environments.spec import EnvironmentSpec
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.plugins.registrations import Detection, EnvironmentGenerator
from dace_ai.state import STATE

if TYPE_CHECKING:
    from dace_ai.context.types import NodeContext
    from dace_ai.prompt.answer import Answer, EnvironmentRequest

#: Largest part of a header read when looking for ``__device__`` functions.
_HEADER_SCAN = 4 << 20

_detections: dict[tuple[str, int], Detection] = STATE.register("environments.resolve.detections", {})
_lock = threading.Lock()


@dataclass
class Resolution:
    """Class paths to attach to the tasklet, and every reason a request was refused."""

    paths: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


def detect_generator(generator: EnvironmentGenerator) -> Detection:
    """The generator's library detection (cached per process; no ``detect`` means always usable)."""
    if generator.detect is None:
        return Detection(True, "needs no installed library of its own")
    key = (generator.name, id(generator.detect))
    with _lock:
        if key not in _detections:
            try:
                result = generator.detect()
                if not isinstance(result, Detection):
                    raise TypeError(f"detect() returned {type(result).__name__}, expected Detection")
            except Exception as exc:  # noqa: BLE001 - a broken detection means 'not installed'
                result = Detection(False, f"detection failed: {type(exc).__name__}: {exc}")
            _detections[key] = result
        return _detections[key]


def _generators() -> dict[str, EnvironmentGenerator]:
    return get_plugin_manager().environment_generators()


def offers(ctx: NodeContext) -> list[tuple[str, str]]:
    """(generator name, prompt text) for every generator installed here that suits the node."""
    texts = []
    for name, generator in _generators().items():
        if not detect_generator(generator).matched:
            continue
        try:
            text = generator.offer(ctx)
        except Exception:  # noqa: BLE001, S112 - a broken offer is simply not offered
            continue
        if text and text.strip():
            texts.append((name, text.strip()))
    return texts


def suitable_environments(ctx: NodeContext) -> list[EnvironmentInfo]:
    """Registered DaCe environments installed here that suit the node's target (generated ones left out)."""
    infos = getattr(ctx, "environments", None) or environment_infos()
    kind = ctx.target.kind
    return [e for e in infos if suits(e, kind) and not e.name.startswith(HOME_MODULE + ".")]


def _named(name: str, infos: list[EnvironmentInfo]) -> EnvironmentInfo | None:
    exact = [e for e in infos if e.name == name]
    if exact:
        return exact[0]
    short = [e for e in infos if e.name.rsplit(".", 1)[-1] == name]
    return short[0] if len(short) == 1 else None


def _use(name: str, ctx: NodeContext) -> tuple[str | None, str | None]:
    infos = getattr(ctx, "environments", None) or environment_infos()
    installed = ", ".join(e.name for e in suitable_environments(ctx)) or "none"
    info = _named(name, infos)
    if info is None:
        return None, (f"'use_environments': {name!r} is not a registered DaCe environment; installed here: {installed}")
    if not info.available:
        return None, (
            f"'use_environments': {info.name!r} is registered but not installed here ({info.reason}); "
            f"installed here: {installed}"
        )
    if not suits(info, ctx.target.kind):
        return None, f"'use_environments': {info.name!r} needs a GPU; this code runs on target {ctx.target.name!r}"
    return info.name, None


def _kernel_problems(spec: EnvironmentSpec) -> list[str]:
    """Inside a GPU kernel only headers of ``__device__`` functions can be used."""
    problems = []
    if spec.libraries or spec.link_flags:
        problems.append("libraries cannot be called inside a GPU kernel (only headers of __device__ functions)")
    for header in spec.headers:
        path = find_header(header, spec.include_dirs)
        if path is None:
            problems.append(
                f"header {header!r} was not found (inside a GPU kernel headers are checked for __device__ functions)"
            )
            continue
        with open(path, "rb") as handle:
            if b"__device__" not in handle.read(_HEADER_SCAN):
                problems.append(f"header {header!r} declares no __device__ functions, so the kernel cannot call it")
    return problems


def _generate(
    request: EnvironmentRequest, ctx: NodeContext, generators: dict[str, EnvironmentGenerator]
) -> tuple[str | None, str | None]:
    where = f"'environments' entry {request.name!r} (generator {request.generator!r})"
    generator = generators.get(request.generator)
    if generator is None:
        usable = ", ".join(name for name in generators if detect_generator(generators[name]).matched) or "none"
        return None, f"{where}: no such environment generator; installed here: {usable}"
    detection = detect_generator(generator)
    if not detection.matched:
        return None, f"{where}: the library is not installed on this machine ({detection.reason})"
    try:
        spec = generator.generate(request)
        if not isinstance(spec, EnvironmentSpec):
            spec = EnvironmentSpec.model_validate(spec)
    except ValueError as exc:  # includes pydantic's ValidationError: a reason for the model
        return None, f"{where}: refused: {exc}"
    if getattr(ctx, "in_gpu_kernel", False):
        problems = _kernel_problems(spec)
        if problems:
            return None, f"{where}: refused inside a GPU kernel: " + "; ".join(problems)
    try:
        return materialise(spec), None
    except ValueError as exc:
        return None, f"{where}: cannot be registered: {exc}"


def resolve_environments(answer: Answer, ctx: NodeContext) -> Resolution:
    """The class paths for ``answer``'s environments, registering generated ones; refusals as problems."""
    result = Resolution()
    for name in answer.use_environments:
        path, problem = _use(name, ctx)
        if path:
            result.paths.add(path)
        if problem:
            result.problems.append(problem)
    if answer.environments:
        generators = _generators()
        for request in answer.environments:
            path, problem = _generate(request, ctx, generators)
            if path:
                result.paths.add(path)
            if problem:
                result.problems.append(problem)
    return result
