"""Implements a misspelt hook name; the manager must reject it with a hint."""

from dace_ai.plugin import Provider, hookimpl


@hookimpl
def dace_ai_provider():
    yield Provider(name="never", factory=lambda settings: None)
