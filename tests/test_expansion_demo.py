"""The offline demo runs on this machine from its shipped answers (provider manual, no key)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dace_ai.targets.host import cpu_facts

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif("avx2" not in cpu_facts()["flags"], reason="the demo's answers need AVX2")
def test_tiled_gemm_demo_replays_shipped_answers(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DACE_ai_") and not k.endswith("_API_KEY")}
    result = subprocess.run([sys.executable, str(ROOT / "samples" / "tiled_gemm" / "tiled_gemm.py"), "--size", "64",
                             "--repeat", "1"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    out = result.stdout
    assert "replaying the answers shipped" in out
    assert "tiled_gemm: matches NumPy" in out and "matmul: matches NumPy" in out
    assert "_mm256_fmadd_ps" in out or "_mm512_fmadd_ps" in out  # the generated code is printed
    assert "NumPy A @ B" in out and "GFLOP/s" in out
