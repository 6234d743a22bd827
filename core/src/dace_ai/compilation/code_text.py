"""A candidate's C++ as code only: comments dropped and string literals emptied, so the static rules
(the ``no-probing`` and ``no-shared-state`` checkers) read calls and declarations, not prose."""

from __future__ import annotations

import re
from dataclasses import dataclass

_COMMENTS_AND_STRINGS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def code_only(text: str) -> str:
    """``text`` without comments; string literals keep only what names a path (``"/proc/self"``)."""

    def keep(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith(("//", "/*")):
            return " "
        return token if ("/proc/" in token or "/sys/" in token) else '""'

    return _COMMENTS_AND_STRINGS.sub(keep, text)


_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(?:include|pragma|line|error|warning)\b[^\n]*", re.M)
_TOKEN = re.compile(
    r"""(?P<comment>//[^\n]*|/\*.*?\*/)
    |(?P<string>(?:u8|u|U|L)?R"(?P<delim>[^()\\\s]{0,16})\((?P<raw>.*?)\)(?P=delim)"|(?:u8|u|U|L)?"(?P<text>(?:\\.|[^"\\\n])*)")
    |(?P<char>'(?:\\.|[^'\\\n])*')
    |(?P<ident>[A-Za-z_]\w*)
    |(?P<number>\.?\d(?:[eEpP][+-]|[\w.'])*)
    |(?P<punct>::|->|\#\#|\S)""",
    re.S | re.X,
)


@dataclass(frozen=True)
class Token:
    """One C++ token: ``kind`` is ``ident``, ``string`` (adjacent literals joined, ``text`` their contents),
    ``char``, ``number`` or ``punct``; ``at`` is its offset in the text."""

    kind: str
    text: str
    at: int


def tokens(text: str) -> list[Token]:
    """The tokens of C++ ``text``: comments dropped, ``#include``/``#pragma`` lines skipped (``#define``
    bodies kept), adjacent string literals joined into one (``"/pro" "c/self"`` is ``/proc/self``)."""
    text = _DIRECTIVE.sub(lambda m: " " * len(m.group(0)), text)
    out: list[Token] = []
    for match in _TOKEN.finditer(text):
        if match.group("comment") is not None:
            continue
        if match.group("string") is not None:
            body = match.group("raw") if match.group("raw") is not None else match.group("text") or ""
            if out and out[-1].kind == "string":
                out[-1] = Token("string", out[-1].text + body, out[-1].at)
            else:
                out.append(Token("string", body, match.start()))
            continue
        kind = next(k for k in ("char", "ident", "number", "punct") if match.group(k) is not None)
        out.append(Token(kind, match.group(0), match.start()))
    return out
