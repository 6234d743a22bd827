"""MkDocs hook: Sphinx cross-reference roles in docstrings render as code, not as ``:class:`` text.

The code's docstrings are written for Sphinx (``:class:`~dace_ai.errors.CheckFailed```,
``:func:`generate```), which reads well in ``help()`` and in editors. mkdocstrings
renders the role's name literally; this hook turns each role into the code span it
stands for, shortened like Sphinx does for ``~`` (the last component only), and the
``Example::`` marker before a literal block into ``Example:``.
"""

from __future__ import annotations

import re

_ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|attr|data|mod|exc|obj|const):<code>(?P<tilde>~?)(?P<target>[^<]+)</code>"
)


def _code(match: re.Match) -> str:
    target = match.group("target")
    shown = target.rsplit(".", 1)[-1] if match.group("tilde") else target
    return f"<code>{shown}</code>"


#: A paragraph ending in Sphinx's literal-block marker (``Example::``), followed by its code block.
_LITERAL_MARKER = re.compile(r"([^\s:])::</p>")


def on_page_content(html, **kwargs):
    return _LITERAL_MARKER.sub(r"\1:</p>", _ROLE.sub(_code, html))
