"""Turn an accepted answer into a plain DaCe tasklet that replaces the node.

The tasklet is an ordinary ``dace.nodes.Tasklet`` (C++), so an expanded SDFG
saved with ``sdfg.save()`` compiles and runs in a fresh process without a
provider, a key or the answer cache. Its connector types are fixed from the
context the model was shown (pointer or value, element type): later type
inference leaves typed connectors alone, so the code always sees what the
prompt promised. Provenance (provider, model, cache key, session) is a comment
at the top of the code, where it survives saving and shows in generated code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dace
from dace import dtypes
from dace.sdfg import nodes

from dace_ai import compat
from dace_ai.compat import gpu_host
from dace_ai.compilation.units import gpu_host_parts
from dace_ai.context.types import ConnectorInfo, NodeContext
from dace_ai.errors import AnswerError
from dace_ai.prompt.answer import Answer
from dace_ai.runtime_check.instrument import reinstrument
from dace_ai.runtime_check.registry import Origin
from dace_ai.solving.provenance import Provenance
from dace_ai.storage.files import build_root

_LANGUAGES = {"cpp": dtypes.Language.CPP, "cuda": dtypes.Language.CPP, "hip": dtypes.Language.CPP}


def _typeclasses() -> dict[str, dtypes.typeclass]:
    table: dict[str, dtypes.typeclass] = {}
    for tc, qualified in dtypes.TYPECLASS_TO_STRING.items():
        table.setdefault(tc.ctype, tc)
        table.setdefault(qualified, tc)
        table.setdefault(qualified.removeprefix("dace::"), tc)
    for alias, tc in {
        "int": dace.int32,
        "long long": dace.int64,
        "unsigned int": dace.uint32,
        "long": dace.int64,
        "char": dace.int8,
        "unsigned char": dace.uint8,
        "short": dace.int16,
        "unsigned short": dace.uint16,
    }.items():
        table.setdefault(alias, tc)
    return table


def connector_type(conn: ConnectorInfo, live_type: Any = None) -> dtypes.typeclass | None:
    """The DaCe type of a connector as the prompt described it (``None`` when unknown)."""
    name = conn.dtype.replace("const ", "").strip()
    base = _typeclasses().get(name)
    if base is None:
        if live_type is None:
            return None
        base = live_type.base_type if isinstance(live_type, dtypes.pointer) else live_type
    return dtypes.pointer(base) if conn.is_pointer else base


def provenance_comment(provenance: Provenance | dict[str, Any] | None) -> str:
    """The tasklet's first line (:meth:`~dace_ai.solving.provenance.Provenance.to_comment`)."""
    if not isinstance(provenance, Provenance):
        provenance = Provenance.from_fields(provenance or {})
    return provenance.to_comment()


def make_tasklet(
    node: nodes.LibraryNode,
    answer: Answer,
    ctx: NodeContext,
    provenance: Provenance | dict[str, Any] | None = None,
    environments: set[str] | None = None,
    sdfg: Any = None,
) -> nodes.Tasklet:
    """The tasklet for ``answer``, with ``node``'s connectors typed as in ``ctx``.

    Given the ``sdfg`` it goes into, a host tasklet over GPU data whose code needs the
    GPU compiler is routed into the SDFG's GPU file (:func:`~dace_ai.compilation.units.gpu_host_parts`).
    """
    inputs: dict[str, Any] = dict(node.in_connectors)
    outputs: dict[str, Any] = dict(node.out_connectors)
    for conn in ctx.connectors:
        side = inputs if conn.direction == "in" else outputs
        if conn.name in side:
            fixed = connector_type(conn, side[conn.name])
            if fixed is not None:
                side[conn.name] = fixed
    untyped = [c for c, t in {**inputs, **outputs}.items() if t is None or getattr(t, "type", 1) is None]
    if untyped and ctx.connectors:
        raise AnswerError(f"node {ctx.name!r}: no type known for connector(s) {untyped}")
    label = compat_label(node.name)
    code, code_global = gpu_host_parts(sdfg, label, answer, ctx, provenance_comment(provenance))
    tasklet = nodes.Tasklet(
        label,
        inputs=inputs,
        outputs=outputs,
        code=code,
        language=_LANGUAGES[answer.language],
        state_fields=list(answer.state_fields),
        code_global=code_global,
        code_init=answer.code_init,
        code_exit=answer.code_exit,
        side_effects=True if answer.side_effects else None,
        ignored_symbols=set(answer.ignored_symbols),
        debuginfo=node.debuginfo,
    )
    tasklet.environments = set(environments or ())  # resolved class paths (see environments.resolve)
    return tasklet


def tasklet_factory(answer: Answer, ctx: NodeContext) -> Callable[[set[str], Any], nodes.Tasklet] | None:
    """What the checks call to build the very tasklet the expansion would place for ``answer``, given
    environment class paths (:func:`dace_ai.checking.candidate_checks.check_candidate`'s ``make_tasklet``);
    None when ``ctx`` has no live node to build it for."""
    live_node = (ctx.live or {}).get("node")
    if live_node is None:
        return None
    return lambda environments, sdfg: make_tasklet(live_node, answer, ctx, environments=environments, sdfg=sdfg)


def compat_label(name: str) -> str:
    """Tasklet labels must be identifiers; node names usually are."""
    label = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name) or "ai_tasklet"
    return label if not label[0].isdigit() else f"_{label}"


def place_tasklet(state: Any, node: nodes.LibraryNode, tasklet: nodes.Tasklet) -> nodes.Tasklet:
    """Replace ``node`` by ``tasklet`` in ``state`` (same edges and connectors)."""
    compat.replace_node(state, node, tasklet)
    return tasklet


def update_tasklet(
    tasklet: nodes.Tasklet,
    answer: Answer,
    provenance: Provenance | dict[str, Any],
    environments: set[str] | None = None,
    sdfg: Any = None,
    ctx: NodeContext | None = None,
) -> nodes.Tasklet:
    """Give an existing generated tasklet the code of ``answer`` (refine, rollback); edges and connectors stay.

    With ``sdfg``, GPU host code is routed as :func:`make_tasklet` does, with the
    parameters the tasklet passes already or, given the node's ``ctx``, those of the node.
    """
    language = _LANGUAGES[answer.language]
    head = provenance_comment(provenance)
    previous = tasklet.code.as_string
    passed = gpu_host.routed_parameters(tasklet.code.as_string, tasklet.code_global.as_string)
    if sdfg is not None and passed is not None and gpu_host.needs_gpu_compiler(answer.code, answer.code_global):
        hip = "hipStream_t" in tasklet.code_global.as_string
        code, code_global = gpu_host.route_to_gpu_file(
            sdfg,
            tasklet.label,
            answer.code,
            answer.code_global,
            passed,
            stream_type="hipStream_t" if hip else "cudaStream_t",
            head=head,
        )
    elif sdfg is not None and ctx is not None:
        code, code_global = gpu_host_parts(sdfg, tasklet.label, answer, ctx, head)
    else:
        code, code_global = head + answer.code, answer.code_global
    tasklet.code = dace.properties.CodeBlock(code, language)
    tasklet.code_global = dace.properties.CodeBlock(code_global, language)
    tasklet.code_init = dace.properties.CodeBlock(answer.code_init, language)
    tasklet.code_exit = dace.properties.CodeBlock(answer.code_exit, language)
    tasklet.state_fields = list(answer.state_fields)
    tasklet.side_effects = True if answer.side_effects else None
    tasklet.ignored_symbols = set(answer.ignored_symbols)
    tasklet.environments = set(environments or ()) | set(answer.use_environments)
    reinstrument(tasklet, previous, _origin(provenance))
    return tasklet


def _origin(provenance: Provenance | dict[str, Any]) -> Origin:
    """The session round and cache key a provenance names (what a run-time check marks when it finds it wrong)."""
    found = provenance if isinstance(provenance, Provenance) else Provenance.from_fields(provenance)
    parts = found.session.split("/")
    if len(parts) == 3 and parts[0] == "ai-sessions" and parts[2].startswith("round-") and parts[2][6:].isdigit():
        return Origin(str(build_root() / "ai-sessions" / parts[1]), int(parts[2][6:]), found.cache_key)
    return Origin(cache_key=found.cache_key)
