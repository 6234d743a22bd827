"""Checker selection, stages, the host probe and faithful checkers, and swapping checkers by setting."""

from __future__ import annotations

import json
import os
import pkgutil
import shutil
import sys
from pathlib import Path

import dace
import pytest
from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.checking.candidate_checks import check_candidate
from dace_ai.checking.stages import check_workdir, repair_message, run_checks, select_checkers
from dace_ai.compilation.diagnostics import parse_diagnostics
from dace_ai.config.settings import resolve_settings
from dace_ai.context.types import ConnectorInfo, NodeContext, TargetInfo
from dace_ai.errors import SettingsError
from dace_ai.plugin import Checker, Detection, Target, hookimpl
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.prompt.answer import Answer
from dace_ai.targets.host import host_compiler

from tests.check_support import link_shared_artefacts
from tests.dace_versions import DACE2

REPO = Path(__file__).resolve().parents[1]
GOOD = "for (int i = 0; i < N; ++i) _b[i] = twice(_a[i]);"
BAD = "for (int i = 0; i < N; ++i) _b[i] = twice(_a[i]) + undeclared_value;"
HELPER = "static double twice(double x) { return 2 * x; }"


def vector_connector(name: str, direction: str, container: str) -> ConnectorInfo:
    return ConnectorInfo(
        name=name,
        direction=direction,
        ctype="double*" if direction == "out" else "const double*",
        dtype="double",
        is_pointer=True,
        container=container,
        storage="CPU_Heap",
        subset="0:N",
        shape=("N",),
        strides=("1",),
        container_shape=("N",),
        container_strides=("1",),
        offset="0",
        index_formula=f"{name}[i0]",
        volume="N",
    )


def node_context(target: TargetInfo | None = None, *, name: str = "scale") -> NodeContext:
    compiler, flags = host_compiler()
    target = target or TargetInfo(name="host", kind="cpu", description="this machine", compiler=compiler, flags=flags)
    return NodeContext(
        key=f"{name}_0",
        name=name,
        node_type="AINode",
        library=None,
        doc="",
        description="b = 2 * a",
        properties={},
        inputs=[vector_connector("_a", "in", "A")],
        outputs=[vector_connector("_b", "out", "B")],
        scopes=[],
        symbols={"N": "int"},
        in_gpu_kernel=False,
        gpu_notes="",
        target=target,
        sdfg_name="prog",
    )


def request_for(code: str, node: NodeContext | None = None, **settings) -> CheckRequest:
    node = node or node_context()
    answer = Answer(code=code, code_global=HELPER)
    settings.setdefault("checkers", "probe")  # installed target packs may add default checkers
    return CheckRequest(answer, node, resolve_settings(settings), check_workdir(node, answer))


@pytest.fixture
def runtime_plugins():
    """Register plugin objects for one test and remove them afterwards."""
    names: list[str] = []

    def register(obj, name, distribution="dace-ai-test-runtime"):
        get_plugin_manager().register(obj, name=name, distribution=distribution, version="9.9")
        names.append(name)

    yield register
    for name in names:
        get_plugin_manager().unregister(name)


# ---------------------------------------------------------------------------------------- probe
def test_probe_passes_good_code_and_fails_bad_code_with_stable_diagnostics():
    good = run_checks(request_for(GOOD))
    assert [(r.checker, r.status) for r in good] == [("probe", "passed")]
    request = request_for(BAD)
    reports = run_checks(request)
    assert [(r.checker, r.status) for r in reports] == [("probe", "failed")]
    message = repair_message(reports)
    assert "undeclared_value" in message
    errors = [d for d in parse_diagnostics(reports[0].diagnostics) if d.is_error]
    assert errors and errors[0].file == "tasklet.cpp" and errors[0].line > 0
    assert str(request.workdir) not in message and str(request.workdir.parent) not in message
    assert "/tmp/" not in message


def test_repair_message_is_byte_stable_across_build_roots(tmp_path, shared_artefacts):
    first = repair_message(run_checks(request_for(BAD)))
    dace.Config.set("default_build_folder", value=str(tmp_path / "elsewhere"))
    link_shared_artefacts(tmp_path / "elsewhere", shared_artefacts)
    second = repair_message(run_checks(request_for(BAD)))
    assert first == second and first


@pytest.mark.own_builds
def test_precompiled_header_is_built_once_and_reused_per_compiler_and_flags(_isolated_dace_ai):
    first = run_checks(request_for(GOOD))[0]
    second = run_checks(request_for(GOOD.replace("++i", "i++")))[0]
    assert first.details["pch"] == "pch built" and second.details["pch"] == "pch reused"
    assert len(list((_isolated_dace_ai / "ai-check" / "pch").iterdir())) == 1
    args = dace.Config.get("compiler", "cpu", "args")
    dace.Config.set("compiler", "cpu", "args", value=args + " -DDACE_AI_OTHER_FLAGS=1")
    try:
        third = run_checks(request_for(GOOD))[0]
    finally:
        dace.Config.set("compiler", "cpu", "args", value=args)
    assert third.status == "passed" and third.details["pch"] == "pch built"
    assert len(list((_isolated_dace_ai / "ai-check" / "pch").iterdir())) == 2


def test_missing_compiler_is_inconclusive_not_failure():
    dace.Config.set("compiler", "cpu", "executable", value="no-such-compiler-c++")  # DaCe's build compiler
    try:
        reports = run_checks(request_for(BAD))
    finally:
        dace.Config.set("compiler", "cpu", "executable", value="")
    assert [(r.checker, r.status) for r in reports] == [("probe", "inconclusive")]
    assert "no-such-compiler-c++" in reports[0].diagnostics
    assert repair_message(reports) == ""


def test_missing_header_of_a_requested_environment_is_inconclusive_but_an_unknown_include_fails():
    node = node_context()
    with_env = Answer(
        code=GOOD, code_global=HELPER, environments=[{"name": "Exotic", "headers": ["exotic_lib_ai_test.h"]}]
    )
    settings = resolve_settings({"checkers": "probe"})
    report = run_checks(CheckRequest(with_env, node, settings, check_workdir(node, with_env)))[0]
    assert report.status == "inconclusive" and "exotic_lib_ai_test.h" in report.diagnostics
    stray = Answer(code=GOOD, code_global='#include "exotic_lib_ai_test.h"\n' + HELPER)
    report = run_checks(CheckRequest(stray, node, settings, check_workdir(node, stray)))[0]
    assert report.status == "failed" and "exotic_lib_ai_test.h" in report.diagnostics


def test_probe_does_not_apply_to_gpu_targets():
    target = TargetInfo(name="gpu", kind="gpu", description="", language="cuda")
    assert run_checks(request_for(BAD, node_context(target))) == []


# -------------------------------------------------------------------------------------- selection
def test_compile_check_false_runs_nothing():
    assert run_checks(request_for(BAD, compile_check=False)) == []


def test_unknown_checker_setting_is_a_clear_error_listing_installed_ones():
    with pytest.raises(SettingsError) as info:
        run_checks(request_for(GOOD, checkers="probe,no-such-checker"))
    message = str(info.value)
    assert "'no-such-checker'" in message and "probe" in message and "faithful" in message
    assert "argument" in message  # the source of the setting


class _Plugin:
    def __init__(self, *checkers):
        self._checkers = checkers

    @hookimpl
    def dace_ai_checkers(self):
        yield from self._checkers


def _report(name, status):
    return lambda request: CheckReport(name, status, f"{name} says {status}")


def test_stages_run_in_order_and_stop_after_the_first_failed_stage(runtime_plugins):
    calls: list[str] = []

    def recording(name, status):
        def check(request):
            calls.append(name)
            return CheckReport(name, status, f"{name}: {status}")

        return check

    runtime_plugins(
        _Plugin(
            Checker(name="t-bench", stage="bench", check=recording("t-bench", "passed")),
            Checker(name="t-verify", stage="verify", check=recording("t-verify", "failed")),
            Checker(name="t-compile", stage="compile", check=recording("t-compile", "passed")),
            Checker(name="t-skip", stage="compile", check=recording("t-skip", "failed"), applies=lambda request: False),
        ),
        "stage-plugin",
    )
    reports = run_checks(request_for(GOOD, checkers="t-bench,t-verify,t-compile,t-skip"))
    assert calls == ["t-compile", "t-verify"]
    assert [(r.checker, r.status, r.stage) for r in reports] == [
        ("t-compile", "passed", "compile"),
        ("t-verify", "failed", "verify"),
    ]
    assert "Check 't-verify' (stage verify) failed" in repair_message(reports)


def test_a_raising_checker_is_inconclusive_and_names_its_distribution(runtime_plugins):
    def explode(request):
        raise RuntimeError("checker bug")

    runtime_plugins(
        _Plugin(Checker(name="t-broken", stage="compile", check=explode)),
        "broken-checker",
        distribution="dace-ai-test-broken-checker",
    )
    reports = run_checks(request_for(GOOD, checkers="t-broken"))
    assert [(r.checker, r.status) for r in reports] == [("t-broken", "inconclusive")]
    assert "dace-ai-test-broken-checker" in reports[0].diagnostics and "checker bug" in reports[0].diagnostics


def test_defaults_plus_the_checkers_named_by_the_target(runtime_plugins):
    runtime_plugins(
        _Plugin(
            Checker(name="t-rvv", stage="compile", check=_report("t-rvv", "passed"), default=False),
            Checker(name="t-off", stage="compile", check=_report("t-off", "passed"), default=False),
        ),
        "rvv-checkers",
    )

    class Targets:
        @hookimpl
        def dace_ai_targets(self):
            yield Target(
                name="t-rvv-target",
                kind="cpu",
                detect=lambda: Detection(False, "test"),
                describe=lambda d: "test",
                checkers=("t-rvv", "t-not-installed"),
            )

    runtime_plugins(Targets(), "rvv-target")
    node = node_context(TargetInfo(name="t-rvv-target", kind="cpu", description=""))
    chosen, missing = select_checkers(node, resolve_settings())
    names = [c.name for c in chosen]
    assert "probe" in names and "t-rvv" in names and "t-off" not in names and "faithful" not in names
    assert [(r.checker, r.status) for r in missing] == [("t-not-installed", "inconclusive")]
    host_names = [c.name for c in select_checkers(node_context(), resolve_settings())[0]]
    assert "probe" in host_names and "t-rvv" not in host_names


def test_plus_and_minus_entries_add_to_and_remove_from_the_defaults(runtime_plugins):
    runtime_plugins(
        _Plugin(Checker(name="t-strict", stage="verify", check=_report("t-strict", "passed"), default=False)),
        "strict-checker",
    )
    node = node_context()
    defaults = [c.name for c in select_checkers(node, resolve_settings())[0]]
    assert "t-strict" not in defaults and "probe" in defaults
    added = [c.name for c in select_checkers(node, resolve_settings({"checkers": "+t-strict"}))[0]]
    assert sorted(added) == sorted([*defaults, "t-strict"])
    swapped = [c.name for c in select_checkers(node, resolve_settings({"checkers": "+t-strict,-probe"}))[0]]
    assert sorted(swapped) == sorted([n for n in defaults if n != "probe"] + ["t-strict"])
    # the added verify-stage checker runs with its stage: after compile checks, before the bench
    assert added.index("t-strict") > added.index("probe") and added.index("t-strict") < added.index("bench")
    with pytest.raises(SettingsError, match=r"mixes plain names with \+name/-name entries"):
        select_checkers(node, resolve_settings({"checkers": "probe,+t-strict"}))
    with pytest.raises(
        SettingsError, match=r"'t-strikt'.*names no installed checker. Did you mean 't-strict'\?.*Installed: .*t-strict"
    ):
        select_checkers(node, resolve_settings({"checkers": "+t-strikt"}))


# ------------------------------------------------------------------- the public entry: one candidate
@pytest.fixture
def without_the_expansion(monkeypatch):
    """While the test runs, importing any module of ``dace_ai.expansion``, ``dace_ai.solving`` or
    ``dace_ai.workflows`` raises ImportError."""
    import importlib

    for name in ("dace_ai.expansion", "dace_ai.solving", "dace_ai.workflows"):
        package = importlib.import_module(name)
        monkeypatch.setitem(sys.modules, name, None)
        for module in pkgutil.iter_modules(package.__path__):
            monkeypatch.setitem(sys.modules, f"{name}.{module.name}", None)


def test_check_candidate_passes_a_correct_answer_and_fails_a_wrong_one_without_the_expansion(without_the_expansion):
    settings = resolve_settings({"checkers": "probe"})
    with pytest.raises(ImportError):
        import dace_ai.solving.tasklet  # noqa: F401 - the fixture works
    good = check_candidate(Answer(code=GOOD, code_global=HELPER), node_context(), settings)
    assert [(r.checker, r.status, r.stage) for r in good] == [("probe", "passed", "compile")]
    bad = check_candidate(Answer(code=BAD, code_global=HELPER), node_context(), settings)
    assert [(r.checker, r.status) for r in bad] == [("probe", "failed")]
    assert "undeclared_value" in repair_message(bad)
    off = resolve_settings({"checkers": "probe", "compile_check": False})
    assert check_candidate(Answer(code=BAD, code_global=HELPER), node_context(), off) == []


def test_check_candidate_hands_the_checkers_its_environments_and_tasklet_factory(runtime_plugins):
    seen: list[CheckRequest] = []

    def look(request):
        seen.append(request)
        return CheckReport("t-look", "passed")

    runtime_plugins(_Plugin(Checker(name="t-look", stage="compile", check=look)), "look-checker")
    answer, node = Answer(code=GOOD, code_global=HELPER), node_context()

    def factory(environments, sdfg):
        return ("tasklet", environments, sdfg)

    reports = check_candidate(answer, node, resolve_settings({"checkers": "t-look"}), ["a.B"], make_tasklet=factory)
    assert [(r.checker, r.status) for r in reports] == [("t-look", "passed")]
    [request] = seen
    assert request.answer is answer and request.node is node and request.environments == {"a.B"}
    assert request.make_tasklet is factory and request.workdir == check_workdir(node, answer)
    assert request.workdir.is_dir()


# -------------------------------------------------------------------------------------- faithful
def live_program() -> tuple[dace.SDFG, dace.SDFGState, object]:
    """A real SDFG with a node whose connectors match :func:`node_context`."""
    n = dace.symbol("N")
    sdfg = dace.SDFG("prog")
    sdfg.add_array("A", [n], dace.float64)
    sdfg.add_array("B", [n], dace.float64)
    state = sdfg.add_state("main")
    node = state.add_tasklet("scale", {"_a"}, {"_b"}, "", language=dace.Language.CPP)
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet("A[0:N]"))
    state.add_edge(node, "_b", state.add_write("B"), None, dace.Memlet("B[0:N]"))
    return sdfg, state, node


def test_faithful_check_builds_with_dace_and_reports_the_compiler_error_with_debugprint_on(monkeypatch):
    monkeypatch.setenv("DACE_debugprint", "1")
    node = node_context()
    sdfg, state, live_node = live_program()
    node.live = {"sdfg": sdfg, "state": state, "node": live_node}
    request = request_for(BAD, node, checkers="faithful")
    reports = run_checks(request)
    assert [(r.checker, r.status) for r in reports] == [("faithful", "failed")]
    assert "undeclared_value" in reports[0].diagnostics and "error" in reports[0].diagnostics
    assert str(request.workdir) not in repair_message(reports)
    assert list((request.workdir / "program" / "src" / "cpu").glob("*.cpp"))  # built where it belongs
    # restored (DaCe 2 reads DACE_debugprint when its configuration loads, not in Config.get)
    assert os.environ["DACE_debugprint"] == "1" and (DACE2 or dace.config.Config.get("debugprint") == "1")
    node.live = {}  # rebuilt from the context alone
    good = run_checks(request_for(GOOD, node, checkers="faithful"))
    assert [(r.checker, r.status) for r in good] == [("faithful", "passed")]


# ------------------------------------------------------------------ a checker from another distribution
@pytest.fixture(scope="session")
def clang_checker_site(tmp_path_factory):
    """The test distribution dace-ai-test-clang-checker, built and installed into a private site folder."""
    from tests.distributions import build_wheel, install_wheels

    work = tmp_path_factory.mktemp("clang_checker")
    source = work / "src"
    shutil.copytree(
        REPO / "tests" / "data" / "clang_checker", source, ignore=shutil.ignore_patterns("build", "*.egg-info")
    )
    wheel = build_wheel(source, work / "wheels")
    return install_wheels([wheel], work / "site")


_SWAP_SCRIPT = f"""
import json, sys
sys.path.insert(0, {str(REPO)!r})
import dace
dace.Config.set('default_build_folder', value=sys.argv[-1] if len(sys.argv) > 1 else '.dacecache')
from tests.test_checking import request_for, BAD
from dace_ai.checking.stages import run_checks, repair_message
reports = run_checks(request_for(BAD, checkers=None))
print(json.dumps({{"reports": [[r.checker, r.status, r.details.get("origin", "")] for r in reports],
                   "message": repair_message(reports)}}))
"""


@pytest.mark.skipif(shutil.which("clang++") is None, reason="clang++ is not installed")
def test_checker_swapped_by_setting_only(clang_checker_site, tmp_path):
    from tests.distributions import run_json

    script = _SWAP_SCRIPT.replace("'.dacecache'", repr(str(tmp_path / ".dacecache")))
    default = run_json(script, clang_checker_site)
    assert ["probe", "failed"] in [r[:2] for r in default["reports"]]
    assert "clang-syntax" not in [r[0] for r in default["reports"]]
    swapped = run_json(script, clang_checker_site, env={"DACE_ai_checkers": "clang-syntax"})
    assert [r[:2] for r in swapped["reports"]] == [["clang-syntax", "failed"]]
    assert "dace-ai-test-clang-checker" in swapped["reports"][0][2]
    assert "use of undeclared identifier 'undeclared_value'" in swapped["message"]  # clang's wording
    assert json.dumps(swapped["message"]).count("tasklet.cpp") >= 1


# ----------------------------------------------------------------------------------- diagnostics
GCC_OUTPUT = """\
[ 50%] Building CXX object CMakeFiles/prog.dir/src/cpu/prog.cpp.o
/b/.dacecache/prog/src/cpu/prog.cpp: In function 'void f()':
/b/.dacecache/prog/src/cpu/prog.cpp:11:15: error: redefinition of 'double helper(double)'
   11 | static double helper(double x) { return x + 1.0; }
      |               ^~~~~~
/b/.dacecache/prog/src/cpu/prog.cpp:9:15: note: 'double helper(double)' previously defined here
    9 | static double helper(double x) { return 2.0 * x; }
/b/.dacecache/prog/src/cpu/prog.cpp:20: warning: ignoring '#pragma omp critical' [-Wunknown-pragmas]
gmake[2]: *** [CMakeFiles/prog.dir/build.make:76: CMakeFiles/prog.dir/src/cpu/prog.cpp.o] Error 1
"""
NVCC_OUTPUT = """\
kernel.cu(12): error: identifier "undeclared" is undefined
      out[i] = undeclared;
               ^
kernel.cu(3): warning #177-D: variable "x" was declared but never referenced

1 error detected in the compilation of "kernel.cu".
"""


def test_diagnostics_of_gcc_clang_nvcc_and_the_linker_are_parsed_with_locations():
    gcc = parse_diagnostics(GCC_OUTPUT)
    assert [(d.file.rsplit("/", 1)[-1], d.line, d.column, d.severity) for d in gcc] == [
        ("prog.cpp", 11, 15, "error"),
        ("prog.cpp", 9, 15, "note"),
        ("prog.cpp", 20, None, "warning"),
    ]
    assert gcc[0].preamble and "In function" in gcc[0].preamble[0]
    assert "^~~~~~" in gcc[0].text and "gmake" not in gcc[1].text  # build noise is not a diagnostic's text
    clang = parse_diagnostics(
        "tasklet.cpp:3:5: error: use of undeclared identifier 'x'\n    x = 1;\n    ^\n1 error generated.\n"
    )
    assert [(d.line, d.column, d.message) for d in clang] == [(3, 5, "use of undeclared identifier 'x'")]
    assert clang[0].lines[-1].strip() == "^"
    nvcc = parse_diagnostics(NVCC_OUTPUT)
    assert [(d.file, d.line, d.severity) for d in nvcc] == [("kernel.cu", 12, "error"), ("kernel.cu", 3, "warning")]
    assert nvcc[0].message == 'identifier "undeclared" is undefined' and "^" in nvcc[0].text
    linker = parse_diagnostics(
        "/usr/bin/ld: prog.o: in function `f':\n"
        "prog.cpp:(.text+0x1c): undefined reference to `missing_fn'\n"
        "collect2: error: ld returned 1 exit status\n"
    )
    assert [(d.line, d.severity) for d in linker if "missing_fn" in d.message] == [(0, "error")]
