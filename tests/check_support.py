"""Test support for checks: the probe's precompiled header built once per session and seeded per test.

Every test gets its own build root (tests/conftest.py), so without seeding each
test would precompile ``dace/dace.h`` again (seconds each). Seeding hard-links the
session's copy where a previous run in the same build root would have left it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import dace


def build_pch(root: Path, targets) -> list[Path]:
    """Precompile dace.h under ``root`` for each target (TargetInfo); return the PCH folders."""
    from dace_ai.checking.compile import ensure_pch, pch_folder
    from dace_ai.targets.build_flags import build_command

    previous = dace.Config.get("default_build_folder")
    dace.Config.set("default_build_folder", value=str(root))
    try:
        folders = []
        for target in targets:
            compiler, flags = build_command(target)
            ensure_pch(compiler, flags)
            folders.append(pch_folder(compiler, flags))
        return folders
    finally:
        dace.Config.set("default_build_folder", value=previous)


def seed_pch(prebuilt: list[Path], root: Path) -> None:
    """Hard-link prebuilt PCH folders into the build root ``root``."""
    for folder in prebuilt:
        target = root / "ai-check" / "pch" / folder.name
        target.mkdir(parents=True, exist_ok=True)
        for item in folder.iterdir():
            if item.name.endswith(".lock") or (target / item.name).exists():
                continue
            try:
                os.link(item, target / item.name)
            except OSError:
                shutil.copy2(item, target / item.name)
