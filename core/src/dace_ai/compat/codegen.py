"""Code generation and builds: DaCe's runtime headers, building without loading, the generated code, the init
function's symbols and C++ spellings of offsets and expressions.
"""

from __future__ import annotations

import copy
import os
import shutil
import threading
from typing import Any

import dace


def dace_runtime_include() -> str:
    """The folder that holds ``dace/dace.h`` (DaCe's runtime headers)."""
    return os.path.join(os.path.dirname(os.path.abspath(dace.__file__)), "runtime", "include")


def compilation_error_types() -> tuple[type[Exception], type[Exception]]:
    """(CompilationError, CompilerConfigurationError) of this DaCe version."""
    from dace.codegen.exceptions import CompilationError, CompilerConfigurationError

    return CompilationError, CompilerConfigurationError


def compile_without_loading(sdfg: Any) -> str:
    """Build an SDFG's library in its build folder without loading it into this process; its path.

    Loading would run the generated code's static initialisers here; checks must not.
    ``SDFG.compile`` is not used: with DaCe's compiler cache on (``compiler.use_cache``)
    it loads a library already in the build folder, and on a code-generation error it
    writes ``_dacegraphs/failing.sdfgz`` into the current folder. These are its
    remaining steps (deep copy, scope connectors, code generation, CMake build). DaCe's
    code generation keeps global state, so it runs under a lock; the C++ compiler (the
    slow part) runs outside it, so several programs build at once.
    """
    from dace.codegen import codegen, compiler

    with _CODEGEN_LOCK:
        generated = copy.deepcopy(sdfg)
        generated.build_folder = sdfg.build_folder
        generated.fill_scope_connectors()
        program_objects = codegen.generate_code(generated, validate=True)
        program_folder = compiler.generate_program_folder(generated, program_objects, sdfg.build_folder)
    return compiler.configure_and_compile(program_folder, generated.name)


_CODEGEN_LOCK = threading.Lock()


def init_symbols(sdfg: Any) -> list[str]:
    """The symbols ``__dace_init_<program>`` receives, in order: the root program's used symbols.

    A tasklet's ``code_init`` is emitted into that function (``code_exit`` into
    ``__dace_exit_<program>``, which receives only ``__state``), so these are the only
    symbols init code can use. Mirrors the frame code generator's
    ``sdfg.init_signature(free_symbols=sdfg.used_symbols(all_symbols=False))``.
    """
    root = sdfg
    while getattr(root, "parent_sdfg", None) is not None:
        root = root.parent_sdfg
    return [k for k in sorted(root.used_symbols(all_symbols=False)) if not k.startswith("__dace")]


def generated_code(sdfg: Any) -> tuple[Any, list[tuple[str, str]]]:
    """The SDFG copy code is generated from, and (path relative to the build folder, code with markers).

    Same steps as ``SDFG.compile`` (deep copy, scope connectors, code generation), so the
    lines match the files on disk, where the ``////__DACE:cfg:state:node`` markers are
    stripped with line numbers kept. Marker ids refer to the returned copy (library
    nodes expanded during code generation shift ids); nodes keep their ``guid``.
    """
    import os

    from dace.codegen import codegen

    generated = copy.deepcopy(sdfg)
    generated.fill_scope_connectors()
    files = []
    for obj in codegen.generate_code(generated):
        folder = os.path.join("src", obj.target.target_name, *([obj.target_type] if obj.target_type else []))
        files.append((os.path.join(folder, f"{obj.name}.{obj.language}"), obj.code))
    return generated, files


def cpp_offset(desc: Any, subset: Any) -> str:
    """C++ element offset of ``subset``'s first element in ``desc`` (as DaCe's code generator writes it)."""
    from dace.codegen.targets.cpp import cpp_offset_expr

    return cpp_offset_expr(desc, subset)


def cpp_expr(expr: Any) -> str:
    """A symbolic expression in C++ syntax."""
    from dace.codegen.common import sym2cpp

    return str(sym2cpp(expr))


def discard_build_folder(sdfg: Any) -> None:
    """Remove the SDFG's build folder so the next ``compile()`` generates and builds everything again.

    With ``compiler.use_cache`` DaCe would otherwise reuse a library built from old code.
    """
    folder = getattr(sdfg, "build_folder", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
