"""What :func:`dace_ai.optimize` found: per node, every candidate, why each was refused, the winner.

Plain dataclasses with a JSON form (``dace-ai optimize --json``), a one-line
``str`` per node, and a rich table for terminals.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from dace_ai.performance.records import SpeedOfLight
from dace_ai.sandbox.deception import format_seconds

if TYPE_CHECKING:
    from dace_ai.dispatch.dispatcher import DispatchStats

CandidateStatus = Literal["passed", "refused", "error"]


@dataclass
class Candidate:
    """One sampled answer and what the checks made of it."""

    round: int  #: 0 for the first samples, 1.. for refinement rounds
    sample: int
    status: CandidateStatus
    reason: str = ""  #: why it was refused (the failing check's words)
    stage: str = ""  #: the stage that refused it (compile, verify, bench, answer)
    speedup: float | None = None  #: over the native expansion (median of the runs)
    speedup_range: list[float] | None = None
    native: str | None = None  #: the native expansion's name in figures ("DaCe pure")
    strongest: str | None = None  #: the fastest baseline timed ("OpenBLAS (DaCe 'OpenBLAS')"), see sandbox.baselines
    speedup_strongest: float | None = None  #: over the strongest baseline
    seconds_per_call: float | None = None
    native_seconds_per_call: float | None = None
    #: Its timing against this machine's roofline (see :mod:`dace_ai.performance.speed_of_light`), when measured.
    speed_of_light: SpeedOfLight | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    source: str = ""  #: "cache" or the provider's name
    session_round: int | None = None
    check_seconds: float = 0.0  #: time its checks took (compile, verify, bench: its own build and runs)
    verification: str = ""  #: verification level of a candidate that passed (e.g. ``verified (3 seeds)``)
    winner: bool = False
    worker: str = ""  #: the executor's worker that ran its checks ("" in this process)
    retries: int = 0  #: times its check job was started again after its worker was lost
    lost_workers: list[str] = field(default_factory=list)

    @property
    def sol_fraction(self) -> float | None:
        """The fraction of the machine's speed of light reached, when the roofline was measured."""
        return self.speed_of_light.fraction if self.speed_of_light is not None else None

    def sol_text(self) -> str:
        """``27% of speed of light (compute-bound)``, or "" when it was not measured."""
        fraction = self.sol_fraction
        if fraction is None:
            return ""
        bound = self.speed_of_light.bound if self.speed_of_light is not None else None
        return f"{100 * fraction:.3g}% of speed of light" + (f" ({bound}-bound)" if bound else "")

    def speedup_text(self) -> str:
        """``0.65x vs OpenBLAS (DaCe 'OpenBLAS'); 61.00x (58.10-63.20) vs DaCe pure``: each figure names its baseline."""
        if self.speedup is None:
            return ""
        low, high = self.speedup_range or (self.speedup, self.speedup)
        native = f"{self.speedup:.2f}x ({low:.2f}-{high:.2f}) vs {self.native or 'native'}"
        if self.speedup_strongest is None or not self.strongest or self.strongest == self.native:
            return native
        return f"{self.speedup_strongest:.2f}x vs {self.strongest}; {native}"


@dataclass
class NodeOptimization:
    """The outcome for one node."""

    name: str
    node_type: str
    sdfg: str
    outcome: Literal["optimized", "native kept", "failed", "skipped"] = "failed"
    reason: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    session: str = ""
    seconds: float = 0.0
    #: Why the remaining refinement rounds were skipped ("" when every round ran): setting target_sol.
    stopped_early: str = ""

    @property
    def winner(self) -> Candidate | None:
        return next((c for c in self.candidates if c.winner), None)

    @property
    def refused(self) -> list[Candidate]:
        return [c for c in self.candidates if c.status != "passed"]

    @property
    def input_tokens(self) -> int:
        return sum(c.input_tokens for c in self.candidates if c.source != "cache")

    @property
    def output_tokens(self) -> int:
        return sum(c.output_tokens for c in self.candidates if c.source != "cache")

    @property
    def cost_usd(self) -> float | None:
        costs = [c.cost_usd for c in self.candidates if c.cost_usd is not None and c.source != "cache"]
        return sum(costs) if costs else None

    def speedup_text(self) -> str:
        best = self.winner
        if best is None or best.speedup is None:
            return "-" if best is None or best.seconds_per_call is None else format_seconds(best.seconds_per_call)
        return best.speedup_text()

    def __str__(self) -> str:
        refused = "; ".join(
            f"r{c.round}s{c.sample} {c.stage or c.status}: {_short(c.reason)}"
            for c in self.candidates
            if c.reason and not c.winner
        )
        win = self.winner
        chosen = f"winner r{win.round}s{win.sample} {self.speedup_text()}" if win else "no winner"
        if win and win.sol_text():
            chosen += f", {win.sol_text()}"
        restarted = ", ".join(
            f"r{c.round}s{c.sample} ({c.retries}x, lost {', '.join(c.lost_workers) or 'a worker'})"
            for c in self.candidates
            if c.retries
        )
        return (
            f"{self.name} ({self.node_type}): {self.outcome}{' - ' + self.reason if self.reason else ''}; "
            f"{len(self.candidates)} candidate(s), {len(self.refused)} refused; {chosen}"
            + (f"; {self.stopped_early}" if self.stopped_early else "")
            + (f"; refused: {refused}" if refused else "")
            + (f"; checks restarted after a lost worker: {restarted}" if restarted else "")
        )


def _short(text: str, limit: int = 140) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


@dataclass
class OptimizeReport:
    """The outcome of :func:`dace_ai.optimize` for every node it looked at."""

    provider: str
    samples: int
    rounds: int
    nodes: list[NodeOptimization] = field(default_factory=list)
    seconds: float = 0.0
    #: Nodes expanded first because their expansion creates AI nodes (``A @ B`` -> Gemm).
    expanded: int = 0
    #: The executor that ran the checks, and where their time went (``DispatchStats``).
    executor: str = ""
    stats: DispatchStats | None = None

    def node(self, name: str) -> NodeOptimization:
        for item in self.nodes:
            if item.name == name:
                return item
        raise KeyError(f"no node {name!r} in this report; nodes: {', '.join(n.name for n in self.nodes)}")

    @property
    def check_seconds(self) -> float:
        return sum(c.check_seconds for n in self.nodes for c in n.candidates)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for item, node in zip(data["nodes"], self.nodes):
            item.update(input_tokens=node.input_tokens, output_tokens=node.output_tokens, cost_usd=node.cost_usd)
        return data

    def __str__(self) -> str:
        lines = [
            (
                f"dace_ai.optimize: {len(self.nodes)} node(s), {self.samples} sample(s) x {1 + self.rounds} "
                f"round(s), provider {self.provider!r}, {self.seconds:.1f} s"
            )
        ]
        lines += [f"  {node}" for node in self.nodes]
        return "\n".join(lines)

    def rich_table(self) -> Any:
        """A rich Table: one row per candidate, grouped by node."""
        from rich.table import Table

        table = Table(title=f"dace_ai.optimize ({self.provider}, {self.samples} samples, {self.rounds} rounds)")
        for column in (
            "node",
            "cand.",
            "status",
            "speedup vs strongest; vs native",
            "speed of light",
            "time/call",
            "why refused",
            "tokens",
        ):
            table.add_column(column)
        for node in self.nodes:
            table.add_row(
                f"[bold]{node.name}[/] ({node.node_type})",
                "",
                node.outcome,
                node.speedup_text(),
                node.winner.sol_text() if node.winner else "",
                "",
                node.reason,
                f"{node.input_tokens}/{node.output_tokens}"
                + (f" ${node.cost_usd:.4f}" if node.cost_usd is not None else ""),
            )
            for c in node.candidates:
                speed = c.speedup_text()
                table.add_row(
                    "",
                    f"r{c.round}s{c.sample}" + (" *" if c.winner else ""),
                    c.status if not c.stage or c.status == "passed" else f"{c.status} ({c.stage})",
                    speed,
                    c.sol_text(),
                    format_seconds(c.seconds_per_call) if c.seconds_per_call else "",
                    _short(c.reason, 90),
                    f"{c.input_tokens}/{c.output_tokens}",
                )
        return table

    def print(self, console: Any = None) -> None:
        """The table on a terminal, the plain text otherwise."""
        import sys

        from rich.console import Console

        console = console or Console()
        if console.is_terminal:
            console.print(self.rich_table())
        else:
            sys.stdout.write(str(self) + "\n")
