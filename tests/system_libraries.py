"""One skip rule for tests that need a system library (OpenBLAS, FFTW): skipped with the reason when it is absent.

Whether a library is here is decided by the same detection its environment pack uses
(``detect_library``: the header on the compiler's include path and the shared library),
so a test skips exactly when the pack would not be offered. ``.ci/run`` installs the
Debian packages, so CI runs every one of these tests; a fresh clone without them
passes with the skips named.

Loaded as a pytest plugin (``-p tests.system_libraries``) with
``DACE_AI_TEST_HIDE_LIBRARIES=openblas,fftw`` it hides those libraries from the
detection, which is how the skip path itself is tested without uninstalling anything.
"""

from __future__ import annotations

import os

import pytest

#: Environment pack -> (Debian package, headers and shared libraries it provides).
LIBRARIES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "openblas": ("libopenblas-dev", ("cblas.h",), ("openblas", "blas", "cblas")),
    "fftw": ("libfftw3-dev", ("fftw3.h",), ("fftw3",)),
}
HIDE_VARIABLE = "DACE_AI_TEST_HIDE_LIBRARIES"


def missing(pack: str) -> str | None:
    """Why the library of environment pack ``pack`` cannot be used here, or None when it can."""
    from dace_ai.environments.resolve import detect_generator
    from dace_ai.plugins.manager import get_plugin_manager

    debian = LIBRARIES[pack][0]
    generator = get_plugin_manager().environment_generators().get(pack)
    if generator is None:
        return f"the {pack} environment pack (dace-ai-{pack}) is not installed"
    detection = detect_generator(generator)
    return None if detection.matched else f"{debian} is not installed ({detection.reason})"


def needs(*packs: str) -> pytest.MarkDecorator:
    """``@needs("openblas")``: skip the test, naming the Debian package, when the library is absent."""
    reasons = [r for r in (missing(p) for p in packs) if r]
    return pytest.mark.skipif(bool(reasons), reason="; ".join(reasons) or "libraries found")


def pytest_configure(config) -> None:
    """As a plugin: hide the libraries named in ``DACE_AI_TEST_HIDE_LIBRARIES`` from every detection."""
    hidden = [p.strip() for p in os.environ.get(HIDE_VARIABLE, "").split(",") if p.strip()]
    if not hidden:
        return
    from dace_ai.environments import installed

    headers = {h for p in hidden for h in LIBRARIES[p][1]}
    libraries = {lib for p in hidden for lib in LIBRARIES[p][2]}
    find_header, find_shared_library = installed.find_header, installed.find_shared_library

    def no_header(header, extra_dirs=()):  # as if the include path held no such file
        return None if header in headers else find_header(header, extra_dirs)

    def no_library(name, extra_dirs=()):
        return None if name in libraries else find_shared_library(name, extra_dirs)

    installed.find_header, installed.find_shared_library = no_header, no_library
