"""Host tasklets over GPU data whose code needs the GPU compiler, routed into DaCe's CUDA/HIP file.

DaCe emits a host tasklet into the program's C++ file, which the host compiler
builds: a kernel launch (``<<<...>>>``) or a ``__global__`` kernel in its global
code does not compile there. When an answer for a host tasklet over GPU data
holds such code, :func:`route_to_gpu_file` moves it, unchanged, into a function
in the SDFG's global code for the GPU file (``sdfg.global_code['cuda']``, built
by nvcc or hipcc) and leaves in the tasklet a call of that function with the
connectors, the symbols, ``__dace_current_stream`` and, where the code uses it,
``__state``. The tasklet keeps the answer's text in ``#if 0`` blocks, so
:func:`answer_text` gives back exactly what the model wrote (sessions compare it
with the recorded answer). The moved code is between marker comments named after
the function, so routing the same tasklet again replaces it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

#: Code the host compiler cannot build: kernel launches and GPU function qualifiers.
GPU_SYNTAX = re.compile(r"<<<|\b__global__\b|\b__device__\b|\b__shared__\b|\bhipLaunchKernelGGL\b")
#: Opens the tasklet's copy of the answer's code (never compiled there).
KEPT = "#if 0  // dace-ai: compiled by the GPU compiler in {function} (the SDFG's GPU global code)"
_KEPT = re.compile(r"^#if 0  // dace-ai: compiled by the GPU compiler in (\w+) .*?\n(.*?)\n#endif\n", re.S | re.M)
_BEGIN = "// dace-ai GPU host code {function} begin"
_END = "// dace-ai GPU host code {function} end"


def needs_gpu_compiler(code: str, code_global: str) -> bool:
    """True when the host code holds kernel launches or GPU functions."""
    return bool(GPU_SYNTAX.search(code) or GPU_SYNTAX.search(code_global))


def top_sdfg(sdfg: Any) -> Any:
    """The outermost SDFG of ``sdfg`` (the one whose state struct the generated code declares)."""
    while getattr(sdfg, "parent_sdfg", None) is not None:
        sdfg = sdfg.parent_sdfg
    return sdfg


def state_struct_name(sdfg: Any) -> str:
    """The C++ name of ``sdfg``'s state struct (``__state``'s type)."""
    from dace.codegen.targets.cpp import mangle_dace_state_struct_name

    return mangle_dace_state_struct_name(top_sdfg(sdfg))


def answer_text(code: str) -> tuple[str, str | None]:
    """(code, function): the answer's code kept in a routed tasklet's ``#if 0`` block, else ``code`` and None."""
    match = _KEPT.search(code)
    if match is None:
        return code, None
    return match.group(2), match.group(1)


def _replace_block(sdfg: Any, backend: str, function: str, text: str | None) -> None:
    """Put ``text`` between ``function``'s markers in ``sdfg.global_code[backend]`` (None removes the block)."""
    import dace

    old = sdfg.global_code.get(backend)
    current = old.as_string if old is not None else ""
    begin, end = _BEGIN.format(function=function), _END.format(function=function)
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", re.S)
    current = pattern.sub("", current)
    if text is not None:
        current = current.rstrip("\n") + ("\n" if current.strip() else "") + f"{begin}\n{text}\n{end}\n"
    sdfg.global_code[backend] = dace.properties.CodeBlock(current, dace.Language.CPP)


def route_to_gpu_file(
    sdfg: Any,
    label: str,
    code: str,
    code_global: str,
    parameters: Sequence[tuple[str, str]],
    *,
    backend: str = "cuda",
    stream_type: str = "cudaStream_t",
    head: str = "",
) -> tuple[str, str]:
    """(tasklet code, tasklet global code) that call ``code`` moved into ``sdfg``'s GPU global code.

    ``parameters`` are (declaration, argument) pairs of what the code sees in the
    tasklet (connectors, symbols, enclosing map parameters); ``head`` is put
    before the call (the provenance comment). The function's name carries a hash
    of what it holds, so two tasklets with the same code share one definition.
    """
    uses_state = "__state" in code or "__state" in code_global
    declarations = [d for d, _ in parameters] + [f"{stream_type} __dace_current_stream"]
    arguments = [a for _, a in parameters] + ["__dace_current_stream"]
    if uses_state:
        declarations.append(f"{state_struct_name(sdfg)} *__state")
        arguments.append("__state")
    signature = ", ".join(declarations)
    digest = hashlib.sha256("\0".join([label, code, code_global, signature]).encode()).hexdigest()[:10]
    function = f"dace_ai_gpu_{re.sub(r'[^0-9A-Za-z_]', '_', label)}_{digest}"
    definition = (
        f"{code_global.rstrip()}\n\nvoid {function}({signature}) {{\n{code.rstrip()}\n}}"
        if code_global.strip()
        else f"void {function}({signature}) {{\n{code.rstrip()}\n}}"
    )
    _replace_block(top_sdfg(sdfg), backend, function, definition)
    kept = KEPT.format(function=function)
    tasklet_code = f"{head}{kept}\n{code.rstrip()}\n#endif\n{function}({', '.join(arguments)});"
    tasklet_global = f"{kept}\n{code_global.rstrip()}\n#endif\nvoid {function}({signature});"
    return tasklet_code, tasklet_global


def routed_parameters(code: str, code_global: str) -> list[tuple[str, str]] | None:
    """The (declaration, argument) pairs a routed tasklet passes (stream and state left out), else None."""
    _, function = answer_text(code)
    if function is None:
        return None
    call = re.search(rf"^{function}\((.*)\);\s*$", code, re.M)
    declaration = re.search(rf"^void {function}\((.*)\);\s*$", code_global, re.M)
    if call is None or declaration is None:
        return None
    arguments = [a.strip() for a in call.group(1).split(",") if a.strip()]
    declarations = [d.strip() for d in declaration.group(1).split(",") if d.strip()]
    pairs = [(d, a) for d, a in zip(declarations, arguments) if a not in ("__dace_current_stream", "__state")]
    return pairs if len(declarations) == len(arguments) else None
