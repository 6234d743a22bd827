"""The offline demo runs on this machine from its shipped answers (provider manual, no key)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.host_cpu import AVX512, HIDE_VARIABLE, lacking_reason, needs_cpu

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "tiled_gemm"
NODES = ("gemm_tile", "_MatMult_gemm", "dense_relu")
#: A verification level that compared the code with its reference, sanitizers included.
#: Without clang (a machine without the Debian extras) the level says why the sanitizers did not run.
SANITIZERS = "sanitizers" if shutil.which("clang++") else "no sanitizers: [^)]*"
VERIFIED = re.compile(rf"verified \(\d+ seeds, \d+ sizes,( 2 thread counts,)? \d+ distributions, {SANITIZERS}\)")


def run_demo(tmp_path: Path, *args: str) -> str:
    env = {
        k: v
        for k, v in os.environ.items()
        if (not k.startswith("DACE_ai_") or k == HIDE_VARIABLE) and not k.endswith("_API_KEY")
    }
    result = subprocess.run(
        [sys.executable, str(SAMPLE / "tiled_gemm.py"), "--size", "256", "--dense", "96,80,24", "--repeat", "1", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def test_every_variant_ships_an_answer_for_every_node():
    for variant in ("avx2", "avx512"):
        for node in NODES:
            answer = json.loads((SAMPLE / "answers" / variant / f"{node}.json").read_text())
            assert answer["code"] and answer["notes"], (variant, node)
            intrinsics = "_mm512_fmadd_ps" if variant == "avx512" else "_mm256_fmadd_ps"
            assert intrinsics in answer["code_global"], (variant, node)


@needs_cpu("avx2", "fma", why="the demo's answers use AVX2 and FMA intrinsics")
@pytest.mark.parametrize("variant", ["avx512", "avx2"])
def test_tiled_gemm_demo_replays_shipped_answers(tmp_path, variant):
    if variant == "avx512" and lacking_reason(*AVX512):
        pytest.skip(lacking_reason(*AVX512, why="the AVX-512 answers use AVX-512 intrinsics"))
    out = run_demo(tmp_path, "--variant", variant)
    assert "replaying the answers shipped" in out and f"answers/{variant}" in out
    for node in NODES:  # every node accepted through the default checks, with its level
        assert re.search(rf"^  {re.escape(node)}: {VERIFIED.pattern}$", out, re.M), (node, out[-4000:])
    for program in ("tiled_gemm", "matmul", "dense_relu"):  # outputs compared with NumPy by the demo itself
        assert f"{program}: matches NumPy" in out
    assert ("_mm512_fmadd_ps" if variant == "avx512" else "_mm256_fmadd_ps") in out  # the generated code
    for node in NODES:  # each node's figures beside NumPy's (timings are printed, never asserted)
        assert re.search(rf"^  {re.escape(node)}: \d+\.\d\dx vs NumPy", out, re.M), node
        sol = rf"^  {re.escape(node)}: .* GFLOP/s, .* GB/s: (compute|memory)-bound, [\d.]+% of speed of light \("
        assert re.search(sol, out, re.M), node  # against the roofline the checks measured
    assert "GFLOP/s" in out
