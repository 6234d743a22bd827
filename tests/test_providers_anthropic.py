"""The anthropic provider through the real ``anthropic`` SDK against FakeLLMServer on 127.0.0.1."""

from __future__ import annotations

import sys

import pytest
from dace_ai.config.settings import resolve_settings
from dace_ai.errors import ProviderError
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.prompt.answer import parse_answer
from dace_ai.providers.select import make_client, select_provider

from tests.fakes.llm_server import (
    FakeLLMServer,
    Fault,
    Reply,
    fake_llm_server_fixture,  # noqa: F401 - the fake_llm_server fixture
)
from tests.provider_cases import ANSWER, SECRET, SYSTEM, USER, answer_text, make_request


@pytest.fixture
def anthropic_env(monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    # No profile from the developer's home may leak in.
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "anthropic-config"))
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def _client(server: FakeLLMServer, **settings):
    values = {"provider": "anthropic", "base_url": server.url, "max_retries": 1, "timeout": 10}
    values.update(settings)
    resolved = resolve_settings(values)
    provider = get_plugin_manager().get("providers", "anthropic")
    return make_client(provider, resolved)


def test_answer_with_structured_output(fake_llm_server, anthropic_env):
    client = _client(fake_llm_server)
    fake_llm_server.push(Reply(text=answer_text(), input_tokens=321, output_tokens=45))
    reply = client.complete(make_request(base_url=fake_llm_server.url, model="claude-test-1"))

    assert parse_answer(reply.text).code == ANSWER["code"]
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (321, 45)
    assert reply.model == "claude-test-1" and reply.stop_reason == "end_turn"
    [recorded] = fake_llm_server.requests
    assert recorded.api == "anthropic" and recorded.path == "/v1/messages"
    body = recorded.body
    assert body["model"] == "claude-test-1" and body["max_tokens"] == 2048
    assert body["system"] == SYSTEM and body["messages"] == [{"role": "user", "content": USER}]
    fmt = body["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert set(fmt["schema"]["properties"]) >= {"code", "language", "code_global", "environments"}
    assert fmt["schema"]["additionalProperties"] is False and fmt["schema"]["required"] == ["code"]
    assert "thinking" not in body and "effort" not in body["output_config"]
    # The key travelled as a header but the fake never records it.
    assert all(SECRET not in value for value in recorded.headers.values())


def test_default_model_and_effort_mapping(fake_llm_server, anthropic_env):
    from dace_ai_anthropic.client import DEFAULT_MODEL

    client = _client(fake_llm_server, effort="high")
    fake_llm_server.push(Reply(text=answer_text()))
    reply = client.complete(make_request(base_url=fake_llm_server.url, effort="high"))
    body = fake_llm_server.requests[0].body
    assert body["model"] == DEFAULT_MODEL
    assert body["output_config"]["effort"] == "high" and body["thinking"] == {"type": "adaptive"}
    # The fake answers with a thinking block first; only the text block is the answer.
    assert parse_answer(reply.text).code == ANSWER["code"]


def test_tool_fallback_for_sdks_without_structured_outputs(fake_llm_server, anthropic_env):
    client = _client(fake_llm_server)
    client.mode = "tool"
    fake_llm_server.push(Reply(text=answer_text(notes="via tool")))
    reply = client.complete(make_request(base_url=fake_llm_server.url))
    body = fake_llm_server.requests[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "tasklet_answer"}
    assert body["tools"][0]["input_schema"]["properties"]["code"]["type"] == "string"
    assert "output_config" not in body
    assert parse_answer(reply.text).notes == "via tool" and reply.stop_reason == "tool_use"


@pytest.mark.parametrize("status", [429, 529])
def test_rate_limit_and_overload_are_retried(fake_llm_server, anthropic_env, status):
    client = _client(fake_llm_server, max_retries=2)
    fake_llm_server.push(Fault(status, headers={"retry-after-ms": "20"}), Reply(text=answer_text()))
    reply = client.complete(make_request(base_url=fake_llm_server.url, max_retries=2))
    assert parse_answer(reply.text).code == ANSWER["code"]
    assert len(fake_llm_server.requests) == 2
    assert fake_llm_server.requests[1].headers.get("x-stainless-retry-count") == "1"


def test_repeated_500_gives_clear_error_after_retry_budget(fake_llm_server, anthropic_env):
    client = _client(fake_llm_server, max_retries=2)
    fake_llm_server.respond_with(lambda request: Fault(500, message="backend on fire", headers={"retry-after-ms": "5"}))
    with pytest.raises(ProviderError) as info:
        client.complete(make_request(base_url=fake_llm_server.url, max_retries=2))
    message = str(info.value)
    assert "provider 'anthropic'" in message and "HTTP 500" in message and "backend on fire" in message
    assert "after 2 retries" in message and "max_retries" in message
    assert len(fake_llm_server.requests) == 3


def test_dropped_connection_is_retried(fake_llm_server, anthropic_env):
    client = _client(fake_llm_server)
    fake_llm_server.push(Fault(drop=True), Reply(text=answer_text()))
    reply = client.complete(make_request(base_url=fake_llm_server.url))
    assert parse_answer(reply.text).code == ANSWER["code"] and len(fake_llm_server.requests) == 2


def test_reply_slower_than_timeout(fake_llm_server, anthropic_env):
    client = _client(fake_llm_server, timeout=0.5, max_retries=0)
    fake_llm_server.push(Reply(text=answer_text(), delay=5))
    with pytest.raises(ProviderError) as info:
        client.complete(make_request(base_url=fake_llm_server.url, timeout=0.5, max_retries=0))
    assert "no reply within timeout=0.5 s" in str(info.value) and "DACE_ai_timeout" in str(info.value)


@pytest.mark.parametrize("body", [None, '{"unexpected": true}'], ids=["not-json", "wrong-shape"])
def test_malformed_body(fake_llm_server, anthropic_env, body):
    client = _client(fake_llm_server)
    fake_llm_server.push(Fault(malformed=True, body=body))
    with pytest.raises(ProviderError, match="not a valid"):
        client.complete(make_request(base_url=fake_llm_server.url))


def test_refusal_is_an_error(fake_llm_server, anthropic_env):
    client = _client(fake_llm_server)
    fake_llm_server.push(Reply(stop="refusal", refusal="This looks like malware."))
    with pytest.raises(ProviderError, match="refused to answer.*This looks like malware"):
        client.complete(make_request(base_url=fake_llm_server.url))


def test_max_tokens_stop_is_an_error(fake_llm_server, anthropic_env):
    client = _client(fake_llm_server)
    fake_llm_server.push(Reply(text='{"code": "for (int i', stop="max_tokens"))
    with pytest.raises(ProviderError, match="cut off at max_tokens=2048.*DACE_ai_max_tokens"):
        client.complete(make_request(base_url=fake_llm_server.url))


def test_bad_request_is_not_retried(fake_llm_server, anthropic_env):
    client = _client(fake_llm_server, max_retries=3)
    fake_llm_server.push(Fault(400, message="model: unknown model 'nope'"))
    with pytest.raises(ProviderError, match="HTTP 400.*unknown model 'nope'.*not retried"):
        client.complete(make_request(base_url=fake_llm_server.url, max_retries=3))
    assert len(fake_llm_server.requests) == 1


def test_rejected_key_names_the_variable(fake_llm_server, anthropic_env):
    client = _client(fake_llm_server)
    fake_llm_server.push(Fault(401, message="invalid x-api-key"))
    with pytest.raises(ProviderError, match="credentials were rejected.*ANTHROPIC_API_KEY"):
        client.complete(make_request(base_url=fake_llm_server.url))


def test_missing_key_names_the_variable(monkeypatch, tmp_path):
    # An empty home: no profile on disk for the SDK's own credential lookup to find.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    provider = get_plugin_manager().get("providers", "anthropic")
    with pytest.raises(ProviderError, match="needs an API key: set ANTHROPIC_API_KEY"):
        make_client(provider, resolve_settings({"provider": "anthropic"}))


def test_unreadable_profile_names_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "empty-config"))
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    provider = get_plugin_manager().get("providers", "anthropic")
    with pytest.raises(ProviderError, match="credentials could not be loaded.*set ANTHROPIC_API_KEY"):
        make_client(provider, resolve_settings({"provider": "anthropic"}))


def test_missing_sdk_names_the_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "anthropic", None)  # import anthropic -> ImportError
    monkeypatch.delitem(sys.modules, "dace_ai_anthropic.client", raising=False)
    provider = get_plugin_manager().get("providers", "anthropic")
    with pytest.raises(ProviderError, match="pip install anthropic"):
        make_client(provider, resolve_settings({"provider": "anthropic"}))


def test_default_when_installed_and_key_set(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    assert select_provider(resolve_settings()).name == "anthropic"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert select_provider(resolve_settings()).name == "openai"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert select_provider(resolve_settings()).name == "manual"


def test_full_expansion_of_a_real_program(fake_llm_server, anthropic_env, monkeypatch):
    """Answer over HTTP through the real SDK, DaCe compiles and runs it; the second run is a cache hit."""
    from tests.provider_cases import full_expansion_round_trip

    recorded, expected = full_expansion_round_trip(
        fake_llm_server, monkeypatch, "anthropic", fake_llm_server.url, model="claude-test-1"
    )
    assert recorded.path == "/v1/messages" and recorded.model == "claude-test-1"
    assert recorded.body["system"] == expected.system
    assert recorded.body["messages"] == [{"role": "user", "content": expected.messages[0].content}]
    assert recorded.body["output_config"]["format"]["type"] == "json_schema"
