"""Put a spot check into a placed tasklet, and take it out again.

The tasklet's first line (its provenance) stays first; one marked line goes before the
model's code (it starts the recording and guards the scope, so every way out of the code
finishes it); the recorder goes into the global code between marker
lines. :func:`strip` removes exactly those, so sessions, hand-edit detection, refine and
rollback see what the model wrote. :func:`reinstrument` keeps a checked tasklet checked
when refine or rollback gives it new code.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.runtime_check import hook, registry
from dace_ai.runtime_check.cpp import BEGIN, MARK, call_line, global_code, ident_of
from dace_ai.runtime_check.plan import SpotPlan, plan_for
from dace_ai.runtime_check.registry import Origin
from dace_ai.storage.files import build_root

_BLOCK = re.compile(
    re.escape(BEGIN.format(ident="@")).replace("@", r"(\w+)") + r".*?" + r"// dace-ai run-time check \1 end\n?", re.S
)


def strip(code: str) -> str:
    """``code`` without a spot check's lines and recorder."""
    if "dace-ai run-time check" not in code:
        return code
    code = _BLOCK.sub("", code)
    return "\n".join(line for line in code.split("\n") if not line.rstrip().endswith(MARK))


def _apply(tasklet: Any, plan: SpotPlan) -> None:
    import dace

    code = tasklet.code.as_string
    head, _, rest = code.partition("\n") if code.lstrip().startswith("//") else ("", "", code)
    lines = ([head] if head else []) + [call_line(plan), rest.rstrip("\n")]
    tasklet.code = dace.properties.CodeBlock("\n".join(lines), dace.Language.CPP)
    kept = tasklet.code_global.as_string if tasklet.code_global is not None else ""
    combined = (kept.rstrip("\n") + "\n" if kept.strip() else "") + global_code(plan)
    tasklet.code_global = dace.properties.CodeBlock(combined, dace.Language.CPP)


def add_spot_check(tasklet: Any, ctx: NodeContext, node: Any, settings: AISettings, origin: Origin) -> str | None:
    """Make ``tasklet`` check itself in the user's program (``settings.runtime_check``); why not, or None.

    ``origin`` says which session round and cache entry hold the answer (what a wrong output marks).
    """
    if settings.runtime_check == "off":
        return "runtime_check=off"

    plan = plan_for(ctx, node, tasklet, settings, build_root())
    if isinstance(plan, str):
        return plan
    _apply(tasklet, plan)
    registry.remember(plan, origin)
    hook.install()  # only a process that placed a check pays for the call hook
    return None


def reinstrument(tasklet: Any, previous_code: str, origin: Origin) -> None:
    """Give a tasklet whose code was just replaced (by the answer of ``origin``) the spot check it had."""
    ident = ident_of(previous_code)
    plan = registry.plan(ident) if ident else None
    if plan is None:
        if ident:
            warnings.warn(
                f"tasklet {tasklet.label!r}: its run-time check is dropped (this process did not place it)",
                stacklevel=3,
            )
        return
    _apply(tasklet, plan)
    registry.remember(plan, origin)
    hook.install()
