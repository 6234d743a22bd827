"""The table of ``ai`` settings: key, DaCe config type, default, bounds, description.

Kept free of heavy imports because ``import dace_ai`` registers these keys in
DaCe's configuration schema at once, while the pydantic model that validates
them (:mod:`dace_ai.config.settings`) is only imported when settings are resolved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

#: A pydantic constraint a setting's bound sets: greater than, at least, less than, at most.
Bound = Literal["gt", "ge", "lt", "le"]


@dataclass(frozen=True)
class SettingDef:
    key: str
    dace_type: str  #: type name in DaCe's config schema: str, int, float, bool
    default: Any
    description: str
    bounds: tuple[tuple[Bound, float], ...] = ()  #: pydantic constraints, e.g. (("gt", 0),)


SETTINGS: tuple[SettingDef, ...] = (
    SettingDef("provider", "str", None, "Provider name; empty picks the best usable one"),
    SettingDef("model", "str", None, "Model name passed to the provider"),
    SettingDef("base_url", "str", None, "Endpoint for gateways and compatible servers"),
    SettingDef("effort", "str", None, "Reasoning effort: low, medium, high or max"),
    SettingDef("max_tokens", "int", 16000, "Maximum tokens in an answer", (("gt", 0),)),
    SettingDef("timeout", "float", 600.0, "Seconds before a request times out", (("gt", 0),)),
    SettingDef("max_retries", "int", 2, "Retries of a failed request (429, 5xx, timeouts)", (("ge", 0),)),
    SettingDef("max_repair_attempts", "int", 2, "Repair rounds after a failed check", (("ge", 0),)),
    SettingDef("compile_check", "bool", True, "Check generated code before using it"),
    SettingDef(
        "on_failure",
        "str",
        None,
        "When an answer still fails its checks after the repair rounds: "
        "native (expand the node natively with a warning) or error; empty: native where the node has a "
        "native implementation, else error",
    ),
    SettingDef(
        "on_inconclusive",
        "str",
        "warn",
        "When a check cannot decide (a checker crashed, a tool is "
        "missing): warn (accept with a warning) or reject (refuse the answer)",
    ),
    SettingDef("cache", "bool", True, "Reuse answers from the ai-cache folder"),
    SettingDef("extra_instructions", "str", "", "Text appended to every prompt"),
    SettingDef("target", "str", None, "Hardware target name; empty detects it"),
    SettingDef(
        "hide_cpu_features",
        "str",
        "",
        "CPU features (in /proc/cpuinfo spelling, comma separated: avx512f,amx_tile) that dace-ai's description "
        "of this machine leaves out, as on a CPU without them: target detection, the ISA check and the prompt "
        "see the smaller CPU (the compiler's -march=native is not changed)",
    ),
    SettingDef(
        "checkers",
        "str",
        None,
        "Checker names to run, comma separated; empty runs the defaults; "
        "+name,-name adds to or removes from the defaults",
    ),
    SettingDef("bench", "str", "report", "Time candidates against the native expansion: off, report or gate"),
    SettingDef(
        "min_speedup", "float", 1.03, "With bench=gate, the speedup over native a candidate must reach", (("gt", 0),)
    ),
    SettingDef(
        "bench_baselines",
        "bool",
        True,
        "Bench stage: also time the node's other DaCe implementations installed here (OpenBLAS, MKL, "
        "OpenMP, ...), each built once per node, and report the speedup over the strongest one",
    ),
    SettingDef(
        "gate_baseline",
        "str",
        "native",
        "With bench=gate, what min_speedup is measured against: native (the node's own expansion) or "
        "strongest (the fastest baseline timed: DaCe's library implementations such as OpenBLAS)",
    ),
    SettingDef(
        "target_sol",
        "float",
        0.0,
        "dace_ai.optimize: skip the remaining refinement rounds of a node once its fastest candidate reaches "
        "this fraction of the machine's speed of light (the bench's roofline figure, e.g. 0.8); 0 never stops "
        "early",
        (("ge", 0),),
    ),
    SettingDef("bench_sizes", "str", None, "Symbol values for timing runs, e.g. 'N=4096,M=512'; empty picks them"),
    SettingDef("bench_repeats", "int", 7, "Timed runs of each side per bench (after a warm-up)", (("ge", 1),)),
    SettingDef(
        "speed_of_light",
        "str",
        "on",
        "Bench stage: compare each timing with this machine's roofline (peak FLOP/s, bandwidth): on "
        "(measured the first time a bench needs it, a few seconds, then stored per machine, compiler and "
        "flags), stored (only a roofline measured before, e.g. by dace-ai targets --roofline) or off",
    ),
    SettingDef(
        "runtime_check",
        "str",
        "auto",
        "Spot check of a generated tasklet inside the user's own program, against the node's reference on "
        "the same inputs: auto (the first call of every new shape, then a sparse random sample of later "
        "calls within runtime_check_share of the node's own time), first (the first call of every new shape "
        "only), every:N (those and every N-th program call) or off (no check code in the tasklet). After a "
        "wrong output every later call of the node raises (warn: is checked)",
    ),
    SettingDef(
        "runtime_check_budget",
        "float",
        1.0,
        "Seconds a run-time spot check may spend on the reference; a NumPy reference that takes longer is "
        "not called again in this process (products are checked by Freivalds' test, within any budget)",
        (("gt", 0),),
    ),
    SettingDef(
        "runtime_check_share",
        "float",
        0.01,
        "runtime_check=auto: the share of the node's own time (measured on its recorded calls) that checks of "
        "later calls of an already checked shape may spend, beyond the first call's check",
        (("ge", 0),),
    ),
    SettingDef(
        "runtime_check_action",
        "str",
        "raise",
        "When a run-time spot check finds a wrong output: raise (RuntimeCheckFailed after the program's call) or warn",
    ),
    SettingDef("check_concurrency", "int", 0, "Candidates checked at once; 0 means the number of cores", (("ge", 0),)),
    SettingDef("verify_seeds", "int", 3, "Random inputs (seeds) the verify stage runs per size", (("ge", 1),)),
    SettingDef(
        "verify_sizes",
        "str",
        None,
        "Symbol sizes the verify stage runs, e.g. 'N=13,67 M=11,61'; empty: two odd sizes per symbol",
    ),
    SettingDef(
        "check_threads",
        "int",
        0,
        "All-core thread count of the sandboxed runs (each candidate also runs with one thread and its "
        "all-core run is repeated); 0 means the cores this process may use",
        (("ge", 0),),
    ),
    SettingDef(
        "sandbox_cpu_seconds",
        "float",
        20.0,
        "CPU seconds a sandboxed run of generated code may use, per thread of its all-core runs",
        (("gt", 0),),
    ),
    SettingDef("sandbox_wall_seconds", "float", 60.0, "Wall-clock seconds a sandboxed run may take", (("gt", 0),)),
    SettingDef("sandbox_memory_mb", "int", 4096, "Address space (MiB) of a sandboxed run", (("ge", 64),)),
    SettingDef("max_concurrency", "int", 4, "Requests in flight at once", (("ge", 1),)),
    SettingDef(
        "executor",
        "str",
        None,
        "Executor plugin running the checks of generate and optimize: threads "
        "(this process), local (worker processes), dask, ...; empty: threads",
    ),
    SettingDef(
        "executor_scheduler",
        "str",
        None,
        "Address of a running scheduler for the executor, e.g. "
        "tcp://head:8786 (dask); empty: the executor starts its own workers",
    ),
    SettingDef(
        "executor_workers",
        "int",
        0,
        "Workers the executor starts when it has no scheduler; 0: its default",
        (("ge", 0),),
    ),
    SettingDef(
        "node_concurrency",
        "int",
        0,
        "Nodes optimize works on at once, their check jobs queued together "
        "on the executor; 0: every node when the checks run on an executor's workers, one node at a time "
        "when they run in this process",
        (("ge", 0),),
    ),
    SettingDef("prompt_dir", "str", None, "Folder of the manual provider's prompt/response files"),
    SettingDef("interactive", "bool", None, "Ask for pasted answers on a terminal (manual provider)"),
    SettingDef("cuda_arch", "str", None, "CUDA architecture for checks, e.g. sm_90; empty asks nvidia-smi"),
    SettingDef("hip_arch", "str", None, "HIP offload architecture for checks, e.g. gfx90a"),
    SettingDef(
        "builtin",
        "str",
        "take",
        "On DaCe 2, which implements DaCe's own AI library (dace.ai, "
        "dace.libraries.ai, the 'ai' implementation): take (dace-ai, with its checks) or keep (DaCe's library "
        "as shipped; dace-ai's implementation is then named 'dace-ai'). Read once, when dace_ai is imported",
    ),
    SettingDef("debug", "bool", False, "Show the full traceback of dace-ai errors raised inside DaCe's expansion"),
)

BY_KEY: dict[str, SettingDef] = {d.key: d for d in SETTINGS}
