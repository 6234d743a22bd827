"""The ``zlib`` environment generator: answers may use zlib where it is installed.

``offer(ctx)`` adds a line to the prompt's environments section telling the model
what it may request (or returns ``None`` where zlib is missing, so the model is not
told about it). When an answer requests ``{"name": "zlib", "generator": "zlib"}``,
``generate(request)`` returns the full class path of a DaCe environment that adds
the header and links the library; the tasklet names it, and DaCe does the rest.
"""

from __future__ import annotations

import re
from pathlib import Path

from dace_ai.plugin import EnvironmentGenerator, EnvironmentRequest, NodeContext, PluginError, hookimpl

HEADER = Path("/usr/include/zlib.h")


def zlib_version() -> str | None:
    """The installed zlib's version, from its header; ``None`` when it is not installed."""
    if not HEADER.is_file():
        return None
    found = re.search(r'#define ZLIB_VERSION "([^"]+)"', HEADER.read_text(errors="replace"))
    return found.group(1) if found else "unknown"


def offer(ctx: NodeContext) -> str | None:
    version = zlib_version()
    if version is None or ctx.target.kind != "cpu":
        return None
    return (f"zlib {version}: request `{{\"name\": \"zlib\", \"generator\": \"zlib\"}}` and put "
            "`#include <zlib.h>` in `code_global` to use `crc32`, `adler32`, `compress2`, `uncompress`; "
            "the library is linked for you.")


def generate(request: EnvironmentRequest) -> str:
    if zlib_version() is None:
        raise PluginError(f"environment {request.name!r}: zlib is not installed here ({HEADER} is missing)")
    from .environment import LabZlib  # imports DaCe's environment machinery only when used

    return LabZlib.full_class_path()


@hookimpl
def dace_ai_environment_generators():
    yield EnvironmentGenerator(name="zlib", offer=offer, generate=generate,
                               description="zlib (crc32, adler32, compress) as a DaCe environment")
