"""Choosing a provider and turning its failures into clear errors.

With no ``provider`` setting, the usable provider with the highest
``auto_rank`` wins (Anthropic when its package is installed and a key is set),
and the built-in ``manual`` exchange is the fallback that always works offline.
"""

from __future__ import annotations

import os

from dace_ai.config.settings import AISettings
from dace_ai.errors import AnswerError, ProviderError, redact
from dace_ai.plugins.manager import PluginManager, get_plugin_manager
from dace_ai.plugins.registrations import Provider
from dace_ai.providers.api import ProviderClient, ProviderReply, ProviderRequest

FALLBACK_PROVIDER = "manual"


def _usable(provider: Provider) -> bool:
    try:
        return bool(provider.available()) if provider.available else False
    except Exception:
        return False


def select_provider(settings: AISettings, manager: PluginManager | None = None) -> Provider:
    manager = manager or get_plugin_manager()
    if settings.provider:
        return manager.get_as("providers", settings.provider, Provider)
    candidates = [p for p in manager.providers().values() if _usable(p)]
    if candidates:
        return max(candidates, key=lambda p: (p.auto_rank, p.name))
    return manager.get_as("providers", FALLBACK_PROVIDER, Provider)


def missing_key_message(provider: Provider) -> str | None:
    """A message naming the variable to set, or None when a key is present (or none is needed)."""
    if not provider.key_env or any(os.environ.get(var) for var in provider.key_env):
        return None
    names = " or ".join(provider.key_env)
    return f"provider {provider.name!r} ({provider.origin}) needs an API key: set {names}"


def make_client(provider: Provider, settings: AISettings) -> ProviderClient:
    """Build the provider's client; a missing SDK names the ``pip install`` to run.

    Keys are the provider's business (its SDK may find credentials of its own), so
    they are not checked here; a failure to start names the key variables when none is set.
    """
    try:
        client = provider.factory(settings)
    except ProviderError as exc:
        raise ProviderError(redact(str(exc))) from exc.__cause__
    except ImportError as exc:  # the SDK is missing
        package = provider.sdk or getattr(exc, "name", None) or "the provider's SDK"
        raise ProviderError(
            redact(
                f"provider {provider.name!r} ({provider.origin}) needs the package {package!r}: "
                f"pip install {package}  (import failed: {exc})"
            )
        ) from exc
    except Exception as exc:
        hint = missing_key_message(provider)
        raise ProviderError(
            redact(
                f"provider {provider.name!r} ({provider.origin}) could not start: "
                f"{type(exc).__name__}: {exc}" + (f" ({hint})" if hint else "")
            )
        ) from exc
    if not isinstance(client, ProviderClient):
        raise ProviderError(
            f"provider {provider.name!r} ({provider.origin}): factory returned "
            f"{type(client).__name__}, which has no complete(request) method"
        )
    return client


def ask(provider: Provider, client: ProviderClient, request: ProviderRequest) -> ProviderReply:
    """Send one request; any failure becomes a :class:`ProviderError` naming the provider."""
    try:
        reply = client.complete(request)
    except AnswerError:  # names the response file and the problem
        raise
    except ProviderError as exc:  # SDK messages may quote the endpoint or a header: no credentials shown
        clean = redact(str(exc))
        if clean == str(exc):
            raise
        error = ProviderError(clean)
        error.__dict__.update(exc.__dict__)
        raise error from exc.__cause__
    except Exception as exc:
        raise ProviderError(
            redact(f"provider {provider.name!r} ({provider.origin}) failed: {type(exc).__name__}: {exc}")
        ) from exc
    if not isinstance(reply, ProviderReply):
        raise ProviderError(
            f"provider {provider.name!r} ({provider.origin}) returned {type(reply).__name__}, not a ProviderReply"
        )
    return reply
