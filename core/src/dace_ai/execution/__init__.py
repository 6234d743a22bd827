"""Running check/verify/bench jobs: job descriptions and executors (local process pool and threads built in);
a candidate's checks as such a job, and the dispatcher that sends it, live in ``dispatch``.

May import ``targets`` and the packages below it (``errors``, ``state``, ``compat``, ``plugins``, ``config``,
``storage``); never ``checking`` or above.
"""
