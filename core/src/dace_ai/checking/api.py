"""What checkers receive and return.

A checker's ``check(request: CheckRequest) -> CheckReport`` judges one candidate
answer for one node. ``failed`` diagnostics are sent back to the model in a
repair round, so they should be the compiler's own words with temporary paths
replaced by stable names (see :func:`stable_paths`). ``inconclusive`` means the
checker could not decide (a missing tool or header) and never counts as failure;
:func:`dace_ai.checking.verdict.judge` then accepts the answer with a warning
(``on_inconclusive=warn``) unless the report's ``details`` hold ``"told"`` (the
checker told the user itself, e.g. once per program), or refuses it
(``on_inconclusive=reject``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dace_ai.context.types import NodeContext
from dace_ai.prompt.answer import Answer

Status = Literal["passed", "failed", "inconclusive"]


@dataclass
class CheckRequest:
    answer: Answer
    node: NodeContext
    settings: Any  #: :class:`dace_ai.config.settings.AISettings`
    workdir: Path  #: a private folder under ``<build root>/ai-check/`` for this check
    #: Builds the very DaCe tasklet the expansion would place, given environment class paths
    #: (set by the pipeline; checks that build a DaCe program use it, others ignore it).
    make_tasklet: Callable[[set[str]], Any] | None = None
    #: Class paths of the DaCe environments the answer resolved to (registered ones it names
    #: and generated ones it requested), set by the pipeline.
    environments: set[str] = field(default_factory=set)
    #: What checkers of one candidate share so work is done once (e.g. the compiled unit,
    #: see :func:`dace_ai.checking.compile.compile_candidate`).
    shared: dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckReport:
    checker: str
    status: Status
    diagnostics: str = ""
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == "failed"


def stable_paths(text: str, replacements: dict[str, str]) -> str:
    """Replace temporary folders in compiler output by stable names.

    Prompts and cache keys must be byte-stable across runs, so diagnostics like
    ``/tmp/abc123/probe.cpp:12:3: error`` become ``candidate.cpp:12:3: error``.
    Longer paths are replaced first.
    """
    for path in sorted(replacements, key=len, reverse=True):
        text = text.replace(path, replacements[path])
    return re.sub(r"/tmp/[A-Za-z0-9_.\-]+/", "", text)
