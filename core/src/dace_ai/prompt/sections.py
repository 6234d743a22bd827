"""Built-in plugin: the default prompt sections.

Each section is a :class:`~dace_ai.plugins.registrations.PromptSection` of this plugin,
so a lab can list, block or replace any of them by name (``replace=True``) or
slot its own between them: orders are spaced by 100. Every section renders
plain markdown from the :class:`~dace_ai.context.types.NodeContext` alone and is
deterministic, so the prompt (and its cache key) only changes when the node,
its surroundings, the target or the machine changes. The target description
and the target's guidance are separate sections so that prompts for two
targets differ in exactly those two sections.
"""

from __future__ import annotations

from dace_ai.context.types import ConnectorInfo, NodeContext, ScopeInfo
from dace_ai.environments.resolve import offers, suitable_environments
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import PromptSection
from dace_ai.prompt.answer import Answer
from dace_ai.targets.build_flags import build_command, builds_with_dace, language_standard


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_task(ctx: NodeContext) -> str:
    """What to implement: the node, where it is, and its description.

    The SDFG's name is left out on purpose: DaCe renames the program it compiles
    (``prog_0``) while a library of the same name is loaded, and the prompt (so
    the cache key) must not change with that.
    """
    library = f" from `{ctx.library}`" if ctx.library else ""
    head = f"Implement the node `{ctx.name}` (a `{ctx.node_type}`{library}) in state `{ctx.state_label}`."
    return f"{head}\n\n{ctx.description}" if ctx.description else head


def render_node(ctx: NodeContext) -> str:
    """The node's class documentation and properties (its semantics for library nodes)."""
    lines = [f"Type: `{ctx.node_type}`" + (f" (library `{ctx.library}`)" if ctx.library else "")]
    if ctx.schedule:
        lines.append(f"Schedule: `{ctx.schedule}`")
    if ctx.doc:
        lines += [
            "",
            "Documentation of the node type:",
            "",
            *("> " + line if line else ">" for line in ctx.doc.splitlines()),
        ]
    if ctx.properties:
        lines += ["", "Properties:"]
        lines += [f"- `{name}` = `{value}`" for name, value in ctx.properties.items()]
    if ctx.notes:
        lines += ["", "Caveats of the context below:"]
        lines += [f"- {note}" for note in ctx.notes]
    return "\n".join(lines)


def _connector_row(c: ConnectorInfo) -> str:
    if not c.container:
        return f"| `{c.name}` | {c.direction} | `{c.ctype}` | (not connected) | | | | | `{_cell(c.index_formula)}` |"
    kind = "pointer" if c.is_pointer else "value"
    where = f"{c.container} ({c.storage}{', transient' if c.transient else ''})"
    shape = f"[{', '.join(c.shape)}]"
    strides = f"[{', '.join(c.strides)}]" if c.is_pointer else "-"
    container = f"[{', '.join(c.container_shape)}] / [{', '.join(c.container_strides)}]"
    return (
        f"| `{c.name}` | {c.direction} | `{c.ctype}` ({kind}) | {_cell(where)} | `{_cell(c.subset)}` | "
        f"{_cell(shape)} | {_cell(strides)} | {_cell(container)} | `{_cell(c.offset)}` | "
        f"`{_cell(c.index_formula)}` |"
    )


def render_connectors(ctx: NodeContext) -> str:
    """Every connector: C++ type, the data behind it, and how to index it."""
    if not ctx.connectors:
        return "The node has no connectors."
    lines = [
        (
            "| connector | dir | C++ type | container (storage) | subset | view shape | view strides (elements) | "
            "container shape / strides | offset in container | element (i0, i1, ...) |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
        *(_connector_row(c) for c in ctx.connectors),
        "",
        (
            "Pointer connectors point at the first element of their subset (the offset column is that element's "
            "index in the container); index them with the formula of the last column, where `i<d>` ranges over "
            "dimension d of the view shape (dimensions of size 1 need no index). Value connectors are plain "
            "variables: read inputs, assign outputs."
        ),
    ]
    for c in ctx.connectors:
        if c.wcr:
            lines.append(
                f"- `{c.name}` is written with write-conflict resolution `{c.wcr}`: the value you write "
                "is combined with the container's value by that function."
            )
        if c.volume.startswith("dynamic"):
            lines.append(f"- `{c.name}` is accessed a {c.volume} number of times.")
    return "\n".join(lines)


def _scope_line(scope: ScopeInfo) -> str:
    if scope.kind in ("map", "consume"):
        ranges = ", ".join(f"{p} in {r}" for p, r in zip(scope.params, scope.ranges))
        return f"{scope.kind} `{scope.label}` over {ranges}, schedule `{scope.schedule}`"
    if scope.kind == "loop":
        var = f" over `{scope.params[0]}`" if scope.params else ""
        header = f" (`{scope.ranges[0]}`)" if scope.ranges and scope.ranges[0].strip("; ") else ""
        return f"loop `{scope.label}`{var}{header}, sequential"
    if scope.kind == "nested_sdfg":
        return f"nested SDFG `{scope.label}`, schedule `{scope.schedule}`"
    return f"{scope.kind} `{scope.label}`"


def render_scopes(ctx: NodeContext) -> str:
    """The enclosing maps, loops and nested SDFGs, outermost first, with resolved schedules."""
    if not ctx.scopes:
        return (
            f"None: the node is at the top level of state `{ctx.state_label}`, so the code runs once each "
            "time that state executes."
        )
    lines = ["Outermost first:"]
    lines += [f"{'  ' * depth}- {_scope_line(scope)}" for depth, scope in enumerate(ctx.scopes)]
    lines += [
        "",
        (
            "The code runs once per iteration of the innermost scope; parallel schedules "
            "(`CPU_Multicore`, GPU schedules) run iterations concurrently, so do not write shared state "
            "outside your outputs: no `static` or file-scope scratch, and no state field written by the "
            "calls (a state field here holds only what is read-only after `code_init`, or per-thread data "
            "indexed by `omp_get_thread_num()` and sized by `omp_get_max_threads()` in `code_init`; other "
            "per-thread scratch is `thread_local`)."
        ),
    ]
    return "\n".join(lines)


def render_symbols(ctx: NodeContext) -> str | None:
    """Symbols the code may read by name."""
    if not ctx.symbols:
        return None
    return "Readable by name in the code:\n" + "\n".join(
        f"- `{name}`: `{ctype}`" for name, ctype in ctx.symbols.items()
    )


def render_gpu(ctx: NodeContext) -> str | None:
    """What device code may not do; left out for host code over host data."""
    return ctx.gpu_notes or None


def render_target(ctx: NodeContext) -> str:
    """The hardware target and why it was chosen."""
    t = ctx.target
    compiler, flags = build_command(t)
    command = " ".join((*compiler, *flags))
    lines = [
        t.description.strip(),
        "",
        f"Target: `{t.name}` ({t.kind}); chosen because: {t.reason}.",
        f"Language of the code: `{t.language}`.",
    ]
    if builds_with_dace(t):
        standard = language_standard(flags)
        lines.append(
            f"The program is compiled with: `{command}`"
            + (f" (C++ standard `{standard}`: use nothing newer)." if standard else ".")
        )
        if t.flags and tuple(t.flags) != tuple(flags):
            lines.append(
                f"Instructions your code may use are those of `{' '.join(t.flags)}` "
                "(and only those the build's flags enable)."
            )
    elif command and command not in t.description:  # some targets already name it in their description
        lines.append(f"Compiled with: `{command}`")
    return "\n".join(lines)


def render_guidance(ctx: NodeContext) -> str | None:
    """The target pack's own advice (left out when it has none)."""
    return ctx.target.guidance.strip() or None


def render_environments(ctx: NodeContext) -> str:
    """Installed DaCe environments that suit the node, and the libraries generators offer for it.

    Environments that are registered but not installed, or made for another kind of
    target (CUDA for CPU code), are not offered; library packs offer themselves only
    when their library is found (their ``offer``), with their own guidance.
    """
    available = suitable_environments(ctx)
    lines = []
    if available:
        lines.append("Installed here (name them in `use_environments` to use their headers and libraries):")
        for env in available:
            extra = ", ".join(f"`{h}`" for h in env.headers)
            lines.append(f"- `{env.name}`" + (f": headers {extra}" if extra else ""))
    else:
        lines.append("No registered DaCe environment suits this node here.")
    offered = offers(ctx)
    packs = [(name, text) for name, text in offered if name != "generic"]
    if packs:
        lines += ["", "Libraries you may request in `environments` (give `generator` as named):"]
        for name, text in packs:
            lines += ["", f"### `{name}`", text]
    generic = [text for name, text in offered if name == "generic"]
    lines += ["", generic[0] if generic else "Otherwise use only the C++ standard library."]
    return "\n".join(lines)


def _answer_fields() -> tuple[str, ...]:
    """One line per field of the answer model (computed once: pydantic's default lookup is slow)."""
    lines = []
    for name, info in Answer.model_fields.items():
        required = "required" if info.is_required() else f"default `{info.get_default(call_default_factory=True)!r}`"
        lines.append(f"- `{name}` ({required}): {info.description or ''}")
    return tuple(lines)


def render_answer_format(ctx: NodeContext) -> str:
    """The fields of the answer object (the same model whose JSON schema providers receive)."""
    lines = ["Answer with one JSON object with these fields:", *_answer_fields()]
    lines += [
        "",
        f"Set `language` to `{ctx.target.language}` for this target. Example of the shape (not the code):",
        "",
        "```json",
        '{"code": "...", "language": "' + ctx.target.language + '", "code_global": "", "notes": "..."}',
        "```",
    ]
    return "\n".join(lines)


#: The built-in sections: (name, order, title, render).
SECTIONS = (
    ("task", 100, "Task", render_task),
    ("node", 200, "Node", render_node),
    ("connectors", 300, "Connectors", render_connectors),
    ("scopes", 400, "Enclosing scopes", render_scopes),
    ("symbols", 500, "Symbols in scope", render_symbols),
    ("gpu", 600, "GPU constraints", render_gpu),
    ("target", 700, "Target", render_target),
    ("target-guidance", 800, "Target guidance", render_guidance),
    ("environments", 900, "DaCe environments", render_environments),
    ("answer-format", 1000, "Answer format", render_answer_format),
)


@hookimpl
def dace_ai_prompt_sections():
    for name, order, title, render in SECTIONS:
        yield PromptSection(
            name=name, order=order, title=title, render=render, description=(render.__doc__ or "").strip()
        )
