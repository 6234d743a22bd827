"""``dace-ai targets`` and the prompt: what is installed, detected and chosen, by installation alone."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from dace_ai.cli.targets import main

from tests.distributions import REPO, build_wheel, install_wheels, run_json
from tests.target_support import gemm_prompt_sections

PACKS = {
    "x86-avx2": "dace-ai-x86",
    "x86-avx512": "dace-ai-x86",
    "sve": "dace-ai-sve",
    "cuda": "dace-ai-cuda",
    "hip": "dace-ai-hip",
    "host": "dace-ai",
}


def _report(capsys, argv=("--json",)) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_json_lists_every_pack_with_distribution_detection_and_choice(capsys):
    report = _report(capsys)
    rows = {row["name"]: row for row in report["targets"]}
    for name, dist in PACKS.items():
        assert rows[name]["distribution"] == dist and rows[name]["version"]
    assert [r["priority"] for r in report["targets"]] == sorted(
        (r["priority"] for r in report["targets"]), reverse=True
    )
    assert rows["sve"]["flags"] == ["-O3", "-march=armv8-a+sve"] and rows["sve"]["checkers"] == [
        "sve-compile",
        "sve-vector-lengths",
    ]
    detected_cpu = [r for r in report["targets"] if r["kind"] == "cpu" and r["detected"]]
    assert report["chosen"]["cpu"]["name"] == detected_cpu[0]["name"]  # highest priority that matched
    assert report["chosen"]["cpu"]["reason"].startswith("detected:")
    if not any(r["detected"] for r in report["targets"] if r["kind"] == "gpu"):
        # No GPU here: GPU code is still written for the best installed GPU pack, and the reason says so.
        assert report["chosen"]["gpu"]["name"] == "cuda"
        assert report["chosen"]["gpu"]["reason"].startswith("no installed gpu target matched this machine")
        assert report["chosen"]["gpu"]["reason"].endswith("cuda has the highest priority")
        assert "no NVIDIA GPU" in rows["cuda"]["reason"]


def test_table_and_setting_override(capsys, monkeypatch):
    monkeypatch.setenv("DACE_ai_target", "sve")
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "cpu code -> sve (configured by environment variable DACE_ai_target)" in out
    assert "dace-ai-sve 0.1.0" in out and "aarch64-linux-gnu-g++ -O3 -march=armv8-a+sve" in out


def test_unknown_target_setting_is_a_clear_error(capsys, monkeypatch):
    monkeypatch.setenv("DACE_ai_target", "x86-avx1024")
    assert main(["--json"]) == 2
    err = capsys.readouterr().err
    assert "'x86-avx1024'" in err and "names no installed target" in err and "Did you mean 'x86-avx512'?" in err


@pytest.mark.parametrize("name", ["x86-avx2", "x86-avx512", "sve"])
def test_gemm_prompt_differs_by_target_exactly_in_target_and_guidance(name):
    host, other = gemm_prompt_sections("host"), gemm_prompt_sections(name)
    assert set(host) == set(other)
    changed = sorted(k for k in host if host[k] != other[k])
    assert changed == ["target", "target-guidance"]
    assert f"`{name}`" in other["target"]


@pytest.fixture(scope="module")
def rvv_site(tmp_path_factory):
    """The RISC-V test distribution built into a wheel and installed into a private site folder."""
    work = tmp_path_factory.mktemp("rvv")
    source = shutil.copytree(REPO / "tests" / "data" / "rvv_target", work / "src")  # keep the repo clean
    wheel = build_wheel(source, work)
    return install_wheels([wheel], work / "site")


def _env(site, **extra):
    return {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), **extra}


@pytest.mark.xdist_group("rvv-wheel")  # one worker builds the RISC-V distribution
def test_installed_rvv_target_appears_in_dace_ai_targets(rvv_site):
    code = (
        "import contextlib, io, json; from dace_ai.cli.targets import main; out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out): assert main(['--json']) == 0\n"
        "print(json.dumps(json.loads(out.getvalue())))"
    )
    report = run_json(code, rvv_site, _env(rvv_site))
    rows = {row["name"]: row for row in report["targets"]}
    assert rows["rvv"]["distribution"] == "dace-ai-test-rvv" and rows["rvv"]["version"] == "0.3.1"
    assert rows["rvv"]["flags"] == ["-O3", "-march=rv64gcv", "-mabi=lp64d"]
    assert rows["rvv"]["detected"] is False and "not a RISC-V machine" in rows["rvv"]["reason"]
    assert report["chosen"]["cpu"]["name"] != "rvv"
    chosen = run_json(code, rvv_site, _env(rvv_site, DACE_ai_target="rvv"))["chosen"]
    assert chosen["cpu"] == {"name": "rvv", "reason": "configured by environment variable DACE_ai_target"}


@pytest.mark.xdist_group("rvv-wheel")  # one worker builds the RISC-V distribution
def test_installed_rvv_target_appears_in_the_prompt(rvv_site):
    # Both prompts come from the same fresh process, so every other section sees the same machine.
    code = (
        "import json; from tests.target_support import gemm_prompt_sections; "
        "print(json.dumps([gemm_prompt_sections('rvv'), gemm_prompt_sections('host')]))"
    )
    sections, host = run_json(code, rvv_site, _env(rvv_site))
    assert "-march=rv64gcv" in sections["target"] and "`rvv`" in sections["target"]
    assert "__riscv_vsetvl_e64m4" in sections["target-guidance"]
    assert sorted(k for k in host if host[k] != sections[k]) == ["target", "target-guidance"]
