"""Test helpers for dace-ai plugin authors.

The fixtures ``dace_ai_plugin_manager`` and ``register_dace_ai_plugin`` come from the
pytest plugin :mod:`dace_ai_pytest`, which pytest loads in every session (entry point
``pytest11``) and which imports dace-ai only when a test uses one of them; this module
is imported explicitly by the tests that want its helpers.

Contract checks, callable from a plugin's own tests::

    from dace_ai.testing import check_registrations
    import my_plugin

    def test_contract():
        check_registrations(my_plugin)

:class:`FakeProvider` is a scripted provider client for tests: it answers from a
queue of texts and records every request. It is a fake and is never registered
through an entry point.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from dace_ai.config.definitions import BY_KEY
from dace_ai.environments.spec import EnvironmentSpec
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import HOOK_TYPES, Detection, Provider
from dace_ai.prompt.answer import EnvironmentRequest
from dace_ai.providers.api import ProviderReply, Usage

if TYPE_CHECKING:
    from dace_ai.plugins.registrations import EnvironmentGenerator
    from dace_ai.providers.api import ProviderRequest


class FakeProvider:
    """A scripted, thread-safe provider client: answers are texts or callables of the request."""

    def __init__(self, answers: Iterable[str | Callable[[Any], str]] = ()) -> None:
        self._answers = list(answers)
        self._lock = threading.Lock()
        self.requests: list[Any] = []

    def queue(self, *answers: str | Callable[[Any], str]) -> None:
        with self._lock:
            self._answers.extend(answers)

    def complete(self, request: ProviderRequest) -> Any:
        with self._lock:
            self.requests.append(request)
            if not self._answers:
                raise RuntimeError("FakeProvider: no scripted answer left for this request")
            answer = self._answers.pop(0)
        text = answer(request) if callable(answer) else answer
        return ProviderReply(
            text=text,
            usage=Usage(input_tokens=len(request.system), output_tokens=len(text)),
            model=request.model or "fake-model",
            stop_reason="end_turn",
        )

    def registration(self, name: str = "fake") -> Any:
        """A Provider registration whose factory returns this client."""
        return Provider(
            name=name, factory=lambda settings: self, offline=True, description="scripted answers for tests"
        )

    def plugin(self, name: str = "fake") -> Any:
        """A plugin object registering this client as provider ``name``."""
        registration = self.registration(name)

        class _Plugin:
            @hookimpl
            def dace_ai_providers(self):
                yield registration

        return _Plugin()


def _hook_results(plugin: object, hook_name: str) -> list[Any]:
    function = getattr(plugin, hook_name, None)
    if function is None:
        return []
    produced = function()
    return list(produced) if produced is not None else []


def _check_settings(items: list[Any], declared: dict[str, Any]) -> None:
    """Settings a plugin declares do not reuse a core setting's name; a name declared twice is declared alike."""
    for item in items:
        for setting in item.settings:
            assert setting.name not in BY_KEY, (
                f"{type(item).__name__} {item.name!r}: setting {setting.name!r} reuses a core setting's name"
            )
            assert declared.setdefault(setting.name, setting) == setting, (
                f"setting {setting.name!r} is declared differently by two registrations"
            )


def check_registrations(plugin: object) -> dict[str, list[Any]]:
    """Run every hook the plugin implements and check each registration's contract (and the settings it declares).

    Checks: the hook yields the right registration type; names are unique within the
    plugin; providers' factories are callable and SDKs are not imported at module
    import; targets' ``detect()`` returns a Detection and ``describe()`` a non-empty
    string; prompt sections render ``str`` or ``None``-compatible callables; checkers
    have a valid stage; environment generators' ``detect()`` returns a Detection and, when
    installed, ``generate()`` an ``EnvironmentSpec``. Returns the registrations by hook.
    """
    found: dict[str, list[Any]] = {}
    declared: dict[str, Any] = {}  # plugin-owned settings: no core names, one declaration per name
    for hook_name, expected in HOOK_TYPES.items():
        items = _hook_results(plugin, hook_name)
        names = [item.name for item in items]
        for item in items:
            assert isinstance(item, expected), f"{hook_name} yielded {type(item).__name__}, not {expected.__name__}"
        assert len(names) == len(set(names)), f"{hook_name} yields duplicate names: {names}"
        found[hook_name] = items
        _check_settings(items, declared)
    for target in found["dace_ai_targets"]:
        detection = target.detect()
        assert isinstance(detection, Detection), f"target {target.name!r}: detect() must return Detection"
        assert isinstance(detection.reason, str) and detection.reason, f"target {target.name!r}: empty reason"
        text = target.describe(detection)
        assert isinstance(text, str) and text.strip(), f"target {target.name!r}: describe() must return text"
        assert isinstance(target.resolved_flags(detection), tuple)
    for generator in found["dace_ai_environment_generators"]:
        _check_environment_generator(generator, Detection)
    return found


def _check_environment_generator(generator: EnvironmentGenerator, detection_type: type[Detection]) -> None:
    """``detect()`` gives a Detection with a reason; when installed, a bare request gives an EnvironmentSpec."""
    detection = generator.detect() if generator.detect is not None else None
    if detection is not None:
        assert isinstance(detection, detection_type), f"generator {generator.name!r}: detect() must return Detection"
        assert isinstance(detection.reason, str) and detection.reason, f"generator {generator.name!r}: empty reason"
    if detection is None or detection.matched:
        spec = generator.generate(EnvironmentRequest(name=generator.name.replace("-", "_"), generator=generator.name))
        assert isinstance(spec, EnvironmentSpec), (
            f"generator {generator.name!r}: generate() must return an EnvironmentSpec, got {type(spec).__name__}"
        )
