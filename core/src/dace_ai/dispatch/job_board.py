"""What a run's check jobs are doing, node by node, live on the terminal.

``generate`` and ``optimize`` hand their checks to an executor, which may queue them
on a cluster for minutes. The :class:`JobBoard` counts, per node, the jobs done,
running and queued (and those that came back without a usable result), from what
the :class:`~dace_ai.dispatch.dispatcher.CheckDispatcher` reports as it submits and
receives them. Which submitted jobs are running rather than queued comes from the
executor when it can tell (dask: the tasks its workers are processing); otherwise
every submitted job counts as running.

On a terminal it is a table redrawn twice a second (rich, already a dependency of
the progress bar); elsewhere it stays silent unless asked for, and then prints its
last state when the run ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Rows shown at most; the other nodes are summed up in one line.
MAX_ROWS = 20


@dataclass
class NodeJobs:
    """One node's check jobs."""

    submitted: set[str] = field(default_factory=set)
    done: int = 0
    failed: int = 0


@dataclass(frozen=True)
class Counts:
    done: int
    running: int
    queued: int
    failed: int


class JobBoard:
    """Per-node counts of check jobs, drawn live (a context manager; see the module docstring)."""

    def __init__(self, title: str, *, enabled: bool, running: Callable[[], set[str] | None] | None = None) -> None:
        self.title = title
        self.enabled = enabled
        self.header = ""  #: a line the driver sets above the table (nodes done, cached, ...)
        #: Ids of the jobs running now, from the executor (None where it cannot tell).
        self.running_jobs = running
        self._nodes: dict[str, NodeJobs] = {}
        self._lock = threading.Lock()
        self._live: Any = None

    def submitted(self, node: str, job_id: str) -> None:
        with self._lock:
            self._nodes.setdefault(node, NodeJobs()).submitted.add(job_id)

    def finished(self, node: str, job_id: str, ok: bool) -> None:
        with self._lock:
            jobs = self._nodes.setdefault(node, NodeJobs())
            jobs.submitted.discard(job_id)
            if ok:
                jobs.done += 1
            else:
                jobs.failed += 1

    def counts(self) -> dict[str, Counts]:
        """Each node's jobs now, in the order the nodes first submitted one."""
        running = self.running_jobs() if self.running_jobs is not None else None
        with self._lock:
            out = {}
            for node, jobs in self._nodes.items():
                busy = len(jobs.submitted) if running is None else len(jobs.submitted & running)
                out[node] = Counts(jobs.done, busy, len(jobs.submitted) - busy, jobs.failed)
            return out

    def __rich__(self) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        counts = self.counts()
        total = Counts(*(sum(getattr(c, f) for c in counts.values()) for f in ("done", "running", "queued", "failed")))
        title = (
            f"{self.title}: {total.done} check job(s) done, {total.running} running, {total.queued} queued"
            + (f", {total.failed} without a result" if total.failed else "")
            + (f"\n{self.header}" if self.header else "")
        )
        table = Table(expand=False)
        for column, style in (
            ("node", ""),
            ("done", "green"),
            ("running", "yellow"),
            ("queued", "cyan"),
            ("no result", "red"),
        ):
            table.add_column(column, style=style, justify="left" if column == "node" else "right")
        # Nodes with work in flight first, then the finished ones.
        ordered = sorted(counts.items(), key=lambda item: (item[1].running + item[1].queued) == 0)
        for node, c in ordered[:MAX_ROWS]:
            table.add_row(node, str(c.done), str(c.running), str(c.queued), str(c.failed or ""))
        if len(ordered) > MAX_ROWS:
            rest = [c for _, c in ordered[MAX_ROWS:]]
            table.add_row(
                f"... {len(rest)} more node(s)",
                str(sum(c.done for c in rest)),
                str(sum(c.running for c in rest)),
                str(sum(c.queued for c in rest)),
                str(sum(c.failed for c in rest) or ""),
            )
        return Group(Text(title), table) if counts else Text(title)

    def __enter__(self) -> JobBoard:  # noqa: PYI034
        if self.enabled:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self, console=Console(stderr=True), refresh_per_second=2, transient=False)
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
