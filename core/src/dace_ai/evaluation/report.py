"""Scores of a benchmark run, from ``results.json`` alone: ``report.md`` and ``report.png``.

Per configuration, over the attempts that were not skipped (a task whose library,
compiler or target is missing here is listed with its reason, not scored):

* compile rate: attempts whose code built (the compile stage and the whole program);
* correct rate: attempts that also matched the reference and that no stage refused
  (one verdict per attempt: a refusal, e.g. by the anti-deception rules, is not correct);
* fast_p (KernelBench's convention): attempts correct *and* faster than the
  **strongest** baseline timed (the fastest of the native expansion, DaCe's installed
  library implementations such as OpenBLAS, and NumPy) by more than ``p``, for
  p = 0, 1, 2; the same against the native expansion alone (``DaCe pure``) as a
  second column;
* geometric-mean speedups over the strongest baseline and over native, over the correct
  attempts with a measured speedup;
* tokens and cost per correct kernel: everything spent (all attempts) / correct attempts;
* speed of light (SOL): each correct attempt's time against this machine's roofline, as
  the fraction of the ideal time (the node's flops at peak or its bytes at the bandwidth,
  whichever is longer; :mod:`dace_ai.performance`), and its geometric mean per
  configuration. ``report.png`` adds a roofline plot with every task as a point.

The plot needs matplotlib (``pip install 'dace-ai[bench]'``); without it the report and
results are written and the plot is skipped with a one-line hint.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dace_ai.evaluation.attempt import verdict
from dace_ai.storage.files import atomic_write

FAST_P = (0.0, 1.0, 2.0)
#: The one line shown when the plot cannot be drawn.
PLOT_HINT = "report.png not written: matplotlib is not installed (pip install 'dace-ai[bench]')"


class PlotUnavailable(RuntimeError):
    """matplotlib is missing: the plot is skipped, the rest of the report is written."""


def scored(attempts: Sequence[dict[str, Any]], configuration: str) -> list[dict[str, Any]]:
    return [a for a in attempts if a["configuration"] == configuration and not a.get("skipped")]


def fast_p(attempts: Sequence[dict[str, Any]], p: float, key: str = "speedup") -> float:
    """Share of ``attempts`` correct and faster than the baseline of ``key`` by more than ``p``.

    ``key="speedup"``: the strongest baseline; ``"speedup_native"``: the native expansion.
    """
    if not attempts:
        return 0.0
    return sum(1 for a in attempts if a["correct"] and a.get(key) is not None and a[key] > p) / len(attempts)


def _total(attempts: Sequence[dict[str, Any]], keys: Sequence[str]) -> float | None:
    values = [a[k] for a in attempts for k in keys if a.get(k) is not None]
    return float(sum(values)) if values else None


def _geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(attempts: Sequence[dict[str, Any]], configuration: str) -> dict[str, Any]:
    mine = scored(attempts, configuration)
    n = len(mine)
    correct = [a for a in mine if a["correct"]]
    tokens = _total(mine, ("input_tokens", "output_tokens"))
    cost = _total(mine, ("cost_usd",))
    return {
        "configuration": configuration,
        "attempts": n,
        "skipped": sum(1 for a in attempts if a["configuration"] == configuration and a.get("skipped")),
        "compile_rate": sum(1 for a in mine if a["compiled"]) / n if n else 0.0,
        "correct_rate": len(correct) / n if n else 0.0,
        **{f"fast_{int(p)}": fast_p(mine, p) for p in FAST_P},
        **{f"fast_{int(p)}_native": fast_p(mine, p, "speedup_native") for p in FAST_P},
        "geomean_speedup": _geomean([a["speedup"] for a in correct if a.get("speedup")]),
        "geomean_speedup_native": _geomean([a["speedup_native"] for a in correct if a.get("speedup_native")]),
        "geomean_sol": _geomean([sol["fraction"] for a in correct if (sol := _sol(a)) and sol["fraction"] > 0]),
        "tokens_per_correct": tokens / len(correct) if tokens is not None and correct else None,
        "cost_per_correct": cost / len(correct) if cost is not None and correct else None,
        "retried": sum(1 for a in mine if a.get("retries")),
    }


def _sol(a: dict[str, Any]) -> dict[str, Any] | None:
    """The attempt's speed-of-light figure (None for attempts of older results or without one)."""
    sol = a.get("speed_of_light")
    return sol if isinstance(sol, dict) and sol.get("fraction") is not None else None


def sol_text(a: dict[str, Any]) -> str:
    """``27% (compute)``: the fraction of speed of light and the bound; ``-`` without a figure."""
    sol = _sol(a)
    if sol is None or not a.get("correct") or a.get("skipped"):
        return "-"
    percent = 100 * sol["fraction"]
    return (f"{percent:.0f}%" if percent >= 1 else f"{percent:.2g}%") + f" ({sol['bound']})"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _opt(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)


SUMMARY_COLUMNS = (
    "configuration",
    "attempts",
    "skipped",
    "compile rate",
    "correct rate",
    "fast_0 (strongest)",
    "fast_1 (strongest)",
    "fast_2 (strongest)",
    "geomean vs strongest",
    "fast_1 (native)",
    "geomean vs native",
    "geomean SOL",
    "tokens / correct",
    "cost / correct (USD)",
    "retried",
)


def summary_row(s: dict[str, Any]) -> list[str]:
    return [
        s["configuration"],
        str(s["attempts"]),
        str(s["skipped"]),
        _pct(s["compile_rate"]),
        _pct(s["correct_rate"]),
        _pct(s["fast_0"]),
        _pct(s["fast_1"]),
        _pct(s["fast_2"]),
        _opt(s["geomean_speedup"], "{:.2f}x"),
        _pct(s["fast_1_native"]),
        _opt(s["geomean_speedup_native"], "{:.2f}x"),
        "n/a" if s.get("geomean_sol") is None else _pct(s["geomean_sol"]),
        _opt(s["tokens_per_correct"], "{:.0f}"),
        _opt(s["cost_per_correct"], "{:.4f}"),
        str(s["retried"]),
    ]


TASK_COLUMNS = (
    "task",
    "sample",
    "compile",
    "verify",
    "bench",
    "task run",
    "correct",
    "vs strongest",
    "vs native",
    "SOL",
    "verdict",
)


def _named(value: float | None, baseline: str | None) -> str:
    """``1.12x vs OpenBLAS (DaCe 'OpenBLAS')``: every figure names its baseline."""
    if value is None:
        return "-"
    return f"{value:.2f}x vs {baseline}" if baseline else f"{value:.2f}x"


def attempt_verdict(a: dict[str, Any]) -> str:
    """The attempt's verdict as recorded, or derived from its fields (results of older runs)."""
    if a.get("verdict"):
        return str(a["verdict"])

    return verdict(a)


def task_row(a: dict[str, Any]) -> list[str]:
    notes = attempt_verdict(a)
    if a.get("retries"):
        notes += f"; retried {a['retries']}x after losing {', '.join(a['lost_workers'])}"
    task_run = a.get("task_run", "not run")
    correct = bool(a["correct"]) and not a.get("skipped")
    strongest = _named(a.get("speedup"), a.get("strongest")) if correct else "-"
    native = _named(a.get("speedup_native"), a.get("native_baseline")) if correct else "-"
    return [
        a["task"],
        str(a["sample"]),
        a["compile"],
        a["verify"],
        a["bench"],
        task_run.split(":")[0],
        "skipped" if a.get("skipped") else "yes" if correct else "no",
        strongest,
        native,
        sol_text(a),
        " ".join(notes.split()).replace("|", "/")[:240],
    ]


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(data: dict[str, Any]) -> str:
    attempts = data["attempts"]
    configurations = sorted({a["configuration"] for a in attempts})
    parts = [
        f"# dace-ai bench: suite `{data.get('suite', '?')}`",
        "",
        (
            "Speedup: baseline time / candidate time (medians, same inputs, interleaved samples, same threads, "
            "in one sandboxed child). Every figure names its baseline. *vs strongest*: against the fastest "
            "baseline timed on this machine (the native expansion, DaCe's installed library implementations "
            "such as OpenBLAS, and the task's NumPy reference); fast_p (KernelBench's convention) uses it. "
            "*vs native*: against the node's own native expansion (DaCe pure) or the task's native program. "
            "One verdict per attempt: an attempt any stage refused (including the anti-deception rules) is "
            "not correct and has no speedup. Rates are over attempts not skipped; a task whose library, "
            "compiler or target is missing here is skipped with its reason."
        ),
        "",
        "## Summary",
        "",
        _table(SUMMARY_COLUMNS, [summary_row(summary(attempts, c)) for c in configurations]),
        "",
        roofline_words(data.get("roofline")),
    ]
    skipped = sorted({(a["task"], str(a["skipped"])) for a in attempts if a.get("skipped")})
    parts += ["", "## Skipped", ""]
    parts += [f"- `{task}`: {reason}" for task, reason in skipped] or ["No task was skipped."]
    retried = [a for a in attempts if a.get("retries")]
    parts += ["", "## Workers", ""]
    if retried:
        lost = sorted({w for a in retried for w in a.get("lost_workers", [])})
        parts.append(
            f"{len(retried)} attempt(s) lost their worker ({', '.join(lost)}) and were run again "
            f"elsewhere; no attempt was lost: every planned attempt has a result."
        )
    else:
        parts.append("No worker was lost.")
    for c in configurations:
        rows = [
            task_row(a)
            for a in sorted((a for a in attempts if a["configuration"] == c), key=lambda a: (a["task"], a["sample"]))
        ]
        parts += ["", f"## {c}", "", _table(TASK_COLUMNS, rows)]
    return "\n".join(parts) + "\n"


def roofline_words(roofline: dict[str, Any] | None) -> str:
    """The paragraph saying what SOL is measured against (or that it was not)."""
    if not roofline:
        return "*SOL*: not measured (this machine's roofline could not be measured; see `dace-ai targets --roofline`)."
    peaks = roofline["peak_gflops"]
    return (
        f"*SOL* (speed of light): the ideal time of the node's work (its flops at peak, or its bytes at the "
        f"bandwidth of the memory levels they fit in, whichever is longer) / the measured time, with the "
        f"threads the run used; *geomean SOL* over the correct attempts with a figure. This machine "
        f"({roofline.get('cpu', '?')}, measured {roofline.get('measured_at', '?')}): peak float32 "
        f"{peaks['float32']:.0f} GFLOP/s, float64 {peaks['float64']:.0f} GFLOP/s, memory "
        f"{roofline['bandwidth_gbs']:.1f} GB/s with {roofline['threads']} threads. A node without known flops "
        f"is judged by its bytes alone (memory)."
    )


def render_png(data: dict[str, Any], path: Path) -> Path:
    """Speedup over the strongest baseline per configuration and the fast_p curves, side by side.

    Raises :class:`PlotUnavailable` when matplotlib is not installed.
    """
    try:
        import matplotlib
    except ImportError:
        raise PlotUnavailable(PLOT_HINT) from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    attempts = data["attempts"]
    configurations = sorted({a["configuration"] for a in attempts})
    fig, (left, right, roof) = plt.subplots(1, 3, figsize=(18, 4.5))
    roofline_axes(roof, data, configurations)
    series = [[a["speedup"] for a in scored(attempts, c) if a["correct"] and a.get("speedup")] for c in configurations]
    positions = range(1, len(configurations) + 1)
    for pos, values in zip(positions, series):
        if values:
            left.boxplot([values], positions=[pos], widths=0.5, showfliers=False)
            left.scatter([pos] * len(values), values, s=12, alpha=0.6)
    left.set_xticks(list(positions), configurations, rotation=15, ha="right", fontsize=8)
    left.set_yscale("log")
    left.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    left.set_ylabel("speedup over the strongest baseline (log)")
    left.set_title("Speedup of correct attempts (vs strongest)")
    natives = [a["speedup_native"] for a in attempts if a["correct"] and a.get("speedup_native")]
    top = max([v for values in series for v in values] + natives + [2.0])
    ps = [top * i / 200 for i in range(201)]
    for c in configurations:
        mine = scored(attempts, c)
        (line,) = right.plot(ps, [fast_p(mine, p) for p in ps], label=f"{c} vs strongest")
        right.plot(
            ps,
            [fast_p(mine, p, "speedup_native") for p in ps],
            linestyle="--",
            color=line.get_color(),
            label=f"{c} vs native",
        )
    right.set_xscale("symlog", linthresh=1.0)
    right.set_xlabel("p (speedup threshold)")
    right.set_ylabel("fast_p")
    right.set_ylim(0, 1.05)
    right.set_title("fast_p: correct and speedup > p")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def roofline_points(
    attempts: Sequence[dict[str, Any]], configuration: str, x_floor: float, roof_at_floor: float
) -> list[tuple[str, float, float, bool]]:
    """(task, arithmetic intensity, GFLOP/s, has flops) of every correct attempt with a figure.

    An attempt without floating-point work is placed at ``x_floor`` at its fraction of the
    roof there (``roof_at_floor`` GFLOP/s), so its distance below the roof reads as its SOL
    like every other point's.
    """
    points = []
    for a in scored(attempts, configuration):
        sol = _sol(a)
        if not a["correct"] or sol is None or not sol.get("bytes"):
            continue
        if sol.get("flops"):
            points.append((a["task"], sol["flops"] / sol["bytes"], sol["gflops"], True))
        else:
            points.append((a["task"], x_floor, sol["fraction"] * roof_at_floor, False))
    return points


def roofline_axes(ax: Any, data: dict[str, Any], configurations: Sequence[str]) -> None:
    """The roofline of this machine (float32 and float64 peaks, memory bandwidth) with every task as a point."""
    roofline = data.get("roofline")
    ax.set_title("Roofline: every correct task (log-log)")
    ax.set_xlabel("arithmetic intensity (flop/byte)")
    ax.set_ylabel("GFLOP/s")
    if not roofline:
        ax.text(0.5, 0.5, "roofline not measured", ha="center", va="center", transform=ax.transAxes)
        return
    x_floor, x_top = 1 / 64, 64.0
    xs = [x_floor * (x_top / x_floor) ** (i / 100) for i in range(101)]
    # The roof at the thread count the attempts ran with (the task runs are single-threaded by default).
    used = sorted({sol["threads"] for a in data["attempts"] if (sol := _sol(a))})
    threads = str(used[0]) if len(used) == 1 else str(roofline["threads"])
    peaks = (roofline.get("peak_gflops_by_threads") or {}).get(threads) or roofline["peak_gflops"]
    bandwidth = ((roofline.get("bandwidth_gbs_by_threads") or {}).get(threads) or {}).get("memory") or roofline[
        "bandwidth_gbs"
    ]
    for dtype, style in (("float32", "-"), ("float64", "--")):
        peak = peaks[dtype]
        ax.plot(
            xs,
            [min(peak, x * bandwidth) for x in xs],
            style,
            color="black",
            linewidth=1,
            label=f"{dtype} peak {peak:.0f} GFLOP/s, memory {bandwidth:.1f} GB/s, {threads} thread(s)",
        )
    for c in configurations:
        points = roofline_points(data["attempts"], c, x_floor, x_floor * bandwidth)
        for with_flops, marker in ((True, "o"), (False, "x")):
            chosen = [p for p in points if p[3] == with_flops]
            if chosen:
                ax.scatter(
                    [p[1] for p in chosen],
                    [p[2] for p in chosen],
                    marker=marker,
                    s=18,
                    alpha=0.7,
                    label=f"{c}" + ("" if with_flops else " (no flops: at its fraction of the roof)"),
                )
        for task, x, y, _ in points:
            ax.annotate(task, (x, y), fontsize=6, alpha=0.7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.legend(fontsize=6)


def write_reports(data: dict[str, Any], out: Path) -> tuple[Path, Path | None, str | None]:
    """Write report.md and report.png; (md path, png path or None, the hint when the plot was skipped)."""
    md = atomic_write(out / "report.md", render_markdown(data))
    try:
        return md, render_png(data, out / "report.png"), None
    except PlotUnavailable as exc:
        return md, None, str(exc)
