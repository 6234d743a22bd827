"""Dispatching checks to executors: each candidate's checks as a self-contained job (check_jobs), what comes
back and whether to believe it (check_results), the dispatcher that routes jobs by target (dispatcher) and
the live board of a run's jobs (job_board); the executors themselves live in ``execution``.
May import ``solving``, ``execution`` and every package below them; never ``expansion`` or above."""
