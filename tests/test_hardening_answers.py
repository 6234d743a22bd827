"""Hostile and careless answers: nesting, control characters, oversized replies, bad response files,
answers that fail their checks in a manual exchange, generate() without a provider."""

import json
import warnings

import dace
import dace_ai
import pytest
from dace_ai.errors import AnswerError
from dace_ai.expansion.exchange import ExchangeWarning
from dace_ai.prompt.answer import Answer, max_answer_chars, parse_answer
from dace_ai.testing import FakeProvider
from dace_ai.workflows.generate import GenerateWarning

from tests.inc_program import BROKEN, GOOD, inc_sdfg


def _sdfg(name="hardened"):
    return inc_sdfg(name)


# ------------------------------------------------------------------ the parser
def test_deeply_nested_json_is_a_clear_answer_error_not_a_recursion_error():
    text = '{"code": "x;", "notes": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(AnswerError, match=r"nested 100001 levels deep"):
        parse_answer(text, origin="provider 'x'")
    fenced = "```json\n" + "[" * 5000 + "]" * 5000 + "\n```"
    with pytest.raises(AnswerError, match="nested"):
        parse_answer(fenced)


@pytest.mark.parametrize("char", ["\x00", "\x01", "\x1b", "\x7f", "\x85"])
def test_control_characters_in_code_are_refused(char):
    with pytest.raises(AnswerError, match=rf"field 'code': contains the control character U\+{ord(char):04X}"):
        parse_answer(json.dumps({"code": f"int a = 1;{char}"}))
    with pytest.raises(AnswerError, match=r"field 'environments\.0\.headers\.0'"):
        parse_answer(json.dumps({"code": "x;", "environments": [{"name": "e", "headers": [f"a{char}.h"]}]}))
    with pytest.raises(ValueError, match="control character"):
        Answer(code=f"x;{char}")


def test_tab_newline_and_carriage_return_are_fine():
    answer = parse_answer(json.dumps({"code": "int a;\r\n\tint b;\n"}))
    assert answer.code == "int a;\r\n\tint b;\n"


def test_unpaired_surrogates_are_refused():
    with pytest.raises(AnswerError, match="unpaired surrogate U\\+D800"):
        parse_answer('{"code": "x;", "notes": "\\ud800"}')


def test_oversized_reply_is_refused_before_parsing():
    limit = max_answer_chars(100)
    huge = json.dumps({"code": "x;", "notes": "n" * limit})
    with pytest.raises(AnswerError, match=r"more than max_tokens=100 allows"):
        parse_answer(huge, origin="provider 'fake'", max_tokens=100)
    assert parse_answer(huge).notes  # without a limit it is just a long answer


def test_oversized_reply_from_a_provider_is_refused_and_never_resent(register_dace_ai_plugin):
    fake = FakeProvider()
    register_dace_ai_plugin(fake.plugin("scripted"), "scripted-provider")
    huge = json.dumps({**BROKEN, "notes": "n" * max_answer_chars(50)})
    fake.queue(huge, json.dumps(GOOD))
    sdfg, state, node = _sdfg()
    with pytest.raises(AnswerError, match="max_tokens=50"):
        dace_ai.expand(sdfg, state, node, {"provider": "scripted", "max_tokens": 50})
    assert len(fake.requests) == 1, "an oversized reply must not start a repair round"
    assert node in state.nodes(), "the SDFG is left as it was"


# ------------------------------------------------------------ response files
@pytest.fixture
def manual(tmp_path):
    dace.Config.set("ai", "provider", value="manual")
    yield tmp_path / "prompts"
    dace.Config.set("ai", "provider", value="")


@pytest.mark.parametrize(
    "content, message",
    [
        (b"\xff\xfe\x00garbage", r"not UTF-8 text \(byte 0xff at offset 0\)"),
        (b'{"code": "a;\\u0000"}', r"field 'code': contains the control character U\+0000"),
        (b"[" * 3000 + b"]" * 3000, "nested 3000 levels deep"),
        (b"", "the answer is empty"),
    ],
)
def test_any_bytes_in_a_response_file_end_in_an_answer_error_naming_the_file(manual, content, message):
    sdfg, state, node = _sdfg("files")
    [files] = dace_ai.generate_prompts(sdfg, manual)
    files.response.write_bytes(content)
    with pytest.raises(AnswerError, match=message) as info:
        dace_ai.read_prompt_responses(sdfg, manual)
    assert str(files.response) in str(info.value)
    assert node in state.nodes()


def test_oversized_response_file_is_refused_unread(manual):
    dace.Config.set("ai", "max_tokens", value=10)
    try:
        sdfg, _, _ = _sdfg("big_file")
        [files] = dace_ai.generate_prompts(sdfg, manual)
        files.response.write_text(json.dumps({**GOOD, "notes": "n" * (max_answer_chars(10) * 4)}))
        with pytest.raises(AnswerError, match=r"bytes, more than max_tokens=10 allows"):
            dace_ai.read_prompt_responses(sdfg, manual)
    finally:
        dace.Config.set("ai", "max_tokens", value=16000)


def test_failed_answer_is_reported_with_check_first_error_and_repair_prompt(manual):
    sdfg, _, _ = _sdfg("exchange_fails")
    [files] = dace_ai.generate_prompts(sdfg, manual)
    files.response.write_text(json.dumps(BROKEN))
    with pytest.warns(ExchangeWarning, match="failed their checks"):
        report = dace_ai.read_prompt_responses(sdfg, manual)
    assert report.expanded == [] and report.missing == []
    [failed] = report.failed
    assert failed.node == "inc" and "probe" in failed.checks
    assert "undefined_thing" in failed.first_error and "error" in failed.first_error
    assert failed.prompt.is_file() and failed.prompt != files.prompt
    assert "undefined_thing" in failed.prompt.read_text(), "the repair prompt shows the diagnostics"
    text = str(report)
    assert (
        "failed check(s) " in text and "probe" in text and str(failed.prompt) in text and "missing answer" not in text
    )

    failed.response.write_text(json.dumps(GOOD))  # the repaired answer
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExchangeWarning)
        assert dace_ai.read_prompt_responses(sdfg, manual).expanded == ["inc"]


def test_generate_without_a_provider_warns_and_says_what_to_do(tmp_path):
    sdfg, _, _ = _sdfg("no_provider")
    with pytest.warns(GenerateWarning, match="No provider is configured") as record:
        summary = dace_ai.generate(sdfg)
    assert summary.failed == 1 and summary.provider == "manual"
    assert "inc" in str(record[0].message)
