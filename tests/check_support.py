"""Test support for build roots: the test run's shared content-addressed artefacts, linked into a build root.

Every test gets its own build root (tests/conftest.py). What a check builds that is named by the hash of
everything that determines it (the precompiled ``dace/dace.h`` per compiler and flags, a node's native
reference program, the sanitizers' driver, the machine's roofline) would otherwise be built again in every
root (seconds each). Those folders of a build root are links into one folder of the test run, shared by
the xdist workers; the core builds each artefact once under its own cross-process file lock, so two
workers that want the same one build it once. Everything else of the root (answers, sessions, check
folders) stays the test's own.
"""

from __future__ import annotations

from pathlib import Path

#: The folders of a build root that hold only content-addressed artefacts (a sub-folder or file per hash).
#: Native references (ai-check/reference) are not shared: on DaCe 2 a reference program's build folder was
#: found emptied of its library while another test's sandbox child loaded it; each test builds its own.
SHARED_FOLDERS = ("ai-check/pch", "ai-check/sanitize-driver", "ai-roofline")


def shared_artefacts_folder(basetemp: Path) -> Path:
    """The test run's folder of shared artefacts: beside the xdist workers' temporary roots, so all share it."""
    base = basetemp.parent if basetemp.name.startswith("popen-gw") else basetemp
    folder = base / "shared-artefacts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def link_shared_artefacts(root: Path, shared: Path) -> None:
    """Make the content-addressed folders of the build root ``root`` links into ``shared``."""
    for relative in SHARED_FOLDERS:
        (shared / relative).mkdir(parents=True, exist_ok=True)
        link = root / relative
        if link.is_symlink() or link.exists():
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(shared / relative, target_is_directory=True)
