"""Checks that tell the truth: compile like the real build, never accept silently, cache only what passed,
and fall back to the native expansion (or stop) when no answer passes. Real compiles and real DaCe runs.

No ``from __future__ import annotations`` here: DaCe reads the programs' annotations as objects."""

import json
import warnings
from pathlib import Path

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.checking.artefacts import Artefacts
from dace_ai.checking.levels import verification_level
from dace_ai.checking.stages import check_workdir, run_checks
from dace_ai.compilation.compile import COMPILED
from dace_ai.config.settings import resolve_settings
from dace_ai.errors import CheckFailed, InconclusiveCheckWarning, NativeFallbackWarning
from dace_ai.plugin import Checker, hookimpl
from dace_ai.prompt.answer import Answer
from dace_ai.providers.api import current_node
from dace_ai.solving.provenance import level_from_code
from dace_ai.storage.cache import AnswerCache
from dace_ai.testing import FakeProvider

from tests.dace_versions import DACE2
from tests.host_cpu import needs_cpu
from tests.test_checking import node_context

N = dace.symbol("N")
if DACE2:  # DaCe 2 builds with C++20 (compiler.cpp_standard), which has no std::to_underlying (C++23)
    CLAMP = (
        "for (int i = 0; i < N; ++i) _b[i] = std::min(std::max(_a[i], 0.0), 1.0) * std::to_underlying(std::byte{1});"
    )
    STANDARD, REFUSAL, NEWER = "c++20", "'to_underlying' is not a member of 'std'", "23"
else:  # DaCe 1.0 builds with -std=c++14 (in compiler.cpu.args), which has no std::clamp (C++17)
    CLAMP = "for (int i = 0; i < N; ++i) _b[i] = std::clamp(_a[i], 0.0, 1.0);"
    STANDARD, REFUSAL, NEWER = "c++14", "'clamp' is not a member of 'std'", "17"
GOOD_GEMM = (
    "for (int i = 0; i < M; ++i) for (int j = 0; j < N; ++j) { double s = 0; "
    "for (int k = 0; k < K; ++k) s += _a[i * K + k] * _b[k * N + j]; _c[i * N + j] = s; }"
)
BROKEN = "this is not C++ at all;"


@pytest.fixture
def provider(register_dace_ai_plugin):
    """A scripted provider answering by node name (code text per node, or a list used in order)."""
    answers: dict[str, object] = {}
    fake = FakeProvider()

    def answer(request):
        script = answers[current_node().name]
        code = (
            script.pop(0)
            if isinstance(script, list) and len(script) > 1
            else (script[0] if isinstance(script, list) else script)
        )
        return json.dumps({"code": code, "code_global": "#include <algorithm>"})

    fake.queue(*[answer] * 50)
    register_dace_ai_plugin(fake.plugin("scripted"), "scripted-provider")
    dace.Config.set("ai", "provider", value="scripted")
    dace.Config.set("ai", "max_repair_attempts", value=1)
    dace.Config.set("ai", "checkers", value="probe")  # the compile stage alone: levels are "compile-only"
    fake.answers = answers
    yield fake
    for key, value in (
        ("provider", ""),
        ("max_repair_attempts", 2),
        ("on_failure", ""),
        ("on_inconclusive", "warn"),
        ("checkers", ""),
    ):
        dace.Config.set("ai", key, value=value)


def cache_entries() -> list[Path]:
    folder = AnswerCache().folder
    return sorted(folder.rglob("*.json")) if folder.is_dir() else []


def ai_program():
    @dace.program
    def clampit(A: dace.float64[N], B: dace.float64[N]):
        dace_ai.ai("Write _out[i] = clamp(_a[i], 0, 1) for every i < N.", a=A, out=B, name="clampit")

    return clampit.to_sdfg()


def gemm_program(implementation: str = "ai"):
    from tests.target_support import gemm_sdfg

    sdfg, _, node = gemm_sdfg()
    node.implementation = implementation
    return sdfg, node


# ------------------------------------------------------------------------------------ compile like the build
def test_std_clamp_is_refused_by_the_compile_stage_with_the_compilers_message():
    """DaCe builds with -std=c++14 (1.0) or C++20 (2.0): code only another standard accepts must not pass."""
    node = node_context()
    answer = Answer(code=CLAMP, code_global="#include <algorithm>")
    request = CheckRequest(answer, node, resolve_settings({"checkers": "probe"}), check_workdir(node, answer))
    [report] = run_checks(request)
    assert report.status == "failed"
    assert REFUSAL in report.diagnostics  # the compiler's own words
    assert f"-std={STANDARD}" in report.details["command"] and "-march=native" in report.details["command"]
    from dace_ai.targets.build_flags import BUILD_TYPE_FLAGS

    build_type = BUILD_TYPE_FLAGS[dace.Config.get("compiler", "build_type").lower()]  # RelWithDebInfo on 1.0
    assert "-fopenmp" in report.details["command"] and build_type[0] in report.details["command"]  # CMake's

    key = ("compiler", "cpp_standard") if DACE2 else ("compiler", "cpu", "args")
    before = dace.Config.get(*key)
    dace.Config.set(*key, value=NEWER if DACE2 else before.replace("-std=c++14", f"-std=c++{NEWER}"))
    try:  # the same answer passes when the real build is newer: the check follows DaCe's configuration
        again = CheckRequest(answer, node, resolve_settings({"checkers": "probe"}), check_workdir(node, answer))
        assert [r.status for r in run_checks(again)] == ["passed"]
    finally:
        dace.Config.set(*key, value=before)


def test_the_prompt_states_the_real_compiler_standard_and_flags():
    from dace_ai.prompt.sections import render_target
    from dace_ai.targets.build_flags import dace_compiler

    text = render_target(node_context())
    assert f"`{dace_compiler()} -std={STANDARD}" in text and f"C++ standard `{STANDARD}`" in text
    assert "-march=native" in text and "-fopenmp" in text


@needs_cpu("avx2", "fma", why="the x86-isa check passes AVX2 code only where -march=native allows it")
def test_one_compile_serves_the_probe_and_the_isa_check():
    from tests.target_support import answer as recorded
    from tests.target_support import gemm_node, target

    node = gemm_node(target("x86-avx512"))
    ans = recorded("x86", "avx2_gemm")
    request = CheckRequest(ans, node, resolve_settings({"checkers": "probe,x86-isa"}), check_workdir(node, ans))
    store = Artefacts()
    reports = run_checks(request, artefacts=store)
    assert [(r.checker, r.status) for r in reports] == [("probe", "passed"), ("x86-isa", "passed")]
    assert sorted(p.name for p in request.workdir.iterdir()) == ["compile"]  # one unit, one object
    assert (request.workdir / "compile" / "tasklet.o").is_file()
    assert store[COMPILED].command == reports[0].details["command"]


def test_faithful_check_never_loads_the_library_even_with_the_compiler_cache_on():
    from dace_ai.checkers.host_compile import faithful_check

    node = node_context()
    answer = Answer(code="for (int i = 0; i < N; ++i) _b[i] = 2 * _a[i];")
    request = CheckRequest(answer, node, resolve_settings({"checkers": "faithful"}), check_workdir(node, answer))
    previous = dace.Config.get_bool("compiler", "use_cache")
    dace.Config.set("compiler", "use_cache", value=True)
    try:
        assert faithful_check(request).status == "passed"
        assert faithful_check(request).status == "passed"  # the library now exists: DaCe's compile would load it
    finally:
        dace.Config.set("compiler", "use_cache", value=previous)
    libraries = list((request.workdir / "program" / "build").glob("lib*.so"))
    assert libraries
    maps = Path("/proc/self/maps").read_text()
    assert not any(str(lib) in maps for lib in libraries)
    assert not Path("_dacegraphs").exists()


# ------------------------------------------------------------------------------------ verification levels
def _r(checker, status, stage, **details):
    return CheckReport(checker, status, "", details={"stage": stage, **details})


def test_verification_level_from_reports():
    assert (
        verification_level([_r("probe", "passed", "compile"), _r("verify", "passed", "verify", seeds=3)])
        == "verified (3 seeds)"
    )
    varied = _r(
        "verify",
        "passed",
        "verify",
        seeds=3,
        sizes=[{"N": 13}, {"N": 67}],
        bench_sizes={"N": 65536},
        threads={"runs": [{"threads": [1, 2, 2]}]},
        distributions={"ran": {"unit": [], "large": [1e4], "zeros": []}},
    )
    assert (
        verification_level([_r("probe", "passed", "compile"), varied])
        == "verified (3 seeds, 3 sizes, 2 thread counts, 3 distributions)"
    )
    assert (
        verification_level([varied, _r("sanitizers", "passed", "verify", sanitizers=["address"])])
        == "verified (3 seeds, 3 sizes, 2 thread counts, 3 distributions, sanitizers)"
    )
    assert (
        verification_level([varied, _r("sanitizers", "inconclusive", "verify", sanitizers=[], reason="clang missing")])
        == "verified (3 seeds, 3 sizes, 2 thread counts, 3 distributions, no sanitizers: clang missing)"
    )
    assert (
        verification_level(
            [_r("probe", "passed", "compile"), _r("verify", "inconclusive", "verify", reason="no reference")]
        )
        == "unverified: no reference"
    )
    assert verification_level([_r("probe", "passed", "compile"), _r("x86-isa", "passed", "compile")]) == "compile-only"
    assert verification_level([]) == "unverified: checks are off"
    missing = CheckReport("probe", "inconclusive", "compiler 'x' not found on PATH\nmore", details={"stage": "compile"})
    assert verification_level([missing]) == "unverified: probe: compiler 'x' not found on PATH"
    assert level_from_code("// dace-ai: node=n verification=verified (3 seeds)\nx = 1;") == "verified (3 seeds)"


def test_accepted_answer_carries_its_level_in_provenance_session_and_cache(provider):
    provider.answers["clampit"] = "for (int i = 0; i < N; ++i) _out[i] = std::min(std::max(_a[i], 0.0), 1.0);"
    sdfg = ai_program()
    sdfg.expand_library_nodes()
    [tasklet] = [
        n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet) and "dace-ai:" in n.code.as_string
    ]
    first_line = tasklet.code.as_string.splitlines()[0]
    assert first_line.endswith("verification=compile-only"), first_line
    [session] = list(Path(".dacecache/ai-sessions").glob("*/session.json"))
    assert json.loads(session.read_text())["verification"] == "compile-only"
    assert [s["verification"] for s in dace_ai.list_sessions()] == ["compile-only"]
    [entry] = cache_entries()
    stored = json.loads(entry.read_text())
    assert (
        stored["verification"] == "compile-only"
        and {"checker": "probe", "status": "passed", "stage": "compile"} in stored["checks"]
    )


# ------------------------------------------------------------------------------------ cache only what passed
def test_a_refused_answer_leaves_nothing_in_the_cache(provider):
    provider.answers["clampit"] = CLAMP.replace("_b[i]", "_out[i]")  # C++17 only: refused every round
    sdfg = ai_program()
    with pytest.raises(CheckFailed) as info:  # an AINode has no native implementation: on_failure is error
        sdfg.expand_library_nodes()
    assert "'clampit'" in str(info.value) and "clamp" in str(info.value)
    assert cache_entries() == []
    asked = len(provider.requests)
    provider.answers["clampit"] = "for (int i = 0; i < N; ++i) _out[i] = std::min(std::max(_a[i], 0.0), 1.0);"
    ai_program().expand_library_nodes()  # a later run asks again instead of replaying the refused answer
    assert len(provider.requests) == asked + 1
    assert len(cache_entries()) == 1


def test_generate_caches_only_answers_that_pass_and_prints_their_level(provider):
    provider.answers["clampit"] = CLAMP.replace("_b[i]", "_out[i]")
    summary = dace_ai.generate(ai_program())
    assert summary.failed == 1 and "refused by its checks" in summary.nodes[0].error
    assert cache_entries() == []
    provider.answers["clampit"] = "for (int i = 0; i < N; ++i) _out[i] = std::min(std::max(_a[i], 0.0), 1.0);"
    summary = dace_ai.generate(ai_program())
    assert summary.generated == 1 and summary.nodes[0].verification == "compile-only"
    assert "clampit: compile-only" in str(summary)
    again = dace_ai.generate(ai_program())
    assert again.cached == 1 and "clampit: compile-only" in str(again)


# ------------------------------------------------------------------------------------ never silent
class _Exploding:
    @hookimpl
    def dace_ai_checkers(self):
        def explode(request):
            raise RuntimeError("checker bug")

        yield Checker(name="t-explode", stage="compile", check=explode, default=False)


def test_a_raising_checker_warns_by_default_and_is_refused_with_reject(provider, register_dace_ai_plugin):
    register_dace_ai_plugin(_Exploding(), "exploding-checker")
    dace.Config.set("ai", "checkers", value="probe,t-explode")
    provider.answers["clampit"] = "for (int i = 0; i < N; ++i) _out[i] = std::min(std::max(_a[i], 0.0), 1.0);"
    with pytest.warns(InconclusiveCheckWarning, match=r"'clampit'.*t-explode.*checker bug.*session: .*ai-sessions"):
        ai_program().expand_library_nodes()
    assert len(cache_entries()) == 1

    dace.Config.set("ai", "on_inconclusive", value="reject")
    provider.answers["clampit"] = "for (int i = 0; i < N; ++i) _out[i] = std::max(std::min(_a[i], 1.0), 0.0);"
    for entry in cache_entries():
        entry.unlink()
    with pytest.raises(CheckFailed, match=r"'clampit'.*could not decide.*t-explode.*on_inconclusive=reject"):
        ai_program().expand_library_nodes()
    assert cache_entries() == []


def test_a_missing_compiler_is_inconclusive_and_warns(provider):
    provider.answers["clampit"] = "for (int i = 0; i < N; ++i) _out[i] = std::min(std::max(_a[i], 0.0), 1.0);"
    dace.Config.set("ai", "checkers", value="probe")
    sdfg = ai_program()
    dace.Config.set("compiler", "cpu", "executable", value="no-such-compiler-c++")
    try:
        with pytest.warns(InconclusiveCheckWarning, match="no-such-compiler-c\\+\\+"):
            sdfg.expand_library_nodes()
    finally:
        dace.Config.set("compiler", "cpu", "executable", value="")
    [tasklet] = [
        n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet) and "dace-ai:" in n.code.as_string
    ]
    assert (
        level_from_code(tasklet.code.as_string)
        == "unverified: probe: compiler 'no-such-compiler-c++' not found on PATH"
    )


# ------------------------------------------------------------------------------------ on_failure
def test_on_failure_native_runs_the_program_natively_with_a_warning(provider):
    provider.answers["gemm"] = BROKEN
    sdfg, _ = gemm_program()
    with pytest.warns(NativeFallbackWarning) as record:
        compiled = sdfg.compile()
    # (DaCe 2's own native expansions warn about set-valued connectors too.)
    message = str(next(r for r in record if issubclass(r.category, NativeFallbackWarning)).message)
    assert "'gemm'" in message and "Gemm" in message and "session: " in message and "ai-sessions" in message
    assert "'pure'" in message
    A, B = np.random.rand(5, 7), np.random.rand(7, 3)
    C = np.zeros((5, 3))
    compiled(A=A, B=B, C=C, M=5, N=3, K=7)
    np.testing.assert_allclose(C, A @ B)
    assert cache_entries() == []
    [session] = list(Path(".dacecache/ai-sessions").glob("*/session.json"))
    summary = json.loads(session.read_text())
    assert summary["fallback"]["implementation"] == "pure"
    assert [r["status"] for r in summary["rounds"]] == ["rejected", "rejected"]


def test_on_failure_error_raises_a_short_clear_error(provider):
    provider.answers["gemm"] = BROKEN
    dace.Config.set("ai", "on_failure", value="error")
    sdfg, _ = gemm_program()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NativeFallbackWarning)
        with pytest.raises(CheckFailed) as info:
            sdfg.expand_library_nodes()
    text = str(info.value)
    assert text.startswith("node 'gemm' (Gemm) in SDFG 'gemm_targets' still fails its checks (probe")
    assert "after 1 repair attempt(s); session: " in text and len(text.splitlines()) <= 14
    assert cache_entries() == []


def test_on_failure_setting_is_validated():
    from dace_ai.errors import SettingsError

    with pytest.raises(SettingsError, match="on_failure"):
        resolve_settings({"on_failure": "retry"})
    with pytest.raises(SettingsError, match="on_inconclusive"):
        resolve_settings({"on_inconclusive": "ignore"})


def test_manual_exchange_reads_the_edited_response_after_a_refusal_and_prints_the_level(tmp_path):
    prompts = tmp_path / "prompts"
    dace.Config.set("ai", "max_repair_attempts", value=1)
    dace.Config.set("ai", "checkers", value="probe")
    try:
        files = dace_ai.generate_prompts(ai_program(), prompts)
        [response] = [f.response for f in files]
        response.write_text(
            json.dumps({"code": CLAMP.replace("_b[i]", "_out[i]"), "code_global": "#include <algorithm>"})
        )
        first = dace_ai.read_prompt_responses(ai_program(), prompts)
        # refused, reported with the repair prompt to answer
        assert first.expanded == [] and [f.node for f in first.failed] == ["clampit"] and first.missing == []
        assert cache_entries() == []
        response.write_text(
            json.dumps({"code": "for (int i = 0; i < N; ++i) _out[i] = std::min(std::max(_a[i], 0.0), 1.0);"})
        )
        second = dace_ai.read_prompt_responses(ai_program(), prompts)
        assert second.expanded == ["clampit"] and second.verification == {"clampit": "compile-only"}
        assert "clampit: compile-only" in str(second)
        assert len(cache_entries()) == 1
    finally:
        dace.Config.set("ai", "max_repair_attempts", value=2)
        dace.Config.set("ai", "checkers", value="")


def test_build_prints_the_level_of_every_generated_tasklet(provider, capsys):
    provider.answers["clampit"] = "for (int i = 0; i < N; ++i) _out[i] = std::min(std::max(_a[i], 0.0), 1.0);"
    sdfg = ai_program()
    program = dace_ai.build(sdfg)
    assert "clampit: compile-only" in capsys.readouterr().err
    A = np.linspace(-1, 2, 9).copy()
    B = np.zeros(9)
    program(A=A, B=B, N=9)
    np.testing.assert_allclose(B, np.clip(A, 0, 1))


def assert_verify_is_installed() -> None:
    """The built-in ``verify`` checker is registered: a missing one is a broken install, never a reason to skip."""
    from dace_ai.plugins.manager import get_plugin_manager

    installed = get_plugin_manager().checkers()
    assert "verify" in installed, f"the built-in verify checker is not registered; installed: {', '.join(installed)}"


def test_a_verified_answer_is_marked_verified_in_its_provenance(provider):
    assert_verify_is_installed()
    dace.Config.set("ai", "checkers", value="")  # the defaults, the verify stage included
    provider.answers["gemm"] = GOOD_GEMM
    sdfg, _ = gemm_program()
    sdfg.expand_library_nodes()
    [tasklet] = [
        n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet) and "dace-ai:" in n.code.as_string
    ]
    level = level_from_code(tasklet.code.as_string)
    assert level is not None and level.startswith("verified (3 seeds, ") and " distributions" in level, level
    [entry] = cache_entries()
    assert json.loads(entry.read_text())["verification"] == level


def test_a_wrong_matmul_is_refused_by_verification_and_the_program_runs_natively(provider):
    assert_verify_is_installed()
    dace.Config.set("ai", "checkers", value="")  # the defaults, the verify stage included
    M, K = dace.symbol("M"), dace.symbol("K")

    @dace.program
    def matmul(A: dace.float64[N, K], B: dace.float64[K, M], C: dace.float64[N, M]):
        C[:] = A @ B

    sdfg = matmul.to_sdfg()
    [node] = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.LibraryNode)]
    node.implementation = "ai"
    provider.answers[node.name] = "for (int i = 0; i < N * M; ++i) _c[i] = 1.0;"  # compiles, is wrong
    with pytest.warns(NativeFallbackWarning, match=rf"'{node.name}' \(MatMul\).*session: .*ai-sessions"):
        compiled = sdfg.compile()
    A, B = np.random.rand(5, 7), np.random.rand(7, 3)
    C = np.zeros((5, 3))
    compiled(A=A, B=B, C=C, N=5, K=7, M=3)
    np.testing.assert_allclose(C, A @ B)
    assert cache_entries() == []
