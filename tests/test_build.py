"""Repair rounds end to end: a scripted provider, the real probe, real DaCe builds, build() and repair()."""

# No ``from __future__ import annotations`` here: DaCe reads ``@dace.program`` annotations as objects.
import json
import re

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.config.settings import resolve_settings
from dace_ai.errors import CheckFailed
from dace_ai.expansion.pending import pending_nodes
from dace_ai.expansion.pipeline import implement
from dace_ai.testing import FakeProvider
from dace_ai.workflows.build import blame, build, repair

N = dace.symbol("N")
GOOD = "for (int i = 0; i < N; ++i) _out[i] = {helper}(_a[i]);"
BAD = "for (int i = 0; i < N; ++i) _out[i] = {helper}(_a[i]) + undeclared_value;"


@pytest.fixture
def scripted(register_dace_ai_plugin, monkeypatch):
    """A scripted provider (``DACE_ai_provider=scripted``); ``script(request) -> answer dict``."""
    fake = FakeProvider()
    fake.script = None

    def answer(request):
        return json.dumps(fake.script(request))

    fake.queue(*[answer] * 40)
    register_dace_ai_plugin(fake.plugin("scripted"), "scripted-provider")
    monkeypatch.setenv("DACE_ai_provider", "scripted")
    return fake


def one_node_program() -> dace.SDFG:
    @dace.program
    def twice(A: dace.float64[N]):
        return dace_ai.ai("TWICE: _out[i] = 2 * _a[i] for every i < N", a=A, name="twice")

    return twice.to_sdfg()


def two_node_program() -> dace.SDFG:
    @dace.program
    def chain(A: dace.float64[N]):
        doubled = dace_ai.ai("DOUBLE: _out[i] = 2 * _a[i] for every i < N", a=A, name="double_it")
        return dace_ai.ai("ADD_ONE: _out[i] = _a[i] + 1 for every i < N", a=doubled, name="add_one")

    return chain.to_sdfg()


def helper_answer(code: str, helper: str, body: str = "2.0 * x") -> dict:
    return {"code": code.format(helper=helper), "code_global": f"static double {helper}(double x) {{ return {body}; }}"}


def implement_all(sdfg: dace.SDFG) -> list:
    return [implement(s, st, node) for s, st, node in pending_nodes(sdfg)]


def test_compile_error_is_repaired_in_the_second_round_with_stable_diagnostics(scripted, _isolated_dace_ai):
    scripted.script = lambda request: helper_answer(BAD if len(request.messages) == 1 else GOOD, "twice_helper")
    sdfg = one_node_program()
    (tasklet,) = implement_all(sdfg)
    assert len(scripted.requests) == 2
    assert "undeclared_value" not in tasklet.code.as_string and "twice_helper(_a[i]);" in tasklet.code.as_string
    repair_request = scripted.requests[1]
    roles = [m.role for m in repair_request.messages]
    assert roles == ["user", "assistant", "user"]
    assert "undeclared_value" in repair_request.messages[1].content  # the rejected answer
    prompt = repair_request.messages[2].content
    assert re.search(r"^tasklet\.cpp:\d+:\d+: error: .*undeclared_value", prompt, re.MULTILINE), prompt
    assert str(_isolated_dace_ai) not in prompt and "/tmp/" not in prompt and "ai-check" not in prompt


def test_an_answer_that_never_compiles_ends_after_exactly_max_repair_attempts(scripted, monkeypatch):
    monkeypatch.setenv("DACE_ai_max_repair_attempts", "2")
    scripted.script = lambda request: helper_answer(BAD, "twice_helper")
    sdfg = one_node_program()
    with pytest.raises(CheckFailed) as info:
        implement_all(sdfg)
    assert len(scripted.requests) == 3  # the first answer and exactly two repairs
    message = str(info.value)
    assert "'twice'" in message and "2 repair attempt" in message
    assert "ai-sessions" in message and "undeclared_value" in message


def test_two_tasklets_with_the_same_helper_are_both_blamed_and_repaired_by_build(scripted):
    def script(request):
        first = request.messages[0].content
        which = "double_it" if "DOUBLE:" in first else "add_one"
        helper = "helper" if len(request.messages) == 1 else f"{which}_helper"
        return helper_answer(GOOD, helper, "2.0 * x" if which == "double_it" else "x + 1.0")

    scripted.script = script
    sdfg = two_node_program()
    compiled = build(sdfg)
    assert len(scripted.requests) == 4  # each node once, then each blamed node once
    repairs = [r for r in scripted.requests if len(r.messages) > 1]
    assert len(repairs) == 2
    for request, other in zip(
        sorted(repairs, key=lambda r: "DOUBLE:" in r.messages[0].content), ("double_it", "add_one")
    ):
        text = request.messages[-1].content
        assert "redefinition of" in text and "previously defined" in text
        assert other in text  # each is told about the other tasklet sharing the file
        assert "src/cpu/" in text and dace.Config.get("default_build_folder") not in text
    A = np.random.rand(9)
    np.testing.assert_allclose(compiled(A=A, N=9), 2 * A + 1)


def test_compile_never_repairs_and_build_does_with_debugprint_on(scripted, monkeypatch):
    monkeypatch.setenv("DACE_debugprint", "1")
    monkeypatch.setenv("DACE_ai_compile_check", "false")  # let the broken answer into the program
    scripted.script = lambda request: helper_answer(BAD if len(request.messages) == 1 else GOOD, "twice_helper")
    sdfg = one_node_program()
    with pytest.raises(dace.codegen.exceptions.CompilationError) as info:
        sdfg.compile()
    assert len(scripted.requests) == 1  # expanded once, never repaired by compile()
    repaired = dace_ai.repair(sdfg, info.value)  # DaCe hid the output ("Compiler failure"); repair compiles again
    assert len(scripted.requests) == 2
    assert repaired == ["twice"]
    assert "undeclared_value" in scripted.requests[1].messages[-1].content
    compiled = dace_ai.build(sdfg)
    assert len(scripted.requests) == 2
    A = np.random.rand(5)
    np.testing.assert_allclose(compiled(A=A, N=5), 2 * A)
    import os

    assert os.environ["DACE_debugprint"] == "1"


def test_errors_outside_generated_tasklets_are_not_blamed(scripted):
    sdfg = dace.SDFG("handwritten")
    sdfg.add_array("A", [4], dace.float64)
    state = sdfg.add_state()
    tasklet = state.add_tasklet("manual", {}, {"o"}, "o = not_declared_anywhere;", language=dace.Language.CPP)
    state.add_edge(tasklet, "o", state.add_write("A"), None, dace.Memlet("A[0]"))
    with pytest.raises(dace.codegen.exceptions.CompilationError) as info:
        sdfg.compile()
    blamed, unblamed = blame(sdfg, str(info.value))
    assert blamed == [] and any("not_declared_anywhere" in d.message for block in unblamed for d in block)
    with pytest.raises(CheckFailed, match="no generated tasklet produced the failing lines"):
        repair(sdfg, info.value)
    assert scripted.requests == []


def test_probe_and_faithful_judge_a_real_node_context_alike():
    from dace_ai.checking.api import CheckRequest
    from dace_ai.checking.stages import check_workdir, run_checks
    from dace_ai.context.collect import collect_sdfg_context
    from dace_ai.prompt.answer import Answer

    sdfg = one_node_program()
    ((nsdfg, state, node),) = pending_nodes(sdfg)
    ctx = collect_sdfg_context(nsdfg).node_context(state, node)
    settings = resolve_settings({"checkers": "probe,faithful"})
    for code, expected in ((GOOD, "passed"), (BAD, "failed")):
        answer = Answer(**helper_answer(code, "twice_helper"))
        reports = run_checks(CheckRequest(answer, ctx, settings, check_workdir(ctx, answer)))
        assert [(r.checker, r.status) for r in reports] == [("probe", expected), ("faithful", expected)]


def test_pinned_tasklets_are_recognised_from_provenance_or_session(_isolated_dace_ai):
    from dace_ai.workflows.build import is_pinned, provenance

    def tasklet(comment):
        return dace.nodes.Tasklet("t", {}, {"o"}, comment + "o = 1;", language=dace.Language.CPP)

    session = _isolated_dace_ai / "ai-sessions" / "prog.t"
    (session / "round-1").mkdir(parents=True)
    (session / "session.json").write_text(json.dumps({"rounds": [{"number": 1}], "pinned": True}))
    assert provenance(tasklet("o = 1;\n")) is None and not is_pinned(tasklet(""))
    assert provenance(tasklet("// dace-ai: node=t source=cache\n")) == {"node": "t", "source": "cache"}
    assert not is_pinned(tasklet("// dace-ai: node=t\n"))
    assert is_pinned(tasklet("// dace-ai: node=t pinned=true\n"))
    assert is_pinned(tasklet("// dace-ai: node=t session=ai-sessions/prog.t/round-1\n"))


def twice_of(a):
    return 2 * a


def referenced_program() -> dace.SDFG:
    @dace.program
    def twice_checked(A: dace.float64[N]):
        return dace_ai.ai("TWICE: _out[i] = 2 * _a[i] for every i < N", a=A, name="twice", reference=twice_of)

    return twice_checked.to_sdfg()


def break_by_hand(tasklet) -> None:
    """A hand edit that breaks the whole program's compile, so build() asks the tasklet for a repair."""
    tasklet.code = dace.properties.CodeBlock(
        tasklet.code.as_string.replace("2.0 * x", "broken_by_hand"), dace.Language.CPP
    )
    tasklet.code_global = dace.properties.CodeBlock(
        tasklet.code_global.as_string.replace("2.0 * x", "broken_by_hand"), dace.Language.CPP
    )


def test_a_build_repair_that_computes_the_wrong_result_is_refused_and_the_tasklet_kept(scripted, monkeypatch):
    """The repaired answer goes through the node's checks: a wrong one never replaces the tasklet silently."""
    from dace_ai.solving.provenance import level_from_code

    monkeypatch.setenv("DACE_ai_max_repair_attempts", "1")
    scripted.script = lambda request: helper_answer(
        GOOD, "twice_helper", "2.0 * x" if len(request.messages) == 1 else "3.0 * x"
    )
    sdfg = referenced_program()
    (tasklet,) = implement_all(sdfg)
    assert level_from_code(tasklet.code.as_string).startswith("verified (")
    break_by_hand(tasklet)
    broken = (tasklet.code.as_string, tasklet.code_global.as_string)
    with pytest.raises(CheckFailed) as info:
        build(sdfg, rounds=1)
    assert len(scripted.requests) == 3  # the first answer, the build repair and one repair round of its checks
    assert "'twice'" in str(info.value) and "verify" in str(info.value)
    assert (tasklet.code.as_string, tasklet.code_global.as_string) == broken  # nothing placed
    rounds = dace_ai.history(sdfg)
    assert [(r["reason"], r["status"]) for r in rounds] == [
        ("expansion", "accepted"),
        ("program build repair", "rejected"),
        ("repair", "rejected"),
    ]
    repair_round = scripted.requests[2].messages[-1].content
    assert "verify" in repair_round  # the verify stage's findings went back to the model


def test_a_build_repair_that_passes_its_checks_carries_its_own_level(scripted):
    from dace_ai.solving.provenance import Provenance

    scripted.script = lambda request: helper_answer(
        GOOD, "twice_helper" if len(request.messages) == 1 else "twice_repaired"
    )
    sdfg = referenced_program()
    (tasklet,) = implement_all(sdfg)
    break_by_hand(tasklet)
    compiled = build(sdfg, rounds=1)
    assert len(scripted.requests) == 2
    written = Provenance.parse(tasklet.code.as_string)
    assert "twice_repaired" in tasklet.code_global.as_string and written.session.endswith("/round-2")
    repair = dace_ai.history(sdfg)[-1]
    assert repair["reason"] == "program build repair" and repair["status"] == "accepted"
    assert written.verification.startswith("verified (") and repair["verification"] == written.verification
    A = np.random.rand(7)
    np.testing.assert_allclose(compiled(A=A, N=7), 2 * A)
