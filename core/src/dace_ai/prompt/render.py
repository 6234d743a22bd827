"""Render the prompt for one node: a fixed system prompt plus ordered plugin sections.

The user prompt is assembled from the ``dace_ai_prompt_sections`` registrations
(the core's built-ins are a plugin like any other, so a lab can add a section or
replace one by name) in ``order``, followed by the ``extra_instructions``
setting, always last so it can override anything above it. Sections must be
deterministic (no timestamps, no paths of temporary folders): the prompt's text
is part of the answer cache key and of the manual provider's file names.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from dace_ai.config.settings import AISettings, resolve_settings
from dace_ai.context.types import NodeContext
from dace_ai.errors import PluginError
from dace_ai.plugins.manager import PluginManager, get_plugin_manager

#: Name of the pseudo-section that carries the ``extra_instructions`` setting.
EXTRA_SECTION = "extra-instructions"

SYSTEM_PROMPT = """\
You implement one node of a DaCe SDFG (a data-centric dataflow program) as the body of a DaCe tasklet \
written in C++ (or CUDA/HIP device code where the prompt says the code runs in a GPU kernel).

The tasklet contract:
- `code` is a sequence of statements placed inside a generated function body. Do not write a function \
signature and never use a `return` statement: the code must fall through to its end.
- Connectors are pre-declared variables with the names and C++ types given in the prompt. Never redeclare them.
  - A pointer connector (e.g. `const double *_a`, `double *_c`) is a strided view into its data container: it \
points at the first element of the memlet's subset, and element (i0, i1, ...) of the subset is addressed with the \
index formula given for it (the view strides already include the subset's steps). Do not assume contiguity or \
alignment beyond what the strides say, and never access elements outside the subset.
  - A scalar connector is a value: read an input scalar by name; assign the result to an output scalar by name.
  - Input pointers are read-only. Write every element of every output the node's semantics define.
- The code runs once per iteration of the innermost enclosing scope (map, loop, nested SDFG or state). \
Symbols in scope (map parameters, loop variables, program symbols) are readable by name as integers.
- `code_global` is placed at file scope, once per program: includes, helper functions, macros, constants. \
Every helper function, macro, type and global variable you define there must have a name unique to this \
node: prefix it with the node's name.
- `code_init` runs once when the program is initialised and `code_exit` once when it is finalised.
- Each entry of `state_fields` is a C++ member declaration added to the program's state struct; the code, \
`code_init` and `code_exit` reach it as `__state->name`. Use it for buffers or handles that outlive one call. \
There is one state per program, shared by every call: when the node runs inside a parallel map (or its calls \
can otherwise run at the same time), a state field may hold only data that is read-only after `code_init` \
(tables, plans, handles used read-only), or per thread: indexed by `omp_get_thread_num()` and sized by \
`omp_get_max_threads()` in `code_init`. Never scratch that every call writes: such calls run at the same \
time and overwrite each other's scratch. Keep scratch per call (a local array) or per thread (a `thread_local` \
variable, or such a per-thread state field). Calls that can run at the same time are checked by running them \
at the same time from several threads.
- Only use external libraries through `use_environments` (DaCe environments available on this machine) or \
`environments` (new ones to generate); otherwise use the C++ standard library and the intrinsics the target allows.
- Write correct code first, then fast code for the stated target.

Answer only with the JSON object of the answer schema described in the prompt: no prose before or after it."""


@dataclass
class Prompt:
    """A rendered prompt: the system text, the user text and the named sections it was built from."""

    system: str
    user: str
    #: (section name, rendered text) in prompt order; ``user`` is their concatenation.
    sections: list[tuple[str, str]] = field(default_factory=list)

    def digest(self, length: int = 16) -> str:
        """A stable hash of system and user text (used in file names of the manual exchange)."""
        text = self.system + "\0" + self.user
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]

    def section(self, name: str) -> str | None:
        """The rendered text of the named section, or None when it was left out."""
        return next((text for sec_name, text in self.sections if sec_name == name), None)


def render_prompt(
    ctx: NodeContext, settings: AISettings | None = None, *, manager: PluginManager | None = None
) -> Prompt:
    """The prompt for the node described by ``ctx``.

    A section whose ``render`` raises or returns something other than text or
    ``None`` is reported as a :class:`PluginError` naming the section and the
    plugin that registered it.
    """
    settings = settings or resolve_settings()
    manager = manager or get_plugin_manager()
    parts: list[tuple[str, str]] = []
    for section in manager.prompt_sections():
        try:
            text = section.render(ctx)
        except Exception as exc:
            raise PluginError(
                f"prompt section {section.name!r} from {section.origin} failed for node "
                f"{ctx.name!r}: {type(exc).__name__}: {exc}"
            ) from exc
        if text is None:
            continue
        if not isinstance(text, str):
            raise PluginError(
                f"prompt section {section.name!r} from {section.origin} returned "
                f"{type(text).__name__} for node {ctx.name!r}; expected str or None"
            )
        text = text.strip()
        if text:
            parts.append((section.name, f"## {section.title}\n\n{text}" if section.title else text))
    extra = settings.extra_instructions.strip()
    if extra:
        parts.append((EXTRA_SECTION, f"## Additional instructions\n\n{extra}"))
    user = "\n\n".join(text for _, text in parts) + "\n"
    return Prompt(system=SYSTEM_PROMPT, user=user, sections=parts)
