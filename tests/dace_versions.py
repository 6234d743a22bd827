"""What the tests need to know about the DaCe version they run on (the suite runs on DaCe 1.0 and 2.0)."""

from __future__ import annotations

from typing import Any

import pytest
from dace_ai import compat

#: The suite runs under DaCe 2.x (``.venv-dace2`` in ``.ci/run``).
DACE2 = compat.DACE_MAJOR >= 2

#: For tests of DaCe 2's own AI library and of dace-ai taking it over.
only_dace2 = pytest.mark.skipif(not DACE2, reason="DaCe 1.0 has no AI library of its own (dace.libraries.ai)")


def only_dace1(reason: str) -> Any:
    """Skip on DaCe 2 for ``reason`` (what DaCe 2 does differently)."""
    return pytest.mark.skipif(DACE2, reason=f"DaCe 2: {reason}")


def add_nested_sdfg(state: Any, inner: Any, outer: Any, inputs: Any, outputs: Any, **kwargs: Any) -> Any:
    """``state.add_nested_sdfg`` in either spelling (DaCe 2 dropped the parent SDFG argument)."""
    if DACE2:
        return state.add_nested_sdfg(inner, inputs, outputs, **kwargs)
    return state.add_nested_sdfg(inner, outer, inputs, outputs, **kwargs)
