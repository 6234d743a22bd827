"""Running check/verify/bench jobs: job descriptions and executors (local process pool built in).

May import ``targets`` and the packages below it (``errors``, ``state``, ``compat``, ``plugins``, ``config``,
``storage``); never ``checking`` or above.
"""
