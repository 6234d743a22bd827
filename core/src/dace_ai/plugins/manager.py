"""The plugin manager: entry-point loading, blocking, collection and provenance.

It wraps a :class:`pluggy.PluginManager` and adds what dace-ai users need:

* its own entry-point loader, so a plugin that fails to import is reported with
  its distribution, version and error while the others still load
  (``DACE_ai_strict_plugins=1`` turns that into an error, for CI and authors);
* blocking before import: ``DACE_ai_disable_plugins=a,b`` and
  ``DACE_ai_no_plugins=1`` (built-ins only) never import what they block;
* one collector per hook that validates registration types, stamps provenance,
  and fails on duplicate names listing every distribution that claimed the name;
* tracing (``DACE_ai_trace_plugins=1``): every hook call, each implementation
  that answered and what it returned.

Loading is lazy and cached: nothing is imported until the first collection.
"""

from __future__ import annotations

import difflib
import os
import sys
import threading
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, TypeVar

import pluggy

from dace_ai.errors import PluginError
from dace_ai.plugins.hookspecs import PROJECT, DaceAISpec
from dace_ai.plugins.registrations import (
    HOOK_TYPES,
    BenchSuite,
    Checker,
    EnvironmentGenerator,
    Executor,
    PluginOrigin,
    PromptSection,
    Provider,
    Registration,
    Setting,
    Target,
)

R = TypeVar("R", bound=Registration)

ENTRY_POINT_GROUP = "dace_ai"
#: Environment variables the plugin manager reads (``DACE_ai_<name>``); not settings, but not typos either.
MANAGER_FLAGS: tuple[str, ...] = ("trace_plugins", "strict_plugins", "disable_plugins", "no_plugins")
#: The distribution whose entry points are the built-in plugins.
CORE_DISTRIBUTION = "dace-ai"

_TRUE = {"1", "true", "yes", "on"}


class PluginLoadWarning(UserWarning):
    """A plugin could not be loaded; the others were."""


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def _env_list(name: str) -> set[str]:
    return {part.strip() for part in os.environ.get(name, "").split(",") if part.strip()}


@dataclass
class PluginRecord:
    """What the manager knows about one plugin, for ``dace-ai plugins list``."""

    name: str
    distribution: str
    version: str
    status: str  # "active", "disabled" or "failed"
    builtin: bool = False
    error: str | None = None
    value: str = ""
    registered: dict[str, list[str]] = field(default_factory=dict)

    @property
    def provenance(self) -> PluginOrigin:
        return PluginOrigin(self.name, self.distribution, self.version)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "status": self.status,
            "builtin": self.builtin,
            "error": self.error,
            "entry_point": self.value,
            "registered": self.registered,
        }


def _normalise(dist_name: str) -> str:
    return dist_name.replace("_", "-").lower()


class PluginManager:
    """dace-ai's plugin manager. Use :func:`get_plugin_manager` for the shared instance."""

    def __init__(self, *, load_entry_points: bool = True) -> None:
        self._pm = pluggy.PluginManager(PROJECT)
        self._pm.add_hookspecs(DaceAISpec)
        self._load_entry_points = load_entry_points
        self._loaded = False
        self._lock = threading.RLock()
        self._records: dict[str, PluginRecord] = {}
        self._plugin_objects: dict[str, Any] = {}
        self._cache: dict[str, dict[str, Registration]] = {}
        #: Prompt sections replaced by a ``replace=True`` section: name -> the replaced registration.
        self._replaced: dict[str, Registration] = {}
        self.trace = _env_flag("DACE_ai_trace_plugins")

    # ------------------------------------------------------------------ loading
    @property
    def strict(self) -> bool:
        return _env_flag("DACE_ai_strict_plugins")

    def load(self) -> None:
        """Load every entry point once (idempotent, thread-safe)."""
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            if self._load_entry_points:
                self._load_group()
            self._pm.check_pending()

    def _load_group(self) -> None:
        disabled = _env_list("DACE_ai_disable_plugins")
        builtins_only = _env_flag("DACE_ai_no_plugins")
        seen: set[tuple[str, str]] = set()
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = getattr(ep, "dist", None)
            dist_name = dist.metadata["Name"] if dist is not None else "unknown"
            version = dist.version if dist is not None else "unknown"
            key = (ep.name, _normalise(dist_name))
            if key in seen:  # the same distribution visible twice on sys.path
                continue
            seen.add(key)
            builtin = _normalise(dist_name) == CORE_DISTRIBUTION
            record = PluginRecord(ep.name, dist_name, version, "active", builtin=builtin, value=ep.value)
            blocked_by = None
            if ep.name in disabled or _normalise(dist_name) in {_normalise(d) for d in disabled}:
                blocked_by = "DACE_ai_disable_plugins"
            elif builtins_only and not builtin:
                blocked_by = "DACE_ai_no_plugins"
            if blocked_by:
                record.status = "disabled"
                record.error = f"blocked by {blocked_by}"
                self._records[ep.name] = record
                continue
            try:
                module = ep.load()
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                self._fail(record, f"import of {ep.value!r} failed: {type(exc).__name__}: {exc}", exc)
                continue
            self._register(module, record)

    def _fail(self, record: PluginRecord, message: str, exc: BaseException | None = None) -> None:
        record.status = "failed"
        record.error = message
        self._records[record.name] = record
        text = f"dace-ai plugin {record.name!r} from {record.distribution} {record.version}: {message}"
        if self.strict:
            raise PluginError(text + " (strict mode: DACE_ai_strict_plugins=1)") from exc
        warnings.warn(text, PluginLoadWarning, stacklevel=3)

    def _register(self, plugin: object, record: PluginRecord) -> None:
        if record.name in self._plugin_objects:
            self._fail(record, f"another plugin is already registered under the name {record.name!r}")
            return
        try:
            self._pm.register(plugin, name=record.name)
        except Exception as exc:  # pluggy.PluginValidationError and ValueError (already registered)
            self._fail(record, f"registration failed: {exc}", exc)
            return
        unknown = [hc.name for hc in (self._pm.get_hookcallers(plugin) or []) if not hc.has_spec()]
        if unknown:
            self._pm.unregister(plugin)
            hints = []
            for hook_name in unknown:
                close = difflib.get_close_matches(hook_name, list(HOOK_TYPES), n=1)
                hints.append(f"{hook_name}" + (f" (did you mean {close[0]}?)" if close else ""))
            self._fail(record, "implements unknown hooks: " + ", ".join(hints))
            return
        self._records[record.name] = record
        self._plugin_objects[record.name] = plugin
        self._cache.clear()

    def register(
        self, plugin: object, name: str, *, distribution: str = "<registered at runtime>", version: str = "0"
    ) -> PluginRecord:
        """Register a plugin object directly (tests, notebooks). Returns its record."""
        self.load()
        with self._lock:
            record = PluginRecord(name, distribution, version, "active", value=repr(plugin))
            self._register(plugin, record)
            if record.status == "failed":
                raise PluginError(f"plugin {name!r}: {record.error}")
            return record

    def unregister(self, name: str) -> None:
        with self._lock:
            plugin = self._plugin_objects.pop(name, None)
            if plugin is not None:
                self._pm.unregister(plugin)
            self._records.pop(name, None)
            self._cache.clear()

    # --------------------------------------------------------------- collection
    def records(self) -> list[PluginRecord]:
        """Every plugin seen, active or not, sorted by name, with what it registered."""
        self.load()
        for hook_name in HOOK_TYPES:
            self._collect(hook_name)
        return sorted(self._records.values(), key=lambda r: r.name)

    def _collect(self, hook_name: str) -> dict[str, Registration]:
        self.load()
        with self._lock:
            if hook_name in self._cache:
                return self._cache[hook_name]
            expected = HOOK_TYPES[hook_name]
            caller = getattr(self._pm.hook, hook_name)
            found: dict[str, list[Registration]] = {}
            for impl in reversed(caller.get_hookimpls()):  # registration order
                record = self._records.get(impl.plugin_name)
                provenance = record.provenance if record else PluginOrigin(impl.plugin_name, "unknown", "unknown")
                try:
                    produced = impl.function()
                    items = list(produced) if produced is not None else []
                    for item in items:
                        if not isinstance(item, expected):
                            raise TypeError(
                                f"{hook_name} must yield {expected.__name__} objects, got {type(item).__name__}"
                            )
                except Exception as exc:
                    message = f"{provenance}: hook {hook_name} failed: {type(exc).__name__}: {exc}"
                    if self.strict:
                        raise PluginError(message) from exc
                    warnings.warn(message, PluginLoadWarning, stacklevel=2)
                    if record:
                        record.error = message
                    continue
                if self.trace:
                    print(
                        f"[dace-ai trace] {hook_name} <- {provenance}: "
                        + (", ".join(repr(i.name) for i in items) or "nothing"),
                        file=sys.stderr,
                    )
                if record is not None:
                    record.registered[hook_name.removeprefix("dace_ai_")] = sorted(i.name for i in items)
                for item in items:
                    found.setdefault(item.name, []).append(item.with_provenance(provenance))
            result = self._resolve(hook_name, found)
            self._cache[hook_name] = result
            return result

    def _resolve(self, hook_name: str, found: dict[str, list[Registration]]) -> dict[str, Registration]:
        result: dict[str, Registration] = {}
        replaced: dict[str, Registration] = {}
        for name, regs in found.items():
            if hook_name == "dace_ai_prompt_sections":
                replacing = [r for r in regs if getattr(r, "replace", False)]
                originals = [r for r in regs if not getattr(r, "replace", False)]
                if len(replacing) == 1 and len(originals) == 1:
                    result[name], replaced[name] = replacing[0], originals[0]
                    continue
                if len(replacing) == 1 and not originals:
                    there = ", ".join(
                        sorted(n for n, rs in found.items() if any(not getattr(r, "replace", False) for r in rs))
                    )
                    close = difflib.get_close_matches(name, there.split(", "), n=1)
                    hint = f" Did you mean {close[0]!r}?" if close else ""
                    raise PluginError(
                        f"PromptSection {name!r} from {replacing[0].origin} has replace=True but "
                        f"no section of that name is registered (sections: {there}).{hint}"
                    )
            if len(regs) == 1:
                result[name] = regs[0]
                continue
            claimants = "; ".join(r.origin for r in regs)
            kind = HOOK_TYPES[hook_name].__name__
            raise PluginError(f"{kind} name {name!r} is registered more than once: {claimants}")
        if hook_name == "dace_ai_prompt_sections":
            self._replaced = replaced
        return dict(sorted(result.items()))

    def replaced_sections(self) -> dict[str, Registration]:
        """Prompt sections replaced by a ``replace=True`` section, by name: the registration replaced."""
        self._collect("dace_ai_prompt_sections")
        return dict(self._replaced)

    def _collect_typed(self, hook_name: str, kind: type[R]) -> dict[str, R]:
        """:meth:`_collect` for a hook whose registrations the collector checked are all ``kind``."""
        found = self._collect(hook_name)
        typed = {name: reg for name, reg in found.items() if isinstance(reg, kind)}
        if len(typed) != len(found):  # the collector refuses these; reaching here means HOOK_TYPES is out of step
            wrong = ", ".join(name for name in found if name not in typed)
            raise PluginError(f"{hook_name}: registrations {wrong} are not {kind.__name__}")
        return typed

    def providers(self) -> dict[str, Provider]:
        return self._collect_typed("dace_ai_providers", Provider)

    def targets(self) -> dict[str, Target]:
        return self._collect_typed("dace_ai_targets", Target)

    def prompt_sections(self) -> list[PromptSection]:
        """Sections in rendering order (``order``, then name)."""
        sections = self._collect_typed("dace_ai_prompt_sections", PromptSection).values()
        return sorted(sections, key=lambda s: (s.order, s.name))

    def checkers(self) -> dict[str, Checker]:
        return self._collect_typed("dace_ai_checkers", Checker)

    def environment_generators(self) -> dict[str, EnvironmentGenerator]:
        return self._collect_typed("dace_ai_environment_generators", EnvironmentGenerator)

    def declared_settings(self) -> dict[str, tuple[Setting, Registration]]:
        """Every plugin-owned :class:`Setting`, by name, with the first registration declaring it.

        Several registrations may declare the same setting (a plugin's provider and its
        checker reading one value) only with identical declarations; two different
        declarations of one name are an error naming both origins.
        """
        found: dict[str, tuple[Setting, Registration]] = {}
        for hook_name in HOOK_TYPES:
            for reg in self._collect(hook_name).values():
                for setting in reg.settings:
                    if setting.name in found and found[setting.name][0] != setting:
                        raise PluginError(
                            f"setting {setting.name!r} is declared differently by "
                            f"{found[setting.name][1].origin} and {reg.origin}"
                        )
                    found.setdefault(setting.name, (setting, reg))
        return dict(sorted(found.items()))

    def executors(self) -> dict[str, Executor]:
        return self._collect_typed("dace_ai_executors", Executor)

    def bench_suites(self) -> dict[str, BenchSuite]:
        return self._collect_typed("dace_ai_bench_suites", BenchSuite)

    def get(self, kind: str, name: str) -> Registration:
        """Look up one registration by hook kind ("providers", ...) and name, with a helpful error."""
        regs = self._collect("dace_ai_" + kind)
        if name not in regs:
            known = ", ".join(regs) or "none"
            close = difflib.get_close_matches(name, list(regs), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            disabled = [r for r in self._records.values() if r.name == name and r.status != "active"]
            why = f" Plugin {name!r} is {disabled[0].status}: {disabled[0].error}." if disabled else ""
            raise PluginError(f"no {kind[:-1].replace('_', ' ')} named {name!r} (installed: {known}).{hint}{why}")
        return regs[name]

    def get_as(self, kind: str, name: str, of: type[R]) -> R:
        """:meth:`get`, for a kind whose registrations are all ``of`` (``get_as("providers", name, Provider)``)."""
        found = self.get(kind, name)
        if not isinstance(found, of):  # the collector checks each hook's type: a kind and a type out of step
            raise PluginError(f"{kind} {name!r} from {found.origin} is a {type(found).__name__}, not {of.__name__}")
        return found

    @property
    def pluggy_manager(self) -> pluggy.PluginManager:
        self.load()
        return self._pm


_manager: PluginManager | None = None
_manager_lock = threading.Lock()


def get_plugin_manager() -> PluginManager:
    """The process-wide plugin manager, created (not loaded) on first use."""
    global _manager
    with _manager_lock:
        if _manager is None:
            _manager = PluginManager()
        return _manager


def set_plugin_manager(manager: PluginManager | None) -> PluginManager | None:
    """Replace the process-wide manager (tests); returns the previous one."""
    global _manager
    with _manager_lock:
        previous, _manager = _manager, manager
        return previous


def iter_registrations(manager: PluginManager | None = None) -> Iterable[tuple[str, Registration]]:
    """Every collected registration as (hook kind, registration), for listings."""
    manager = manager or get_plugin_manager()
    for hook_name in HOOK_TYPES:
        for reg in manager._collect(hook_name).values():
            yield hook_name.removeprefix("dace_ai_"), reg
