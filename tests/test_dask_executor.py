"""The ``dask`` executor (dace-ai-dask) on a real LocalCluster: placement by resource tags."""

from __future__ import annotations

from dace_ai.execution.jobs import ExecutorOptions, Job
from dace_ai.execution.local import run_jobs

from tests.test_execution import square


def test_jobs_go_to_workers_that_offer_their_resources():
    """The workers may time and run SVE code; nobody offers CUDA, so that job fails at once, with the fix."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, resources={"bench": 1, "sve": 1}
    ) as cluster:
        jobs = [
            Job("timed", square, {"x": 3}, stage="bench"),
            Job("sve", square, {"x": 4}, stage="bench", target="sve"),
            Job("cuda", square, {"x": 5}, stage="bench", target="cuda"),
        ]
        timed, on_sve, cuda = run_jobs(jobs, "dask", ExecutorOptions(scheduler=cluster.scheduler_address))
    assert timed.value["square"] == 9 and on_sve.value["square"] == 16
    assert cuda.value is None and "'cuda'" in cuda.error and "--resources" in cuda.error
