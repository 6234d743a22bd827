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
from dace_ai.storage.sessions import SessionWarning, open_session

from tests.inc_program import GOOD, inc_sdfg


def _sdfg(name="stored"):
    return inc_sdfg(name)



SETTINGS = {"provider": "scripted", "compile_check": False}


def _expand(name="stored"):
    sdfg, state, node = _sdfg(name)
    tasklet = dace_ai.expand(sdfg, state, node, SETTINGS)
    return tasklet, state


# ------------------------------------------------------------ corrupted entries
@pytest.mark.parametrize("content", [
    b"\x00\xff garbage \xfe",
    b'{"text": "trunc',
    b"[1, 2, 3]",
    b'{"provider": "scripted"}',
    b'{"text": 42, "provider": "scripted"}',
    b'{"text": "{}", "provider": "scripted", "usage": "lots"}',
    b'{"text": "{}", "provider": "scripted", "usage": {"tokens": 3}}',
    b'{"text": "{}", "provider": ["scripted"]}',
    b'{"text": "{}", "provider": "scripted", "key": "0000"}',
], ids=["garbage", "truncated", "list", "no-text", "text-int", "usage-str", "usage-keys", "provider-list",
        "other-key"])
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


@pytest.mark.parametrize("content", [b"\xff", b"[]", b'{"system": "s"}', b'{"system": "s", "messages": [["x"]]}'])
def test_damaged_recorded_conversation_is_a_clear_error(_isolated_dace_ai, content):
    import dace
    from dace_ai.config.settings import resolve_settings
    from dace_ai.errors import CheckFailed
    from dace_ai.expansion.revision import Revision, revise
    from dace_ai.expansion.sessions import Generated, of_tasklet
    from dace_ai.storage.sessions import session_by_id

    round_dir = _isolated_dace_ai / "ai-sessions" / "s.n" / "round-1"
    round_dir.mkdir(parents=True)
    (round_dir / "messages.json").write_bytes(content)
    (round_dir / "answer.txt").write_text("{}")
    session = session_by_id("s.n")
    assert session.conversation(1) is None
    tasklet = dace.nodes.Tasklet("t", {}, {"o"}, "// dace-ai: session=ai-sessions/s.n/round-1\no = 1;",
                                language=dace.Language.CPP)
    g = Generated(None, None, tasklet, {"node": "t", "session": "ai-sessions/s.n/round-1"}, session, 1)
    with pytest.raises(CheckFailed, match="the recorded conversation of round 1 cannot be read"):
        revise(None, g, Revision("fix it", "program build repair"), resolve_settings())
    with pytest.raises(ValueError, match="not a session id"):
        session_by_id("ai-sessions/../../etc")
    escaping = dace.nodes.Tasklet("t", {}, {"o"}, "// dace-ai: session=ai-sessions/../../etc/round-1\no = 1;",
                                 language=dace.Language.CPP)
    assert of_tasklet(dace.SDFG("p").add_state(), escaping).session is None
