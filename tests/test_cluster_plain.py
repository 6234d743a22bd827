"""A plain user script (no ``if __name__ == "__main__":`` guard) with six ``ai(..., reference=)`` nodes
generates with ``executor="dask"`` exactly as it does locally, and its top level runs once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).with_name("plain_script.py")


def run_script(folder: Path, executor: str) -> dict:
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DACE_")}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), executor], cwd=folder, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["top_level_runs"] = (folder / "top-level-runs.txt").read_text().split()
    out["stderr"] = done.stderr
    return out


def test_an_unguarded_script_generates_on_dask_as_it_does_locally(tmp_path):
    local = run_script(tmp_path / "threads", "threads")
    cluster = run_script(tmp_path / "dask", "dask")
    assert len(cluster["top_level_runs"]) == 1  # no worker ran the script again
    assert "Nanny failed" not in cluster["stderr"] and "FileExistsError" not in cluster["stderr"]
    assert "started 2 local dask worker process(es)" in cluster["stderr"]
    assert re.search(r"dashboard http://\S+/status", cluster["stderr"]), cluster["stderr"]
    assert "" not in cluster["workers"] and local["workers"] == [""]  # the checks ran on the workers
    assert len(cluster["levels"]) == 6 and all(level.startswith("verified (") for _, _, level in cluster["levels"])
    assert cluster["levels"] == local["levels"]
    assert len(cluster["tasklets"]) == 6 and cluster["tasklets"] == local["tasklets"]
