"""Entry point: registers the ``labgateway`` provider and the setting it owns.

dace-ai imports this module whenever it loads plugins, so it stays thin: the
client (and anything heavy it needs) is imported inside the factory.
"""

from __future__ import annotations

import os

from dace_ai.plugin import AISettings, Provider, ProviderClient, Setting, hookimpl

TOKEN_ENV = "LABGATEWAY_TOKEN"

#: A setting this plugin owns: DACE_ai_labgateway_temperature, [tool.dace-ai], dace-ai.toml, ...
TEMPERATURE = Setting("labgateway_temperature", float, 0.0, "Sampling temperature sent to the lab gateway")


def _factory(settings: AISettings) -> ProviderClient:
    from .client import GatewayClient

    return GatewayClient(settings)


def _available() -> bool:
    """Chosen automatically only when the token is set."""
    return bool(os.environ.get(TOKEN_ENV))


@hookimpl
def dace_ai_providers():
    yield Provider(
        name="labgateway",
        factory=_factory,
        key_env=(TOKEN_ENV,),
        available=_available,
        auto_rank=10,
        settings=(TEMPERATURE,),
        description="The lab's Chat Completions gateway (plain HTTP, no SDK)",
    )
