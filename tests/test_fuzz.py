"""Property-based tests (Hypothesis): whatever the input, the answer parser, the response-file
reader, the settings loader and the cache readers end in a result or in their own clear error,
and the cache key is stable and tells distinct requests apart. Example counts stay modest so
the suite stays fast."""

import json
import string

import pytest
from dace_ai.errors import AnswerError, SettingsError
from dace_ai.prompt.answer import Answer, parse_answer
from dace_ai.providers.api import Message, ProviderRequest
from dace_ai.providers.manual import read_response_file
from dace_ai.storage.cache import BadEntry, cache_key, parse_entry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Compiled DaCe programs (-ffast-math) may have switched this process to flush subnormals to zero.
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_subnormal=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
answer_like = st.fixed_dictionaries(
    {"code": st.text(max_size=60)},
    optional={
        "notes": st.text(max_size=30),
        "code_global": st.text(max_size=30),
        "state_fields": st.lists(st.text(max_size=10), max_size=3),
        "language": st.sampled_from(["cpp", "cuda", "hip", "fortran"]),
        "extra": json_values,
    },
)


@FAST
@given(st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")))
def test_parser_accepts_or_refuses_any_text_with_an_answer_error(text):
    try:
        answer = parse_answer(text, origin="fuzz", max_tokens=100)
    except AnswerError as exc:
        assert str(exc).startswith("fuzz:")
    else:
        assert isinstance(answer, Answer) and answer.code.strip()


@FAST
@given(answer_like, st.sampled_from(["plain", "fenced", "prose"]))
def test_valid_answers_round_trip_and_invalid_ones_name_a_field(data, wrapping):
    text = json.dumps(data)
    text = {"plain": text, "fenced": f"```json\n{text}\n```", "prose": f"Here it is:\n```json\n{text}\n```\n"}[wrapping]
    try:
        answer = parse_answer(text, origin="fuzz")
    except AnswerError as exc:
        assert "field" in str(exc) or "nested" in str(exc)
    else:
        assert answer.code == data["code"]
        # A parsed answer holds only text that can be written as UTF-8 source.
        answer.model_dump_json().encode("utf-8")
        assert "\x00" not in answer.code


@FAST
@given(st.integers(min_value=1, max_value=200))
def test_any_nesting_depth_is_a_clear_error_never_a_recursion_error(depth):
    text = (
        json.dumps({"code": "x;", "notes": "n"})[:-1] + ', "environments": ' + "[" * depth * 50 + "]" * depth * 50 + "}"
    )
    with pytest.raises(AnswerError):
        parse_answer(text)


@FAST
@given(st.binary(max_size=400))
def test_response_file_reader_on_any_bytes(tmp_path, data):
    path = tmp_path / "node_0123456789ab_response.json"
    path.write_bytes(data)
    try:
        text = read_response_file(path, max_tokens=100)
        parse_answer(text, origin=f"response file {path}")
    except AnswerError as exc:
        assert str(path) in str(exc)


@FAST
@given(
    st.binary(max_size=300)
    | json_values.map(lambda v: json.dumps(v).encode())
    | st.dictionaries(
        st.sampled_from(["text", "provider", "usage", "model", "created", "key", "stop_reason"]),
        json_values,
        max_size=7,
    ).map(lambda d: json.dumps(d).encode())
)
def test_cache_entry_reader_on_any_bytes(data):
    try:
        entry = parse_entry("k" * 64, data)
    except BadEntry as exc:
        assert str(exc)
    else:
        assert isinstance(entry.record["text"], str) and isinstance(entry.provider, str)
        from dace_ai.providers.api import ProviderReply

        ProviderReply.from_record(entry.record)  # a record that parsed is a usable reply


setting_values = (
    st.text(alphabet=string.printable, max_size=12)
    | st.integers().map(str)
    | st.floats(allow_nan=True, allow_subnormal=False).map(str)
    | st.sampled_from(["", "none", "auto", "true", "off", "1", "-1", "0"])
)


@FAST
@given(
    st.sampled_from(
        [
            "max_tokens",
            "timeout",
            "max_retries",
            "max_concurrency",
            "cache",
            "effort",
            "compile_check",
            "provider",
            "target",
            "checkers",
            "model",
            "debug",
        ]
    ),
    setting_values,
)
def test_settings_loader_on_any_value(key, value):
    from dace_ai.config.settings import resolve_settings

    try:
        settings_ = resolve_settings(environ={f"DACE_ai_{key}": value})
    except SettingsError as exc:
        message = str(exc)
        assert f"'{key}'" in message and f"DACE_ai_{key}" in message
        assert "<class" not in message and "pydantic" not in message
    else:
        assert settings_.source(key) in ("default", f"environment variable DACE_ai_{key}")


@FAST
@given(st.text(alphabet=string.ascii_letters + string.digits + "_=\n", max_size=60))
def test_settings_file_of_any_content(tmp_path, content):
    from dace_ai.config.settings import resolve_settings

    folder = tmp_path / "fuzz-settings"
    folder.mkdir(exist_ok=True)
    (folder / "dace-ai.toml").write_text(content)
    try:
        resolve_settings(start_dir=folder, environ={})
    except SettingsError as exc:
        assert "dace-ai.toml" in str(exc) or "setting '" in str(exc)


requests = st.builds(
    lambda system, user, model, effort, tokens, url: ProviderRequest(
        system=system,
        messages=(Message("user", user),),
        schema={"type": "object"},
        model=model,
        effort=effort,
        max_tokens=tokens,
        base_url=url,
    ),
    st.text(max_size=20),
    st.text(max_size=20),
    st.none() | st.sampled_from(["m1", "m2"]),
    st.none() | st.sampled_from(["low", "high"]),
    st.integers(1, 5),
    st.none() | st.sampled_from(["http://a.example", "http://b.example"]),
)


def _material(request):
    return (
        request.system,
        request.messages,
        request.model or "",
        request.effort or "",
        request.max_tokens,
        request.base_url or "",
    )


@FAST
@given(requests, requests)
def test_cache_key_is_stable_and_collision_free_for_distinct_requests(a, b):
    assert cache_key("fuzz", a) == cache_key("fuzz", a)
    if _material(a) != _material(b):
        assert cache_key("fuzz", a) != cache_key("fuzz", b)
    else:
        assert cache_key("fuzz", a) == cache_key("fuzz", b)
    assert cache_key("fuzz", a) != cache_key("other", a)


@FAST
@given(st.lists(st.text(max_size=8), min_size=1, max_size=4), st.lists(st.text(max_size=8), min_size=1, max_size=4))
def test_cache_key_tells_conversations_apart_wherever_the_text_is_split(first, second):
    def request(parts):
        return ProviderRequest(system="s", messages=tuple(Message("user", p) for p in parts), schema={})

    if first != second:
        assert cache_key("fuzz", request(first)) != cache_key("fuzz", request(second))
