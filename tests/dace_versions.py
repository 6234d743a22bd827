"""What the tests need to know about the DaCe version they run on (the suite runs on DaCe 1.0 and 2.0)."""

from __future__ import annotations

import functools
import shutil
import subprocess
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


@functools.cache
def cross_headers_problem(compiler: str = "aarch64-linux-gnu-g++") -> str | None:
    """Why ``compiler`` cannot compile DaCe's runtime headers, or None (also None when it is not installed).

    DaCe 2's headers need C++20 and, on aarch64, ``_Float16`` in C++ (GCC 13); Debian 12's cross
    compiler is GCC 12. DaCe 1.0's headers compile with it.
    """
    if not DACE2 or shutil.which(compiler) is None:
        return None
    from dace_ai.plugin import dace_include_dir, runtime_standard_flag

    done = subprocess.run(
        [
            compiler,
            runtime_standard_flag(),
            "-fsyntax-only",
            "-I",
            str(dace_include_dir()),
            "-include",
            "dace/dace.h",
            "-x",
            "c++",
            "/dev/null",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    return None if done.returncode == 0 else (errors[0] if errors else done.stderr.strip()[:200])
