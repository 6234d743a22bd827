"""``--export-jsonl``: one line per attempt for training and reward modelling.

Each line: the prompt (system and user text), the answer text, compile / correct /
speedup outcomes (``speedup`` against the strongest baseline, named in ``strongest``;
``speedup_native`` against the native expansion), the attempt's verdict and a reward. The reward follows Makora/DICE-style shaping from
compile, correctness and measured speedup, with weights the user sets
(``--reward compile=0.1,correct=0.5,speedup=0.4``)::

    reward = compile_w * compiled + correct_w * correct
             + speedup_w * clip(log2(speedup), 0, SPEEDUP_CAP)   (only when correct)
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from dace_ai.errors import SettingsError
from dace_ai.storage.files import atomic_write

DEFAULT_WEIGHTS = {"compile": 0.1, "correct": 0.5, "speedup": 0.4}
#: log2(speedup) is capped here, so one lucky kernel does not dominate a batch.
SPEEDUP_CAP = 3.0


def parse_weights(text: str | None) -> dict[str, float]:
    """``"compile=0.1,correct=0.5,speedup=0.4"`` -> weights (missing keys keep their default)."""
    weights = dict(DEFAULT_WEIGHTS)
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in weights:
            raise SettingsError(f"--reward: {part.strip()!r} is not KEY=NUMBER with KEY one of {', '.join(weights)}")
        try:
            weights[key] = float(value)
        except ValueError:
            raise SettingsError(f"--reward: {key}={value!r} is not a number") from None
    return weights


def reward(attempt: dict[str, Any], weights: dict[str, float]) -> float:
    value = weights["compile"] * bool(attempt["compiled"]) + weights["correct"] * bool(attempt["correct"])
    if attempt["correct"] and attempt.get("speedup"):
        value += weights["speedup"] * min(max(math.log2(attempt["speedup"]), 0.0), SPEEDUP_CAP)
    return value


def export_jsonl(data: dict[str, Any], path: Path, weights: dict[str, float]) -> int:
    """Write one JSON line per scored attempt; return how many lines were written."""
    lines = []
    for a in data["attempts"]:
        if a.get("skipped"):
            continue
        lines.append(
            json.dumps(
                {
                    "id": a["id"],
                    "configuration": a["configuration"],
                    "task": a["task"],
                    "sample": a["sample"],
                    "prompt_hash": a.get("prompt_hash"),
                    "prompt": a.get("prompt"),
                    "answer": a["answer_text"],
                    "compile": bool(a["compiled"]),
                    "correct": bool(a["correct"]),
                    "speedup": a.get("speedup"),
                    "strongest": a.get("strongest"),
                    "speedup_native": a.get("speedup_native"),
                    "verdict": a.get("verdict"),
                    "reward": reward(a, weights),
                }
            )
        )

    atomic_write(Path(path), "\n".join(lines) + ("\n" if lines else ""))
    return len(lines)
