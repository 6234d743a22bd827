"""Tests that need OpenBLAS or FFTW skip, naming the Debian package, on a machine without them.

The libraries are hidden from the packs' own detection (``tests/system_libraries.py`` as a
pytest plugin), not uninstalled: the same tests then run in a child pytest and must be
reported as skipped with the reason, never as failures.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.distributions import REPO
from tests.system_libraries import HIDE_VARIABLE

NEEDS_A_LIBRARY = [
    "tests/test_environments.py::test_registered_environments_reused_unknown_listed_gpu_ones_not_offered_to_cpu_code",
    (
        "tests/test_environments.py::"
        "test_a_pack_whose_library_is_missing_is_not_offered_and_a_request_for_it_is_a_clear_error"
    ),
    "tests/test_environments.py::test_gemm_through_ai_calls_cblas_sgemm_via_the_openblas_pack",
    "tests/test_environments.py::test_ai_node_fft_with_fftw_plan_made_once_in_init_code",
]
# tests/test_bench.py's offline-suite test needs no library: where FFTW is absent it asserts that the FFT
# task is skipped with the reason (its attempts run in worker processes, which this hiding does not reach).


def test_hidden_libraries_are_missing_with_the_debian_package_named(monkeypatch):
    from dace_ai.environments import installed

    from tests import system_libraries

    monkeypatch.setenv(HIDE_VARIABLE, "openblas,fftw")
    monkeypatch.setattr(installed, "find_header", installed.find_header)  # restored after the test
    monkeypatch.setattr(installed, "find_shared_library", installed.find_shared_library)
    system_libraries.pytest_configure(None)
    found = installed.detect_library(["fftw3.h"], ["fftw3"])
    assert not found.matched and "header fftw3.h" in found.reason and "libfftw3.so" in found.reason
    assert installed.find_header("stdio.h") is not None  # only the named libraries are hidden


def test_tests_needing_openblas_or_fftw_skip_with_the_reason_when_they_are_absent(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DACE_ai_", "PYTEST_"))}
    env[HIDE_VARIABLE] = "openblas,fftw"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.system_libraries",
            "-n",
            "0",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            *NEEDS_A_LIBRARY,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert f"{len(NEEDS_A_LIBRARY)} skipped" in out and "failed" not in out and "passed" not in out, out
    assert "libopenblas-dev is not installed (not found: header cblas.h" in out
    assert "libfftw3-dev is not installed (not found: header fftw3.h" in out
