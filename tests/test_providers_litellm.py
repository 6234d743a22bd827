"""The litellm provider through the real ``litellm`` package against FakeLLMServer on 127.0.0.1.

LiteLLM's OpenAI-compatible route (``openai/<model>`` with ``api_base``) speaks Chat
Completions to the fake. ``LITELLM_LOCAL_MODEL_COST_MAP`` keeps LiteLLM from
downloading its price table.
"""

from __future__ import annotations

import json
import sys

import pytest
from dace_ai.config.settings import resolve_settings
from dace_ai.errors import ProviderError
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.prompt.answer import parse_answer
from dace_ai.providers.select import make_client

from tests.fakes.llm_server import (
    FakeLLMServer,
    Fault,
    Reply,
    fake_llm_server_fixture,  # noqa: F401 - the fake_llm_server fixture
)
from tests.provider_cases import ANSWER, SECRET, SYSTEM, USER, answer_text, make_request

PRICED_MODEL = "openai/gpt-5.5"  # in LiteLLM's price table, takes a response schema
LOCAL_MODEL = "openai/local-coder-7b"  # unknown to LiteLLM: JSON-only instruction, no price


@pytest.fixture
def litellm_env(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _client(server: FakeLLMServer, **settings):
    values = {
        "provider": "litellm",
        "model": PRICED_MODEL,
        "base_url": server.openai_url,
        "max_retries": 1,
        "timeout": 10,
    }
    values.update(settings)
    return make_client(get_plugin_manager().get("providers", "litellm"), resolve_settings(values))


def _request(server: FakeLLMServer, **overrides):
    overrides.setdefault("model", PRICED_MODEL)
    return make_request(base_url=server.openai_url, **overrides)


def test_response_schema_usage_and_cost(fake_llm_server, litellm_env):
    client = _client(fake_llm_server)
    fake_llm_server.push(Reply(text=answer_text(), input_tokens=1000, output_tokens=200))
    reply = client.complete(_request(fake_llm_server, effort="high"))

    assert parse_answer(reply.text).code == ANSWER["code"]
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (1000, 200)
    assert reply.usage.cost_usd is not None and reply.usage.cost_usd > 0
    [recorded] = fake_llm_server.requests
    assert recorded.path == "/v1/chat/completions"
    body = recorded.body
    assert body["model"] == "gpt-5.5"
    assert recorded.max_tokens == 2048
    assert body["messages"][0]["role"] in ("system", "developer") and body["messages"][0]["content"] == SYSTEM
    assert body["messages"][-1] == {"role": "user", "content": USER}
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False
    assert "code_global" in fmt["json_schema"]["schema"]["required"]
    assert all(SECRET not in value for value in recorded.headers.values())


def test_json_only_instruction_for_models_without_schema_support(fake_llm_server, litellm_env):
    client = _client(fake_llm_server, model=LOCAL_MODEL)
    fake_llm_server.push(Reply(text=answer_text()))
    reply = client.complete(_request(fake_llm_server, model=LOCAL_MODEL))
    assert parse_answer(reply.text).code == ANSWER["code"]
    assert reply.usage.cost_usd is None  # not in LiteLLM's price table
    body = fake_llm_server.requests[0].body
    assert "response_format" not in body
    system = body["messages"][0]["content"]
    assert system.startswith(SYSTEM) and "Respond with exactly one JSON object" in system
    assert '"code_global"' in system  # the schema itself is in the prompt


def test_429_then_success(fake_llm_server, litellm_env):
    client = _client(fake_llm_server)
    fake_llm_server.push(Fault(429, headers={"retry-after-ms": "10"}), Reply(text=answer_text()))
    reply = client.complete(_request(fake_llm_server))
    assert parse_answer(reply.text).code == ANSWER["code"] and len(fake_llm_server.requests) == 2


def test_repeated_500(fake_llm_server, litellm_env):
    client = _client(fake_llm_server)
    fake_llm_server.respond_with(lambda r: Fault(500, message="gateway down", headers={"retry-after-ms": "5"}))
    with pytest.raises(ProviderError, match=r"provider 'litellm'.*HTTP 500.*gateway down.*after 1 retry"):
        client.complete(_request(fake_llm_server))
    assert len(fake_llm_server.requests) == 2


def test_reply_slower_than_timeout(fake_llm_server, litellm_env):
    client = _client(fake_llm_server, timeout=0.5, max_retries=0)
    fake_llm_server.push(Reply(text=answer_text(), delay=5))
    with pytest.raises(ProviderError, match="no reply within timeout=0.5 s"):
        client.complete(_request(fake_llm_server, timeout=0.5, max_retries=0))


def test_malformed_body(fake_llm_server, litellm_env):
    client = _client(fake_llm_server, max_retries=0)
    fake_llm_server.push(Fault(malformed=True))
    with pytest.raises(ProviderError, match="provider 'litellm'"):
        client.complete(_request(fake_llm_server, max_retries=0))


def test_refusal(fake_llm_server, litellm_env):
    client = _client(fake_llm_server)
    fake_llm_server.push(Reply(stop="refusal", refusal="Not going to do that."))
    with pytest.raises(ProviderError, match="refused to answer: Not going to do that"):
        client.complete(_request(fake_llm_server))


def test_length_stop(fake_llm_server, litellm_env):
    client = _client(fake_llm_server)
    fake_llm_server.push(Reply(text='{"code": "x', stop="max_tokens"))
    with pytest.raises(ProviderError, match="cut off at max_tokens=2048"):
        client.complete(_request(fake_llm_server))


def test_missing_credentials_name_the_variable(litellm_env, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ProviderError, match="needs credentials: set OPENAI_API_KEY"):
        make_client(
            get_plugin_manager().get("providers", "litellm"),
            resolve_settings({"provider": "litellm", "model": PRICED_MODEL}),
        )


def test_missing_sdk_names_the_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "litellm", None)
    monkeypatch.delitem(sys.modules, "dace_ai_litellm.client", raising=False)
    with pytest.raises(ProviderError, match="pip install litellm"):
        make_client(get_plugin_manager().get("providers", "litellm"), resolve_settings({"provider": "litellm"}))


def test_recorded_schema_is_the_strict_answer_schema(fake_llm_server, litellm_env):
    from dace_ai.prompt.answer import answer_json_schema
    from dace_ai.providers.sdk import strict_json_schema

    client = _client(fake_llm_server)
    fake_llm_server.push(Reply(text=answer_text()))
    client.complete(_request(fake_llm_server))
    sent = fake_llm_server.requests[0].schema
    assert json.dumps(sent, sort_keys=True) == json.dumps(strict_json_schema(answer_json_schema()), sort_keys=True)


def test_full_expansion_of_a_real_program(fake_llm_server, litellm_env, monkeypatch):
    """Answer over HTTP through LiteLLM, DaCe compiles and runs it; the second run is a cache hit."""
    from tests.provider_cases import full_expansion_round_trip

    recorded, expected = full_expansion_round_trip(
        fake_llm_server, monkeypatch, "litellm", fake_llm_server.openai_url, model=PRICED_MODEL
    )
    assert recorded.path == "/v1/chat/completions" and recorded.model == "gpt-5.5"
    assert recorded.body["messages"][0]["content"] == expected.system
    assert recorded.body["messages"][1] == {"role": "user", "content": expected.messages[0].content}
    assert recorded.body["response_format"]["json_schema"]["strict"] is True
