"""Built programs: SDFG files, how to call a built program without DaCe, and the loaded library of a compiled
one.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dace
from dace.config import Config


def load_sdfg(path: Any) -> Any:
    """An SDFG read from a ``.sdfg`` / ``.sdfgz`` file."""
    return dace.SDFG.from_file(str(path))


def save_sdfg(sdfg: Any, path: Any, compress: bool = False) -> None:
    """Write ``sdfg`` to ``path`` (DaCe's JSON, gzip-compressed when ``compress``)."""
    sdfg.save(str(path), compress=compress)


#: The SDFG DaCe writes into a program's build folder: ``program.sdfg`` on DaCe 1.0, compressed on 2.0.
PROGRAM_FILES = ("program.sdfg", "program.sdfgz")


def program_file(folder: Any) -> Any:
    """The SDFG file in a program's build folder (a ``Path``; the first name when none exists yet)."""
    candidates = [Path(folder) / name for name in PROGRAM_FILES]
    return next((path for path in candidates if path.is_file()), candidates[0])


def program_layout(folder: str, sizes: dict[str, int]) -> dict[str, Any]:
    """How to call a built program without DaCe: library, entry points, arguments in call order.

    A sandboxed child loads the library with ``ctypes`` from this description alone
    (importing DaCe there would cost seconds per run). Each argument is an array
    (numpy dtype, shape, strides and total size evaluated at ``sizes``) or a scalar
    (ctypes type and value); ``init`` lists the arguments the init function takes.
    """
    from dace import data, symbolic
    from dace.sdfg import SDFG

    sdfg = SDFG.from_file(str(program_file(folder)))
    suffix = Config.get("compiler", "library_extension")
    arglist = sdfg.arglist()
    order = sdfg.signature_arglist(with_types=False, arglist=arglist)
    free = set(map(str, sdfg.free_symbols))

    def np_name(dtype: Any) -> str:
        import numpy

        return numpy.dtype(dtype).name

    def value(expr: Any) -> int:
        return int(symbolic.evaluate(expr, sizes)) if symbolic.issymbolic(expr) else int(expr)

    args = []
    for name in order:
        desc = arglist[name]
        if isinstance(desc, data.Array):
            args.append(
                {
                    "name": name,
                    "array": True,
                    "dtype": np_name(desc.dtype.as_numpy_dtype()),
                    "shape": [value(d) for d in desc.shape],
                    "strides": [value(d) for d in desc.strides],
                    "total": value(desc.total_size),
                }
            )
        else:
            args.append(
                {"name": name, "array": False, "ctype": desc.dtype.as_ctypes().__name__, "value": sizes.get(name, 0)}
            )
    return {
        "library": os.path.join(folder, "build", f"lib{sdfg.name}.{suffix}"),
        "name": sdfg.name,
        "args": args,
        "init": [a["name"] for a in args if a["name"] in free],
    }


def register_compiled_call_hook(hook: Callable[[Any, Any], Any]) -> None:
    """Run ``hook(compiled_sdfg, args)`` (a context manager) around every call of a compiled program."""
    import dace.hooks

    dace.hooks.register_compiled_sdfg_call_hook(context_manager=hook)


def program_function(compiled: Any, name: str, restype: Any, argtypes: list[Any]) -> Any:
    """The C function ``name`` of a compiled program's loaded library (ctypes), or None when it has none."""
    library = getattr(compiled, "_lib", None)
    handle = getattr(library, "_lib", None)
    stub = getattr(library, "_stub", None)
    if handle is None or stub is None:
        return None
    address = stub.get_symbol(handle, ctypes.c_char_p(name.encode()))
    if not address:
        return None
    return ctypes.CFUNCTYPE(restype, *argtypes)(address)


def program_handle(compiled: Any) -> int | None:
    """The handle of a compiled program's loaded library (changes when DaCe loads it again), or None."""
    handle = getattr(getattr(compiled, "_lib", None), "_lib", None)
    return getattr(handle, "value", None)
