"""Asking a model: the provider protocol, the offline ``manual`` provider, helpers for
the SDK packs, and choosing a provider with clear errors.

May import the layers below it (``errors``, ``state``, ``compat``, ``plugins``, ``config``, ``storage``)
and its neighbours ``prompt`` and ``context``.
"""
