"""The cache and the sessions under faults: corrupted entries, folders that cannot be written
(also as root), keys that cover defaults and the whole node, and the ``dace-ai cache`` command."""

import copy
import json
import os
import time
from typing import ClassVar

import dace
import dace_ai
import pytest
from dace import properties
from dace.sdfg import nodes as dnodes
from dace_ai.cli.main import main
from dace_ai.plugins.registrations import Provider
from dace_ai.providers.api import Message, ProviderRequest
from dace_ai.storage.cache import AnswerCache, CacheWarning, cache_key
from dace_ai.storage.session_store import SessionWarning, open_session

from tests.inc_program import GOOD, inc_sdfg


def _sdfg(name="stored"):
    return inc_sdfg(name)


SETTINGS = {"provider": "scripted", "compile_check": False}


def _expand(name="stored"):
    sdfg, state, node = _sdfg(name)
    tasklet = dace_ai.expand(sdfg, state, node, SETTINGS)
    return tasklet, state


# ------------------------------------------------------------ corrupted entries
@pytest.mark.parametrize(
    "content",
    [
        b"\x00\xff garbage \xfe",
        b'{"text": "trunc',
        b"[1, 2, 3]",
        b'{"provider": "scripted"}',
        b'{"text": 42, "provider": "scripted"}',
        b'{"text": "{}", "provider": "scripted", "usage": "lots"}',
        b'{"text": "{}", "provider": "scripted", "usage": {"tokens": 3}}',
        b'{"text": "{}", "provider": ["scripted"]}',
        b'{"text": "{}", "provider": "scripted", "key": "0000"}',
    ],
    ids=[
        "garbage",
        "truncated",
        "list",
        "no-text",
        "text-int",
        "usage-str",
        "usage-keys",
        "provider-list",
        "other-key",
    ],
)
def test_corrupted_entry_is_moved_aside_with_a_warning_and_the_node_asked_again(fake, content):
    fake.queue(json.dumps(GOOD), json.dumps(GOOD))
    _expand()
    [entry] = AnswerCache().folder.glob("??/*.json")
    entry.write_bytes(content)
    with pytest.warns(CacheWarning, match=str(entry).replace(".", r"\.")) as record:
        tasklet, state = _expand()
    message = str(next(w.message for w in record if issubclass(w.category, CacheWarning)))
    assert "is not a valid entry" in message and "asked again" in message
    assert len(fake.requests) == 2, "the node was asked again"
    assert tasklet in state.nodes()
    [quarantined] = (AnswerCache().folder / "quarantine").iterdir()
    assert quarantined.read_bytes() == content, "the bad entry is kept for inspection"
    assert json.loads(entry.read_text())["text"] == json.dumps(GOOD), "a good entry replaced it"


# ------------------------------------------------------ folders that cannot be written
def test_cache_folder_that_cannot_be_written_is_a_warning_and_the_answer_is_used(fake, _isolated_dace_ai):
    # A file where the folder should be: refused even to root (chmod would not stop root).
    _isolated_dace_ai.mkdir(parents=True, exist_ok=True)
    (_isolated_dace_ai / "ai-cache").write_text("not a folder")
    fake.queue(json.dumps(GOOD))
    with pytest.warns(CacheWarning, match="cannot write the entry .* the answer is used but not cached"):
        tasklet, state = _expand()
    assert tasklet in state.nodes() and len(fake.requests) == 1


def test_session_folder_that_cannot_be_written_is_a_warning_and_the_answer_is_used(fake, _isolated_dace_ai):
    _isolated_dace_ai.mkdir(parents=True, exist_ok=True)
    (_isolated_dace_ai / "ai-sessions").write_text("not a folder")
    fake.queue(json.dumps(GOOD))
    with pytest.warns(SessionWarning, match="cannot record the round"):
        tasklet, state = _expand()
    assert tasklet in state.nodes()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits (the file cases above cover root)")
def test_read_only_cache_folder_for_ordinary_users(fake, _isolated_dace_ai):
    folder = _isolated_dace_ai / "ai-cache"
    folder.mkdir(parents=True)
    folder.chmod(0o500)
    try:
        fake.queue(json.dumps(GOOD))
        with pytest.warns(CacheWarning):
            tasklet, state = _expand()
        assert tasklet in state.nodes()
    finally:
        folder.chmod(0o700)


@pytest.mark.parametrize(
    "content", [b"\xff", b"[]", b'{"rounds": 5}', b'{"rounds": [{"status": "x"}]}', b'{"rounds": [], "node": "n"}']
)
def test_session_json_of_any_shape_is_moved_aside_and_recording_goes_on(fake, content):
    fake.queue(json.dumps(GOOD), json.dumps(GOOD))
    sdfg, state, node = _sdfg()
    again = copy.deepcopy(sdfg)  # the same node (its guid names the session), expanded a second time
    dace_ai.expand(sdfg, state, node, SETTINGS)
    [summary] = (AnswerCache().folder.parent / "ai-sessions").glob("*/session.json")
    summary.write_bytes(content)
    for entry in AnswerCache().folder.glob("??/*.json"):
        entry.unlink()  # ask again, so a round is recorded
    with pytest.warns(SessionWarning, match=str(summary).replace(".", r"\.")):
        [(state, node)] = [(s, n) for n, s in again.all_nodes_recursive() if isinstance(n, dnodes.LibraryNode)]
        dace_ai.expand(again, state, node, SETTINGS)
    assert json.loads(summary.read_text())["rounds"][0]["number"] == 1
    assert [p.name.startswith("session.json.bad-") for p in summary.parent.glob("session.json.bad-*")] == [True]


# ----------------------------------------------------------------- the cache key
def _request(**overrides):
    values = {"system": "s", "messages": (Message("user", "u"),), "schema": {"type": "object"}}
    values.update(overrides)
    return ProviderRequest(**values)


def test_key_covers_the_providers_default_model_and_endpoint(monkeypatch):
    old = Provider(
        name="keyed",
        factory=lambda s: None,
        default_model="model-1",
        default_base_url="https://api.example",
        base_url_env=("KEYED_BASE_URL",),
    )
    new_model = Provider(
        name="keyed",
        factory=lambda s: None,
        default_model="model-2",
        default_base_url="https://api.example",
        base_url_env=("KEYED_BASE_URL",),
    )
    new_url = Provider(
        name="keyed",
        factory=lambda s: None,
        default_model="model-1",
        default_base_url="https://api2.example",
        base_url_env=("KEYED_BASE_URL",),
    )
    request = _request()
    key = cache_key("keyed", request, old)
    assert cache_key("keyed", request, new_model) != key, "a new default model must not replay old answers"
    assert cache_key("keyed", request, new_url) != key, "a new default endpoint must not replay old answers"
    assert cache_key("keyed", _request(model="model-1", base_url="https://api.example"), old) == key
    monkeypatch.setenv("KEYED_BASE_URL", "https://gateway.example")
    assert cache_key("keyed", request, old) != key, "the SDK's base URL variable changes the endpoint"


def test_shipped_providers_declare_the_defaults_their_clients_use():
    from dace_ai.plugins.manager import get_plugin_manager
    from dace_ai_anthropic import client as anthropic_client
    from dace_ai_litellm import client as litellm_client
    from dace_ai_openai import client as openai_client

    providers = get_plugin_manager().providers()
    for name, module in (("anthropic", anthropic_client), ("openai", openai_client), ("litellm", litellm_client)):
        assert providers[name].default_model == module.DEFAULT_MODEL
    assert providers["anthropic"].base_url_env == ("ANTHROPIC_BASE_URL",)
    assert providers["openai"].effective_base_url(None) == "https://api.openai.com/v1"
    # Looked up by name: the key of an empty model is the key of the default model.
    assert cache_key("anthropic", _request()) == cache_key("anthropic", _request(model=anthropic_client.DEFAULT_MODEL))


def test_key_ignores_credentials_in_the_base_url_but_not_the_host():
    a = cache_key("x", _request(base_url="https://user:secret-1@host.example/v1"))
    b = cache_key("x", _request(base_url="https://user:secret-2@host.example/v1"))
    c = cache_key("x", _request(base_url="https://other.example/v1"))
    assert a == b != c


@dace.library.node
class LongTable(dnodes.LibraryNode):
    """Looks values up in a long table."""

    implementations: ClassVar[dict] = {}
    default_implementation = "ai"
    table = properties.Property(dtype=str, default="", desc="the table")

    def __init__(self, name, table=""):
        super().__init__(name, inputs={"_a"}, outputs={"_out"})
        self.table = table


def _table_key(table):
    from dace_ai.expansion.expansion_pass import node_context, resolve
    from dace_ai.solving.requests import build_request

    sdfg = dace.SDFG("tables")
    sdfg.add_array("A", [8], dace.float64)
    sdfg.add_array("B", [8], dace.float64)
    state = sdfg.add_state()
    node = LongTable("lookup", table)
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet("A[0:8]"))
    state.add_edge(node, "_out", state.add_write("B"), None, dace.Memlet("B[0:8]"))
    settings = resolve({"provider": "manual"})
    request = build_request(node_context(sdfg, state, node, settings), settings)
    return cache_key("manual", request), request.messages[0].content


def test_nodes_that_differ_only_beyond_the_shown_part_of_a_property_get_different_keys():
    base = ",".join(str(i) for i in range(200))
    key_a, prompt_a = _table_key(base + ",1")
    key_b, prompt_b = _table_key(base + ",2")
    assert len(base) > 300 and "characters in all, sha256" in prompt_a
    assert key_a != key_b and prompt_a != prompt_b
    assert _table_key(base + ",1")[0] == key_a, "the key is stable"


# ------------------------------------------------------------------ dace-ai cache
def test_cache_command_lists_stats_verifies_and_clears(fake, capsys):
    fake.queue(json.dumps(GOOD))
    _expand()
    folder = AnswerCache().folder
    [entry] = folder.glob("??/*.json")
    bad = folder / "ab" / ("ab" + "0" * 62 + ".json")
    bad.parent.mkdir(exist_ok=True)
    bad.write_bytes(b"\x00garbage")
    (folder / "ab" / ".half.json.x1.tmp").write_text('{"te')  # an unfinished write of a killed process
    capsys.readouterr()

    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert entry.stem[:16] in out and "scripted" in out and "INVALID" in out
    assert main(["cache", "stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["entries"], stats["invalid"], stats["unfinished_writes"]) == (2, 1, 1)
    assert stats["by_provider"] == {"scripted": 1}
    assert main(["cache", "verify"]) == 1
    out = capsys.readouterr().out
    assert str(bad) in out and "not JSON" in out and "unfinished write" in out
    assert main(["cache", "verify", "--fix"]) == 0
    capsys.readouterr()
    assert main(["cache", "verify"]) == 0 and "ok:" in capsys.readouterr().out

    os.utime(entry, (time.time() - 3 * 86400,) * 2)
    assert main(["cache", "clear", "--older-than", "4d"]) == 0
    assert entry.exists() and "removed 0 entries" in capsys.readouterr().out
    assert main(["cache", "clear", "--older-than", "2d"]) == 0
    assert not entry.exists() and "removed 1 entry" in capsys.readouterr().out
    assert main(["cache", "clear", "--older-than", "soon"]) == 1
    assert "expected a number with a unit" in capsys.readouterr().err


def test_cache_command_on_another_root(tmp_path, capsys):
    assert main(["cache", "stats", "--root", str(tmp_path / "elsewhere"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == 0


def test_open_session_creates_nothing_until_written(_isolated_dace_ai):
    session = open_session("s", "s.n")
    assert not session.folder.exists() and session.summary() == {"rounds": []}


@pytest.mark.parametrize("content", [b"\xff", b"[]", b'{"system": "s"}', b'{"system": "s", "messages": [["x"]]}'])
def test_damaged_recorded_conversation_is_a_clear_error(_isolated_dace_ai, content):
    import dace
    from dace_ai.config.settings import resolve_settings
    from dace_ai.errors import CheckFailed
    from dace_ai.storage.session_store import session_by_id
    from dace_ai.workflows.generated import Generated, of_tasklet
    from dace_ai.workflows.revision import Revision, revise

    round_dir = _isolated_dace_ai / "ai-sessions" / "s.n" / "round-1"
    round_dir.mkdir(parents=True)
    (round_dir / "messages.json").write_bytes(content)
    (round_dir / "answer.txt").write_text("{}")
    session = session_by_id("s.n")
    assert session.conversation(1) is None
    tasklet = dace.nodes.Tasklet(
        "t", {}, {"o"}, "// dace-ai: session=ai-sessions/s.n/round-1\no = 1;", language=dace.Language.CPP
    )
    g = Generated(None, None, tasklet, {"node": "t", "session": "ai-sessions/s.n/round-1"}, session, 1)
    with pytest.raises(CheckFailed, match="the recorded conversation of round 1 cannot be read"):
        revise(None, g, Revision("fix it", "program build repair"), resolve_settings())
    with pytest.raises(ValueError, match="not a session id"):
        session_by_id("ai-sessions/../../etc")
    escaping = dace.nodes.Tasklet(
        "t", {}, {"o"}, "// dace-ai: session=ai-sessions/../../etc/round-1\no = 1;", language=dace.Language.CPP
    )
    assert of_tasklet(dace.SDFG("p").add_state(), escaping).session is None
