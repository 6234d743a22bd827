"""The ``ai`` settings: their table (:mod:`~dace_ai.config.definitions`) and the one pydantic
model that reads them from DaCe's config, files and the environment (:mod:`~dace_ai.config.settings`).

May import ``errors``, ``state``, ``compat`` and ``plugins``.
"""
