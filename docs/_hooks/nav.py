"""MkDocs hook: pages under ``guides/`` and ``user/`` appear in their nav section without editing mkdocs.yml.

A page already listed keeps its place and title; any other Markdown file in those
folders is appended to the section (``Guides`` or ``User guide``), titled by its
first heading.
"""

from __future__ import annotations

from pathlib import Path

SECTIONS = {"guides": "Guides", "user": "User guide"}


def _listed(nav) -> set[str]:
    found: set[str] = set()
    stack = [nav]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.add(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def on_config(config):
    nav = config.get("nav")
    if not nav:
        return config
    docs = Path(config["docs_dir"])
    listed = _listed(nav)
    for folder, title in SECTIONS.items():
        section = next((entry for entry in nav if isinstance(entry, dict) and title in entry), None)
        if section is None:
            section = {title: []}
            nav.append(section)
        if section[title] is None:
            section[title] = []
        for page in sorted((docs / folder).glob("*.md")):
            relative = page.relative_to(docs).as_posix()
            if relative in listed:
                continue
            heading = next(
                (line.lstrip("# ").strip() for line in page.read_text().splitlines() if line.startswith("# ")),
                page.stem.replace("-", " ").capitalize(),
            )
            section[title].append({heading: relative})
    # An empty section is not a valid nav entry.
    config["nav"] = [entry for entry in nav if not (isinstance(entry, dict) and list(entry.values()) == [[]])]
    return config
