"""The openai provider through the real ``openai`` SDK against FakeLLMServer on 127.0.0.1."""

from __future__ import annotations

import json
import sys

import pytest
from dace_ai.config.settings import resolve_settings
from dace_ai.errors import ProviderError, SettingsError
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


@pytest.fixture
def openai_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    for name in ("OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)


def _client(server: FakeLLMServer, **settings):
    values = {"provider": "openai", "base_url": server.openai_url, "max_retries": 1, "timeout": 10}
    values.update(settings)
    return make_client(get_plugin_manager().get("providers", "openai"), resolve_settings(values))


def _request(server: FakeLLMServer, **overrides):
    return make_request(base_url=server.openai_url, **overrides)


def _assert_strict(schema: dict) -> None:
    """Strict mode: every object closed and listing all of its properties as required, no defaults."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            assert "default" not in node
            if node.get("type") == "object":
                assert node["additionalProperties"] is False
                assert node["required"] == list(node["properties"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def test_responses_api_with_strict_schema(fake_llm_server, openai_env):
    client = _client(fake_llm_server, effort="medium")
    fake_llm_server.push(Reply(text=answer_text(), input_tokens=500, output_tokens=60))
    reply = client.complete(_request(fake_llm_server, model="gpt-test", effort="medium"))

    assert parse_answer(reply.text).code == ANSWER["code"]
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (500, 60)
    assert reply.stop_reason == "completed" and reply.model == "gpt-test"
    [recorded] = fake_llm_server.requests
    assert recorded.path == "/v1/responses"
    body = recorded.body
    assert body["model"] == "gpt-test" and body["max_output_tokens"] == 2048
    assert body["instructions"] == SYSTEM and body["input"] == [{"role": "user", "content": USER}]
    assert body["reasoning"] == {"effort": "medium"} and body["store"] is False
    fmt = body["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["strict"] is True and fmt["name"] == "tasklet_answer"
    assert "code_global" in fmt["schema"]["required"] and "$defs" in fmt["schema"]
    _assert_strict(fmt["schema"])
    assert all(SECRET not in value for value in recorded.headers.values())


def test_strict_answer_with_every_field_parses(fake_llm_server, openai_env):
    """A strict-mode model fills every field, optional ones with empty values: still a valid answer."""
    client = _client(fake_llm_server)
    full = answer_text(
        language="cpp",
        code_global="",
        code_init="",
        code_exit="",
        state_fields=[],
        side_effects=False,
        ignored_symbols=[],
        use_environments=[],
        environments=[],
        notes="",
    )
    fake_llm_server.push(Reply(text=full))
    assert parse_answer(client.complete(_request(fake_llm_server)).text).language == "cpp"


def test_chat_completions_for_compatible_servers(fake_llm_server, openai_env, monkeypatch):
    monkeypatch.setenv("DACE_ai_openai_api", "chat")
    client = _client(fake_llm_server, effort="low")
    fake_llm_server.push(Reply(text=answer_text(), input_tokens=70, output_tokens=8))
    reply = client.complete(_request(fake_llm_server, model="qwen2.5-coder", effort="low"))
    assert parse_answer(reply.text).code == ANSWER["code"]
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (70, 8)
    body = fake_llm_server.requests[0].body
    assert fake_llm_server.requests[0].path == "/v1/chat/completions"
    assert body["messages"][0] == {"role": "system", "content": SYSTEM}
    assert body["max_completion_tokens"] == 2048 and body["reasoning_effort"] == "low"
    assert body["response_format"]["json_schema"]["strict"] is True
    _assert_strict(body["response_format"]["json_schema"]["schema"])


def test_unknown_api_choice_is_rejected(openai_env, monkeypatch):
    monkeypatch.setenv("DACE_ai_openai_api", "completions")
    with pytest.raises(
        SettingsError,
        match=r"setting 'openai_api' = 'completions' from environment variable "
        r"DACE_ai_openai_api is not allowed \(allowed: 'responses', 'chat'\)",
    ):
        resolve_settings({"provider": "openai"})


def test_api_choice_is_a_plugin_setting_from_toml(fake_llm_server, openai_env, tmp_path, monkeypatch):
    """``openai_api`` is owned by the openai plugin yet read from ``[tool.dace-ai]`` like a core setting."""
    (tmp_path / "pyproject.toml").write_text('[tool.dace-ai]\nopenai_api = "chat"\n')
    settings = resolve_settings({"provider": "openai", "base_url": fake_llm_server.openai_url}, start_dir=tmp_path)
    assert settings.openai_api == "chat" and settings.source("openai_api").endswith("[tool.dace-ai]")
    client = make_client(get_plugin_manager().get("providers", "openai"), settings)
    fake_llm_server.push(Reply(text=answer_text()))
    client.complete(_request(fake_llm_server))
    assert fake_llm_server.requests[0].path == "/v1/chat/completions"


def test_429_then_success(fake_llm_server, openai_env):
    client = _client(fake_llm_server)
    fake_llm_server.push(Fault(429, message="slow down", headers={"retry-after": "0.01"}), Reply(text=answer_text()))
    reply = client.complete(_request(fake_llm_server))
    assert parse_answer(reply.text).code == ANSWER["code"] and len(fake_llm_server.requests) == 2


def test_repeated_500(fake_llm_server, openai_env):
    client = _client(fake_llm_server)
    fake_llm_server.respond_with(lambda r: Fault(500, message="upstream exploded", headers={"retry-after-ms": "5"}))
    with pytest.raises(ProviderError, match=r"provider 'openai'.*HTTP 500.*upstream exploded.*after 1 retry"):
        client.complete(_request(fake_llm_server))
    assert len(fake_llm_server.requests) == 2


def test_reply_slower_than_timeout(fake_llm_server, openai_env):
    client = _client(fake_llm_server, timeout=0.5, max_retries=0)
    fake_llm_server.push(Reply(text=answer_text(), delay=5))
    with pytest.raises(ProviderError, match=r"no reply within timeout=0.5 s with retries off"):
        client.complete(_request(fake_llm_server, timeout=0.5, max_retries=0))


def test_malformed_body(fake_llm_server, openai_env):
    client = _client(fake_llm_server)
    fake_llm_server.push(Fault(malformed=True))
    with pytest.raises(ProviderError, match="not a valid API response"):
        client.complete(_request(fake_llm_server))


def test_refusal(fake_llm_server, openai_env):
    client = _client(fake_llm_server)
    fake_llm_server.push(Reply(stop="refusal", refusal="I cannot write that code."))
    with pytest.raises(ProviderError, match="refused to answer: I cannot write that code"):
        client.complete(_request(fake_llm_server))


def test_incomplete_at_token_limit(fake_llm_server, openai_env):
    client = _client(fake_llm_server)
    fake_llm_server.push(Reply(text='{"code": "x', stop="max_tokens"))
    with pytest.raises(ProviderError, match="cut off at max_tokens=2048"):
        client.complete(_request(fake_llm_server))


def test_missing_key_names_the_variable():
    provider = get_plugin_manager().get("providers", "openai")
    with pytest.raises(ProviderError, match="needs an API key: set OPENAI_API_KEY"):
        make_client(provider, resolve_settings({"provider": "openai"}))


def test_compatible_server_without_key(fake_llm_server):
    """A local compatible server needs no key: with a base_url the placeholder is sent."""
    client = _client(fake_llm_server)
    fake_llm_server.push(Reply(text=answer_text()))
    assert parse_answer(client.complete(_request(fake_llm_server)).text).code == ANSWER["code"]


def test_missing_sdk_names_the_pip_install(monkeypatch, openai_env):
    monkeypatch.setitem(sys.modules, "openai", None)
    monkeypatch.delitem(sys.modules, "dace_ai_openai.client", raising=False)
    with pytest.raises(ProviderError, match="pip install openai"):
        make_client(get_plugin_manager().get("providers", "openai"), resolve_settings({"provider": "openai"}))


def test_full_expansion_of_a_real_program(fake_llm_server, openai_env, monkeypatch):
    """Answer over HTTP through the real SDK, DaCe compiles and runs it; the second run is a cache hit."""
    from tests.provider_cases import full_expansion_round_trip

    recorded, expected = full_expansion_round_trip(
        fake_llm_server, monkeypatch, "openai", fake_llm_server.openai_url, model="gpt-test"
    )
    assert recorded.path == "/v1/responses" and recorded.model == "gpt-test"
    assert recorded.body["instructions"] == expected.system
    assert recorded.body["input"] == [{"role": "user", "content": expected.messages[0].content}]
    assert recorded.body["text"]["format"]["strict"] is True
    _assert_strict(recorded.schema)


def test_strict_schema_transformation_leaves_the_answer_schema_alone():
    from dace_ai.prompt.answer import answer_json_schema
    from dace_ai.providers.sdk import strict_json_schema

    original = answer_json_schema()
    before = json.dumps(original, sort_keys=True)
    strict = strict_json_schema(original)
    assert json.dumps(original, sort_keys=True) == before
    _assert_strict(strict)
    env = strict["$defs"]["EnvironmentRequest"]
    assert env["required"] == list(env["properties"]) and "generator" in env["required"]
    assert strict["properties"]["environments"]["items"] == {"$ref": "#/$defs/EnvironmentRequest"}
    with pytest.raises(TypeError, match="expected a JSON schema object"):
        strict_json_schema("not a schema")  # type: ignore[arg-type]
