"""The answer schema: what a model must return for one node.

One pydantic model; its JSON schema is what providers send as structured
output. :func:`parse_answer` accepts plain JSON or JSON inside a fenced block and
raises :class:`~dace_ai.errors.AnswerError` naming the field and the problem for
anything else, before anything is cached or changed in the SDFG.

Answers are untrusted input, so the parser is bounded: a reply longer than its
``max_tokens`` could produce is refused before it is parsed, JSON nested deeper
than any answer needs is refused without recursing, and control characters
(other than tab, newline and carriage return) and unpaired surrogates are
refused in every text field: they cannot be written to a source file or a
UTF-8 record faithfully.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dace_ai.environments.spec import (
    MAX_ITEMS,
    AbsolutePath,
    CMakePackage,
    CompileFlag,
    CppCode,
    Definition,
    GeneratorName,
    Header,
    Identifier,
    Library,
    LinkFlag,
    StateField,
)
from dace_ai.errors import AnswerError


class EnvironmentRequest(BaseModel):
    """An external library the code needs, materialised as a DaCe environment.

    Every field is checked against an allow-list of forms (identifiers, header and
    library names, absolute paths, known flag shapes; see
    :mod:`dace_ai.environments.fields`), because these values reach DaCe's code
    generator and CMake. The request is stored as data, never as code.
    """

    model_config = ConfigDict(extra="forbid")
    name: Identifier = Field(description="Environment name (an identifier)")
    generator: GeneratorName = Field(
        "generic", description="Environment generator plugin to use (a library pack offered above, or 'generic')"
    )
    headers: list[Header] = Field(default_factory=list, max_length=MAX_ITEMS, description="Headers to include")
    libraries: list[Library] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Libraries to link, e.g. 'openblas'"
    )
    cmake_packages: list[CMakePackage] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="CMake packages to find"
    )
    compile_definitions: list[Definition] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Preprocessor definitions, NAME or NAME=value"
    )
    include_dirs: list[AbsolutePath] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Extra include folders (absolute paths)"
    )
    compile_flags: list[CompileFlag] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Compiler flags of the allowed forms"
    )
    link_flags: list[LinkFlag] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Linker flags of the allowed forms (-l, -L, -Wl,-rpath)"
    )
    state_fields: list[StateField] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="C++ declarations added to the program state"
    )
    init_code: CppCode = Field("", description="C++ run once when the program starts")
    finalize_code: CppCode = Field("", description="C++ run once when the program ends")


class Answer(BaseModel):
    """A model's implementation of one node."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(description="Body of the tasklet (C++ statements; no function signature, no return)")
    language: Literal["cpp", "cuda", "hip"] = Field("cpp", description="Language of the code")
    code_global: str = Field("", description="Code at file scope: includes, helper functions (unique names)")
    code_init: str = Field("", description="Code run once when the program is initialised")
    code_exit: str = Field("", description="Code run once when the program is finalised")
    state_fields: list[str] = Field(default_factory=list, description="Declarations added to the state struct")
    side_effects: bool = Field(False, description="True if the code has effects beyond its outputs")
    ignored_symbols: list[str] = Field(default_factory=list, description="Symbols the code deliberately ignores")
    use_environments: list[str] = Field(default_factory=list, description="Existing DaCe environments to use")
    environments: list[EnvironmentRequest] = Field(default_factory=list, description="New environments needed")
    notes: str = Field("", description="Short explanation of the implementation")

    @field_validator("code")
    @classmethod
    def _code_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must contain the tasklet's code, got an empty string")
        return value

    @field_validator("code", "code_global", "code_init", "code_exit", "notes")
    @classmethod
    def _printable(cls, value: str) -> str:
        problem = text_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("state_fields", "ignored_symbols", "use_environments")
    @classmethod
    def _printable_items(cls, value: list[str]) -> list[str]:
        for index, item in enumerate(value):
            problem = text_problem(item)
            if problem:
                raise ValueError(f"item {index} {problem}")
        return value


#: Characters a reply may use per token of ``max_tokens`` (tokens average ~4; whitespace runs are longer).
CHARS_PER_TOKEN = 32
#: Slack on top of ``max_tokens * CHARS_PER_TOKEN`` (fences, small limits).
MIN_ANSWER_CHARS = 65536
#: Deepest JSON nesting an answer needs (answer -> environments -> list -> string is 4).
MAX_DEPTH = 16
#: Control characters (tab, newline and carriage return excepted) and surrogates, in one class.
_BAD_CHAR = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def max_answer_chars(max_tokens: int | None) -> int:
    """The longest reply (in characters) that ``max_tokens`` tokens can plausibly produce."""
    return MIN_ANSWER_CHARS + CHARS_PER_TOKEN * max(0, int(max_tokens or 0))


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be used as answer text (a control character, a lone surrogate), or None."""
    bad = _BAD_CHAR.search(value)
    if bad is None:
        return None
    if 0xD800 <= ord(bad.group()) <= 0xDFFF:
        return f"contains an unpaired surrogate U+{ord(bad.group()):04X} at offset {bad.start()} (not valid Unicode)"
    return (
        f"contains the control character U+{ord(bad.group()):04X} at offset {bad.start()} "
        "(only tab, newline and carriage return are allowed)"
    )


def _text_problems(data: Any, where: str = "", depth: int = 0) -> list[str]:
    """Every text problem in decoded JSON, as ``field 'path': problem``; also bounds the nesting."""
    if depth > MAX_DEPTH:
        return [f"field {where or '<answer>'!r}: nested deeper than {MAX_DEPTH} levels"]
    problems: list[str] = []
    if isinstance(data, str):
        problem = text_problem(data)
        if problem:
            problems.append(f"field {where or '<answer>'!r}: {problem}")
    elif isinstance(data, dict):
        for key, value in data.items():
            problem = text_problem(key)
            path = f"{where}.{key}" if where else str(key)
            if problem:
                problems.append(f"field name {path!r}: {problem}")
            problems += _text_problems(value, path, depth + 1)
    elif isinstance(data, list):
        for index, item in enumerate(data):
            problems += _text_problems(item, f"{where}.{index}" if where else str(index), depth + 1)
    return problems


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def _nesting_depth(text: str) -> int:
    """The deepest bracket nesting of JSON text (strings skipped), without recursion (for messages)."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_JSON_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def answer_json_schema() -> dict[str, Any]:
    """The JSON schema sent to providers (strict: every object closed)."""
    return Answer.model_json_schema()


#: DaCe 2.0's own response files (``dace.libraries.ai``) name environment fields after CMake's.
_DACE_ENVIRONMENT_FIELDS = {
    "cmake_libraries": "libraries",
    "cmake_includes": "include_dirs",
    "cmake_compile_flags": "compile_flags",
    "cmake_link_flags": "link_flags",
}


def from_dace_spelling(data: dict[str, Any], origin: str = "answer") -> dict[str, Any]:
    """An answer written for DaCe 2.0's own AI library, in dace-ai's spelling; others unchanged.

    DaCe's files say ``"language": "CPP"`` and describe environments with ``cmake_*``
    fields; the meaning is the same. A ``"Python"`` tasklet or CMake variables have no
    counterpart here and are refused by name.
    """
    if data.get("language") == "Python":
        raise AnswerError(
            f"{origin}: field 'language': Python tasklets are not supported; answer in C++ "
            '("language": "CPP" or "cpp")'
        )
    if data.get("language") == "CPP":
        data = {**data, "language": "cpp"}
    environments = data.get("environments")
    if isinstance(environments, list) and any(
        isinstance(e, dict) and (set(e) & {*_DACE_ENVIRONMENT_FIELDS, "cmake_variables", "cmake_minimum_version"})
        for e in environments
    ):
        converted = []
        for index, env in enumerate(environments):
            if not isinstance(env, dict):
                converted.append(env)
                continue
            if env.get("cmake_variables"):
                raise AnswerError(
                    f"{origin}: field 'environments.{index}.cmake_variables': CMake variables are not "
                    "supported; use compile_definitions or cmake_packages"
                )
            env = {
                _DACE_ENVIRONMENT_FIELDS.get(k, k): v
                for k, v in env.items()
                if k not in ("cmake_variables", "cmake_minimum_version")
            }
            converted.append(env)
        data = {**data, "environments": converted}
    return data


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)\n?```", re.DOTALL)
#: From the first fence to the last: an answer whose strings contain a fence of their own.
_OUTER_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*)\n?```", re.DOTALL)


def parse_answer(text: str, *, origin: str = "answer", max_tokens: int | None = None) -> Answer:
    """Parse and validate an answer; ``origin`` (a file name, a provider) is named in errors.

    With ``max_tokens``, a reply longer than :func:`max_answer_chars` allows is refused
    before it is parsed (a model cannot have written it within its token limit).
    """
    if not isinstance(text, str):
        raise AnswerError(f"{origin}: the answer is {type(text).__name__}, not text; expected a JSON object")
    limit = max_answer_chars(max_tokens) if max_tokens is not None else None
    if limit is not None and len(text) > limit:
        raise AnswerError(
            f"{origin}: the answer has {len(text)} characters, more than max_tokens={max_tokens} "
            f"allows ({limit}); it was refused unread (raise max_tokens if it is genuine)"
        )
    if not text.strip():
        raise AnswerError(f"{origin}: the answer is empty; expected a JSON object with at least 'code'")
    stripped = text.strip()
    candidates = [stripped]
    candidates += [m.group(1) for m in _FENCE.finditer(text)]
    candidates += [m.group(1) for m in _OUTER_FENCE.finditer(text)]
    data: Any = None
    last_error: json.JSONDecodeError | None = None
    for candidate in candidates:
        try:
            data = json.loads(candidate)  # its C scanner stops deep nesting with a RecursionError
            break
        except json.JSONDecodeError as exc:
            last_error = exc
        except RecursionError:
            raise AnswerError(
                f"{origin}: the JSON is nested {_nesting_depth(candidate)} levels deep; an answer "
                f"needs at most {MAX_DEPTH}"
            ) from None
    else:
        detail = f" ({last_error.msg} at line {last_error.lineno} column {last_error.colno})" if last_error else ""
        raise AnswerError(f"{origin}: not JSON{detail}; expected a JSON object (optionally in a ```json block)")
    problems = _text_problems(data)
    if problems:
        raise AnswerError(f"{origin}: invalid answer: " + "; ".join(problems[:5]))
    if not isinstance(data, dict):
        raise AnswerError(f"{origin}: expected a JSON object, got {type(data).__name__}")
    data = from_dace_spelling(data, origin)
    try:
        return Answer.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "<answer>"
            if err["type"] == "extra_forbidden":
                problems.append(f"field {where!r}: unknown field (allowed: {', '.join(Answer.model_fields)})")
            elif err["type"] == "missing":
                problems.append(f"field {where!r}: missing (required)")
            else:
                problems.append(f"field {where!r}: {err['msg']} (got {err.get('input')!r:.80})")
        raise AnswerError(f"{origin}: invalid answer: " + "; ".join(problems)) from None
