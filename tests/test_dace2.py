"""DaCe 2.0: dace-ai implements DaCe's own AI library (``dace.libraries.ai``) unless ``builtin=keep``.

The program in :mod:`tests.dace2_program` is written for DaCe's library alone (it never
imports dace_ai); under dace-ai its answers go through compile, verify and bench, and a
wrong one is refused. The settings that leave DaCe's library alone are decided when
``dace_ai`` is imported, so those cases run in a fresh process.

No ``from __future__ import annotations`` here: DaCe reads the programs' annotations as objects.
"""

import json
import os
import subprocess
import sys
from ast import literal_eval
from pathlib import Path

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai import compat
from dace_ai.errors import AnswerError
from dace_ai.prompt.answer import parse_answer
from dace_ai.solving.provenance import level_from_code

from tests.dace_versions import DACE2, only_dace2

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """Run ``code`` as a script (DaCe parses programs from their source) in a fresh interpreter, from ``tmp_path``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DACE_ai_")}
    environ.update(env, PYTHONPATH=str(ROOT), DACE_default_build_folder=str(tmp_path / ".dacecache"))
    script = tmp_path / f"script_{len(list(tmp_path.glob('script_*.py')))}.py"
    script.write_text(code)
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


# ----------------------------------------------------------------------------- DaCe's answer files
def test_dace_response_files_are_read():
    """DaCe 2.0's manual response files: ``"language": "CPP"`` and CMake-named environment fields."""
    answer = parse_answer(
        json.dumps(
            {
                "notes": "",
                "language": "CPP",
                "code": "_out = _a;",
                "code_global": "",
                "code_init": "",
                "code_exit": "",
                "state_fields": [],
                "side_effects": False,
                "ignored_symbols": [],
                "use_environments": [],
                "environments": [
                    {
                        "name": "Fftw",
                        "headers": ["fftw3.h"],
                        "cmake_libraries": ["fftw3"],
                        "cmake_packages": [],
                        "cmake_includes": [],
                        "cmake_compile_flags": [],
                        "cmake_link_flags": ["-lfftw3"],
                        "cmake_variables": [],
                        "cmake_minimum_version": None,
                        "state_fields": [],
                        "init_code": "",
                        "finalize_code": "",
                    }
                ],
            }
        )
    )
    assert answer.language == "cpp" and answer.code == "_out = _a;"
    (env,) = answer.environments
    assert env.libraries == ["fftw3"] and env.link_flags == ["-lfftw3"] and env.headers == ["fftw3.h"]
    with pytest.raises(AnswerError, match="Python tasklets are not supported"):
        parse_answer(json.dumps({"language": "Python", "code": "_out = _a"}), origin="r.json")
    with pytest.raises(AnswerError, match=r"environments\.0\.cmake_variables"):
        parse_answer(
            json.dumps(
                {"code": "x;", "environments": [{"name": "E", "cmake_variables": [{"name": "A", "value": "1"}]}]}
            )
        )


def test_doctor_says_who_implements_ai():
    from dace_ai.cli.doctor import dace_report

    report = dace_report()
    assert report["version"] == dace.__version__ and report["in_charge"] == "dace-ai"
    assert report["builtin_ai_library"] is DACE2 and report["implementation"] == "ai"
    assert ("DACE_ai_builtin=keep" in report["reason"]) is DACE2
    assert bool(report["replaced"]) is DACE2


# ----------------------------------------------------------------------------- taking over (DaCe 2)
@only_dace2
def test_dace_ai_stands_in_for_the_library_whichever_is_imported_first(tmp_path):
    """Imported after ``dace.libraries.ai`` too; and a process that never imports dace_ai sees DaCe unchanged."""
    check = (
        "import sys, dace, dace.libraries.ai as lib\n"
        "from dace.libraries.ai.expansion import ExpandAI\n"
        "from dace.libraries.standard.nodes import Reduce\n"
        "before = (ExpandAI.for_node_class(Reduce).__module__, lib.generate_prompts.__module__)\n"
        "if sys.argv[1:] == ['import']:\n"
        "    import dace_ai\n"
        "after = (ExpandAI.for_node_class(Reduce).__module__, lib.generate_prompts.__module__,\n"
        "         lib.exchange.read_prompt_response.__module__, lib.build.__module__, dace.ai.__module__)\n"
        "print(repr((before, after, 'dace_ai' in sys.modules)))\n"
    )
    untouched = _python(check.replace("sys.argv[1:]", "[]"), tmp_path)
    taken = _python(check.replace("sys.argv[1:]", "['import']"), tmp_path)
    assert untouched.returncode == 0 and taken.returncode == 0, untouched.stderr + taken.stderr
    before, after, imported = literal_eval(untouched.stdout.strip().splitlines()[-1])
    assert not imported and after[:2] == before and before[0].startswith("dace.libraries.ai")
    assert after[-1] == "dace.frontend.python.interface"
    _, after, imported = literal_eval(taken.stdout.strip().splitlines()[-1])
    assert imported and after == (
        "dace_ai.expansion.implementation",
        "dace_ai.expansion.takeover",
        "dace_ai.expansion.exchange",
        "dace_ai.workflows.build",
        "dace_ai.expansion.frontend",
    )


@only_dace2
def test_saved_sdfg_keeps_each_ainode_kind():
    """DaCe's and dace-ai's ``AINode`` share a class name; a saved SDFG loads each as what it was."""
    from dace.libraries.ai import AINode as DaceAINode

    sdfg = dace.SDFG("two_kinds")
    state = sdfg.add_state()
    state.add_node(dace_ai.AINode("ours", "Write _out = 1.", outputs={"_out"}))
    state.add_node(DaceAINode("theirs", "Write _out = 2.", outputs={"_out"}))
    loaded = dace.SDFG.from_json(sdfg.to_json())
    kinds = {n.label: type(n) for n in loaded.start_state.nodes()}
    assert kinds == {"ours": dace_ai.AINode, "theirs": DaceAINode}


@only_dace2
def test_program_for_dace_library_runs_through_dace_ai(tmp_path):
    """DaCe's API, DaCe's answer files: dace-ai expands both nodes (provenance, sessions) and checks the answers."""
    import dace.libraries.ai as library

    from tests import dace2_program as program

    sdfg = program.program_sdfg()
    prompts = program.answer_prompts(sdfg, tmp_path / "prompts")
    assert len(prompts) == 2 and all(p.endswith("_prompt.md") and Path(p).is_file() for p in prompts)
    library.read_prompt_responses(sdfg, str(tmp_path / "prompts"))
    found = program.tasklets(sdfg)
    assert set(found) == {"ai", "matmul"}
    assert all(type(t) is dace.nodes.Tasklet and t.code.as_string.startswith("// dace-ai:") for t in found.values())
    assert level_from_code(found["matmul"].code.as_string).startswith("verified")
    rows = {row["name"]: row for row in library.sessions(sdfg)}
    assert set(rows) == {"ai", "matmul"} and rows["matmul"]["provider"] == "manual"
    checks = json.loads(next(Path(rows["matmul"]["folder"]).glob("round-1/checks.json")).read_text())
    passed = {c["stage"] for c in checks if c["status"] == "passed"}
    assert {"compile", "verify", "bench"} <= passed, checks
    computed, expected = program.run(sdfg)
    np.testing.assert_allclose(computed, expected)


@only_dace2
def test_wrong_answer_in_dace_format_is_refused(tmp_path):
    import dace.libraries.ai as library

    from tests import dace2_program as program

    sdfg = program.program_sdfg()
    program.answer_prompts(sdfg, tmp_path / "prompts", wrong=True)
    with pytest.warns(dace_ai.expansion.exchange.ExchangeWarning):
        report = library.read_prompt_responses(sdfg, str(tmp_path / "prompts"))
    assert report.expanded == ["ai"] and [f.node for f in report.failed] == ["matmul"]
    assert "verify" in report.failed[0].checks and report.failed[0].prompt.is_file()
    assert [type(n).__name__ for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.LibraryNode)] == [
        "MatMul"
    ]  # still waiting for an answer that passes


@only_dace2
def test_builtin_keep_leaves_dace_library_alone_and_dace_ai_ai_still_works(tmp_path):
    script = (
        "import json, sys, dace, dace_ai, numpy as np\n"
        "from dace_ai import compat\n"
        "from tests import dace2_program\n"
        "assert dace.ai is not dace_ai.ai and not compat.replaced()\n"
        "assert 'dace-ai' in dace_ai.AINode.implementations\n"
        "dace2_program.main('theirs')\n"
        "@dace.program\n"
        "def twice(A: dace.float64[8]):\n"
        "    return dace_ai.ai('Write _out[i] = 2 * _a[i] for every i < 8.', a=A)\n"
        "sdfg = twice.to_sdfg()\n"
        "for f in dace_ai.generate_prompts(sdfg, 'ours'):\n"
        "    f.response.write_text(json.dumps({'code': 'for (int i = 0; i < 8; ++i) _out[i] = 2 * _a[i];'}))\n"
        "dace_ai.read_prompt_responses(sdfg, 'ours')\n"
        "(code,) = [n.code.as_string for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet)]\n"
        "A = np.arange(8.0)\n"
        "print(json.dumps({'ours': code, 'correct': bool(np.allclose(sdfg(A=A), 2 * A))}))\n"
    )
    done = _python(script, tmp_path, DACE_ai_builtin="keep")
    assert done.returncode == 0, done.stderr[-3000:]
    theirs, ours = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
    assert theirs["correct"] and set(theirs["classes"].values()) == {"dace.libraries.ai.nodes.ai_tasklet.AITasklet"}
    assert not any(code.startswith("// dace-ai:") for code in theirs["code"].values())
    assert ours["correct"] and ours["ours"].startswith("// dace-ai:")


@pytest.mark.skipif(DACE2, reason="DaCe 2 has its own AI library; the setting matters there")
def test_builtin_setting_changes_nothing_on_dace_1():
    assert not compat.HAS_BUILTIN_AI and dace_ai.expansion.implementation.IMPLEMENTATION == "ai"
    assert dace.ai is dace_ai.ai


@pytest.mark.parametrize("index", [0, 1])
def test_migration_guide_programs_run(index, tmp_path):
    """docs/user/migration.md's programs run as written, on DaCe 1.0 and 2.0 (the second only acts on 2.0)."""
    import re

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "user" / "migration.md").read_text(), re.DOTALL)
    assert len(blocks) == 2
    done = _python(blocks[index], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert ("implemented by dace-ai" in done.stdout) is (index == 1 and DACE2)
