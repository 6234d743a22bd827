"""On-disk reuse between the candidates of a node: the samples of a slow native reference and of the baselines.

The parent names the files (per node, bench case and thread count); the child reads
them before timing and writes what it timed, for the node's next candidate.
"""

from __future__ import annotations

import json
import os
from typing import Any, TypedDict

import numpy as np

#: A native reference slower than this per call is timed once per node and bench size, not per candidate.
REUSE_NATIVE_SECONDS = 0.02


class Known(TypedDict):
    """Samples an earlier candidate of the node measured, and the calls of each sample."""

    samples: list[float]
    batch: int


def known_samples(path: str | None, min_seconds: float = 0.0) -> Known | None:
    """The samples saved in ``path``, when their median is at least ``min_seconds`` per call, else None.

    A baseline's are reused whatever their speed (``min_seconds=0``): a library baseline
    (OpenBLAS) does not change between candidates, and loading it starts its thread
    pool, whose spinning threads would cost every later candidate time and disturb its
    own samples. The native reference's only when slow (:data:`REUSE_NATIVE_SECONDS`).
    """
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            known = json.load(handle)
        samples = [float(x) for x in known["samples"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not samples or sorted(samples)[len(samples) // 2] < min_seconds:
        return None
    return {"samples": samples, "batch": int(known.get("batch") or 1)}


def save_samples(path: str | None, samples: list[float], batch: int) -> None:
    """Save timed samples for the node's next candidate (nothing when the file cannot be written)."""
    if not path:
        return
    try:
        save_json(path, {"samples": samples, "batch": batch})
    except OSError:
        pass


def save_json(path: str, value: Any) -> None:
    """Write ``value`` as JSON to ``path`` atomically (a temporary file, then renamed)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(value, handle)
    os.replace(tmp, path)


def save_array(path: str, value: np.ndarray) -> None:
    """Write ``value`` as a ``.npy`` file to ``path`` atomically."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as handle:
        np.save(handle, value, allow_pickle=False)
    os.replace(tmp, path)
