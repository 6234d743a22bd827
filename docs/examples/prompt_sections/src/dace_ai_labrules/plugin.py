"""The lab's house rules: one new prompt section, and the target guidance extended.

A section's ``render(ctx)`` receives the node's :class:`NodeContext` and returns
its text, or ``None`` to leave the section out for this node. ``order`` places
it among the built-in sections (``dace-ai plugins list`` shows every order).
"""

from __future__ import annotations

from dace_ai.plugin import NodeContext, PromptSection, hookimpl

PREFIX = "lab_"


def render_house_rules(ctx: NodeContext) -> str | None:
    """Rules every answer of the lab follows; the last one only for nodes that write doubles."""
    rules = [
        f"Prefix every helper function or type in `code_global` with `{PREFIX}` (e.g. `{PREFIX}{ctx.name}_kernel`).",
        "Add a one-line comment above every loop saying what it computes.",
    ]
    if any(c.dtype == "double" for c in ctx.outputs):
        rules.append(
            "Accumulate sums of doubles in the order of increasing index (results are compared bit "
            "for bit with the lab's reference)."
        )
    return "\n".join(f"- {rule}" for rule in rules)


def render_guidance(ctx: NodeContext) -> str | None:
    """The target pack's guidance, followed by the lab's own advice for CPU targets."""
    lab = (
        "- Our benchmarks run on a busy node: prefer code that is fast single-threaded."
        if ctx.target.kind == "cpu"
        else ""
    )
    text = "\n".join(part for part in (ctx.target.guidance.strip(), lab) if part)
    return text or None


@hookimpl
def dace_ai_prompt_sections():
    # After the target guidance (800) and before the environments (900).
    yield PromptSection(
        name="house-rules",
        order=850,
        title="House rules",
        render=render_house_rules,
        description="The lab's naming, comment and summation rules",
    )
    # replace=True swaps the built-in section of the same name; naming none is an error.
    yield PromptSection(
        name="target-guidance",
        order=800,
        title="Target guidance",
        render=render_guidance,
        replace=True,
        description="The target pack's guidance plus the lab's",
    )
