"""The ``labnode`` target: the lab's AMD EPYC (Zen 4) cluster nodes.

A target says whether this machine is one (``detect``), how to describe it to the
model (``describe``, the prompt's Target section), what the vendor advises
(``guidance``), how its code is compiled (``compiler``, ``flags``), and what the data
sheet says the node can do (``peaks``, shown beside the measured roofline).
"""

from __future__ import annotations

from dace_ai.plugin import Detection, Target, VendorPeaks, hookimpl, read_cpu

GUIDANCE = """\
- The nodes have AVX-512 with a 256-bit datapath: prefer 256-bit vectors (`__m256d`) unless the loop is \
long and purely arithmetic.
- Each core has 1 MiB of L2: block loops so the working set of an inner loop stays below 512 KiB.
- Leave threading to DaCe's maps; do not start threads or use OpenMP in the tasklet."""


def detect() -> Detection:
    """A Zen 4 node: an AMD CPU with AVX-512 (the reason is shown by ``dace-ai targets``)."""
    cpu = read_cpu()
    amd = "AMD" in cpu.model
    avx512 = "avx512f" in cpu.flags
    if amd and avx512:
        return Detection(True, f"{cpu.model} has AVX-512", {"model": cpu.model})
    missing = [what for what, ok in (("an AMD CPU", amd), ("AVX-512", avx512)) if not ok]
    return Detection(
        False, f"{cpu.model or cpu.machine} is not a lab node: needs {' and '.join(missing)}", {"model": cpu.model}
    )


def describe(detection: Detection) -> str:
    model = detection.details.get("model") or "AMD EPYC"
    return f"A lab cluster node: {model} (Zen 4), x86-64 with AVX-512, compiled with g++."


def flags(detection: Detection) -> tuple[str, ...]:
    """Tune for the real CPU on a node; elsewhere (a login host, CI) only for the ISA level."""
    return ("-O3", "-march=znver4") if detection.matched else ("-O3", "-march=x86-64-v4")


@hookimpl
def dace_ai_targets():
    yield Target(
        name="labnode",
        kind="cpu",
        priority=30,  # above the generic x86 targets on the machines it matches
        detect=detect,
        describe=describe,
        guidance=GUIDANCE,
        compiler=("g++",),
        flags=flags,
        # EPYC 9654: 96 cores x 2.4 GHz x 16 float64 FMA flops per cycle; 12 channels of DDR5-4800.
        peaks=VendorPeaks(
            peak_gflops={"float32": 7372.8, "float64": 3686.4},
            bandwidth_gbs=460.8,
            threads=96,
            source="AMD EPYC 9654 data sheet (base clock)",
        ),
        description="The lab's AMD EPYC (Zen 4) cluster nodes",
    )
