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

import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import MissingAnswer
from .provider_api import ProviderReply, ProviderRequest
from .settings import AISettings

PROMPT_SUFFIX = "_prompt.md"
RESPONSE_SUFFIX = "_response.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]+")


def prompt_hash(request: ProviderRequest) -> str:
    """12 hex digits of SHA-256 over the prompt content (system, conversation, schema)."""
    material = {"system": request.system, "messages": [[m.role, m.content] for m in request.messages],
                "schema": request.schema}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:12]


def file_stem(node_name: str, request: ProviderRequest) -> str:
    return f"{_UNSAFE.sub('_', node_name) or 'node'}_{prompt_hash(request)}"


def prompt_folder(settings: AISettings | None, directory: str | Path | None = None) -> Path:
    from .storage import ai_folder

    chosen = directory or (settings.prompt_dir if settings else None)
    if chosen:
        folder = Path(chosen).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    return ai_folder("ai-prompts")


@dataclass(frozen=True)
class PromptFile:
    """One node's prompt file and the response path its answer belongs at."""

    node: str
    sdfg: str
    prompt: Path
    response: Path


def prompt_document(node_name: str, request: ProviderRequest, response: Path) -> str:
    """The prompt as a Markdown document a person can paste into any chat and answer."""
    parts = [f"# dace-ai prompt for node `{node_name}`\n\n",
             f"Answer with one JSON object that matches the schema at the end, and save it as\n"
             f"`{response.name}` in the folder of this file.\n\n",
             "## System prompt\n\n", request.system.rstrip(), "\n"]
    for message in request.messages:
        title = "Request" if message.role == "user" else "Your previous answer"
        parts += [f"\n## {title}\n\n", message.content.rstrip(), "\n"]
    parts += ["\n## Answer schema\n\n```json\n", json.dumps(request.schema, indent=2, sort_keys=True), "\n```\n"]
    return "".join(parts)


def write_prompt(folder: Path, node_name: str, sdfg_name: str, request: ProviderRequest) -> PromptFile:
    from .storage import atomic_write

    stem = file_stem(node_name, request)
    files = PromptFile(node_name, sdfg_name, folder / f"{stem}{PROMPT_SUFFIX}", folder / f"{stem}{RESPONSE_SUFFIX}")
    atomic_write(files.prompt, prompt_document(node_name, request, files.response))
    return files


def _interactive(settings: AISettings) -> bool:
    if settings.interactive is not None:
        return settings.interactive
    return sys.stdin.isatty() and sys.stdout.isatty()


def _paste(files: PromptFile) -> str:
    print(f"dace-ai: node {files.node!r} needs an answer. The prompt is in\n  {files.prompt}\n"
          "Paste the JSON answer, then a line with a single '.' (or Ctrl-D); an empty answer stops.",
          file=sys.stderr, flush=True)
    lines = []
    for line in sys.stdin:
        if line.strip() == ".":
            break
        lines.append(line)
    return "".join(lines)


def missing_answer(files: PromptFile) -> MissingAnswer:
    error = MissingAnswer(
        f"no answer yet for node {files.node!r} (SDFG {files.sdfg!r}) from the manual provider. "
        f"The prompt is in {files.prompt}; save the answer (JSON) as {files.response} and run again "
        f"(or call dace_ai.read_prompt_responses(sdfg, {str(files.prompt.parent)!r})).")
    error.prompt_path = files.prompt  # type: ignore[attr-defined]
    error.response_path = files.response  # type: ignore[attr-defined]
    return error


class ManualClient:
    """Answers from ``<prompt_dir>/<node>_<hash>_response.json``, else writes the prompt and stops."""

    def __init__(self, settings: AISettings) -> None:
        self.settings = settings

    def complete(self, request: ProviderRequest) -> ProviderReply:
        from .pipeline import cached_fallback, current_node
        from .storage import atomic_write

        ctx = current_node()
        name, sdfg_name = (ctx.name, ctx.sdfg_name) if ctx is not None else ("node", "")
        folder = prompt_folder(self.settings)
        stem = file_stem(name, request)
        response = folder / f"{stem}{RESPONSE_SUFFIX}"
        if response.is_file():
            return ProviderReply(response.read_text(encoding="utf-8"), model="manual")
        if cached_fallback():  # the cache answers; nobody needs to be asked
            raise MissingAnswer(f"no response file {response}; the cached answer is used")
        files = write_prompt(folder, name, sdfg_name, request)
        if _interactive(self.settings):
            text = _paste(files)
            if text.strip():
                atomic_write(files.response, text)
                return ProviderReply(text, model="manual")
        raise missing_answer(files)


def _manual_settings(settings: Any, directory: str | Path | None) -> AISettings:
    from .pipeline import resolve

    base = resolve(settings)
    update: dict[str, Any] = {"provider": "manual"}
    if directory is not None:
        update["prompt_dir"] = str(Path(directory).resolve())
    return base.model_copy(update=update)


def generate_prompts(sdfg: Any, directory: str | Path | None = None, settings: Any = None, *,
                     expand_others: bool = True) -> list[PromptFile]:
    """Write ``<node>_<hash>_prompt.md`` for every node that would expand with 'ai' (nested SDFGs too).

    With ``expand_others`` (default) a copy of the SDFG has its other library nodes
    expanded first, as a compile would, so nodes they turn into are included
    (``A @ B`` with ``blas.default_implementation = 'ai'`` becomes a Gemm). The
    SDFG itself is not changed.
    """
    import copy

    from .pipeline import build_request, expand_other_nodes, expansion_pass, node_context, pending_nodes, resolve

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


@dataclass
class ResponseReport:
    """What :func:`read_prompt_responses` did: nodes expanded, and those still without an answer."""

    expanded: list[str] = field(default_factory=list)
    missing: list[PromptFile] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"expanded {len(self.expanded)} node(s): {', '.join(self.expanded) or '-'}"]
        lines += [f"missing answer for {m.node!r}: save it as {m.response} (prompt: {m.prompt})" for m in self.missing]
        return "\n".join(lines)


def read_prompt_responses(sdfg: Any, directory: str | Path | None = None, settings: Any = None, *,
                          expand_others: bool = True) -> ResponseReport:
    """Expand every pending node whose response file exists; report the others.

    Answers are checked like any answer (and cached under the provider ``manual``);
    a failed check writes the repair prompt, reported as missing. With
    ``expand_others`` (default) the SDFG's other library nodes are expanded first
    (as in :func:`generate_prompts`, but in place).
    """
    from .pipeline import expand_other_nodes, expansion_pass, implement

    if expand_others:
        expand_other_nodes(sdfg)
    report = ResponseReport()
    with expansion_pass():
        manual = _manual_settings(settings, directory)
        for nsdfg, state, node in _pending(sdfg):
            name = node.name
            try:
                implement(nsdfg, state, node, manual)
                report.expanded.append(name)
            except MissingAnswer as exc:
                report.missing.append(PromptFile(name, nsdfg.name, exc.prompt_path,  # type: ignore[attr-defined]
                                                 exc.response_path))  # type: ignore[attr-defined]
    return report


def _pending(sdfg: Any) -> list[tuple[Any, Any, Any]]:
    from .pipeline import pending_nodes

    return pending_nodes(sdfg)


def generate_prompt(node: Any, state: Any, settings: Any = None) -> str:
    """The prompt document for one node (nothing written)."""
    from .pipeline import build_request, node_context, resolve

    settings = resolve(settings)
    ctx = node_context(state.sdfg, state, node, settings)
    request = build_request(ctx, settings)
    folder = Path(settings.prompt_dir) if settings.prompt_dir else Path("ai-prompts")
    return prompt_document(ctx.name, request, folder / f"{file_stem(ctx.name, request)}{RESPONSE_SUFFIX}")


def read_prompt_response(node: Any, state: Any, reply: Any, settings: Any = None) -> Any:
    """Expand one node now with ``reply`` (JSON text, a dict, or an Answer); return the tasklet.

    The reply is validated first: a bad one raises :class:`~dace_ai.errors.AnswerError`
    and changes nothing.
    """
    from .answer import Answer, parse_answer
    from .pipeline import implement

    if isinstance(reply, Answer):
        text = reply.model_dump_json()
    elif isinstance(reply, dict):
        text = json.dumps(reply)
    else:
        text = str(reply)
    parse_answer(text, origin=f"reply for node {getattr(node, 'name', '?')!r}")
    return implement(state.sdfg, state, node, _manual_settings(settings, None), supplied=text)
