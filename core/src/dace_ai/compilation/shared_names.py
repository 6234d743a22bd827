"""The names of state an answer's calls share, read from its text: ``static`` and file-scope variables
that are not ``const``, ``constexpr``, ``thread_local`` or ``extern``, and the members of its state struct.

A reading of the text only: it names what the behavioural check (concurrent calls in the sandbox child)
found to be shared, and lets the ``no-shared-state`` checker refuse the obvious early. It does not
see every way to declare a variable (macros, attributes, templates), so it is never the only gate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dace_ai.compilation.code_text import code_only

_STATIC = re.compile(r"\bstatic\b(?P<rest>[^;{(]*?)(?P<name>\b[A-Za-z_]\w*)\s*(?P<after>\[|=|;|\{|,|\()")
_FILE_SCOPE = re.compile(
    r"(?:^|(?<=[;{}]))\s*(?!return\b|typedef\b|using\b|namespace\b|struct\b|class\b|enum\b|template\b|#)"
    r"(?P<rest>(?:[A-Za-z_][\w:<>]*[\s\*&]+)+)(?P<name>[A-Za-z_]\w*)\s*(?P<after>\[|=|;)",
    re.M,
)
_ATTRIBUTES = re.compile(r"\balignas\s*\([^()]*\)|\b__attribute__\s*\(\(.*?\)\)|\[\[.*?\]\]", re.S)
_IMMUTABLE = re.compile(r"\b(?:const|constexpr|thread_local|extern)\b")
_PARAMETER = re.compile(r"^\s*(?:void\s*)?$|\b[A-Za-z_][\w:<>]*[\s\*&]+[A-Za-z_]\w*\s*(?:,|$|=)")
_FIELD_NAME = re.compile(r"(?P<name>[A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*(?:=.*|\{.*\})?$", re.S)


def _depth_zero(text: str) -> str:
    """``text`` with everything inside braces blanked (what is at file scope); a namespace's braces keep
    file scope."""
    out: list[str] = []
    stack: list[bool] = []  # per open brace: does it open a namespace?
    for index, ch in enumerate(text):
        if ch == "{":
            opens_namespace = bool(re.search(r"\bnamespace\b[\w\s:]*$", text[max(0, index - 80) : index]))
            stack.append(opens_namespace)
        blank = not all(stack) and ch != "\n"
        out.append(" " if blank else ch)
        if ch == "}" and stack:
            stack.pop()
    return "".join(out)


def _is_function(text: str, start: int) -> bool:
    """Whether the ``(`` just before ``start`` opens a function's parameters (a body or parameter
    declarations follow), not a constructor's arguments (``static std::vector<double> v(8192);``)."""
    depth, end = 1, start
    while end < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        end += 1
    inside, after = text[start : end - 1], text[end:].lstrip()
    return after.startswith(("{", "const", "noexcept", "->", "override")) or bool(_PARAMETER.search(inside))


def shared_variables(code: str, code_global: str) -> list[tuple[str, str]]:
    """(where, name) of every mutable ``static`` or file-scope variable the text declares plainly."""
    found: list[tuple[str, str]] = []
    for where, text in (("code", code), ("code_global", code_global)):
        plain = _ATTRIBUTES.sub(" ", code_only(text))  # `static alignas(64) double b[8]` names `b`
        for match in _STATIC.finditer(plain):
            rest = match.group("rest")
            if match.group("after") == "(" and _is_function(plain, match.end()):
                continue
            if not _IMMUTABLE.search(rest):
                found.append((where, match.group("name")))
    top = _depth_zero(_ATTRIBUTES.sub(" ", code_only(code_global)))
    for match in _FILE_SCOPE.finditer(top):
        rest = match.group("rest")
        if not _IMMUTABLE.search(rest) and not re.search(r"\bstatic\b", rest):
            found.append(("code_global", match.group("name")))
    return list(dict.fromkeys(found))


def field_names(state_fields: Sequence[str]) -> list[str]:
    """The member names of ``state_fields`` declarations (``double* scratch`` -> ``scratch``)."""
    names = []
    for declaration in state_fields:
        match = _FIELD_NAME.search(declaration.strip().rstrip(";").strip())
        if match:
            names.append(match.group("name"))
    return names


def shared_state_words(code: str, code_global: str, state_fields: Sequence[str]) -> str:
    """What the calls share, for a message: ```scratch` (static in the code), `__state->buf` (state
    field)``; ``unknown`` when the text names nothing."""
    parts = [
        f"`{name}` ({'static' if where == 'code' else 'file scope'} in {where})"
        for where, name in shared_variables(code, code_global)
    ]
    parts += [f"`__state->{name}` (state field)" for name in field_names(state_fields)]
    return ", ".join(parts) or "unknown"
