"""The documentation builds with ``mkdocs build --strict``, from the code it documents.

The reference pages come from docstrings (mkdocstrings), the settings table from the
settings definitions, the guides include the example distributions verbatim; pages
added under docs/guides/ or docs/user/ appear in the nav without editing mkdocs.yml.
The tests read one strict build (CI builds the documentation only here, in the README's test command).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.distributions import REPO

#: One worker runs the module (xdist --dist loadgroup), so the documentation its tests read is built once.
pytestmark = pytest.mark.xdist_group("docs-build")


def _build(root: Path, site: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DACE_ai_")}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
        check=False,
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The site of one strict build: the repository's mkdocs.yml and docs/ (copied, so the checkout stays
    clean) with two pages added under docs/guides/ and docs/user/ without editing mkdocs.yml."""
    work = tmp_path_factory.mktemp("docs")
    root = work / "checkout"
    root.mkdir()
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(REPO / "docs", root / "docs", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    (root / "core").symlink_to(REPO / "core")
    (root / "SECURITY.md").symlink_to(REPO / "SECURITY.md")  # included by docs/user/security.md
    (root / "docs" / "guides" / "run-on-the-cluster.md").write_text("# Run on the cluster\n\nSteps.\n")
    (root / "docs" / "user").mkdir(exist_ok=True)
    (root / "docs" / "user" / "quickstart.md").write_text("# Quickstart\n\nFirst steps.\n")
    site = work / "site"
    proc = _build(root, site)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return site


def _text(page: Path) -> str:
    return re.sub(r"<[^>]+>", "", page.read_text())


def test_settings_table_lists_every_core_and_plugin_setting(built):
    from dace_ai.config.definitions import SETTINGS

    text = _text(built / "reference" / "settings" / "index.html")
    for definition in SETTINGS:
        assert f"DACE_ai_{definition.key}" in text, definition.key
    assert "DACE_ai_openai_api" in text and "dace-ai-openai" in text  # owned by the openai plugin


def test_reference_comes_from_docstrings_with_typed_signatures(built):
    registrations = _text(built / "reference" / "registrations" / "index.html")
    assert "Callable[[NodeView], str | None]" in registrations.replace("&lt;", "<").replace("&gt;", ">")
    assert "What a model must know about a node (dace_ai.context.types.NodeContext)" in registrations  # its class
    assert "A check of generated code at one stage of the cascade" in registrations
    hooks = _text(built / "reference" / "hooks" / "index.html")
    assert "dace_ai_environment_generators" in hooks


def test_guides_show_the_example_files(built):
    page = (built / "guides" / "write-a-provider" / "index.html").read_text()
    assert "GatewayClient" in page and "labgateway_temperature" in page


def test_pages_added_without_editing_mkdocs_yml_are_built_and_listed(built):
    index = (built / "index.html").read_text()
    assert "guides/run-on-the-cluster/" in index and "Run on the cluster" in index
    assert "user/quickstart/" in index and "Quickstart" in index


def test_the_user_guide_is_in_the_nav_and_the_user_api_comes_from_docstrings(built):
    index = (built / "index.html").read_text()
    for page in (
        "getting-started",
        "describing-nodes",
        "speed",
        "sessions",
        "environments",
        "evaluating",
        "settings",
        "troubleshooting",
        "security",
    ):
        assert f"user/{page}/" in index, page
    api = _text(built / "reference" / "user-api" / "index.html")
    assert "Add a node, described in natural language, whose code a language model writes" in api
    assert "Ask for samples candidates per node, keep the fastest correct one" in api.replace("<code>", "")
    security = _text(built / "user" / "security" / "index.html")
    assert "Model output is untrusted" in security and "Reporting a problem" in security  # SECURITY.md included


def test_sphinx_roles_in_docstrings_render_as_code(built):
    for page in ("user-api", "plugin", "registrations"):
        html = (built / "reference" / page / "index.html").read_text()
        assert not re.search(r":(class|func|meth|attr|data|mod):<code>", html), page
        assert "::</p>" not in html, page
