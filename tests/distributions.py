"""Install real plugin distributions from tests/data into throw-away site folders.

A distribution is built into a wheel once per test session and installed with
pip into a private ``--target`` folder; tests then run Python in a subprocess
with that folder on ``PYTHONPATH``, so entry points are discovered exactly as
after ``pip install`` while the shared test environment stays untouched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"


def build_wheel(source: Path, wheel_dir: Path) -> Path:
    """Build the distribution in ``source`` into ``wheel_dir`` and return the wheel.

    It is built from a private copy: a build without isolation writes ``build/`` and
    ``*.egg-info`` next to its sources, and the test workers (one per core) each build the
    same distributions at once, which must not share those folders (nor leave them in the tree).
    """
    wheel_dir.mkdir(parents=True, exist_ok=True)
    before = set(wheel_dir.glob("*.whl"))
    with tempfile.TemporaryDirectory(prefix="dist-", dir=wheel_dir) as scratch:
        copy = Path(scratch) / source.name
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(wheel_dir),
                str(copy),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
    built = set(wheel_dir.glob("*.whl")) - before
    assert len(built) == 1, f"expected one wheel from {source}, got {built}"
    return built.pop()


def install_wheels(wheels: list[Path], target: Path) -> Path:
    """Install wheels into ``target`` (a folder for PYTHONPATH), like ``pip install``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            *map(str, wheels),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return target


def run_python(
    code: str, site: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter with ``site`` on PYTHONPATH."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DACE_ai_")}
    if site is not None:
        full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), full_env.get("PYTHONPATH", "")]))
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=timeout)


def run_json(code: str, site: Path | None = None, env: dict[str, str] | None = None) -> dict:
    """Run ``code`` (which prints one JSON document last) and return the parsed document."""
    proc = run_python(code, site, env)
    assert proc.returncode == 0, f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])
