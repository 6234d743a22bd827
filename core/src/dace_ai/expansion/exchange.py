"""The manual exchange: prompts as files, answers as files (or pasted on a terminal).

For when no provider may be called from the machine (air-gapped clusters,
reviewed answers, shipped demos). File names are ``<node>_<hash>_prompt.md`` and
``<node>_<hash>_response.json`` where ``<hash>`` is a hash of the prompt content
(system prompt, conversation, answer schema), so an answer is only ever used for
the exact prompt it was written for, and a repair round gets a new file.

Whole SDFG::

    files = dace_ai.generate_prompts(sdfg, "prompts")      # one prompt per pending node
    # ... save each answer as the response path named in its prompt ...
    report = dace_ai.read_prompt_responses(sdfg, "prompts")  # expands what has an answer
    print(report.missing)                                  # the rest

One node (methods added to every library node by ``import dace_ai``)::

    text = node.generate_prompt(state)               # the prompt document
    tasklet = node.read_prompt_response(state, reply)  # expand it now with this answer (JSON text)

During ``sdfg.compile()`` with ``provider = "manual"``, a node without an answer
stops with :class:`~dace_ai.errors.MissingAnswer` naming the prompt file and the
response path (folder: the ``prompt_dir`` setting, default
``<build root>/ai-prompts``); on an interactive terminal the answer may be pasted.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dace_ai import compat
from dace_ai.compilation.diagnostics import parse_diagnostics
from dace_ai.config.settings import AISettings
from dace_ai.errors import DaceAIWarning, MissingAnswer
from dace_ai.expansion.expansion_pass import expansion_pass, node_context, resolve
from dace_ai.expansion.pending import expand_other_nodes, pending_nodes
from dace_ai.expansion.pipeline import implement
from dace_ai.prompt.answer import Answer, parse_answer
from dace_ai.providers.manual import (
    RESPONSE_SUFFIX,
    PromptFile,
    file_stem,
    prompt_document,
    prompt_folder,
    write_prompt,
)
from dace_ai.solving.provenance import level_from_code
from dace_ai.solving.requests import build_request
from dace_ai.storage.session_store import open_session

if TYPE_CHECKING:
    from dace_ai.storage.session_store import Session


def _manual_settings(settings: AISettings | dict[str, Any] | None, directory: str | Path | None) -> AISettings:
    base = resolve(settings)
    update: dict[str, Any] = {"provider": "manual"}
    if directory is not None:
        update["prompt_dir"] = str(Path(directory).resolve())
    return base.model_copy(update=update)


def generate_prompts(
    sdfg: Any,
    directory: str | Path | None = None,
    settings: AISettings | dict[str, Any] | None = None,
    *,
    expand_others: bool = True,
) -> list[PromptFile]:
    """Write ``<node>_<hash>_prompt.md`` for every node that would expand with 'ai' (nested SDFGs too).

    With ``expand_others`` (default) a copy of the SDFG has its other library nodes
    expanded first, as a compile would, so nodes they turn into are included
    (``A @ B`` with ``blas.default_implementation = 'ai'`` becomes a Gemm). The
    SDFG itself is not changed.
    """
    import copy

    if expand_others:
        sdfg = copy.deepcopy(sdfg)
        expand_other_nodes(sdfg)
    with expansion_pass():
        settings = resolve(settings)
        folder = prompt_folder(settings, directory)
        written = []
        for nsdfg, state, node in pending_nodes(sdfg):
            ctx = node_context(nsdfg, state, node, settings)
            written.append(write_prompt(folder, ctx.name, ctx.sdfg_name, build_request(ctx, settings)))
        return written


class ExchangeWarning(DaceAIWarning):
    """Some nodes of a manual exchange have no usable answer yet (see the report)."""


@dataclass
class FailedAnswer:
    """An answer that was read but failed its checks; its repair prompt awaits the next answer."""

    node: str
    checks: list[str]  #: the checkers that failed, e.g. ``["probe"]``
    first_error: str  #: the first error of the first failed check (a compiler's first error)
    prompt: Path  #: the repair prompt (the failed answer and the diagnostics)
    response: Path  #: where the repaired answer goes
    session: Path

    def __str__(self) -> str:
        return (
            f"answer for {self.node!r} failed check(s) {', '.join(self.checks)}: {self.first_error}\n"
            f"  repair prompt: {self.prompt}\n  save the repaired answer as {self.response} "
            f"(session: {self.session})"
        )


@dataclass
class ResponseReport:
    """What :func:`read_prompt_responses` did: nodes expanded, answers that failed, nodes without an answer."""

    expanded: list[str] = field(default_factory=list)
    missing: list[PromptFile] = field(default_factory=list)
    failed: list[FailedAnswer] = field(default_factory=list)
    #: Node name -> how far its tasklet was checked (``native fallback`` when no answer passed).
    verification: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"expanded {len(self.expanded)} node(s): {', '.join(self.expanded) or '-'}"]
        lines += [f"  - {name}: {self.verification.get(name, 'unknown')}" for name in self.expanded]
        lines += [str(f) for f in self.failed]
        lines += [f"missing answer for {m.node!r}: save it as {m.response} (prompt: {m.prompt})" for m in self.missing]
        return "\n".join(lines)


def read_prompt_responses(
    sdfg: Any,
    directory: str | Path | None = None,
    settings: AISettings | dict[str, Any] | None = None,
    *,
    expand_others: bool = True,
) -> ResponseReport:
    """Expand every pending node whose response file exists; report the others.

    Answers are checked like any answer (and cached under the provider ``manual``);
    an answer that fails its checks is listed in ``failed`` with the checks, the
    first error and the repair prompt written for it. With ``expand_others``
    (default) the SDFG's other library nodes are expanded first (as in
    :func:`generate_prompts`, but in place). Nodes left without a usable answer are
    also announced with an :class:`ExchangeWarning`.
    """
    if expand_others:
        expand_other_nodes(sdfg)
    report = ResponseReport()
    with expansion_pass():
        manual = _manual_settings(settings, directory)
        for nsdfg, state, node in _pending(sdfg):
            name = node.name
            ctx = node_context(nsdfg, state, node, manual)
            session = open_session(ctx.sdfg_name, ctx.key, guid=compat.node_guid(node), label=ctx.name)
            rounds_before = len(session.summary().get("rounds", []))
            try:
                tasklet = implement(nsdfg, state, node, manual)
                report.expanded.append(name)
                report.verification[name] = tasklet_level(tasklet)
            except MissingAnswer as exc:
                if exc.prompt_path is None or exc.response_path is None:
                    raise  # the manual exchange always names its files; nothing here to report as missing
                files = PromptFile(name, nsdfg.name, exc.prompt_path, exc.response_path)
                failure = _failed_round(session, rounds_before, files)
                if failure is not None:
                    report.failed.append(failure)
                else:
                    report.missing.append(files)
    if report.failed or report.missing:
        warnings.warn(
            f"dace_ai.read_prompt_responses: {len(report.failed)} answer(s) failed their checks and "
            f"{len(report.missing)} node(s) have no answer yet:\n{report}",
            ExchangeWarning,
            stacklevel=2,
        )
    return report


def _failed_round(session: Session, rounds_before: int, files: PromptFile) -> FailedAnswer | None:
    """The answer of this call that failed its checks (from the session), or None when none did."""
    rounds = session.summary().get("rounds", [])[rounds_before:]
    rejected = [r for r in rounds if r.get("status") == "rejected"]
    if not rejected:
        return None
    folder = session.folder / f"round-{rejected[-1]['number']}"
    try:
        rows = json.loads((folder / "checks.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        rows = []
    failed = [r for r in rows if isinstance(r, dict) and r.get("status") == "failed"]
    first = "(no diagnostics recorded)"
    if failed:
        try:
            log = (folder / f"check-{failed[0]['checker']}.log").read_text(encoding="utf-8")
        except OSError:
            log = ""
        first = first_error(log) or first
    return FailedAnswer(
        files.node,
        [str(r.get("checker")) for r in failed] or ["?"],
        first,
        files.prompt,
        files.response,
        session.folder,
    )


def first_error(log: str) -> str:
    """The first error of a check's diagnostics (compiler output), as one line."""
    errors = [d for d in parse_diagnostics(log) if d.is_error]
    if errors:
        d = errors[0]
        return f"{d.file}:{d.line}: {d.severity}: {d.message}" if d.line else f"{d.severity}: {d.message}"
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")


def tasklet_level(tasklet: Any) -> str:
    """The verification level in a generated tasklet's provenance; ``native fallback`` for None."""
    if tasklet is None:
        return "native fallback (no answer passed its checks)"
    return level_from_code(tasklet.code.as_string) or "unknown"


def _pending(sdfg: Any) -> list[tuple[Any, Any, Any]]:
    return pending_nodes(sdfg)


def generate_prompt(node: Any, state: Any, settings: AISettings | dict[str, Any] | None = None) -> str:
    """The prompt document for one node (nothing written)."""
    settings = resolve(settings)
    ctx = node_context(state.sdfg, state, node, settings)
    request = build_request(ctx, settings)
    folder = Path(settings.prompt_dir) if settings.prompt_dir else Path("ai-prompts")
    return prompt_document(ctx.name, request, folder / f"{file_stem(ctx.name, request)}{RESPONSE_SUFFIX}")


def read_prompt_response(node: Any, state: Any, reply: Any, settings: AISettings | dict[str, Any] | None = None) -> Any:
    """Expand one node now with ``reply`` (JSON text, a dict, or an Answer); return the tasklet.

    None when the reply (and its repairs) failed and ``on_failure=native`` expanded the node natively.

    The reply is validated first: a bad one raises :class:`~dace_ai.errors.AnswerError`
    and changes nothing.
    """
    if isinstance(reply, Answer):
        text = reply.model_dump_json()
    elif isinstance(reply, dict):
        text = json.dumps(reply)
    else:
        text = str(reply)
    parse_answer(text, origin=f"reply for node {getattr(node, 'name', '?')!r}")
    return implement(state.sdfg, state, node, _manual_settings(settings, None), supplied=text)
