"""Who implements DaCe 2.0's own AI library when dace-ai is installed: dace-ai (default) or DaCe.

DaCe 2.0 ships ``dace.libraries.ai``: ``dace.ai(...)``, ``AINode``, the reserved ``'ai'``
implementation on every library node, the manual exchange (``generate_prompts`` /
``read_prompt_responses``), ``build``/``repair`` and the session functions. Its
users are the people who want dace-ai's checks, so by default (setting
``builtin = "take"``) ``import dace_ai`` makes all of those go through dace-ai:

- ``'ai'`` on any library node (DaCe's ``AINode`` included) expands with dace-ai's
  pipeline: providers, compile/verify/bench checks, cache, sessions;
- ``dace.ai(...)`` in a program adds dace-ai's ``AINode`` (``reference=`` works);
- ``dace.libraries.ai.generate_prompts`` and the other public functions are dace-ai's,
  and DaCe's manual response files (``"language": "CPP"``) are read.

Nothing else of DaCe changes, and nothing at all before ``dace_ai`` is imported.
With ``builtin = "keep"`` (``DACE_ai_builtin=keep``) DaCe's library stays exactly
as shipped and dace-ai registers its implementation as ``'dace-ai'``;
``dace_ai.ai(...)`` and ``dace_ai.AINode`` keep working. On DaCe 1.0, which has no
AI library, dace-ai's implementation is ``'ai'`` and the setting changes nothing.

The setting is read once, when ``dace_ai`` is imported (environment, DaCe's
configuration, project file), because the implementation's name is fixed then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dace_ai import compat


def take_over(expansion_for: Callable[[type], type]) -> None:
    """Route DaCe's own AI library through dace-ai (DaCe 2.x, ``builtin = "take"``); see the module docstring.

    ``expansion_for(node_class)`` is dace-ai's expansion class for a library node class
    (:func:`dace_ai.expansion.implementation.expansion_for`).
    """
    from dace_ai.config.definitions import SETTINGS

    compat.adopt_ai_defaults(SETTINGS)
    compat.route_reserved_implementation(expansion_for)
    functions = {name: _delegate(module, name) for name, module in _FUNCTIONS.items()}
    functions["generate_prompts"] = generate_prompts
    compat.replace_library_functions(functions)


def generate_prompts(sdfg: Any, directory: Any = None, *args: Any, **kwargs: Any) -> list[str]:
    """``dace.libraries.ai.generate_prompts``: dace-ai's prompts, returned as DaCe's are (the prompt paths).

    Each answer goes next to its prompt, ``..._prompt.md`` -> ``..._response.json``, as with DaCe's.
    """
    # Imported on first call: the exchange needs the whole pipeline, and ``import dace_ai`` stays light.
    from dace_ai.expansion.exchange import generate_prompts as generate

    return [str(f.prompt) for f in generate(sdfg, directory, *args, **kwargs)]


#: DaCe's AI library function -> the dace-ai module implementing it (same name, compatible arguments).
_FUNCTIONS = {
    "read_prompt_responses": "dace_ai.expansion.exchange",
    "generate_prompt": "dace_ai.expansion.exchange",
    "read_prompt_response": "dace_ai.expansion.exchange",
    "build": "dace_ai.workflows.build",
    "repair": "dace_ai.workflows.build",
    "sessions": "dace_ai.workflows.sessions",
    "show": "dace_ai.workflows.sessions",
    "history": "dace_ai.workflows.sessions",
    "refine": "dace_ai.workflows.sessions",
    "rollback": "dace_ai.workflows.sessions",
    "pin": "dace_ai.workflows.sessions",
    "unpin": "dace_ai.workflows.sessions",
}


def _delegate(module: str, name: str) -> Any:
    """A function calling ``module.name``, imported on first call (``import dace_ai`` stays light)."""
    from importlib import import_module

    def delegate(*args: Any, **kwargs: Any) -> Any:
        return getattr(import_module(module), name)(*args, **kwargs)

    delegate.__name__ = delegate.__qualname__ = name
    delegate.__module__ = module
    delegate.__doc__ = (
        f"dace-ai's :func:`{module}.{name}` (standing in for DaCe's own; see dace_ai.expansion.takeover)."
    )
    return delegate
