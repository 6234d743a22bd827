"""Registers provider \"twin\" (clashes with dace-ai-test-dup-b)."""

from dace_ai.plugin import Provider, hookimpl


@hookimpl
def dace_ai_providers():
    yield Provider(name="twin", factory=lambda settings: None)
