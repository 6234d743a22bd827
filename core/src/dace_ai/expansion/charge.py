"""Who implements ``'ai'`` in this process, and under which name: decided once, at ``import dace_ai``.

On DaCe 2, which ships its own AI library, the ``builtin`` setting says whether dace-ai takes
``'ai'`` over (``take``, the default) or registers as ``'dace-ai'`` beside DaCe's (``keep``);
on DaCe 1.0 dace-ai is ``'ai'`` (see :mod:`~dace_ai.expansion.takeover` for what taking over
means). Everything that names the implementation (pending nodes, the native fallback, the
expansion classes) reads :data:`IMPLEMENTATION` here.
"""

from __future__ import annotations

from dataclasses import dataclass

from dace_ai import compat

#: dace-ai's implementation name when DaCe's own library keeps ``'ai'``.
OWN_NAME = "dace-ai"


@dataclass(frozen=True)
class Charge:
    """Which library implements DaCe's ``'ai'``, and why (shown by ``dace-ai doctor``)."""

    builtin: bool  #: DaCe ships its own AI library
    mode: str  #: "take" or "keep" (the ``builtin`` setting)
    source: str  #: where the setting came from
    implementation: str  #: the name dace-ai's implementation is registered under

    @property
    def dace_ai_in_charge(self) -> bool:
        return not self.builtin or self.mode == "take"

    def describe(self) -> str:
        if not self.builtin:
            return f"dace-ai implements 'ai' (DaCe {compat.DACE_VERSION} has no AI library of its own)"
        if self.mode == "take":
            return (
                f"dace-ai implements DaCe {compat.DACE_VERSION}'s AI library: 'ai', dace.ai, "
                f"dace.libraries.ai functions (builtin=take from {self.source}; "
                "set DACE_ai_builtin=keep to leave DaCe's library alone)"
            )
        return (
            f"DaCe {compat.DACE_VERSION}'s own AI library implements 'ai' and dace.ai (builtin=keep from "
            f"{self.source}); dace-ai is the '{OWN_NAME}' implementation and dace_ai.ai"
        )


def _resolve() -> Charge:
    if not compat.HAS_BUILTIN_AI:
        return Charge(False, "take", "default", compat.AI_IMPLEMENTATION)
    from dace_ai.config.settings import early_setting  # local: import dace_ai stays light

    mode, source = early_setting("builtin")
    return Charge(True, mode, source, compat.AI_IMPLEMENTATION if mode == "take" else OWN_NAME)


#: Decided once, at ``import dace_ai``.
CHARGE: Charge = _resolve()

#: ``'ai'``, or ``'dace-ai'`` on DaCe 2 when DaCe's own library keeps ``'ai'``.
IMPLEMENTATION = CHARGE.implementation
