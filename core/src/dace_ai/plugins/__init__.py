"""The plugin system: hook specifications, typed registrations, the plugin manager with
provenance, and the protocols plugins' callables receive (:mod:`~dace_ai.plugins.types`).

May import ``errors``, ``state`` and ``compat`` only: everything else builds on it.
"""
