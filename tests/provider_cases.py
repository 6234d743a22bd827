"""Builders shared by the provider tests: requests, answers, and a real program with an AI node."""

import json
from typing import Any

import dace
import dace_ai
from dace_ai.config.settings import AISettings
from dace_ai.prompt.answer import answer_json_schema
from dace_ai.providers.api import Message, ProviderRequest

SYSTEM = "You write C++ tasklet bodies for DaCe library nodes. (test system prompt)"
USER = "Implement node `double_it`: _out[i] = 2 * _in0[i] for i in 0..N-1. (test user prompt)"
ANSWER = {"code": "for (int i = 0; i < N; ++i) _out[i] = 2 * _in0[i];", "notes": "scalar loop"}
#: A key value that must never appear in a recorded request.
SECRET = "sk-test-never-recorded-0123456789"


def answer_text(**overrides: Any) -> str:
    return json.dumps({**ANSWER, **overrides})


def make_request(**overrides: Any) -> ProviderRequest:
    values: dict[str, Any] = {
        "system": SYSTEM,
        "messages": (Message("user", USER),),
        "schema": answer_json_schema(),
        "model": None,
        "max_tokens": 2048,
        "timeout": 10.0,
        "max_retries": 1,
    }
    values.update(overrides)
    return ProviderRequest(**values)


# ------------------------------------------------------------- a real program
#: What a model would answer for :func:`double_program`'s node.
DOUBLE_CODE = "for (int i = 0; i < N; ++i) _out[i] = 2.0 * _in0[i];"
DOUBLE_DESCRIPTION = "Write _out[i] = 2 * _in0[i] for every i < N."


N = dace.symbol("N")


def double_program() -> Any:
    """A fresh ``@dace.program`` (its own parse and expansion) with one ``dace_ai.ai`` node.

    (This module has no ``from __future__ import annotations``: DaCe reads the annotations.)
    """

    @dace.program
    def double_it(A: dace.float64[N]):
        return dace_ai.ai(DOUBLE_DESCRIPTION, A, name="double_it")

    return double_it


def expected_request(program: Any, settings: AISettings) -> ProviderRequest:
    """The request the expansion sends for ``program``'s only AI node, rebuilt from a fresh SDFG."""
    from dace_ai.expansion.expansion_pass import expansion_pass, node_context
    from dace_ai.expansion.pending import pending_nodes
    from dace_ai.solving.requests import build_request

    sdfg = program.to_sdfg()
    with expansion_pass():
        [(nsdfg, state, node)] = pending_nodes(sdfg)
        return build_request(node_context(nsdfg, state, node, settings), settings)


def use_provider(monkeypatch: Any, provider: str, base_url: str, **settings: Any) -> None:
    """Choose the provider and its endpoint the way users do: DACE_ai_* environment variables."""
    values = {
        "provider": provider,
        "base_url": base_url,
        "compile_check": "0",
        "max_retries": "1",
        "timeout": "30",
        **{k: str(v) for k, v in settings.items()},
    }
    for key, value in values.items():
        monkeypatch.setenv(f"DACE_ai_{key}", value)


def full_expansion_round_trip(
    server: Any, monkeypatch: Any, provider: str, base_url: str, model: str, max_tokens: int = 3000
) -> tuple[Any, ProviderRequest]:
    """Run :func:`double_program` (DaCe compiles and runs it) with the answer coming from ``server``.

    Then stop the server and run a fresh copy of the program: it must be answered from the
    cache. Returns the recorded HTTP request and the request the expansion built.
    """
    import numpy as np
    from dace_ai.config.settings import resolve_settings
    from dace_ai.storage.cache import AnswerCache

    from tests.fakes.llm_server import Reply

    use_provider(monkeypatch, provider, base_url, model=model, max_tokens=max_tokens)
    server.push(
        Reply(text=json.dumps({"code": DOUBLE_CODE, "notes": "scalar loop"}), input_tokens=900, output_tokens=40)
    )
    A = np.arange(37, dtype=np.float64)
    np.testing.assert_allclose(double_program()(A), 2 * A)
    assert len(server.requests) == 1, [r.path for r in server.requests]
    recorded = server.requests[0]
    expected = expected_request(double_program(), resolve_settings())
    text = recorded.text()
    assert expected.system in text, "the system prompt did not reach the server"
    assert expected.messages[0].content in text, "the rendered prompt did not reach the server"
    assert expected.max_tokens == max_tokens and recorded.max_tokens == max_tokens
    assert recorded.schema is not None and "code" in recorded.schema["properties"]

    server.stop()  # from now on any request would fail
    # The first program's library is still loaded, so DaCe compiles this copy under another
    # SDFG name (``double_it_0``): the prompt, and so the cache key, must not depend on it.
    B = np.random.rand(19)
    np.testing.assert_allclose(double_program()(B), 2 * B)
    entries = list(AnswerCache().folder.rglob("*.json"))
    assert len(entries) == 1 and json.loads(entries[0].read_text())["provider"] == provider
    assert_no_secret_on_disk()
    return recorded, expected


def assert_no_secret_on_disk() -> None:
    """No file dace-ai wrote (cache, sessions, checks, prompts) contains the API key."""
    from dace_ai.storage.files import build_root

    files = [p for p in build_root().rglob("*") if p.is_file()]
    assert any("ai-sessions" in str(p) for p in files) and any("ai-cache" in str(p) for p in files)
    leaked = [str(p) for p in files if SECRET.encode() in p.read_bytes()]
    assert leaked == [], f"API key written to {leaked}"
