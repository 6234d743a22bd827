"""Every Python snippet of the user guide (docs/user/*.md) and the README runs, offline, in page order.

Sybil reads each page's ```python blocks (and ``<!-- invisible-code-block: python -->``
comments, which set up what a reader's machine has and the page does not show: a
provider replaying recorded answers) and runs them in one namespace per page, so a
page reads like one session at the Python prompt. ``<!-- skip: next -->`` leaves out a
block that cannot run here (it needs a key or a cluster); use it sparingly, with the
reason next to it. Non-Python material goes in ```bash / ```text / ```json blocks.

Each page runs in a fresh build root and working folder (tests/conftest.py), with the
provider ``recorded`` replaying answers through :class:`dace_ai.testing.FakeProvider`
(``register_plugin`` in the namespace) and every ``ai`` setting restored afterwards.
Snippets that compile DaCe programs take seconds each; keep them few and small.
"""

from __future__ import annotations

import os
import unittest
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

from tests.distributions import REPO

SYBIL = Sybil(parsers=[PythonCodeBlockParser(), SkipParser()], path=str(REPO), patterns=["README.md", "docs/user/*.md"])


def _pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs" / "user").glob("*.md"))]


def _param(page: Path):
    return pytest.param(page, id=page.relative_to(REPO).as_posix())


@pytest.fixture
def _ai_settings_restored():
    """Snippets may set ``dace.Config`` values of the ``ai`` category; they do not leak into other tests."""
    import dace
    from dace_ai.config.definitions import SETTINGS

    saved = {s.key: dace.Config.get("ai", s.key) for s in SETTINGS}
    variables = {k for k in os.environ if k.startswith("DACE_ai_")}
    yield
    for key, value in saved.items():
        dace.Config.set("ai", key, value=value)
    for name in [k for k in os.environ if k.startswith("DACE_ai_") and k not in variables]:
        del os.environ[name]


@pytest.mark.parametrize("page", [_param(p) for p in _pages()])
def test_every_python_snippet_of_the_page_runs(page, register_dace_ai_plugin, _ai_settings_restored):
    document = SYBIL.parse(page)
    document.namespace.update(register_plugin=register_dace_ai_plugin, __name__="__docs__")
    ran = 0
    for example in document:
        try:
            example.evaluate()
        except unittest.SkipTest:
            continue
        except Exception as exc:
            raise AssertionError(
                f"{page.relative_to(REPO)}, snippet at line {example.line}: {type(exc).__name__}: {exc}"
            ) from exc
        ran += 1
    assert ran or "```python" not in page.read_text(), f"{page.name}: no snippet ran"


def test_the_user_guide_has_pages_and_each_has_a_python_example():
    pages = sorted((REPO / "docs" / "user").glob("*.md"))
    assert len(pages) >= 9
    for page in pages:
        if page.name in ("checks.md", "migration.md", "cluster.md"):
            continue  # written with their features; their snippets run above like every page's
        assert "```python" in page.read_text(), f"{page.name} has no runnable example"
