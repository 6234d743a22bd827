"""The answer schema: what a model must return for one node.

One pydantic model; its JSON schema is what providers send as structured
output. :func:`parse_answer` accepts plain JSON or JSON inside a fenced block and
raises :class:`~dace_ai.errors.AnswerError` naming the field and the problem for
anything else, before anything is cached or changed in the SDFG.
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
    generator: GeneratorName = Field("generic", description="Environment generator plugin to use (a library pack "
                                                             "offered above, or 'generic')")
    headers: list[Header] = Field(default_factory=list, max_length=MAX_ITEMS, description="Headers to include")
    libraries: list[Library] = Field(default_factory=list, max_length=MAX_ITEMS,
                                     description="Libraries to link, e.g. 'openblas'")
    cmake_packages: list[CMakePackage] = Field(default_factory=list, max_length=MAX_ITEMS,
                                               description="CMake packages to find")
    compile_definitions: list[Definition] = Field(default_factory=list, max_length=MAX_ITEMS,
                                                  description="Preprocessor definitions, NAME or NAME=value")
    include_dirs: list[AbsolutePath] = Field(default_factory=list, max_length=MAX_ITEMS,
                                             description="Extra include folders (absolute paths)")
    compile_flags: list[CompileFlag] = Field(default_factory=list, max_length=MAX_ITEMS,
                                             description="Compiler flags of the allowed forms")
    link_flags: list[LinkFlag] = Field(default_factory=list, max_length=MAX_ITEMS,
                                       description="Linker flags of the allowed forms (-l, -L, -Wl,-rpath)")
    state_fields: list[StateField] = Field(default_factory=list, max_length=MAX_ITEMS,
                                           description="C++ declarations added to the program state")
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


def answer_json_schema() -> dict[str, Any]:
    """The JSON schema sent to providers (strict: every object closed)."""
    return Answer.model_json_schema()


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)\n?```", re.DOTALL)


def parse_answer(text: str, *, origin: str = "answer") -> Answer:
    """Parse and validate an answer; ``origin`` (a file name, a provider) is named in errors."""
    if not isinstance(text, str) or not text.strip():
        raise AnswerError(f"{origin}: the answer is empty; expected a JSON object with at least 'code'")
    stripped = text.strip()
    candidates = [stripped]
    candidates += [m.group(1) for m in _FENCE.finditer(text)]
    data: Any = None
    last_error: json.JSONDecodeError | None = None
    for candidate in candidates:
        try:
            data = json.loads(candidate)
            break
        except json.JSONDecodeError as exc:
            last_error = exc
    else:
        detail = f" ({last_error.msg} at line {last_error.lineno} column {last_error.colno})" if last_error else ""
        raise AnswerError(f"{origin}: not JSON{detail}; expected a JSON object (optionally in a ```json block)")
    if not isinstance(data, dict):
        raise AnswerError(f"{origin}: expected a JSON object, got {type(data).__name__}")
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
