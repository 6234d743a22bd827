"""Evaluation tasks: one small TOML file each, in a suite registered through ``dace_ai_bench_suites``.

A task names a ``@dace.program`` of its suite's module holding the node to implement
(a library node by type, or an AI node by name), the NumPy ``reference`` that says
what the outputs must be, optionally a ``baseline`` program that computes the same
natively (for AI nodes, which have no native expansion), and the sizes to run at::

    id = "gemm"
    title = "General matrix multiply C = A @ B"
    program = "gemm"
    node = "Gemm"
    reference = "gemm"
    outputs = ["C"]
    sizes = { M = 192, N = 160, K = 176 }
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dace_ai.environments.resolve import detect_generator
from dace_ai.errors import SettingsError
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.state import STATE

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    title: str
    program: str = Field(description="a @dace.program in the suite module containing the node")
    node: str = Field(description="library node type (e.g. 'Gemm') or the AI node's name")
    reference: str = Field(description="NumPy function in the suite module: inputs by name -> {output: array}")
    baseline: str | None = Field(None, description="program computing the same natively (default: `program`)")
    outputs: list[str]
    sizes: dict[str, int]
    scalars: dict[str, float] = Field(default_factory=dict)
    #: Input generators by argument name: "uniform" (default, [-1, 1)), "int:LO:HI", "positive".
    inputs: dict[str, str] = Field(default_factory=dict)
    rtol: float = 1e-6
    atol: float = 1e-8
    #: Environment generators that must be installed (the task is skipped with a reason otherwise).
    requires: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)

    @property
    def kind(self) -> str:
        return "library" if self.node[:1].isupper() else "ai"


def suite_registration(name: str) -> Any:
    return get_plugin_manager().get("bench_suites", name)


def load_task_file(path: Path) -> Task:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        task = Task.model_validate(data)
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        raise SettingsError(f"task file {path}: {exc}") from None
    if task.id != path.stem:
        raise SettingsError(f"task file {path}: id {task.id!r} must match the file name {path.stem!r}")
    return task


@STATE.cached("evaluation.tasks.suites", maxsize=None)
def load_suite(name: str) -> tuple[Task, ...]:
    """Every task of suite ``name``, sorted by id."""
    suite = suite_registration(name)
    folder = Path(suite.path) / "tasks"
    files = sorted(folder.glob("*.toml"))
    if not files:
        raise SettingsError(f"bench suite {name!r} ({suite.origin}) has no tasks in {folder}")
    return tuple(load_task_file(f) for f in files)


def find_task(suite: str, task_id: str) -> Task:
    for task in load_suite(suite):
        if task.id == task_id:
            return task
    raise SettingsError(
        f"bench suite {suite!r} has no task {task_id!r}; tasks: " + ", ".join(t.id for t in load_suite(suite))
    )


def suite_member(suite: str, attribute: str) -> Any:
    """A program or reference of the suite's module, by name."""
    module = importlib.import_module(suite_registration(suite).module)
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise SettingsError(f"bench suite {suite!r}: module {module.__name__} has no {attribute!r}") from None


def missing_requirements(task: Task) -> list[str]:
    """What the task needs that this machine lacks, each with its reason ([] when nothing is missing).

    An environment generator counts only when its pack is installed *and* its library
    is detected (headers and shared library found).
    """
    if not task.requires:
        return []

    installed = get_plugin_manager().environment_generators()
    missing = []
    for name in task.requires:
        if name not in installed:
            missing.append(f"environment generator {name!r}, not installed here (install the pack that provides it)")
            continue
        found = detect_generator(installed[name])
        if not found.matched:
            missing.append(f"the {name} library, not found on this machine ({found.reason})")
    return missing


def recorded_answers(folder: Path, task_id: str) -> list[dict[str, Any]]:
    """The recorded samples for a task (``<folder>/<task>.json``: ``{"samples": [...]}``); [] when none."""
    import json

    path = Path(folder) / f"{task_id}.json"
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SettingsError(f"recorded answers {path}: not JSON ({exc})") from None
    samples = data.get("samples") if isinstance(data, dict) else None
    if not isinstance(samples, list) or not samples:
        raise SettingsError(f'recorded answers {path}: expected {{"samples": [...]}} with at least one sample')
    return samples
