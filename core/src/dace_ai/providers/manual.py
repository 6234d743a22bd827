"""Built-in plugin: the ``manual`` provider (prompt and answer files; works offline).

It needs no SDK, no key and no network, which also makes it the fallback when
no other provider is usable. The drivers over whole SDFGs are in :mod:`dace_ai.expansion.exchange`.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from dace_ai.config.settings import AISettings
from dace_ai.errors import AnswerError, MissingAnswer
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import Provider
from dace_ai.prompt.answer import max_answer_chars, parse_answer
from dace_ai.providers.api import ProviderReply, ProviderRequest, cached_fallback, current_node
from dace_ai.storage.files import ai_folder, atomic_write

PROMPT_SUFFIX = "_prompt.md"
RESPONSE_SUFFIX = "_response.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]+")


def prompt_hash(request: ProviderRequest) -> str:
    """12 hex digits of SHA-256 over the prompt content (system, conversation, schema)."""
    material = {
        "system": request.system,
        "messages": [[m.role, m.content] for m in request.messages],
        "schema": request.schema,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:12]


def file_stem(node_name: str, request: ProviderRequest) -> str:
    return f"{_UNSAFE.sub('_', node_name) or 'node'}_{prompt_hash(request)}"


def prompt_folder(settings: AISettings | None, directory: str | Path | None = None) -> Path:
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
    parts = [
        f"# dace-ai prompt for node `{node_name}`\n\n",
        f"Answer with one JSON object that matches the schema at the end, and save it as\n"
        f"`{response.name}` in the folder of this file.\n\n",
        "## System prompt\n\n",
        request.system.rstrip(),
        "\n",
    ]
    for message in request.messages:
        title = "Request" if message.role == "user" else "Your previous answer"
        parts += [f"\n## {title}\n\n", message.content.rstrip(), "\n"]
    parts += ["\n## Answer schema\n\n```json\n", json.dumps(request.schema, indent=2, sort_keys=True), "\n```\n"]
    return "".join(parts)


def write_prompt(folder: Path, node_name: str, sdfg_name: str, request: ProviderRequest) -> PromptFile:
    stem = file_stem(node_name, request)
    files = PromptFile(node_name, sdfg_name, folder / f"{stem}{PROMPT_SUFFIX}", folder / f"{stem}{RESPONSE_SUFFIX}")
    atomic_write(files.prompt, prompt_document(node_name, request, files.response))
    return files


def _interactive(settings: AISettings) -> bool:
    if settings.interactive is not None:
        return settings.interactive
    return sys.stdin.isatty() and sys.stdout.isatty()


def _paste(files: PromptFile) -> str:
    print(
        f"dace-ai: node {files.node!r} needs an answer. The prompt is in\n  {files.prompt}\n"
        "Paste the JSON answer, then a line with a single '.' (or Ctrl-D); an empty answer stops.",
        file=sys.stderr,
        flush=True,
    )
    lines = []
    for line in sys.stdin:
        if line.strip() == ".":
            break
        lines.append(line)
    return "".join(lines)


def missing_answer(files: PromptFile) -> MissingAnswer:
    return MissingAnswer(
        f"no answer yet for node {files.node!r} (SDFG {files.sdfg!r}) from the manual provider. "
        f"The prompt is in {files.prompt}; save the answer (JSON) as {files.response} and run again "
        f"(or call dace_ai.read_prompt_responses(sdfg, {str(files.prompt.parent)!r})).",
        prompt_path=files.prompt,
        response_path=files.response,
    )


def read_response_file(path: Path, max_tokens: int | None) -> str:
    """The text of a response file, or an :class:`AnswerError` naming the file and what is wrong with it.

    A person (or a script) wrote the file, so it may hold anything: it is refused
    unread when larger than ``max_tokens`` could produce, and when it is not UTF-8.
    """
    limit = max_answer_chars(max_tokens) * 4  # bytes: up to 4 per character in UTF-8
    try:
        size = path.stat().st_size
        if size > limit:
            raise AnswerError(
                f"response file {path}: {size} bytes, more than max_tokens={max_tokens} allows "
                f"({limit}); it was refused unread"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise AnswerError(f"response file {path}: cannot be read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise AnswerError(
            f"response file {path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}); save the answer as UTF-8 JSON"
        ) from None
    return text


class ManualClient:
    """Answers from ``<prompt_dir>/<node>_<hash>_response.json``, else writes the prompt and stops."""

    def __init__(self, settings: AISettings) -> None:
        self.settings = settings

    def complete(self, request: ProviderRequest) -> ProviderReply:
        ctx = current_node()
        name, sdfg_name = (ctx.name, ctx.sdfg_name) if ctx is not None else ("node", "")
        folder = prompt_folder(self.settings)
        stem = file_stem(name, request)
        response = folder / f"{stem}{RESPONSE_SUFFIX}"
        if response.is_file():
            text = read_response_file(response, request.max_tokens)
            parse_answer(text, origin=f"response file {response}", max_tokens=request.max_tokens)
            return ProviderReply(text, model="manual")
        if cached_fallback():  # the cache answers; nobody needs to be asked
            raise MissingAnswer(f"no response file {response}; the cached answer is used")
        files = write_prompt(folder, name, sdfg_name, request)
        if _interactive(self.settings):
            text = _paste(files)
            if text.strip():
                atomic_write(files.response, text)
                return ProviderReply(text, model="manual")
        raise missing_answer(files)


def _factory(settings: AISettings) -> ManualClient:
    return ManualClient(settings)


@hookimpl
def dace_ai_providers():
    yield Provider(
        name="manual",
        factory=_factory,
        offline=True,
        answers_before_cache=True,
        auto_rank=-1000,
        description="Prompts written to files; answers read from response files or pasted",
    )
