"""An environment as data: what a generator returns and what is stored on disk.

Generators (the generic one that copies an answer's request, and the library
packs) describe the DaCe environment they want with an :class:`EnvironmentSpec`.
Every field is checked against the allow-lists of :mod:`dace_ai.environments.fields`
when the spec is made and again when it is read back from disk, so a spec is
always safe to hand to DaCe's code generator and CMake.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from dace_ai.environments import fields

#: At most this many entries per list field.
MAX_ITEMS = 32

Identifier = Annotated[str, AfterValidator(fields.identifier)]
Header = Annotated[str, AfterValidator(fields.header)]
AbsolutePath = Annotated[str, AfterValidator(fields.absolute_path)]
Library = Annotated[str, AfterValidator(fields.library)]
CMakePackage = Annotated[str, AfterValidator(fields.cmake_package)]
Definition = Annotated[str, AfterValidator(fields.definition)]
CompileFlag = Annotated[str, AfterValidator(fields.compile_flag)]
LinkFlag = Annotated[str, AfterValidator(fields.link_flag)]
StateField = Annotated[str, AfterValidator(fields.state_field)]
CppCode = Annotated[str, AfterValidator(fields.cpp_code)]
GeneratorName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")]
ClassPath = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")]


class EnvironmentSpec(BaseModel):
    """A DaCe environment described by data only (no code of ours or a model's is run to build it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Identifier
    generator: GeneratorName = "generic"
    headers: list[Header] = Field(default_factory=list, max_length=MAX_ITEMS)
    include_dirs: list[AbsolutePath] = Field(default_factory=list, max_length=MAX_ITEMS)
    libraries: list[Library] = Field(default_factory=list, max_length=MAX_ITEMS)
    cmake_packages: list[CMakePackage] = Field(default_factory=list, max_length=MAX_ITEMS)
    compile_definitions: list[Definition] = Field(default_factory=list, max_length=MAX_ITEMS)
    compile_flags: list[CompileFlag] = Field(default_factory=list, max_length=MAX_ITEMS)
    link_flags: list[LinkFlag] = Field(default_factory=list, max_length=MAX_ITEMS)
    state_fields: list[StateField] = Field(default_factory=list, max_length=MAX_ITEMS)
    init_code: CppCode = ""
    finalize_code: CppCode = ""
    #: Full class paths of registered DaCe environments this one builds on (e.g. DaCe's CUDA).
    dependencies: list[ClassPath] = Field(default_factory=list, max_length=MAX_ITEMS)

    def digest(self) -> str:
        """A short hash of every field: the same spec always gets the same class name."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def class_name(self) -> str:
        """The DaCe environment class name, ``<name>_<digest>`` (two specs never share one)."""
        return f"{self.name}_{self.digest()}"
