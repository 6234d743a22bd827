"""DaCe's Python frontend: replacing calls and the classes its errors and string literals have."""

from __future__ import annotations

from typing import Any


def register_frontend_call(func: Any, names: list[str]) -> None:
    """Make ``func`` the frontend replacement of each name (``@oprepo.replaces``)."""
    from dace.frontend.common import op_repository as oprepo

    for name in names:
        oprepo.Replacements._rep[name] = func


def syntax_error_class() -> type[Any]:
    """The frontend's syntax error (carries the call's file and line)."""
    from dace.frontend.python.common import DaceSyntaxError

    return DaceSyntaxError


def string_literal_class() -> type[Any]:
    from dace.frontend.python.common import StringLiteral

    return StringLiteral
