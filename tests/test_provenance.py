"""One Provenance type writes and reads a generated tasklet's first line: every field round-trips (the level
with its spaces, pinned, fields this version does not know), and pin, unpin, rollback and refine keep the
verification level whole. No ``from __future__ import annotations``: DaCe reads the programs' annotations."""

import dace
import dace_ai
import pytest
from dace_ai.solving.provenance import Provenance, level_from_code, provenance, with_fields

from tests.test_verdict import ai_program, checker, generated  # noqa: F401 - the checker fixture

LEVEL = "verified (3 seeds, 7 sizes, 2 thread counts, 6 distributions, no sanitizers: clang missing)"


def test_every_field_round_trips_through_the_comment():
    written = Provenance(
        node="gemm",
        provider="openai",
        model="gpt-x",
        source="cache",
        cache_key="0123456789abcdef",
        session="ai-sessions/gemm-1a2b/round-3",
        bench="1.84x(1.71-1.95)_vs_native",
        sol="0.33",
        optimize="r1s0",
        pinned=True,
        verification=LEVEL,
        extra=(("energy", "1.2J"), ("edited", "true")),
    )
    line = written.to_comment()
    assert line.startswith("// dace-ai: node=gemm ") and line.endswith(f" verification={LEVEL}\n")
    assert line.count("\n") == 1 and "energy=1.2J edited=true verification=" in line  # unknown fields before the level
    assert " bench=1.84x(1.71-1.95)_vs_native sol=0.33 optimize=r1s0 " in line
    read = Provenance.parse(line + "for (;;) {}\n")
    assert read == written and read.to_comment() == line
    assert read.session_round == ("gemm-1a2b", 3) and read.pinned
    assert Provenance.from_fields(read.pairs()) == written  # as a session records it


def test_parse_reads_what_older_and_newer_writers_wrote():
    assert Provenance.parse("x = 1;\n") is None and Provenance.parse("") is None
    old = Provenance.parse("  // dace-ai: node=t source=cache verification=compile-only\nx;")
    assert old == Provenance(node="t", source="cache", verification="compile-only")
    newer = Provenance.parse("// dace-ai: node=t energy=1.2J pinned=true verification=unverified: no reference")
    assert newer.extra == (("energy", "1.2J"),) and newer.pinned and newer.verification == "unverified: no reference"
    assert Provenance.parse("// dace-ai: verification=compile-only").verification == "compile-only"
    assert level_from_code("// dace-ai: node=n verification=verified (3 seeds)\nx = 1;") == "verified (3 seeds)"
    assert level_from_code("// dace-ai: node=n\nx = 1;") is None and level_from_code("x = 1;") is None


def test_values_stay_on_one_line_and_one_word():
    line = Provenance(node="my node", model="a\nb", verification="verified (3 seeds,\n5 sizes)").to_comment()
    assert line == "// dace-ai: node=my_node model=a_b verification=verified (3 seeds, 5 sizes)\n"
    assert Provenance.parse(line).verification == "verified (3 seeds, 5 sizes)"
    changed = Provenance.parse(line).replace(pinned="true", energy="0.5J", model=None)
    assert changed.pinned and changed.model == "" and changed.extra == (("energy", "0.5J"),)
    assert changed.replace(pinned=None).pinned is False


def _level(tasklet) -> str:
    return level_from_code(tasklet.code.as_string)


def test_pin_unpin_rollback_and_refine_keep_the_level_whole(checker):
    checker.status = "inconclusive"  # a level with spaces: "unverified: t-verdict: tool missing (inconclusive)"
    sdfg = ai_program()
    with pytest.warns(dace_ai.errors.InconclusiveCheckWarning):
        sdfg.expand_library_nodes()
    [tasklet] = generated(sdfg)
    first = _level(tasklet)
    assert first == "unverified: t-verdict: tool missing (inconclusive)"
    with_fields(tasklet, energy="1.2J")  # a field another version wrote
    dace_ai.pin(sdfg, "copyit")
    assert _level(tasklet) == first and provenance(tasklet)["pinned"] == "true"
    assert provenance(tasklet)["energy"] == "1.2J"
    dace_ai.unpin(sdfg, "copyit")
    assert _level(tasklet) == first and "pinned" not in provenance(tasklet)

    checker.status = "passed"
    dace_ai.refine(sdfg, "copyit", "the same, please")
    assert _level(tasklet) == "compile-only" and provenance(tasklet)["session"].endswith("/round-2")
    dace_ai.rollback(sdfg, "copyit", round=1)
    assert _level(tasklet) == first and provenance(tasklet)["session"].endswith("/round-1")
    dace_ai.pin(sdfg, "copyit")
    assert _level(tasklet) == first
    code = tasklet.code.as_string
    saved = dace.SDFG.from_json(sdfg.to_json())  # the line survives saving and loading
    [again] = generated(saved)
    assert again.code.as_string == code and Provenance.parse(code).pinned
