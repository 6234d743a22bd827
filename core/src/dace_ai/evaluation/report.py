"""Scores of a benchmark run, from ``results.json`` alone: ``report.md`` and ``report.png``.

Per configuration, over the attempts that were not skipped (a task whose
environment is missing is listed, not scored):

* compile rate: attempts whose code built (the compile stage and the whole program);
* correct rate: attempts that also matched the reference (verify stage and task run);
* fast_p (KernelBench): attempts correct *and* faster than the native baseline by more
  than ``p`` (speedup > p), for p = 0, 1, 2;
* geometric-mean speedup over native, over the correct attempts with a measured speedup;
* tokens and cost per correct kernel: everything spent (all attempts) / correct attempts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FAST_P = (0.0, 1.0, 2.0)


def scored(attempts: Sequence[dict[str, Any]], configuration: str) -> list[dict[str, Any]]:
    return [a for a in attempts if a["configuration"] == configuration and not a.get("skipped")]


def fast_p(attempts: Sequence[dict[str, Any]], p: float) -> float:
    if not attempts:
        return 0.0
    return sum(1 for a in attempts if a["correct"] and a.get("speedup") is not None and a["speedup"] > p) / len(attempts)


def _total(attempts: Sequence[dict[str, Any]], keys: Sequence[str]) -> float | None:
    values = [a[k] for a in attempts for k in keys if a.get(k) is not None]
    return float(sum(values)) if values else None


def summary(attempts: Sequence[dict[str, Any]], configuration: str) -> dict[str, Any]:
    mine = scored(attempts, configuration)
    n = len(mine)
    correct = [a for a in mine if a["correct"]]
    speedups = [a["speedup"] for a in correct if a.get("speedup")]
    tokens = _total(mine, ("input_tokens", "output_tokens"))
    cost = _total(mine, ("cost_usd",))
    return {
        "configuration": configuration,
        "attempts": n,
        "skipped": sum(1 for a in attempts if a["configuration"] == configuration and a.get("skipped")),
        "compile_rate": sum(1 for a in mine if a["compiled"]) / n if n else 0.0,
        "correct_rate": len(correct) / n if n else 0.0,
        **{f"fast_{int(p)}": fast_p(mine, p) for p in FAST_P},
        "geomean_speedup": math.exp(sum(math.log(s) for s in speedups) / len(speedups)) if speedups else None,
        "tokens_per_correct": tokens / len(correct) if tokens is not None and correct else None,
        "cost_per_correct": cost / len(correct) if cost is not None and correct else None,
        "retried": sum(1 for a in mine if a.get("retries")),
    }


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _opt(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)


SUMMARY_COLUMNS = ("configuration", "attempts", "skipped", "compile rate", "correct rate", "fast_0", "fast_1",
                   "fast_2", "geomean speedup", "tokens / correct", "cost / correct (USD)", "retried")


def summary_row(s: dict[str, Any]) -> list[str]:
    return [s["configuration"], str(s["attempts"]), str(s["skipped"]), _pct(s["compile_rate"]),
            _pct(s["correct_rate"]), _pct(s["fast_0"]), _pct(s["fast_1"]), _pct(s["fast_2"]),
            _opt(s["geomean_speedup"], "{:.2f}x"), _opt(s["tokens_per_correct"], "{:.0f}"),
            _opt(s["cost_per_correct"], "{:.4f}"), str(s["retried"])]


TASK_COLUMNS = ("task", "sample", "compile", "verify", "bench", "task run", "correct", "speedup", "notes")


def task_row(a: dict[str, Any]) -> list[str]:
    notes = a.get("skipped") or ""
    if a.get("retries"):
        notes = (notes + "; " if notes else "") + f"retried {a['retries']}x after losing {', '.join(a['lost_workers'])}"
    if a.get("bench_refusal"):
        notes = (notes + "; " if notes else "") + "bench stage: " + a["bench_refusal"].splitlines()[0][:160]
    if not a.get("skipped") and not a["correct"] and a.get("error"):
        first = str(a["error"]).strip().splitlines()[0] if str(a["error"]).strip() else ""
        notes = (notes + "; " if notes else "") + first[:120]
    task_run = a.get("task_run", "not run")
    return [a["task"], str(a["sample"]), a["compile"], a["verify"], a["bench"], task_run.split(":")[0],
            "yes" if a["correct"] else "no", _opt(a.get("speedup"), "{:.2f}x"), notes.replace("|", "/")]


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(data: dict[str, Any]) -> str:
    attempts = data["attempts"]
    configurations = sorted({a["configuration"] for a in attempts})
    parts = [f"# dace-ai bench: suite `{data.get('suite', '?')}`", "",
             ("Speedup: native time / candidate time (medians, same inputs, same child process), from the bench "
              "stage (the node against its native expansion) when it measured one, else from the task run "
              "(the whole program against the native baseline program, at the task's sizes). "
              "fast_p: share of attempts correct and faster than native by more than p. "
              "Rates are over attempts not skipped."), "", "## Summary", "",
             _table(SUMMARY_COLUMNS, [summary_row(summary(attempts, c)) for c in configurations])]
    retried = [a for a in attempts if a.get("retries")]
    parts += ["", "## Workers", ""]
    if retried:
        lost = sorted({w for a in retried for w in a.get("lost_workers", [])})
        parts.append(f"{len(retried)} attempt(s) lost their worker ({', '.join(lost)}) and were run again "
                     f"elsewhere; no attempt was lost: every planned attempt has a result.")
    else:
        parts.append("No worker was lost.")
    for c in configurations:
        rows = [task_row(a) for a in sorted((a for a in attempts if a["configuration"] == c),
                                            key=lambda a: (a["task"], a["sample"]))]
        parts += ["", f"## {c}", "", _table(TASK_COLUMNS, rows)]
    return "\n".join(parts) + "\n"


def render_png(data: dict[str, Any], path: Path) -> Path:
    """Speedup distribution per configuration and the fast_p curve, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    attempts = data["attempts"]
    configurations = sorted({a["configuration"] for a in attempts})
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    series = [[a["speedup"] for a in scored(attempts, c) if a["correct"] and a.get("speedup")] for c in configurations]
    positions = range(1, len(configurations) + 1)
    for pos, values in zip(positions, series):
        if values:
            left.boxplot([values], positions=[pos], widths=0.5, showfliers=False)
            left.scatter([pos] * len(values), values, s=12, alpha=0.6)
    left.set_xticks(list(positions), configurations, rotation=15, ha="right", fontsize=8)
    left.set_yscale("log")
    left.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    left.set_ylabel("speedup over native (log)")
    left.set_title("Speedup of correct attempts")
    top = max([v for values in series for v in values] + [2.0])
    ps = [top * i / 200 for i in range(201)]
    for c in configurations:
        mine = scored(attempts, c)
        right.plot(ps, [fast_p(mine, p) for p in ps], label=c)
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


def write_reports(data: dict[str, Any], out: Path) -> tuple[Path, Path]:
    from dace_ai.storage.files import atomic_write

    md = atomic_write(out / "report.md", render_markdown(data))
    return md, render_png(data, out / "report.png")
