"""The bench stage's speed of light: the node's work at the bench sizes against this machine's roofline.

Setting ``speed_of_light``: ``on`` (default; the roofline is measured the first time
a bench needs it, a few seconds, then read from the store), ``stored`` (only a
roofline measured before, e.g. by ``dace-ai targets --roofline``: a bench never
measures), ``off``. A figure that cannot be made (no roofline, a node whose traffic
is unknown) leaves the bench's verdict alone: the reason is recorded instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dace_ai.performance.measure import RooflineError
from dace_ai.performance.records import SpeedOfLight
from dace_ai.performance.speed_of_light import from_roofline
from dace_ai.performance.store import cached_roofline, machine_roofline
from dace_ai.performance.work import node_work


@dataclass(frozen=True)
class BenchSpeedOfLight:
    """A bench's speed of light, or why there is none."""

    figure: SpeedOfLight | None
    level: str = ""  #: the memory level whose bandwidth was used ("L2", "memory")
    work: dict[str, str | None] | None = None  #: the node's work: flops and bytes expressions, source, note
    reason: str = ""  #: why there is no figure


def roofline_for(setting: str) -> tuple[Any, str]:
    """(roofline or None, reason) under the ``speed_of_light`` setting."""
    if setting == "off":
        return None, "setting speed_of_light is off"
    if setting == "stored":
        found = cached_roofline()
        return (
            (found, "")
            if found is not None
            else (None, "no roofline measured for this machine yet (dace-ai targets --roofline measures it)")
        )
    try:
        return machine_roofline(), ""
    except RooflineError as exc:
        return None, str(exc)


def bench_speed_of_light(
    node: Any, setting: str, seconds: float | None, values: Any, threads: int | None
) -> BenchSpeedOfLight:
    """The speed of light of one call of ``node`` (a NodeContext) taking ``seconds`` at symbol ``values``
    (the sizes, plus enclosing map parameters) with ``threads`` threads, under the ``speed_of_light`` setting."""
    if not seconds:
        return BenchSpeedOfLight(None, reason="not timed")
    roofline, reason = roofline_for(str(setting or "on"))
    if roofline is None:
        return BenchSpeedOfLight(None, reason=reason)
    if isinstance(values, Exception):
        return BenchSpeedOfLight(None, reason=f"the node's work is not known at the bench sizes ({values})")
    try:
        work = node_work(node)
        flops, nbytes = work.at(values)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return BenchSpeedOfLight(None, reason=f"the node's work is not known at the bench sizes ({exc})")
    threads = int(threads or roofline.threads)
    figure, level = from_roofline(roofline, flops, nbytes, seconds, work.dtype, threads)
    return BenchSpeedOfLight(
        SpeedOfLight.from_record(figure),
        level,
        {"flops": work.flops, "bytes": work.bytes, "source": work.source, "note": work.note},
    )
