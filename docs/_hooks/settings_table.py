"""MkDocs hook: the settings table, generated from the settings definitions.

The marker ``<!-- settings-table -->`` in a page is replaced by one table of the core
settings (:data:`dace_ai.config.definitions.SETTINGS`) and one of the settings owned
by the plugins installed where the docs are built (``Setting`` in registrations), so
the reference cannot fall behind the code.
"""

from __future__ import annotations

MARKER = "<!-- settings-table -->"


def _cell(value) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|")


def settings_markdown() -> str:
    from dace_ai.config.definitions import SETTINGS
    from dace_ai.config.settings import plugin_settings

    lines = [
        "### Core settings",
        "",
        "| Setting | Environment variable | Type | Default | Description |",
        "|---|---|---|---|---|",
    ]
    for d in SETTINGS:
        default = "" if d.default is None else f"`{d.default!r}`"
        lines.append(f"| `{d.key}` | `DACE_ai_{d.key}` | {d.dace_type} | {default} | {_cell(d.description)} |")
    lines += [
        "",
        "### Settings owned by the installed plugins",
        "",
        "| Setting | Environment variable | Type | Default | Owner | Description |",
        "|---|---|---|---|---|---|",
    ]
    for name, (setting, registration) in plugin_settings().items():
        owner = registration.provenance.distribution if registration.provenance else "?"
        default = "" if setting.default is None else f"`{setting.default!r}`"
        lines.append(
            f"| `{name}` | `DACE_ai_{name}` | {setting.dace_type} | {default} | {owner} | "
            f"{_cell(setting.description)} |"
        )
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown, page, config, files):
    if MARKER in markdown:
        return markdown.replace(MARKER, settings_markdown())
    return markdown
