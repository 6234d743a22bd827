"""Built-in plugin: the ``manual`` provider (prompt and answer files; works offline).

It needs no SDK, no key and no network, which also makes it the fallback when
no other provider is usable. See :mod:`dace_ai.manual` for the file exchange.
"""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..registrations import Provider


def _factory(settings):
    from ..manual import ManualClient

    return ManualClient(settings)


@hookimpl
def dace_ai_providers():
    yield Provider(name="manual", factory=_factory, offline=True, answers_before_cache=True, auto_rank=-1000,
                   description="Prompts written to files; answers read from response files or pasted")
