"""The ``zlib`` environment generator: answers may use zlib where it is installed.

``detect()`` says whether zlib's header and shared library are on this machine; where
they are not, the generator is neither offered in the prompt nor usable, and a request
for it is refused with that reason. ``offer(ctx)`` is the text the prompt's
environments section shows for a node (``None`` where zlib does not suit it).
``generate(request)`` returns an ``EnvironmentSpec``: plain data (headers, libraries)
that dace-ai stores and turns into a DaCe environment with its own code, so nothing an
answer says ever becomes Python.
"""

from __future__ import annotations

import re
from functools import lru_cache

from dace_ai.plugin import (
    Detection,
    EnvironmentGenerator,
    EnvironmentRequest,
    EnvironmentSpec,
    NodeContext,
    detect_library,
    hookimpl,
)


@lru_cache(maxsize=1)
def detect() -> Detection:
    return detect_library(["zlib.h"], ["z"])


def zlib_version() -> str:
    """The installed zlib's version, read from the header ``detect`` found."""
    header = detect().details.get("headers", {}).get("zlib.h", "")
    try:
        with open(header, encoding="utf-8", errors="replace") as f:
            found = re.search(r'#define ZLIB_VERSION "([^"]+)"', f.read())
    except OSError:
        return "unknown"
    return found.group(1) if found else "unknown"


def offer(ctx: NodeContext) -> str | None:
    if ctx.target.kind != "cpu" or ctx.in_gpu_kernel:
        return None
    return (
        f'zlib {zlib_version()}: request `{{"name": "zlib", "generator": "zlib"}}` to use `crc32`, '
        "`adler32`, `compress2`, `uncompress` (the header is included and the library linked for you)."
    )


def generate(request: EnvironmentRequest) -> EnvironmentSpec:
    return EnvironmentSpec(name="zlib", generator="zlib", headers=["zlib.h"], libraries=["z"])


@hookimpl
def dace_ai_environment_generators():
    yield EnvironmentGenerator(
        name="zlib",
        detect=detect,
        offer=offer,
        generate=generate,
        description="zlib (crc32, adler32, compress) as a DaCe environment",
    )
