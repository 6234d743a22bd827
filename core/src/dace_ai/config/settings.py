"""The ``ai`` settings: one pydantic model, several sources, every value traceable.

Sources, highest first:

1. explicit arguments (``resolve_settings(model="...")``, ``build(sdfg, ...)``),
2. environment variables ``DACE_ai_<key>`` (DaCe's own spelling for config overrides),
3. DaCe's configuration (``dace.Config.set('ai', key, value=...)`` or ``.dace.conf``),
4. a ``[tool.dace-ai]`` table in the nearest ``pyproject.toml``, or a ``dace-ai.toml``,
5. the defaults below.

A bad value raises :class:`~dace_ai.errors.SettingsError` naming the key, the
value, the source it came from and what is allowed.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from dace_ai.config.definitions import BY_KEY
from dace_ai.errors import SettingsError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

ENV_PREFIX = "DACE_ai_"


def _field(key: str) -> Any:
    """A pydantic field whose default, bounds and description come from :mod:`setting_defs`."""
    definition = BY_KEY[key]
    return Field(definition.default, description=definition.description, **dict(definition.bounds))


class AISettings(BaseModel):
    """Every setting of dace-ai. Field descriptions double as ``dace-ai config`` help."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str | None = _field("provider")
    model: str | None = _field("model")
    base_url: str | None = _field("base_url")
    effort: Literal["low", "medium", "high", "max"] | None = _field("effort")
    max_tokens: int = _field("max_tokens")
    timeout: float = _field("timeout")
    max_retries: int = _field("max_retries")
    max_repair_attempts: int = _field("max_repair_attempts")
    compile_check: bool = _field("compile_check")
    cache: bool = _field("cache")
    extra_instructions: str = _field("extra_instructions")
    target: str | None = _field("target")
    checkers: tuple[str, ...] | None = _field("checkers")
    bench: Literal["off", "report", "gate"] = _field("bench")
    min_speedup: float = _field("min_speedup")
    bench_sizes: str | None = _field("bench_sizes")
    bench_repeats: int = _field("bench_repeats")
    check_concurrency: int = _field("check_concurrency")
    verify_seeds: int = _field("verify_seeds")
    verify_sizes: str | None = _field("verify_sizes")
    sandbox_cpu_seconds: float = _field("sandbox_cpu_seconds")
    sandbox_wall_seconds: float = _field("sandbox_wall_seconds")
    sandbox_memory_mb: int = _field("sandbox_memory_mb")
    max_concurrency: int = _field("max_concurrency")
    prompt_dir: str | None = _field("prompt_dir")
    interactive: bool | None = _field("interactive")
    cuda_arch: str | None = _field("cuda_arch")
    hip_arch: str | None = _field("hip_arch")

    _sources: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("checkers", mode="before")
    @classmethod
    def _split_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            parts = tuple(p.strip() for p in value.split(",") if p.strip())
            return parts or None
        return value

    @field_validator("provider", "model", "base_url", "effort", "target", "prompt_dir", "interactive",
                     "cuda_arch", "hip_arch", "bench_sizes", "verify_sizes",
                     mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in ("", "none", "auto"):
            return None
        return value

    @field_validator("verify_sizes")
    @classmethod
    def _sizes_format(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"\s*\w+=\d+(,\d+)*([\s;]+\w+=\d+(,\d+)*)*\s*", value):
            raise ValueError("expected NAME=SIZE[,SIZE...] separated by spaces, e.g. 'N=13,67 M=11,61'")
        return value

    @property
    def sources(self) -> dict[str, str]:
        """Where each effective value came from."""
        return dict(self._sources)

    def source(self, key: str) -> str:
        return self._sources.get(key, "default")


KEYS: tuple[str, ...] = tuple(AISettings.model_fields)


def _find_file_settings(start: Path) -> tuple[dict[str, Any], str] | None:
    """The ``[tool.dace-ai]`` table of the nearest pyproject.toml, or a dace-ai.toml."""
    for folder in (start, *start.parents):
        standalone = folder / "dace-ai.toml"
        if standalone.is_file():
            return _read_toml(standalone), str(standalone)
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            table = _read_toml(pyproject).get("tool", {}).get("dace-ai")
            if table is not None:
                return dict(table), f"{pyproject} [tool.dace-ai]"
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML: {exc}") from exc


def _allowed(key: str) -> str:
    info = AISettings.model_fields[key]
    text = str(info.annotation).replace("typing.", "")
    constraints = [str(m) for m in info.metadata]
    return text + (f" with {', '.join(constraints)}" if constraints else "")


def _validate_one(key: str, value: Any, source: str) -> Any:
    try:
        return getattr(AISettings.model_validate({key: value}), key)
    except ValidationError as exc:
        problem = "; ".join(e["msg"] for e in exc.errors())
        raise SettingsError(
            f"setting {key!r} = {value!r} from {source} is not allowed: {problem} (allowed: {_allowed(key)})"
        ) from None


def resolve_settings(overrides: Mapping[str, Any] | None = None, *, start_dir: str | os.PathLike | None = None,
                     environ: Mapping[str, str] | None = None) -> AISettings:
    """Resolve every setting from its sources and remember where each came from."""
    from dace_ai.compat import dace_config_overrides

    overrides = {k: v for k, v in (overrides or {}).items()}
    unknown = sorted(set(overrides) - set(KEYS))
    if unknown:
        raise SettingsError(f"unknown setting(s) {', '.join(map(repr, unknown))}; known: {', '.join(KEYS)}")
    environ = os.environ if environ is None else environ
    dace_values = dace_config_overrides()
    file_found = _find_file_settings(Path(start_dir or os.getcwd()).resolve())
    file_values, file_source = file_found if file_found else ({}, "")
    file_unknown = sorted(set(file_values) - set(KEYS))
    if file_unknown:
        raise SettingsError(f"{file_source}: unknown setting(s) {', '.join(map(repr, file_unknown))}; "
                            f"known: {', '.join(KEYS)}")

    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in KEYS:
        env_name = ENV_PREFIX + key
        if key in overrides and overrides[key] is not None:
            value, source = overrides[key], "argument"
        elif env_name in environ:
            value, source = environ[env_name], f"environment variable {env_name}"
        elif key in dace_values:
            value, source = dace_values[key], f"dace.Config ('ai', {key!r})"
        elif key in file_values:
            value, source = file_values[key], file_source
        else:
            continue
        values[key] = _validate_one(key, value, source)
        sources[key] = source
    settings = AISettings.model_validate(values)
    settings._sources.update(sources)
    return settings


def describe_settings(settings: AISettings) -> list[dict[str, Any]]:
    """Rows of (key, value, source, description) for ``dace-ai config``."""
    rows = []
    for key, info in AISettings.model_fields.items():
        rows.append({"key": key, "value": getattr(settings, key), "source": settings.source(key),
                     "description": info.description or ""})
    return rows
