"""No key on disk or in an error: full provider round trips with the key in the environment
and credentials in the base URL, through the real SDKs against the fake server."""

import json

import pytest
from dace_ai.errors import ProviderError, redact

from tests.fakes.llm_server import (
    Fault,
    fake_llm_server_fixture,  # noqa: F401 - the fake_llm_server fixture
)
from tests.provider_cases import SECRET, double_program, full_expansion_round_trip, use_provider

#: A credential embedded in the base URL (gateways that take basic auth).
URL_SECRET = "url-pass-never-recorded-9876"


def _with_credentials(url: str) -> str:
    return url.replace("http://", f"http://gateway-user:{URL_SECRET}@", 1)


def _scan(root) -> list[str]:
    files = [p for p in root.rglob("*") if p.is_file()]
    assert files
    return [str(p) for p in files if SECRET.encode() in p.read_bytes() or URL_SECRET.encode() in p.read_bytes()]


@pytest.mark.parametrize("provider, key_var", [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")])
def test_round_trip_with_key_in_environment_and_url_writes_neither(
    fake_llm_server, monkeypatch, tmp_path, _isolated_dace_ai, provider, key_var
):
    monkeypatch.setenv(key_var, SECRET)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "anthropic-config"))
    base = fake_llm_server.url if provider == "anthropic" else fake_llm_server.openai_url
    full_expansion_round_trip(fake_llm_server, monkeypatch, provider, _with_credentials(base), "model-x")
    assert _scan(_isolated_dace_ai) == []
    records = list(_isolated_dace_ai.glob("ai-sessions/*/round-*/request.json"))
    assert records
    for request_json in records:
        recorded = json.loads(request_json.read_text())["base_url"]
        assert recorded.startswith("http://***@127.0.0.1:"), recorded


def test_errors_and_logs_of_a_failing_request_carry_no_credentials(
    fake_llm_server, monkeypatch, tmp_path, _isolated_dace_ai
):
    import numpy as np

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    use_provider(monkeypatch, "openai", _with_credentials(fake_llm_server.openai_url), max_retries=0)
    fake_llm_server.push(Fault(status=401, message=f"bad key {SECRET} for {URL_SECRET}"))
    with pytest.raises(ProviderError) as info:
        double_program()(np.ones(5))
    text = str(info.value) + "".join(getattr(info.value, "__notes__", []))
    assert "credentials were rejected" in text
    assert SECRET not in text and URL_SECRET not in text
    assert _scan(_isolated_dace_ai) == [], "errors.log and the session hold no credentials"
    assert (_isolated_dace_ai / "ai-sessions" / "errors.log").is_file()


def test_config_command_shows_no_url_credentials(monkeypatch, capsys):
    from dace_ai.cli.main import main

    monkeypatch.setenv("DACE_ai_base_url", f"https://user:{URL_SECRET}@gateway.example/v1")
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert URL_SECRET not in out and "https://***@gateway.example/v1" in out


@pytest.mark.parametrize(
    "text, hidden",
    [
        ("https://u:p4ssw0rd-long@h/v1", "p4ssw0rd-long"),
        ("GET /v1?api_key=abcdef123456&x=1", "abcdef123456"),
        ("Authorization: Bearer sk-abcdefghijkl", "sk-abcdefghijkl"),
        ('{"x-api-key": "sk-zzzzzzzzzzzz"}', "sk-zzzzzzzzzzzz"),
    ],
)
def test_redact_hides_urls_query_keys_and_headers(text, hidden):
    assert hidden not in redact(text) and "***" in redact(text)


def test_redact_hides_values_of_key_variables(monkeypatch):
    monkeypatch.setenv("SOME_SERVICE_API_KEY", "value-of-a-key-123")
    assert redact("failed with value-of-a-key-123 in it") == "failed with *** in it"
