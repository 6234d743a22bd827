"""What a plugin's callables receive and return, as the plugin layer sees them.

The registrations (:mod:`dace_ai.plugins.registrations`) sit at the bottom of the
package: settings, targets, environments, checks and providers are all built from
them. The concrete types their callables receive (the resolved settings, the node's
context, a check's request and report, an environment request and spec, a provider
client) are defined in those higher layers, so naming them here, even for
annotations only, would make an import circle. These protocols say what the plugin
layer relies on instead; the concrete classes satisfy them. Plugin authors import
the concrete classes from :mod:`dace_ai.plugin`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class SettingsView(Protocol):
    """The resolved settings (:class:`dace_ai.config.settings.AISettings`): every setting, core or
    plugin-owned, read as an attribute (``settings.openai_api``)."""

    def __getattr__(self, name: str) -> Any: ...


class NodeView(Protocol):
    """What a model must know about a node (:class:`dace_ai.context.types.NodeContext`)."""

    @property
    def key(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def node_type(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def symbols(self) -> dict[str, str]: ...
    @property
    def in_gpu_kernel(self) -> bool: ...


class CheckRequestView(Protocol):
    """One candidate to check (:class:`dace_ai.checking.api.CheckRequest`)."""

    @property
    def answer(self) -> Any: ...
    @property
    def node(self) -> NodeView: ...
    @property
    def settings(self) -> SettingsView: ...
    @property
    def workdir(self) -> Path: ...


class CheckReportView(Protocol):
    """A checker's finding (:class:`dace_ai.checking.api.CheckReport`)."""

    @property
    def checker(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def diagnostics(self) -> str: ...
    @property
    def stage(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def details(self) -> dict[str, Any]: ...


class EnvironmentRequestView(Protocol):
    """An answer's request for a library (:class:`dace_ai.prompt.answer.EnvironmentRequest`)."""

    @property
    def name(self) -> str: ...
    @property
    def generator(self) -> str: ...


class EnvironmentSpecView(Protocol):
    """A DaCe environment as data (:class:`dace_ai.environments.spec.EnvironmentSpec`)."""

    @property
    def name(self) -> str: ...
    @property
    def generator(self) -> str: ...


class ProviderClientView(Protocol):
    """A source of answers (:class:`dace_ai.providers.api.ProviderClient`): ``complete(ProviderRequest)``
    returns a ``ProviderReply``, both defined with the provider API."""

    def complete(self, request: Any) -> Any: ...
