"""The ``ai`` settings: one pydantic model, several sources, every value traceable.

Sources, highest first:

1. explicit arguments (``resolve_settings(model="...")``, ``build(sdfg, ...)``),
2. environment variables ``DACE_ai_<key>`` (DaCe's own spelling for config overrides),
3. DaCe's configuration (``dace.Config.set('ai', key, value=...)`` or ``.dace.conf``),
4. a ``[tool.dace-ai]`` table in the nearest ``pyproject.toml``, or a ``dace-ai.toml``,
5. the defaults below.

A bad value raises :class:`~dace_ai.errors.SettingsError` naming the key, the
value, the source it came from and what is allowed.

Plugins own settings too (:class:`~dace_ai.plugins.registrations.Setting` in a
registration's ``settings``): they come from the same sources, are validated the
same way and are read as attributes (``settings.openai_api``). They are known once
plugins load, so :func:`resolve_settings` loads them (``import dace_ai`` does not).
A ``DACE_ai_*`` environment variable that names no setting gets a warning naming
the closest one.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, ValidationError, field_validator

from dace_ai.compat import dace_config_overrides, register_ai_config
from dace_ai.config.definitions import BY_KEY, SettingDef
from dace_ai.errors import SettingsError, remember_secret
from dace_ai.plugins.manager import MANAGER_FLAGS, get_plugin_manager
from dace_ai.plugins.registrations import Setting
from dace_ai.state import STATE

if TYPE_CHECKING:
    from dace_ai.plugins.manager import PluginManager

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

ENV_PREFIX = "DACE_ai_"


class FieldBounds(TypedDict, total=False):
    """The keyword constraints of ``pydantic.Field`` that a setting's bounds become."""

    gt: float
    ge: float
    lt: float
    le: float


def _field(key: str) -> Any:
    """A pydantic field whose default, bounds and description come from :mod:`setting_defs`."""
    definition = BY_KEY[key]
    bounds: FieldBounds = {}
    for name, limit in definition.bounds:
        bounds[name] = limit
    return Field(definition.default, description=definition.description, **bounds)


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
    on_failure: Literal["native", "error"] | None = _field("on_failure")
    on_inconclusive: Literal["warn", "reject"] = _field("on_inconclusive")
    cache: bool = _field("cache")
    extra_instructions: str = _field("extra_instructions")
    target: str | None = _field("target")
    hide_cpu_features: str = _field("hide_cpu_features")
    checkers: tuple[str, ...] | None = _field("checkers")
    bench: Literal["off", "report", "gate"] = _field("bench")
    min_speedup: float = _field("min_speedup")
    bench_baselines: bool = _field("bench_baselines")
    gate_baseline: Literal["native", "strongest"] = _field("gate_baseline")
    target_sol: float = _field("target_sol")
    bench_sizes: str | None = _field("bench_sizes")
    bench_repeats: int = _field("bench_repeats")
    speed_of_light: Literal["on", "stored", "off"] = _field("speed_of_light")
    runtime_check: str = _field("runtime_check")
    runtime_check_budget: float = _field("runtime_check_budget")
    runtime_check_share: float = _field("runtime_check_share")
    runtime_check_action: Literal["raise", "warn"] = _field("runtime_check_action")
    check_concurrency: int = _field("check_concurrency")
    verify_seeds: int = _field("verify_seeds")
    verify_sizes: str | None = _field("verify_sizes")
    check_threads: int = _field("check_threads")
    sandbox_cpu_seconds: float = _field("sandbox_cpu_seconds")
    sandbox_wall_seconds: float = _field("sandbox_wall_seconds")
    sandbox_memory_mb: int = _field("sandbox_memory_mb")
    max_concurrency: int = _field("max_concurrency")
    executor: str | None = _field("executor")
    executor_scheduler: str | None = _field("executor_scheduler")
    executor_workers: int = _field("executor_workers")
    node_concurrency: int = _field("node_concurrency")
    prompt_dir: str | None = _field("prompt_dir")
    interactive: bool | None = _field("interactive")
    cuda_arch: str | None = _field("cuda_arch")
    hip_arch: str | None = _field("hip_arch")
    builtin: Literal["take", "keep"] = _field("builtin")
    debug: bool = _field("debug")

    _sources: dict[str, str] = PrivateAttr(default_factory=dict)
    #: Values of plugin-owned settings, by name (filled by :func:`resolve_settings`).
    _plugin_values: dict[str, Any] = PrivateAttr(default_factory=dict)

    @field_validator("checkers", mode="before")
    @classmethod
    def _split_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            parts = tuple(p.strip() for p in value.split(",") if p.strip())
            return parts or None
        return value

    @field_validator(
        "provider",
        "model",
        "base_url",
        "effort",
        "target",
        "prompt_dir",
        "interactive",
        "cuda_arch",
        "hip_arch",
        "bench_sizes",
        "verify_sizes",
        "on_failure",
        "executor",
        "executor_scheduler",
        mode="before",
    )
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in ("", "none", "auto"):
            return None
        return value

    @field_validator("hide_cpu_features")
    @classmethod
    def _features_format(cls, value: str) -> str:
        names = [n.strip().lower() for n in str(value).split(",") if n.strip()]
        bad = [n for n in names if not re.fullmatch(r"[a-z0-9_]+", n)]
        if bad:
            raise ValueError(
                f"expected CPU feature names as /proc/cpuinfo spells them (avx512f,amx_tile), not {bad[0]!r}"
            )
        return ",".join(names)

    @field_validator("verify_sizes")
    @classmethod
    def _sizes_format(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"\s*\w+=\d+(,\d+)*([\s;]+\w+=\d+(,\d+)*)*\s*", value):
            raise ValueError("expected NAME=SIZE[,SIZE...] separated by spaces, e.g. 'N=13,67 M=11,61'")
        return value

    @field_validator("runtime_check")
    @classmethod
    def _runtime_check_format(cls, value: str) -> str:
        text = str(value).strip().lower()
        if not re.fullmatch(r"off|auto|first|every:[1-9]\d*", text):
            raise ValueError("expected off, auto, first or every:N (N >= 1), e.g. 'every:100'")
        return text

    @property
    def sources(self) -> dict[str, str]:
        """Where each effective value came from."""
        return dict(self._sources)

    def source(self, key: str) -> str:
        return self._sources.get(key, "default")

    @property
    def plugin_values(self) -> dict[str, Any]:
        """The resolved values of plugin-owned settings, by name."""
        return dict(self._plugin_values)

    def __getattr__(self, name: str) -> Any:
        """Plugin-owned settings read like core ones: ``settings.openai_api``."""
        try:
            return super().__getattr__(name)  # type: ignore[misc]  # pydantic's private attributes
        except AttributeError:
            if name.startswith("_"):
                raise
        private = object.__getattribute__(self, "__pydantic_private__") or {}
        values = private.get("_plugin_values") or {}
        if name in values:
            return values[name]
        declared = plugin_settings()
        if name in declared:
            return declared[name][0].default
        known = [*KEYS, *declared]
        close = difflib.get_close_matches(name, known, n=1)
        raise AttributeError(f"no setting named {name!r}" + (f"; did you mean {close[0]!r}?" if close else ""))


KEYS: tuple[str, ...] = tuple(AISettings.model_fields)


class SettingsWarning(UserWarning):
    """A ``DACE_ai_*`` environment variable names no setting (probably a typo)."""


def plugin_settings(manager: PluginManager | None = None) -> dict[str, tuple[Setting, Any]]:
    """The settings installed plugins declare, by name, with the registration declaring each.

    Loads the plugins (once per process) and registers the keys in DaCe's config schema,
    so ``dace.Config.set('ai', name, value=...)`` and ``.dace.conf`` work for them too. A
    plugin setting named like a core setting is an error.
    """
    declared = (manager or get_plugin_manager()).declared_settings()
    clashes = [f"{name!r} ({reg.origin})" for name, (_, reg) in declared.items() if name in BY_KEY]
    if clashes:
        raise SettingsError(f"plugin setting(s) {', '.join(clashes)} reuse the name of a core setting")
    register_ai_config(
        [
            SettingDef(name, setting.dace_type, setting.default, setting.description)
            for name, (setting, _) in declared.items()
        ]
    )
    return declared


def _validate_plugin(setting: Setting, value: Any, source: str) -> Any:
    if isinstance(value, str) and setting.default is None and value.strip().lower() in ("", "none"):
        return None
    try:
        checked: object = TypeAdapter(setting.type).validate_python(value.strip() if isinstance(value, str) else value)
    except ValidationError as exc:
        problem = "; ".join(e["msg"] for e in exc.errors())
        raise SettingsError(
            f"setting {setting.name!r} = {value!r} from {source} is not allowed: {problem} "
            f"(allowed: {setting.type.__name__})"
        ) from None
    if setting.choices and checked not in setting.choices:
        raise SettingsError(
            f"setting {setting.name!r} = {value!r} from {source} is not allowed "
            f"(allowed: {', '.join(map(repr, setting.choices))})"
        )
    return checked


_warned: set[str] = STATE.register("config.settings.warned", set())


def _warn_unknown_environment(environ: Mapping[str, str], known: list[str]) -> None:
    """Warn (once per name) about ``DACE_ai_*`` variables that name no setting."""
    allowed = set(known) | set(MANAGER_FLAGS)
    for name in environ:
        if not name.startswith(ENV_PREFIX) or name[len(ENV_PREFIX) :] in allowed or name in _warned:
            continue
        _warned.add(name)
        close = difflib.get_close_matches(name[len(ENV_PREFIX) :], sorted(allowed), n=1, cutoff=0.6)
        hint = f"; did you mean {ENV_PREFIX}{close[0]}?" if close else f"; settings: {', '.join(known)}"
        warnings.warn(
            f"environment variable {name} names no dace-ai setting and is ignored{hint}", SettingsWarning, stacklevel=3
        )


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


_TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false (1/0, yes/no, on/off)", "str": "text"}
_BOUND_WORDS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def _allowed(key: str) -> str:
    """What ``key`` accepts, in words: "an integer >= 1", "one of 'low', 'medium', ..."."""
    if key == "effort":
        return "one of 'low', 'medium', 'high', 'max' (or empty)"
    if key == "checkers":
        return "checker names, comma separated"
    definition = BY_KEY[key]
    words = _TYPE_WORDS.get(definition.dace_type, definition.dace_type)
    bounds = " and ".join(f"{_BOUND_WORDS.get(op, op)} {limit:g}" for op, limit in definition.bounds)
    return words + (f" {bounds}" if bounds else "")


def _validate_one(key: str, value: Any, source: str) -> Any:
    try:
        return getattr(AISettings.model_validate({key: value}), key)
    except ValidationError as exc:
        # A setting's own validator words its rule itself; pydantic's type and bound errors are worded here.
        own = [e["msg"].removeprefix("Value error, ") for e in exc.errors() if e["type"] == "value_error"]
        rule = "; ".join(own) if own else f"it must be {_allowed(key)}"
        raise SettingsError(f"setting {key!r} = {value!r} from {source} is not allowed: {rule}") from None


#: Settings whose values name installed plugins: setting -> (hook kind, what one is called).
CHOICES: dict[str, tuple[str, str]] = {
    "provider": ("providers", "provider"),
    "target": ("targets", "target"),
    "checkers": ("checkers", "checker"),
    "executor": ("executors", "executor"),
}


def check_choices(settings: AISettings) -> None:
    """Refuse a provider, target or checker name that no installed plugin registers, with the closest name."""
    import difflib

    manager = get_plugin_manager()
    for key, (kind, noun) in CHOICES.items():
        value = getattr(settings, key)
        if not value:
            continue
        installed = list(getattr(manager, kind)())
        for entry in value if isinstance(value, tuple) else (value,):
            name = entry.lstrip("+-") if key == "checkers" else entry  # "+name" / "-name" edit the defaults
            if name in installed:
                continue
            close = difflib.get_close_matches(name, installed, n=1, cutoff=0.5)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise SettingsError(
                f"setting {key!r} = {name!r} from {settings.source(key)} names no installed "
                f"{noun}.{hint} Installed: {', '.join(sorted(installed)) or 'none'}"
            )


def _unknown(names: list[str], known: list[str]) -> str:
    """``'x' (did you mean 'y'?), 'z'`` for an error message."""
    parts = []
    for name in names:
        close = difflib.get_close_matches(name, known, n=1)
        parts.append(repr(name) + (f" (did you mean {close[0]!r}?)" if close else ""))
    return ", ".join(parts)


def resolve_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    start_dir: str | os.PathLike | None = None,
    environ: Mapping[str, str] | None = None,
) -> AISettings:
    """Resolve every setting (core and plugin-owned) from its sources and remember where each came from."""
    declared = plugin_settings()
    known = [*KEYS, *declared]
    overrides = {k: v for k, v in (overrides or {}).items()}
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise SettingsError(f"unknown setting(s) {_unknown(unknown, known)}; known: {', '.join(known)}")
    environ = os.environ if environ is None else environ
    _warn_unknown_environment(environ, known)
    dace_values = dace_config_overrides()
    file_found = _find_file_settings(Path(start_dir or os.getcwd()).resolve())
    file_values, file_source = file_found if file_found else ({}, "")
    file_unknown = sorted(set(file_values) - set(known))
    if file_unknown:
        raise SettingsError(
            f"{file_source}: unknown setting(s) {_unknown(file_unknown, known)}; known: {', '.join(known)}"
        )

    values: dict[str, Any] = {}
    plugin_values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in known:
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
            if key in declared:
                plugin_values[key] = declared[key][0].default
            continue
        if key in declared:
            plugin_values[key] = _validate_plugin(declared[key][0], value, source)
        else:
            values[key] = _validate_one(key, value, source)
        sources[key] = source
    settings = AISettings.model_validate(values)
    settings._sources.update(sources)
    settings._plugin_values.update(plugin_values)
    remember_secret(settings.base_url)  # never shown again, wherever it turns up
    check_choices(settings)
    return settings


def early_setting(
    key: str, *, start_dir: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Any, str]:
    """(value, source) of one core setting, resolved without loading plugins (for ``import dace_ai``).

    Same sources and order as :func:`resolve_settings` (no explicit arguments at import time).
    """
    environ = os.environ if environ is None else environ
    env_name = ENV_PREFIX + key
    if env_name in environ:
        source = f"environment variable {env_name}"
        return _validate_one(key, environ[env_name], source), source
    dace_values = dace_config_overrides()
    if key in dace_values:
        source = f"dace.Config ('ai', {key!r})"
        return _validate_one(key, dace_values[key], source), source
    found = _find_file_settings(Path(start_dir or os.getcwd()).resolve())
    if found and key in found[0]:
        return _validate_one(key, found[0][key], found[1]), found[1]
    return BY_KEY[key].default, "default"


def describe_settings(settings: AISettings) -> list[dict[str, Any]]:
    """Rows of (key, value, source, description, owner) for ``dace-ai config``: core, then plugin-owned."""
    rows = []
    for key, info in AISettings.model_fields.items():
        rows.append(
            {
                "key": key,
                "value": getattr(settings, key),
                "source": settings.source(key),
                "description": info.description or "",
                "owner": "dace-ai",
            }
        )
    for name, (setting, registration) in plugin_settings().items():
        rows.append(
            {
                "key": name,
                "value": getattr(settings, name),
                "source": settings.source(name),
                "description": setting.description,
                "owner": registration.origin,
            }
        )
    return rows
