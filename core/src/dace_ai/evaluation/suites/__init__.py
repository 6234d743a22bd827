"""Built-in plugin: the ``core`` suite of ``dace-ai bench`` (NPBench-style kernels)."""

from __future__ import annotations

from pathlib import Path

from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import BenchSuite

CORE_SUITE = Path(__file__).parent / "core"


@hookimpl
def dace_ai_bench_suites():
    yield BenchSuite(
        name="core",
        path=CORE_SUITE,
        module="dace_ai.evaluation.suites.core.programs",
        description="BLAS, reductions, stencils, normalisations, FFT, histogram and scan kernels",
    )
