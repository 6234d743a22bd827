"""One timing against the roofline: achieved GFLOP/s and GB/s, the bound, the fraction of speed of light.

The *ideal time* of a call is the longer of its floating-point work at the peak rate
and its bytes at the bandwidth of the memory levels they fit in (best case: see
:meth:`~dace_ai.performance.roofline.Roofline.bandwidth`); the call is
*compute-bound* when the first is longer, else *memory-bound*. The *fraction of speed
of light* is ideal time / measured time: 1.0 is the hardware's limit, 0.05 leaves a
factor of twenty. A node without known flops is judged by its bytes alone.

The figure is this dict as JSON data (the bench report's ``speed_of_light``, a
:class:`~dace_ai.performance.records.SpeedOfLight`; sessions, ``optimize``, ``dace-ai bench``)::

    {"gflops": float | None, "gbs": float | None, "bound": "compute" | "memory", "fraction": float,
     "peak_gflops": float | None, "bandwidth_gbs": float, "flops": float | None, "bytes": float,
     "dtype": str, "threads": int}

(flops and bytes per call), and :func:`describe` its one line.
"""

from __future__ import annotations

from typing import Any

#: Keys of a speed-of-light figure, in the order :func:`figure` writes them.
KEYS = ("gflops", "gbs", "bound", "fraction", "peak_gflops", "bandwidth_gbs", "flops", "bytes", "dtype", "threads")


def figure(
    flops: float | None,
    nbytes: float,
    seconds: float,
    dtype: str,
    peak_gflops: float | None,
    bandwidth_gbs: float,
    threads: int,
) -> dict[str, Any]:
    """The speed-of-light figure of one call taking ``seconds`` (``ValueError`` for a non-positive time)."""
    if not seconds or seconds <= 0:
        raise ValueError(f"a speed-of-light figure needs a positive time per call, got {seconds!r}")
    compute = flops / (peak_gflops * 1e9) if flops and peak_gflops else 0.0
    memory = nbytes / (bandwidth_gbs * 1e9) if bandwidth_gbs else 0.0
    return {
        "gflops": flops / seconds / 1e9 if flops is not None else None,
        "gbs": nbytes / seconds / 1e9 if nbytes else None,
        "bound": "compute" if compute > memory else "memory",
        "fraction": max(compute, memory) / seconds,
        "peak_gflops": peak_gflops,
        "bandwidth_gbs": bandwidth_gbs,
        "flops": flops,
        "bytes": nbytes,
        "dtype": dtype,
        "threads": int(threads),
    }


def from_roofline(
    roofline: Any, flops: float | None, nbytes: float, seconds: float, dtype: str, threads: int
) -> tuple[dict[str, Any], str]:
    """(figure, memory level) against a :class:`~dace_ai.performance.roofline.Roofline` at ``threads``.

    The bandwidth is the best case of the levels holding the call's bytes (a bench small
    enough for L2 is held to about L2's bandwidth); the level is the slowest one they reach.
    """
    bandwidth, level = roofline.bandwidth(threads, nbytes)
    return figure(flops, nbytes, seconds, dtype, roofline.peak(dtype, threads), bandwidth, threads), level


def _rate(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.1f}"
    return f"{value:.2g}"


def _percent(fraction: float) -> str:
    percent = 100 * fraction
    return f"{percent:.0f}%" if percent >= 1 else f"{percent:.2g}%"


def describe(sol: dict[str, Any]) -> str:
    """``52.1 GFLOP/s, 0.9 GB/s: compute-bound, 27% of speed of light (peak 190 GFLOP/s float32, 2 threads)``."""
    achieved = []
    if sol.get("gflops") is not None:
        achieved.append(f"{_rate(sol['gflops'])} GFLOP/s")
    if sol.get("gbs") is not None:
        achieved.append(f"{_rate(sol['gbs'])} GB/s")
    bound = f"{sol['bound']}-bound" + (" (no flops known)" if sol.get("flops") is None else "")
    if sol["bound"] == "compute":
        limit = f"peak {_rate(sol['peak_gflops'])} GFLOP/s {sol['dtype']}"
    else:
        limit = f"{_rate(sol['bandwidth_gbs'])} GB/s"
    threads = f"{sol['threads']} thread{'s' if sol['threads'] != 1 else ''}"
    return (
        f"{', '.join(achieved) or 'no work known'}: {bound}, {_percent(sol['fraction'])} of speed of light "
        f"({limit}, {threads})"
    )


def provenance_field(sol: dict[str, Any] | None) -> str:
    """The tasklet provenance's space-free field value: ``0.33`` (the fraction), "" when there is none."""
    if not sol or sol.get("fraction") is None:
        return ""
    return f"{sol['fraction']:.3g}"
