"""How fast code runs against what this machine can do: the roofline, work per node, speed of light.

* :mod:`~dace_ai.performance.roofline`: the measured peaks (FLOP/s per element type and
  thread count, bandwidth per memory level) and the questions figures ask of them;
* :mod:`~dace_ai.performance.measure` and :mod:`~dace_ai.performance.store`: measuring
  them once per machine, compiler and flags, and keeping them under the build root;
* :mod:`~dace_ai.performance.work`: floating-point operations and bytes of a node, as
  expressions of its symbols;
* :mod:`~dace_ai.performance.speed_of_light`: one timing against the roofline (achieved
  GFLOP/s and GB/s, the bound, the fraction of speed of light) and its one-line text;
* :mod:`~dace_ai.performance.records`: the bench stage's results as typed records (its figures,
  their speed of light) that check reports carry.

Importing this package is cheap: the functions below import what they need.

May import ``targets`` and the packages below it; never ``checking`` or above.
"""

from __future__ import annotations

from typing import Any


def describe_speed_of_light(sol: dict[str, Any]) -> str:
    """One line for a ``speed_of_light`` figure (see :func:`dace_ai.performance.speed_of_light.describe`)."""
    from dace_ai.performance.speed_of_light import describe  # local: importing a submodule runs this __init__

    return describe(sol)


def machine_roofline(*, remeasure: bool = False) -> Any:
    """This machine's :class:`~dace_ai.performance.roofline.Roofline`, measured once and stored."""
    from dace_ai.performance.store import machine_roofline as get  # local: importing a submodule runs this __init__

    return get(remeasure=remeasure)


def cached_roofline() -> Any:
    """The stored roofline, or None when this machine, compiler and flags were never measured."""
    from dace_ai.performance.store import cached_roofline as get  # local: importing a submodule runs this __init__

    return get()


__all__ = ["cached_roofline", "describe_speed_of_light", "machine_roofline"]
