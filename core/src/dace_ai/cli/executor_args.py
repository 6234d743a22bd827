"""Where ``generate`` and ``optimize`` run their checks, from the command line.

``--executor``, ``--scheduler``, ``--workers`` pick the executor; the batch options
(``--queue``, ``--walltime``, ...) set the ``cluster_*`` settings of the batch
executors (``slurm``, ``pbs``, ``lsf`` of the ``dace-ai-dask`` package) for this run,
over ``.dace.conf``, the environment and ``pyproject.toml``. ``--dry-run`` prints what
the executor would start (a batch job script) and starts nothing.
"""

from __future__ import annotations

import argparse
from typing import Any

#: Batch options: (flag, setting, metavar, help); a repeatable flag's values are joined by new lines.
BATCH_OPTIONS = (
    ("--cluster", "cluster", "SYSTEM", "batch system of 'dask' without --scheduler: slurm, pbs or lsf"),
    ("--queue", "cluster_queue", "NAME", "queue (SLURM partition) of the workers' jobs"),
    ("--account", "cluster_account", "NAME", "account (project) the jobs are charged to"),
    ("--walltime", "cluster_walltime", "HH:MM:SS", "wall-clock limit of each job"),
    ("--cores", "cluster_cores", "N", "cores of each job (the worker runs that many checks at once)"),
    ("--memory", "cluster_memory", "SIZE", "memory of each job, e.g. 16GB"),
    (
        "--prologue",
        "cluster_prologue",
        "LINE",
        "shell line run before the worker starts (repeatable), e.g. 'module load gcc/12'",
    ),
    ("--directive", "cluster_directives", "DIRECTIVE", "extra job directive (repeatable), e.g. --exclusive"),
    ("--targets", "cluster_targets", "T[,T]", "targets the workers run, e.g. sve (default: this machine's)"),
    ("--interface", "cluster_interface", "NAME", "network interface the scheduler and workers use, e.g. ib0"),
    ("--adapt", "cluster_adapt", "MIN:MAX", "scale the jobs with the queue of checks between MIN and MAX"),
)
REPEATED = {"cluster_prologue", "cluster_directives"}


def add_executor_arguments(parser: argparse.ArgumentParser, *, dry_run: bool = False) -> None:
    """``--executor``, ``--scheduler``, ``--workers`` and the batch options: where the candidates' checks run."""
    parser.add_argument(
        "--executor",
        default=None,
        help="executor plugin running the checks: threads (this process, the default), local "
        "(worker processes), dask (a dask cluster), slurm, pbs or lsf (dask workers as batch "
        "jobs), ... (setting 'executor')",
    )
    parser.add_argument(
        "--scheduler", default=None, metavar="ADDR", help="address of a running scheduler, e.g. tcp://head:8786 (dask)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="workers (batch jobs for slurm, pbs, lsf) the executor starts when there is no scheduler",
    )
    group = parser.add_argument_group("batch clusters (executors slurm, pbs, lsf; settings cluster_*)")
    for flag, setting, metavar, text in BATCH_OPTIONS:
        group.add_argument(
            flag,
            dest=setting,
            metavar=metavar,
            help=text,
            default=None,
            action="append" if setting in REPEATED else "store",
        )
    if dry_run:
        group.add_argument(
            "--dry-run",
            action="store_true",
            help="print the job script (or what else the executor would start) and start nothing",
        )


def settings_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the batch options give (only those given on the command line)."""
    overrides: dict[str, Any] = {}
    for _, setting, _, _ in BATCH_OPTIONS:
        value = getattr(args, setting, None)
        if value is not None:
            overrides[setting] = "\n".join(value) if setting in REPEATED else value
    return overrides


def dry_run(args: argparse.Namespace) -> int:
    """Print what the executor of these options would start, without starting it (:mod:`dace_ai.cli.dry_run`)."""
    from dace_ai.cli.dry_run import show  # local: CLI startup (the executors load when the command runs)

    return show(args, settings_overrides(args))
