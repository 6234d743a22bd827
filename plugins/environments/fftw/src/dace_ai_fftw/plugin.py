"""FFTW 3 as a DaCe environment.

Offered for CPU code when ``fftw3.h`` and ``libfftw3`` are found (Debian:
``apt-get install libfftw3-dev``). The guidance asks the model to make plans once
in init code, keep them in the program state and destroy them in exit code,
because FFTW's planner is slow and not thread-safe while executing a plan is.
"""

from __future__ import annotations

from dace_ai.plugin import Detection, EnvironmentGenerator, EnvironmentSpec, detect_library, hookimpl, machine_fact

GUIDANCE = """\
FFTW 3 (`fftw3.h`, linked with `-lfftw3`). Request it with \
`"environments": [{"name": "fftw", "generator": "fftw"}]`; for single precision (`fftwf_*`) add \
`"libraries": ["fftw3f"]` to that entry. Do not include `fftw3.h` yourself.
- Plans are made ONCE in `code_init` and destroyed in `code_exit`: declare the plan in `state_fields` \
(e.g. `fftw_plan plan;`), create it in `code_init` as `__state->plan = fftw_plan_dft_1d(N, tmp_in, tmp_out, \
FFTW_FORWARD, FFTW_ESTIMATE | FFTW_UNALIGNED);` on buffers from `fftw_malloc` that you free right after \
planning (the program's arrays are not known at init time), and call `fftw_destroy_plan(__state->plan);` in \
`code_exit`. Sizes in `code_init` must be constants or symbols DaCe passes to the program's initialisation; \
a size known only from an array's shape is not available there.
- In the tasklet body execute with the new-array interface: \
`fftw_execute_dft(__state->plan, (fftw_complex*)in, (fftw_complex*)out);` (`fftw_complex` is `double[2]`; \
`std::complex<double>` has the same layout). Only the `fftw_execute*` calls are thread-safe; never plan in the body.
- FFTW's transforms are unnormalised: a backward transform of a forward one is N times the input."""


@machine_fact("dace_ai_fftw.detect")
def detect() -> Detection:
    return detect_library(["fftw3.h"], ["fftw3"])


def offer(ctx) -> str | None:
    if ctx.target.kind != "cpu" or ctx.in_gpu_kernel:
        return None
    return GUIDANCE


def generate(request) -> EnvironmentSpec:
    libraries = ["fftw3"]
    if "fftw3f" in getattr(request, "libraries", ()):
        found = detect_library(["fftw3.h"], ["fftw3f"])
        if not found.matched:
            raise ValueError(f"single-precision FFTW is not installed here ({found.reason})")
        libraries.append("fftw3f")
    return EnvironmentSpec(name="fftw", generator="fftw", headers=["fftw3.h"], libraries=libraries)


@hookimpl
def dace_ai_environment_generators():
    yield EnvironmentGenerator(
        name="fftw",
        detect=detect,
        offer=offer,
        generate=generate,
        description="FFTW 3 (fftw3.h, -lfftw3), plans made in init code",
    )
