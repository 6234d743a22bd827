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

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from dace_ai import compat
from dace_ai.config.definitions import SETTINGS


def take_over(expansion_for: Callable[[type], type], workflows: Mapping[str, Callable[..., Any]]) -> None:
    """Route DaCe's own AI library through dace-ai (DaCe 2.x, ``builtin = "take"``); see the module docstring.

    ``expansion_for(node_class)`` is dace-ai's expansion class for a library node class
    (:func:`dace_ai.expansion.implementation.expansion_for`). ``workflows`` are the stand-ins for DaCe's
    ``build``, ``repair`` and session functions, by name: dace-ai's workflows sit above this package, so
    the public door ``dace_ai`` hands them in (imported on first call, so ``import dace_ai`` stays light).
    """
    compat.adopt_ai_defaults(SETTINGS)
    compat.route_reserved_implementation(expansion_for)
    compat.replace_library_functions({**{function.__name__: function for function in _FUNCTIONS}, **workflows})


def generate_prompts(sdfg: Any, directory: Any = None, *args: Any, **kwargs: Any) -> list[str]:
    """``dace.libraries.ai.generate_prompts``: dace-ai's prompts, returned as DaCe's are (the prompt paths).

    Each answer goes next to its prompt, ``..._prompt.md`` -> ``..._response.json``, as with DaCe's.
    """
    from dace_ai.expansion.exchange import generate_prompts as generate  # local: import cost (whole pipeline)

    return [str(f.prompt) for f in generate(sdfg, directory, *args, **kwargs)]


_F = TypeVar("_F", bound=Callable[..., Any])


def _named_after(module: str) -> Callable[[_F], _F]:
    """Give a stand-in the ``__module__`` of the function it calls (what ``dace doctor`` and users see)."""

    def name(function: _F) -> _F:
        function.__module__ = module
        return function

    return name


# DaCe's manual exchange functions, each standing in for dace-ai's function of the same name (compatible
# arguments).


@_named_after("dace_ai.expansion.exchange")
def read_prompt_responses(*args: Any, **kwargs: Any) -> Any:
    """dace-ai's :func:`dace_ai.expansion.exchange.read_prompt_responses`."""
    from dace_ai.expansion.exchange import read_prompt_responses  # local: import cost (whole pipeline)

    return read_prompt_responses(*args, **kwargs)


@_named_after("dace_ai.expansion.exchange")
def generate_prompt(*args: Any, **kwargs: Any) -> Any:
    """dace-ai's :func:`dace_ai.expansion.exchange.generate_prompt`."""
    from dace_ai.expansion.exchange import generate_prompt  # local: import cost (whole pipeline)

    return generate_prompt(*args, **kwargs)


@_named_after("dace_ai.expansion.exchange")
def read_prompt_response(*args: Any, **kwargs: Any) -> Any:
    """dace-ai's :func:`dace_ai.expansion.exchange.read_prompt_response`."""
    from dace_ai.expansion.exchange import read_prompt_response  # local: import cost (whole pipeline)

    return read_prompt_response(*args, **kwargs)


#: DaCe's AI library functions dace-ai replaces, each by the function of the same name above.
_FUNCTIONS: tuple[Callable[..., Any], ...] = (
    generate_prompts,
    read_prompt_responses,
    generate_prompt,
    read_prompt_response,
)
