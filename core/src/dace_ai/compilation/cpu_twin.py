"""The CPU twin of a device tasklet: the same per-point code, compiled for the host with a fixed header.

A device tasklet inside a GPU map runs once per map point; its twin is the same
code as a host tasklet at the same map point: the node's context with GPU
storages and schedules given their CPU counterparts (:func:`twin_node`) and the
unit opened by :data:`TWIN_HEADER`, dace-ai's own fixed text (never the model's),
which gives the device-side names a per-point tasklet may use their CPU meaning:
``__ldg``, the fast-math intrinsics (``__expf``, ``rsqrtf``, ``__fmaf_rn``, ...),
``atomicAdd`` and friends on the CPU's atomics, the vector types ``float2`` ...
``double4`` with ``make_float2`` ..., and ``__device__``/``__forceinline__`` as
plain C++ (``min``/``max`` come from ``<dace/dace.h>``, included before it).

What has no per-point meaning on a CPU (thread and block indices, barriers, warp
shuffles and votes, shared memory, inline PTX, kernels of its own) is named by
:func:`twin_blockers`; such code is not run on the twin.
"""

from __future__ import annotations

import dataclasses
import re

from dace_ai.context.types import NodeContext
from dace_ai.prompt.answer import Answer
from dace_ai.targets.select import TargetInfo

#: What the CPU twin calls itself in levels and reports.
TWIN = "the CPU twin"

#: CPU counterparts of GPU storages and schedules (anything else GPU-side becomes the first of its kind).
_CPU_STORAGE = {"GPU_Global": "CPU_Heap", "GPU_Shared": "CPU_Heap", "CPU_Pinned": "CPU_Heap"}
_CPU_SCHEDULE = {"GPU_Device": "Sequential", "GPU_ThreadBlock": "Sequential", "GPU_Persistent": "Sequential"}

#: (pattern, what it is) for device code the twin cannot give a CPU meaning.
_BLOCKERS: tuple[tuple[str, str], ...] = (
    (r"\b__syncthreads\w*|\b__syncwarp\b|\b__threadfence\w*", "a barrier"),
    (r"\b__shfl\w*", "a warp shuffle"),
    (r"\b__ballot\w*|\b__any_sync\b|\b__all_sync\b|\b__activemask\b|\b__match_\w+", "a warp vote"),
    (r"\b(?:threadIdx|blockIdx|blockDim|gridDim|warpSize)\b", "thread and block indices"),
    (r"\b__shared__\b", "shared memory"),
    (r"\basm\b|\b__asm__\b", "inline assembly (PTX)"),
    (r"\b__global__\b|<<<", "a kernel of its own"),
    (r"\bcooperative_groups\b|\bcg::", "cooperative groups"),
)

#: The twin's header (fixed text): device-side names with their CPU meaning.
TWIN_HEADER = r"""// dace-ai's CPU twin of device code: device-side names given their CPU meaning (dace-ai's own text).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#ifndef __device__
#define __device__
#endif
#ifndef __host__
#define __host__
#endif
#ifndef __forceinline__
#define __forceinline__ inline
#endif
#ifndef __noinline__
#define __noinline__
#endif
#ifndef __constant__
#define __constant__
#endif
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif
namespace dace_ai_twin {
template <typename T> inline T ldg(const T* p) { return *p; }
inline float saturate(float x) { return x > 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); }
template <typename T, typename S> inline T bits_as(S s) { T out; std::memcpy(&out, &s, sizeof(T)); return out; }
// Every atomic as a compare-and-swap loop on the value's bytes: integers and floating point alike.
template <typename T, typename F> inline T atomic_update(T* address, F f) {
    T old;
    __atomic_load(address, &old, __ATOMIC_RELAXED);
    T desired;
    do { desired = f(old); } while (!__atomic_compare_exchange(address, &old, &desired, false,
                                                               __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return old;
}
}  // namespace dace_ai_twin
#define __ldg(p) dace_ai_twin::ldg(p)
#define __expf(x) std::exp((float)(x))
#define __exp10f(x) std::pow(10.0f, (float)(x))
#define __logf(x) std::log((float)(x))
#define __log2f(x) std::log2((float)(x))
#define __log10f(x) std::log10((float)(x))
#define __sinf(x) std::sin((float)(x))
#define __cosf(x) std::cos((float)(x))
#define __tanf(x) std::tan((float)(x))
#define __sincosf(x, s, c) (*(s) = std::sin((float)(x)), *(c) = std::cos((float)(x)))
#define __powf(x, y) std::pow((float)(x), (float)(y))
#define __fdividef(x, y) ((float)(x) / (float)(y))
#define __frcp_rn(x) (1.0f / (float)(x))
#define __fsqrt_rn(x) std::sqrt((float)(x))
#define __dsqrt_rn(x) std::sqrt((double)(x))
#define __fmaf_rn(a, b, c) std::fma((float)(a), (float)(b), (float)(c))
#define __fma_rn(a, b, c) std::fma((double)(a), (double)(b), (double)(c))
#define __fmul_rn(a, b) ((float)(a) * (float)(b))
#define __fadd_rn(a, b) ((float)(a) + (float)(b))
#define __fsub_rn(a, b) ((float)(a) - (float)(b))
#define __fdiv_rn(a, b) ((float)(a) / (float)(b))
#define __dmul_rn(a, b) ((double)(a) * (double)(b))
#define __dadd_rn(a, b) ((double)(a) + (double)(b))
#define __dsub_rn(a, b) ((double)(a) - (double)(b))
#define __ddiv_rn(a, b) ((double)(a) / (double)(b))
#define __saturatef(x) dace_ai_twin::saturate((float)(x))
#define __float2int_rn(x) ((int)std::nearbyint((float)(x)))
#define __float2int_rz(x) ((int)(float)(x))
#define __float2int_rd(x) ((int)std::floor((float)(x)))
#define __float2int_ru(x) ((int)std::ceil((float)(x)))
#define __int2float_rn(x) ((float)(x))
#define __double2float_rn(x) ((float)(x))
#define __float_as_int(x) dace_ai_twin::bits_as<int>((float)(x))
#define __int_as_float(x) dace_ai_twin::bits_as<float>((int)(x))
#define __float_as_uint(x) dace_ai_twin::bits_as<unsigned int>((float)(x))
#define __uint_as_float(x) dace_ai_twin::bits_as<float>((unsigned int)(x))
#define __double_as_longlong(x) dace_ai_twin::bits_as<long long>((double)(x))
#define __longlong_as_double(x) dace_ai_twin::bits_as<double>((long long)(x))
#define __popc(x) __builtin_popcount((unsigned int)(x))
#define __popcll(x) __builtin_popcountll((unsigned long long)(x))
#define __clz(x) ((x) == 0 ? 32 : __builtin_clz((unsigned int)(x)))
#define __clzll(x) ((x) == 0 ? 64 : __builtin_clzll((unsigned long long)(x)))
#define __ffs(x) __builtin_ffs((int)(x))
#define __ffsll(x) __builtin_ffsll((long long)(x))
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
template <typename T, typename U> inline T atomicAdd(T* a, U v) {
    return dace_ai_twin::atomic_update(a, [&](T old) { return (T)(old + (T)v); });
}
template <typename T, typename U> inline T atomicSub(T* a, U v) {
    return dace_ai_twin::atomic_update(a, [&](T old) { return (T)(old - (T)v); });
}
template <typename T, typename U> inline T atomicMax(T* a, U v) {
    return dace_ai_twin::atomic_update(a, [&](T old) { return old < (T)v ? (T)v : old; });
}
template <typename T, typename U> inline T atomicMin(T* a, U v) {
    return dace_ai_twin::atomic_update(a, [&](T old) { return (T)v < old ? (T)v : old; });
}
template <typename T, typename U> inline T atomicAnd(T* a, U v) {
    return dace_ai_twin::atomic_update(a, [&](T old) { return (T)(old & (T)v); });
}
template <typename T, typename U> inline T atomicOr(T* a, U v) {
    return dace_ai_twin::atomic_update(a, [&](T old) { return (T)(old | (T)v); });
}
template <typename T, typename U> inline T atomicXor(T* a, U v) {
    return dace_ai_twin::atomic_update(a, [&](T old) { return (T)(old ^ (T)v); });
}
template <typename T, typename U> inline T atomicExch(T* a, U v) {
    T desired = (T)v, old;
    __atomic_exchange(a, &desired, &old, __ATOMIC_SEQ_CST);
    return old;
}
template <typename T, typename U, typename V> inline T atomicCAS(T* a, U compare, V v) {
    T expected = (T)compare, desired = (T)v;
    __atomic_compare_exchange(a, &expected, &desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicMax_block atomicMax
#define atomicMin_block atomicMin
#define atomicExch_block atomicExch
#define atomicCAS_block atomicCAS
#define DACE_AI_TWIN_VECTOR(T, N2, N3, N4)                                                              \
    struct alignas(2 * sizeof(T)) N2 { T x, y; };                                                        \
    struct N3 { T x, y, z; };                                                                            \
    struct alignas(4 * sizeof(T) > 16 ? 16 : 4 * sizeof(T)) N4 { T x, y, z, w; };                       \
    inline N2 make_##N2(T x, T y) { return N2{x, y}; }                                                   \
    inline N3 make_##N3(T x, T y, T z) { return N3{x, y, z}; }                                           \
    inline N4 make_##N4(T x, T y, T z, T w) { return N4{x, y, z, w}; }
DACE_AI_TWIN_VECTOR(float, float2, float3, float4)
DACE_AI_TWIN_VECTOR(double, double2, double3, double4)
DACE_AI_TWIN_VECTOR(int, int2, int3, int4)
DACE_AI_TWIN_VECTOR(unsigned int, uint2, uint3, uint4)
DACE_AI_TWIN_VECTOR(long long, longlong2, longlong3, longlong4)
#undef DACE_AI_TWIN_VECTOR
// ---- end of the CPU twin's header ----
"""


def twin_blockers(answer: Answer) -> list[str]:
    """What in the answer's code the twin cannot run (``__syncthreads``, ...), one phrase each; [] when none."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", f"{answer.code_global}\n{answer.code}", flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    found = []
    for pattern, what in _BLOCKERS:
        match = re.search(pattern, text)
        if match:
            found.append(f"uses {match.group(0).strip()} ({what})")
    return found


def cpu_storage(storage: str) -> str:
    """The CPU counterpart of a storage (``GPU_Global`` -> ``CPU_Heap``); CPU storages unchanged."""
    return _CPU_STORAGE.get(storage, "CPU_Heap" if storage.startswith("GPU_") else storage)


def cpu_schedule(schedule: str) -> str:
    """The CPU counterpart of a schedule (``GPU_Device`` -> ``Sequential``); CPU schedules unchanged."""
    return _CPU_SCHEDULE.get(schedule, "Sequential" if schedule.startswith("GPU_") else schedule)


def twin_node(node: NodeContext) -> NodeContext:
    """The node's context as a host tasklet at the same map point: CPU storages, schedules and target.

    Connectors, memlets, symbols and the enclosing maps' parameters and ranges are the
    device tasklet's own; the live program stays (the reference is built from it).
    """
    target = TargetInfo(
        name="host",
        kind="cpu",
        description=f"{TWIN} of device code for {node.target.name}",
        reason=f"{TWIN} of a device tasklet",
        language="cpp",
    )
    return dataclasses.replace(
        node,
        inputs=[dataclasses.replace(c, storage=cpu_storage(c.storage)) for c in node.inputs],
        outputs=[dataclasses.replace(c, storage=cpu_storage(c.storage)) for c in node.outputs],
        scopes=[dataclasses.replace(s, schedule=cpu_schedule(s.schedule)) for s in node.scopes],
        schedule=cpu_schedule(node.schedule),
        in_gpu_kernel=False,
        gpu_notes="",
        target=target,
        notes=[*node.notes, f"{TWIN} of a device tasklet"],
    )


def twin_answer(answer: Answer) -> Answer:
    """The answer as host C++ (the same code; the language changes, nothing else)."""
    return answer.model_copy(update={"language": "cpp"})
