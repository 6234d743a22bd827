"""What dace-ai keeps on disk under the build root: files written atomically under locks,
the answer cache and the sessions.

May import ``errors``, ``state``, ``compat``, ``plugins`` and ``config``.
"""
