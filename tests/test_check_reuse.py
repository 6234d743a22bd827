"""An answer checked once is not checked again while nothing its checks depend on changed.

``dace_ai.generate`` checks every answer before caching it; the expansion that follows is
served the same answer from the cache and reuses those checks when their fingerprint (the
check job's payload, the checkers, dace-ai's own code, the compiler) is unchanged. Real
checks (probe, verify, sanitizers, bench), a scripted provider, real DaCe compiles.

No ``from __future__ import annotations`` here: DaCe reads the programs' annotations as objects.
"""

import json
import warnings

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.checking import candidate_checks, stages
from dace_ai.errors import InconclusiveCheckWarning
from dace_ai.solving.provenance import Provenance
from dace_ai.storage.cache import AnswerCache
from dace_ai.testing import FakeProvider

N = dace.symbol("N")
TWICE = {"code": "for (int i = 0; i < N; ++i) _out[i] = 2.0 * _a[i];"}


@pytest.fixture
def checks_run(register_dace_ai_plugin, monkeypatch):
    """A scripted provider answering TWICE, and the list of nodes whose checks ran (in order)."""
    fake = FakeProvider()
    fake.queue(*[json.dumps(TWICE)] * 20)
    register_dace_ai_plugin(fake.plugin("scripted"), "scripted-provider")
    monkeypatch.setenv("DACE_ai_provider", "scripted")
    ran: list[str] = []
    real = stages.run_checks

    def counting(request):
        ran.append(request.node.name)
        return real(request)

    monkeypatch.setattr(candidate_checks, "run_checks", counting)  # where check_candidate looks it up
    return ran


def twice_of(a):
    return 2 * a


def program(reference=twice_of) -> dace.SDFG:
    @dace.program
    def twice_reused(A: dace.float64[N]):
        return dace_ai.ai("TWICE: _out[i] = 2 * _a[i] for every i < N", a=A, name="twice", reference=reference)

    return twice_reused.to_sdfg()


def compiled_level(sdfg) -> tuple[str, object]:
    compiled = sdfg.compile()
    (tasklet,) = [
        n
        for n, _ in sdfg.all_nodes_recursive()
        if isinstance(n, dace.nodes.Tasklet) and Provenance.parse(n.code.as_string)
    ] or [None]
    return compiled, tasklet


def expanded_level(sdfg) -> str:
    sdfg.expand_library_nodes()
    (tasklet,) = [
        n
        for n, _ in sdfg.all_nodes_recursive()
        if isinstance(n, dace.nodes.Tasklet) and Provenance.parse(n.code.as_string)
    ]
    return Provenance.parse(tasklet.code.as_string).verification


def test_the_expansion_after_generate_reuses_its_checks_and_carries_their_level(checks_run):
    sdfg = program()
    summary = dace_ai.generate(sdfg)
    assert checks_run == ["twice"] and summary.generated == 1
    (result,) = summary.nodes
    assert result.verification.startswith("verified (")
    level = expanded_level(sdfg)
    assert checks_run == ["twice"]  # not checked a second time
    assert level == result.verification
    (row,) = [r for r in dace_ai.history(sdfg) if r["reason"] == "expansion"]
    assert row["status"] == "accepted" and row["source"] == "cache" and row["checks_reused"] is True
    A = np.random.rand(11)
    np.testing.assert_allclose(sdfg(A=A, N=11), 2 * A)


def test_a_changed_setting_of_the_checks_means_checking_again(checks_run, monkeypatch):
    sdfg = program()
    dace_ai.generate(sdfg)
    monkeypatch.setenv("DACE_ai_verify_seeds", "2")
    level = expanded_level(sdfg)
    assert checks_run == ["twice", "twice"]
    assert level.startswith("verified (2 seeds")


def test_a_changed_reference_means_checking_again(checks_run):
    dace_ai.generate(program())

    def twice_of(a):  # the same name, other code: what the answer is compared with changed
        return a + a

    assert expanded_level(program(twice_of)).startswith("verified (")
    assert checks_run == ["twice", "twice"]


def test_an_entry_without_a_record_is_checked_and_then_reused(checks_run):
    dace_ai.generate(program())
    (entry,) = AnswerCache().folder.rglob("*.json")
    data = json.loads(entry.read_text())
    data.pop("checked")  # an entry written before checks were recorded
    entry.write_text(json.dumps(data))
    expanded_level(program())
    assert checks_run == ["twice", "twice"]
    assert "checked" in json.loads(entry.read_text())  # the checks that ran are recorded now
    expanded_level(program())
    assert checks_run == ["twice", "twice"]


@pytest.mark.parametrize("damage", ["fingerprint", "evidence", "shape"])
def test_a_damaged_record_is_never_believed(checks_run, damage):
    dace_ai.generate(program())
    (entry,) = AnswerCache().folder.rglob("*.json")
    data = json.loads(entry.read_text())
    verify = next(r for r in data["checked"]["reports"] if r["checker"] == "verify")
    if damage == "fingerprint":
        data["checked"]["fingerprint"] = "0" * 64
    elif damage == "evidence":  # a passed verify report without its seeds and sizes
        verify["seeds"], verify["sizes"] = 0, []
    else:
        data["checked"]["reports"] = "passed"
    entry.write_text(json.dumps(data))
    assert expanded_level(program()).startswith("verified (")
    assert checks_run == ["twice", "twice"]


def test_a_reused_check_that_could_not_decide_is_warned_about_again(checks_run):
    """The checker said "not verified" once, in the run that checked; the run that reuses says it again."""
    dace_ai.generate(program(reference=None))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        level = expanded_level(program(reference=None))
    assert checks_run == ["twice"]
    assert level.startswith("unverified")
    assert any(issubclass(w.category, InconclusiveCheckWarning) and "'twice'" in str(w.message) for w in caught)
