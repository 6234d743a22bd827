"""Cross targets: the prompt and the checks name the target's own compiler and flags, installed or not.

A vendor's ARM NEON pack on an x86 machine without its cross compiler must not be
told "compiled with c++ -march=native ..." (the x86 host build): the prompt names
``aarch64-none-linux-gnu-g++`` and its flags, and the compile check says that the
compiler is missing (inconclusive) instead of judging the code with the host's compiler.
"""

from __future__ import annotations

import platform
import shutil

import pytest
from dace_ai.checking.levels import verification_level
from dace_ai.checking.stages import check_workdir, run_checks
from dace_ai.config.settings import resolve_settings
from dace_ai.plugin import Detection, Target, hookimpl
from dace_ai.prompt.answer import Answer
from dace_ai.prompt.sections import render_target
from dace_ai.targets.build_flags import build_command, builds_with_dace, dace_build_command, named_machine

from tests.dace_versions import cross_headers_problem
from tests.target_support import axpy_node, target

#: Arm's own toolchain name: absent on a Debian machine (which names its cross compiler aarch64-linux-gnu-g++).
NEON_COMPILER = "aarch64-none-linux-gnu-g++"
NEON_FLAGS = ("-O3", "-march=armv8-a+simd")
NEON_GLOBAL = "#include <arm_neon.h>"
NEON_CODE = (
    "for (int i = 0; i + 2 <= N; i += 2) vst1q_f64(_z + i, vfmaq_n_f64(vld1q_f64(_y + i), "
    "vld1q_f64(_x + i), 2.0));\nif (N % 2) _z[N - 1] = 2 * _x[N - 1] + _y[N - 1];"
)


class _NeonPack:
    """A vendor's NEON target as an outside author writes it: a compiler and flags, no checker of its own."""

    @hookimpl
    def dace_ai_targets(self):
        yield Target(
            name="t-neon",
            kind="cpu",
            priority=1,
            detect=lambda: Detection(False, "test: not ARM"),
            describe=lambda d: "ARMv8-A with Advanced SIMD (NEON), 128-bit vectors.",
            guidance="Use <arm_neon.h> intrinsics (float64x2_t, vld1q_f64, vfmaq_f64).",
            compiler=(NEON_COMPILER,),
            flags=NEON_FLAGS,
        )


@pytest.fixture
def neon(register_dace_ai_plugin):
    if platform.machine() == "aarch64":
        pytest.skip("on an ARM machine NEON code is host code")
    if shutil.which(NEON_COMPILER):
        pytest.skip(f"{NEON_COMPILER} is installed here; this test needs a machine without it")
    register_dace_ai_plugin(_NeonPack(), "neon-pack")
    return target("t-neon")


def test_a_missing_cross_compiler_is_still_a_cross_compiler(neon):
    assert not builds_with_dace(neon)
    assert build_command(neon) == ([NEON_COMPILER], list(NEON_FLAGS))
    host_compiler, host_flags = dace_build_command()
    assert build_command(neon) != (host_compiler, host_flags)


def test_the_prompt_names_the_targets_own_compiler_and_flags_when_it_is_not_installed(neon):
    text = render_target(axpy_node(neon))
    assert f"`{NEON_COMPILER} -O3 -march=armv8-a+simd`" in text
    host_compiler, host_flags = dace_build_command()
    assert "-march=native" not in text and "-fopenmp" not in text  # nothing of the x86 host build
    assert " ".join([*host_compiler, *host_flags]) not in text


def test_the_checks_report_the_missing_cross_compiler_as_inconclusive(neon):
    answer = Answer(code=NEON_CODE, code_global=NEON_GLOBAL)
    node = axpy_node(neon)
    reports = [r for r in run_checks(_request(answer, node)) if not r.details.get("static")]  # the compile ones
    assert [(r.checker, r.status) for r in reports if not r.details.get("static")] == [
        ("probe", "inconclusive")
    ]  # no host verify or bench
    assert f"compiler {NEON_COMPILER!r} not found on PATH" in reports[0].diagnostics
    assert reports[0].details["compiler"] == [NEON_COMPILER] and reports[0].details["flags"] == list(NEON_FLAGS)
    assert verification_level(reports).startswith("unverified: ")


def _request(answer, node):
    from dace_ai.checking.api import CheckRequest

    return CheckRequest(answer, node, resolve_settings(), check_workdir(node, answer))


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-g++") is None, reason="g++-aarch64-linux-gnu is not installed")
@pytest.mark.skipif(
    cross_headers_problem() is not None,
    reason=f"DaCe 2's runtime headers do not compile with this aarch64-linux-gnu-g++: {cross_headers_problem()}",
)
def test_an_installed_cross_compiler_compiles_the_candidate_with_the_targets_flags(register_dace_ai_plugin):
    if platform.machine() == "aarch64":
        pytest.skip("on an ARM machine NEON code is host code")

    class Installed:
        @hookimpl
        def dace_ai_targets(self):
            yield Target(
                name="t-neon-debian",
                kind="cpu",
                detect=lambda: Detection(False, "test"),
                describe=lambda d: "NEON",
                compiler=("aarch64-linux-gnu-g++",),
                flags=NEON_FLAGS,
            )

    register_dace_ai_plugin(Installed(), "neon-debian-pack")
    node = axpy_node(target("t-neon-debian"))
    good = [
        r
        for r in run_checks(_request(Answer(code=NEON_CODE, code_global=NEON_GLOBAL), node))
        if not r.details.get("static")
    ]
    assert [(r.checker, r.status) for r in good if not r.details.get("static")] == [("probe", "passed")]
    assert good[0].details["command"][:3] == ["aarch64-linux-gnu-g++", *NEON_FLAGS]
    typo = Answer(code=NEON_CODE.replace("vfmaq_n_f64", "vfmaq_n_f65"), code_global=NEON_GLOBAL)
    bad = [r for r in run_checks(_request(typo, node)) if not r.details.get("static")]
    assert [(r.checker, r.status) for r in bad if not r.details.get("static")] == [
        ("probe", "failed")
    ] and "vfmaq_n_f65" in bad[0].diagnostics


@pytest.mark.parametrize(
    ("argv", "machine"),
    [
        (("aarch64-linux-gnu-g++",), "aarch64-linux-gnu"),
        (("riscv64-unknown-elf-g++-13",), "riscv64-unknown-elf"),
        (("clang++", "--target=aarch64-linux-gnu"), "aarch64-linux-gnu"),
        (("clang++", "-target", "armv7a-linux-gnueabihf"), "armv7a-linux-gnueabihf"),
        (("x86_64-linux-gnu-g++-12",), "x86_64-linux-gnu"),
        (("g++",), None),
        (("clang++-17",), None),
        (("/opt/bin/c++",), None),
        (("no-such-compiler-c++",), None),
    ],
)
def test_the_machine_a_compiler_is_for_is_read_from_its_name_or_target_flag(argv, machine):
    assert named_machine(argv) == machine
