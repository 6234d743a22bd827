"""Programs, native baselines and NumPy references of the ``core`` suite.

Library-node tasks are ordinary NumPy-style DaCe programs (``A @ B`` becomes a MatMul
that specializes to a Gemm, ``np.sum(A, axis=0)`` a Reduce); their baseline is the
same program with DaCe's native expansion. AI-node tasks describe the node in words
(``dace_ai.ai``) and come with a native DaCe program computing the same, the
baseline a generated kernel is timed against.

No ``from __future__ import annotations`` here: DaCe reads the annotations as types.
"""

import dace
import numpy as np

import dace_ai

N, M, K, B = (dace.symbol(s) for s in "NMKB")
NI, NJ, NK, NL, NM, NR, NQ, NP, DH = (dace.symbol(s) for s in ("NI", "NJ", "NK", "NL", "NM", "NR", "NQ", "NP", "DH"))


# ------------------------------------------------------------------ library nodes (BLAS, Reduce, Transpose)
@dace.program
def dot(x: dace.float64[N], y: dace.float64[N], out: dace.float64[1]):
    out[:] = x @ y


@dace.program
def gemv(A: dace.float64[M, N], x: dace.float64[N], y: dace.float64[M]):
    y[:] = A @ x


@dace.program
def gemm(A: dace.float64[M, K], B_: dace.float64[K, N], C: dace.float64[M, N]):
    C[:] = A @ B_


@dace.program
def batched_gemm(A: dace.float64[B, M, K], B_: dace.float64[B, K, N], C: dace.float64[B, M, N]):
    C[:] = A @ B_


@dace.program
def transpose(A: dace.float64[M, N], At: dace.float64[N, M]):
    At[:] = np.transpose(A)


@dace.program
def sum_axis0(A: dace.float64[M, N], out: dace.float64[N]):
    out[:] = np.sum(A, axis=0)


@dace.program
def sum_axis1(A: dace.float64[M, N], out: dace.float64[M]):
    out[:] = np.sum(A, axis=1)


@dace.program
def sum_all(A: dace.float64[M, N], out: dace.float64[1]):
    out[0] = np.sum(A)


@dace.program
def max_axis1(A: dace.float64[M, N], out: dace.float64[M]):
    out[:] = np.max(A, axis=1)


@dace.program
def fft(x: dace.complex128[N], y: dace.complex128[N]):
    y[:] = np.fft.fft(x)


# ------------------------------------------------------------------ AI nodes and their native baselines
@dace.program
def axpy(a: dace.float64, x: dace.float64[N], y: dace.float64[N], out: dace.float64[N]):
    dace_ai.ai(
        "Write _out[i] = _a * _x[i] + _y[i] for every 0 <= i < N.", a=a, x=x, y=y, out=out, name="axpy", flops="2*N"
    )


@dace.program
def axpy_native(a: dace.float64, x: dace.float64[N], y: dace.float64[N], out: dace.float64[N]):
    out[:] = a * x + y


@dace.program
def softmax(x: dace.float64[N, M], out: dace.float64[N, M]):
    dace_ai.ai(
        "Row-wise softmax of the N x M row-major matrix _x: for each row i, "
        "_out[i, j] = exp(_x[i, j] - max_j _x[i, :]) / sum_j exp(_x[i, j] - max_j _x[i, :]).",
        x=x,
        out=out,
        name="softmax",
        flops="4*N*M",
    )


@dace.program
def softmax_native(x: dace.float64[N, M], out: dace.float64[N, M]):
    for i in dace.map[0:N]:
        mx = np.max(x[i])
        e = np.exp(x[i] - mx)
        out[i] = e / np.sum(e)


@dace.program
def layernorm(x: dace.float64[N, M], gamma: dace.float64[M], beta: dace.float64[M], out: dace.float64[N, M]):
    dace_ai.ai(
        "Layer normalisation over the last axis of the N x M row-major matrix _x: for each row i, "
        "mean = sum_j _x[i, j] / M, var = sum_j (_x[i, j] - mean)^2 / M, "
        "_out[i, j] = (_x[i, j] - mean) / sqrt(var + 1e-5) * _gamma[j] + _beta[j].",
        x=x,
        gamma=gamma,
        beta=beta,
        out=out,
        name="layernorm",
        flops="8*N*M",
    )


@dace.program
def layernorm_native(x: dace.float64[N, M], gamma: dace.float64[M], beta: dace.float64[M], out: dace.float64[N, M]):
    for i in dace.map[0:N]:
        mean = np.sum(x[i]) / M
        d = x[i] - mean
        var = np.sum(d * d) / M
        out[i] = d / np.sqrt(var + 1e-5) * gamma + beta


@dace.program
def stencil1d(x: dace.float64[N], out: dace.float64[N]):
    dace_ai.ai(
        "Three-point stencil: _out[i] = 0.25 * _x[i - 1] + 0.5 * _x[i] + 0.25 * _x[i + 1] for 1 <= i < N - 1; "
        "_out[0] = _x[0] and _out[N - 1] = _x[N - 1].",
        x=x,
        out=out,
        name="stencil1d",
        flops="5*N",
    )


@dace.program
def stencil1d_native(x: dace.float64[N], out: dace.float64[N]):
    out[0] = x[0]
    out[N - 1] = x[N - 1]
    out[1 : N - 1] = 0.25 * x[0 : N - 2] + 0.5 * x[1 : N - 1] + 0.25 * x[2:N]


@dace.program
def jacobi2d(x: dace.float64[N, M], out: dace.float64[N, M]):
    dace_ai.ai(
        "Five-point Jacobi step on the N x M row-major grid _x: for 1 <= i < N - 1 and 1 <= j < M - 1, "
        "_out[i, j] = 0.2 * (_x[i, j] + _x[i - 1, j] + _x[i + 1, j] + _x[i, j - 1] + _x[i, j + 1]); "
        "boundary elements are copied: _out[i, j] = _x[i, j].",
        x=x,
        out=out,
        name="jacobi2d",
        flops="5*N*M",
    )


@dace.program
def jacobi2d_native(x: dace.float64[N, M], out: dace.float64[N, M]):
    out[:] = x[:]
    out[1 : N - 1, 1 : M - 1] = 0.2 * (
        x[1 : N - 1, 1 : M - 1]
        + x[0 : N - 2, 1 : M - 1]
        + x[2:N, 1 : M - 1]
        + x[1 : N - 1, 0 : M - 2]
        + x[1 : N - 1, 2:M]
    )


@dace.program
def conv2d(x: dace.float64[N, M], w: dace.float64[3, 3], out: dace.float64[N - 2, M - 2]):
    dace_ai.ai(
        "Valid 2-D convolution (cross-correlation) of the N x M row-major image _x with the 3 x 3 "
        "row-major kernel _w: _out[i, j] = sum over 0 <= di, dj < 3 of _x[i + di, j + dj] * _w[di, dj] "
        "for 0 <= i < N - 2, 0 <= j < M - 2 (_out is (N - 2) x (M - 2), row-major).",
        x=x,
        w=w,
        out=out,
        name="conv2d",
        flops="18*(N-2)*(M-2)",
    )


@dace.program
def conv2d_native(x: dace.float64[N, M], w: dace.float64[3, 3], out: dace.float64[N - 2, M - 2]):
    for i, j in dace.map[0 : N - 2, 0 : M - 2]:
        out[i, j] = (
            x[i, j] * w[0, 0]
            + x[i, j + 1] * w[0, 1]
            + x[i, j + 2] * w[0, 2]
            + x[i + 1, j] * w[1, 0]
            + x[i + 1, j + 1] * w[1, 1]
            + x[i + 1, j + 2] * w[1, 2]
            + x[i + 2, j] * w[2, 0]
            + x[i + 2, j + 1] * w[2, 1]
            + x[i + 2, j + 2] * w[2, 2]
        )


@dace.program
def histogram(x: dace.int32[N], hist: dace.int64[64]):
    dace_ai.ai(
        "Histogram with 64 bins: _hist[b] = number of indices i < N with _x[i] == b; every _x[i] is in "
        "[0, 64). Every bin must be written (zero bins included).",
        x=x,
        out=hist,
        name="histogram",
        flops="0",
    )


@dace.program
def histogram_native(x: dace.int32[N], hist: dace.int64[64]):
    hist[:] = 0
    for i in range(N):
        hist[x[i]] = hist[x[i]] + 1


@dace.program
def scan(x: dace.float64[N], out: dace.float64[N]):
    dace_ai.ai(
        "Inclusive prefix sum: _out[i] = _x[0] + _x[1] + ... + _x[i] for every 0 <= i < N.",
        x=x,
        out=out,
        name="scan",
        flops="N",
    )


@dace.program
def scan_native(x: dace.float64[N], out: dace.float64[N]):
    out[0] = x[0]
    for i in range(1, N):
        out[i] = out[i - 1] + x[i]


@dace.program
def conv1d(x: dace.float64[N], w: dace.float64[K], out: dace.float64[N - K + 1]):
    dace_ai.ai(
        "Valid 1-D correlation: _out[i] = sum over 0 <= k < K of _x[i + k] * _w[k] for 0 <= i < N - K + 1.",
        x=x,
        w=w,
        out=out,
        name="conv1d",
        flops="2*K*(N-K+1)",
    )


@dace.program
def conv1d_native(x: dace.float64[N], w: dace.float64[K], out: dace.float64[N - K + 1]):
    for i in dace.map[0 : N - K + 1]:
        out[i] = np.sum(x[i : i + K] * w)


@dace.program
def outer(x: dace.float64[M], y: dace.float64[N], out: dace.float64[M, N]):
    dace_ai.ai(
        "Outer product: _out[i, j] = _x[i] * _y[j] for 0 <= i < M, 0 <= j < N (_out row-major).",
        x=x,
        y=y,
        out=out,
        name="outer",
        flops="M*N",
    )


@dace.program
def outer_native(x: dace.float64[M], y: dace.float64[N], out: dace.float64[M, N]):
    for i, j in dace.map[0:M, 0:N]:
        out[i, j] = x[i] * y[j]


@dace.program
def relu(x: dace.float64[N], out: dace.float64[N]):
    dace_ai.ai(
        "Rectified linear unit: _out[i] = max(_x[i], 0) for every 0 <= i < N.", x=x, out=out, name="relu", flops="N"
    )


@dace.program
def relu_native(x: dace.float64[N], out: dace.float64[N]):
    out[:] = np.maximum(x, 0)


# ------------------------------------------------------------------ NPBench-style kernels (one AI node each)
# Several library operations in one node (2mm, attention, ...): the native program computes the same with
# DaCe's own expansions, the NumPy reference is what a user writes in NumPy.
@dace.program
def mm2(
    alpha: dace.float64,
    beta: dace.float64,
    a: dace.float64[NI, NK],
    b: dace.float64[NK, NJ],
    c: dace.float64[NJ, NL],
    d: dace.float64[NI, NL],
    out: dace.float64[NI, NL],
):
    dace_ai.ai(
        "2mm: _out = _alpha * (_a @ _b) @ _c + _beta * _d, with _a NI x NK, _b NK x NJ, _c NJ x NL and "
        "_d, _out NI x NL, all row-major.",
        alpha=alpha,
        beta=beta,
        a=a,
        b=b,
        c=c,
        d=d,
        out=out,
        name="mm2",
        flops="2*NI*NJ*NK + 2*NI*NJ*NL + 3*NI*NL",
    )


@dace.program
def mm2_native(
    alpha: dace.float64,
    beta: dace.float64,
    a: dace.float64[NI, NK],
    b: dace.float64[NK, NJ],
    c: dace.float64[NJ, NL],
    d: dace.float64[NI, NL],
    out: dace.float64[NI, NL],
):
    t = alpha * (a @ b)
    out[:] = t @ c + beta * d


@dace.program
def mm3(
    a: dace.float64[NI, NK],
    b: dace.float64[NK, NJ],
    c: dace.float64[NJ, NM],
    d: dace.float64[NM, NL],
    out: dace.float64[NI, NL],
):
    dace_ai.ai(
        "3mm: _out = (_a @ _b) @ (_c @ _d), with _a NI x NK, _b NK x NJ, _c NJ x NM, _d NM x NL and "
        "_out NI x NL, all row-major.",
        a=a,
        b=b,
        c=c,
        d=d,
        out=out,
        name="mm3",
        flops="2*NI*NJ*NK + 2*NJ*NL*NM + 2*NI*NL*NJ",
    )


@dace.program
def mm3_native(
    a: dace.float64[NI, NK],
    b: dace.float64[NK, NJ],
    c: dace.float64[NJ, NM],
    d: dace.float64[NM, NL],
    out: dace.float64[NI, NL],
):
    e = a @ b
    f = c @ d
    out[:] = e @ f


@dace.program
def atax(a: dace.float64[M, N], x: dace.float64[N], out: dace.float64[N]):
    dace_ai.ai(
        "atax: _out = _a^T @ (_a @ _x), with _a an M x N row-major matrix, _x and _out of length N.",
        a=a,
        x=x,
        out=out,
        name="atax",
        flops="4*M*N",
    )


@dace.program
def atax_native(a: dace.float64[M, N], x: dace.float64[N], out: dace.float64[N]):
    t = a @ x
    out[:] = np.transpose(a) @ t


@dace.program
def bicg(a: dace.float64[M, N], p: dace.float64[N], r: dace.float64[M], s: dace.float64[N], q: dace.float64[M]):
    dace_ai.ai(
        "bicg: _out0 = _a^T @ _r (length N) and _out1 = _a @ _p (length M), with _a an M x N row-major matrix.",
        a=a,
        p=p,
        r=r,
        out=(s, q),
        name="bicg",
        flops="4*M*N",
    )


@dace.program
def bicg_native(a: dace.float64[M, N], p: dace.float64[N], r: dace.float64[M], s: dace.float64[N], q: dace.float64[M]):
    s[:] = np.transpose(a) @ r
    q[:] = a @ p


@dace.program
def mvt(
    a: dace.float64[N, N],
    x1: dace.float64[N],
    x2: dace.float64[N],
    y1: dace.float64[N],
    y2: dace.float64[N],
    o1: dace.float64[N],
    o2: dace.float64[N],
):
    dace_ai.ai(
        "mvt: _out0 = _x1 + _a @ _y1 and _out1 = _x2 + _a^T @ _y2, with _a an N x N row-major matrix.",
        a=a,
        x1=x1,
        x2=x2,
        y1=y1,
        y2=y2,
        out=(o1, o2),
        name="mvt",
        flops="4*N*N + 2*N",
    )


@dace.program
def mvt_native(
    a: dace.float64[N, N],
    x1: dace.float64[N],
    x2: dace.float64[N],
    y1: dace.float64[N],
    y2: dace.float64[N],
    o1: dace.float64[N],
    o2: dace.float64[N],
):
    o1[:] = x1 + a @ y1
    o2[:] = x2 + np.transpose(a) @ y2


@dace.program
def gesummv(
    alpha: dace.float64,
    beta: dace.float64,
    a: dace.float64[N, N],
    b: dace.float64[N, N],
    x: dace.float64[N],
    out: dace.float64[N],
):
    dace_ai.ai(
        "gesummv: _out = _alpha * (_a @ _x) + _beta * (_b @ _x), with _a and _b N x N row-major.",
        alpha=alpha,
        beta=beta,
        a=a,
        b=b,
        x=x,
        out=out,
        name="gesummv",
        flops="4*N*N + 3*N",
    )


@dace.program
def gesummv_native(
    alpha: dace.float64,
    beta: dace.float64,
    a: dace.float64[N, N],
    b: dace.float64[N, N],
    x: dace.float64[N],
    out: dace.float64[N],
):
    out[:] = alpha * (a @ x) + beta * (b @ x)


@dace.program
def syrk(
    alpha: dace.float64, beta: dace.float64, a: dace.float64[N, M], c: dace.float64[N, N], out: dace.float64[N, N]
):
    dace_ai.ai(
        "syrk: _out = _alpha * _a @ _a^T + _beta * _c (the full N x N matrix), with _a N x M, all row-major.",
        alpha=alpha,
        beta=beta,
        a=a,
        c=c,
        out=out,
        name="syrk",
        flops="2*N*N*M + 3*N*N",
    )


@dace.program
def syrk_native(
    alpha: dace.float64, beta: dace.float64, a: dace.float64[N, M], c: dace.float64[N, N], out: dace.float64[N, N]
):
    out[:] = alpha * (a @ np.transpose(a)) + beta * c


@dace.program
def syr2k(
    alpha: dace.float64,
    beta: dace.float64,
    a: dace.float64[N, M],
    b: dace.float64[N, M],
    c: dace.float64[N, N],
    out: dace.float64[N, N],
):
    dace_ai.ai(
        "syr2k: _out = _alpha * (_a @ _b^T + _b @ _a^T) + _beta * _c (the full N x N matrix), with _a and "
        "_b N x M, all row-major.",
        alpha=alpha,
        beta=beta,
        a=a,
        b=b,
        c=c,
        out=out,
        name="syr2k",
        flops="4*N*N*M + 3*N*N",
    )


@dace.program
def syr2k_native(
    alpha: dace.float64,
    beta: dace.float64,
    a: dace.float64[N, M],
    b: dace.float64[N, M],
    c: dace.float64[N, N],
    out: dace.float64[N, N],
):
    out[:] = alpha * (a @ np.transpose(b) + b @ np.transpose(a)) + beta * c


@dace.program
def doitgen(a: dace.float64[NR, NQ, NP], c4: dace.float64[NP, NP], out: dace.float64[NR, NQ, NP]):
    dace_ai.ai(
        "doitgen: _out[r, q, p] = sum over 0 <= s < NP of _a[r, q, s] * _c4[s, p], with _a and _out "
        "NR x NQ x NP and _c4 NP x NP, all row-major.",
        a=a,
        c4=c4,
        out=out,
        name="doitgen",
        flops="2*NR*NQ*NP*NP",
    )


@dace.program
def doitgen_native(a: dace.float64[NR, NQ, NP], c4: dace.float64[NP, NP], out: dace.float64[NR, NQ, NP]):
    out[:] = 0
    for r, q, p, s in dace.map[0:NR, 0:NQ, 0:NP, 0:NP]:
        out[r, q, p] += a[r, q, s] * c4[s, p]


@dace.program
def heat3d(x: dace.float64[N, M, K], out: dace.float64[N, M, K]):
    dace_ai.ai(
        "One explicit heat step on the N x M x K row-major grid _x: for interior points "
        "(1 <= i < N - 1, 1 <= j < M - 1, 1 <= k < K - 1) _out[i, j, k] = _x[i, j, k] + 0.125 * "
        "(_x[i + 1, j, k] - 2 _x[i, j, k] + _x[i - 1, j, k]) + 0.125 * (_x[i, j + 1, k] - 2 _x[i, j, k] + "
        "_x[i, j - 1, k]) + 0.125 * (_x[i, j, k + 1] - 2 _x[i, j, k] + _x[i, j, k - 1]); boundary points "
        "are copied: _out[i, j, k] = _x[i, j, k].",
        x=x,
        out=out,
        name="heat3d",
        flops="16*(N-2)*(M-2)*(K-2)",
    )


@dace.program
def heat3d_native(x: dace.float64[N, M, K], out: dace.float64[N, M, K]):
    out[:] = x[:]
    for i, j, k in dace.map[1 : N - 1, 1 : M - 1, 1 : K - 1]:
        out[i, j, k] = (
            x[i, j, k]
            + 0.125 * (x[i + 1, j, k] - 2.0 * x[i, j, k] + x[i - 1, j, k])
            + 0.125 * (x[i, j + 1, k] - 2.0 * x[i, j, k] + x[i, j - 1, k])
            + 0.125 * (x[i, j, k + 1] - 2.0 * x[i, j, k] + x[i, j, k - 1])
        )


@dace.program
def batched_softmax(x: dace.float64[B, N, M], out: dace.float64[B, N, M]):
    dace_ai.ai(
        "Softmax over the last axis of the B x N x M row-major tensor _x: for each (b, i), "
        "_out[b, i, j] = exp(_x[b, i, j] - max_j _x[b, i, :]) / sum_j exp(_x[b, i, j] - max_j _x[b, i, :]).",
        x=x,
        out=out,
        name="batched_softmax",
        flops="4*B*N*M",
    )


@dace.program
def batched_softmax_native(x: dace.float64[B, N, M], out: dace.float64[B, N, M]):
    for b, i in dace.map[0:B, 0:N]:
        mx = np.max(x[b, i])
        e = np.exp(x[b, i] - mx)
        out[b, i] = e / np.sum(e)


@dace.program
def attention(
    scale: dace.float64,
    q: dace.float64[N, DH],
    k: dace.float64[N, DH],
    v: dace.float64[N, DH],
    out: dace.float64[N, DH],
):
    dace_ai.ai(
        "Single-head attention: S = _scale * _q @ _k^T (N x N), P = row-wise softmax of S "
        "(P[i, j] = exp(S[i, j] - max_j S[i, :]) / sum_j exp(S[i, j] - max_j S[i, :])), _out = P @ _v; "
        "_q, _k, _v and _out are N x DH row-major.",
        scale=scale,
        q=q,
        k=k,
        v=v,
        out=out,
        name="attention",
        flops="4*N*N*DH + 5*N*N",
    )


@dace.program
def attention_native(
    scale: dace.float64,
    q: dace.float64[N, DH],
    k: dace.float64[N, DH],
    v: dace.float64[N, DH],
    out: dace.float64[N, DH],
):
    s = scale * (q @ np.transpose(k))
    p = np.empty((N, N), dtype=np.float64)
    for i in dace.map[0:N]:
        mx = np.max(s[i])
        e = np.exp(s[i] - mx)
        p[i] = e / np.sum(e)
    out[:] = p @ v


@dace.program
def covariance(data: dace.float64[N, M], out: dace.float64[M, M]):
    dace_ai.ai(
        "Covariance of the M features of N samples (_data is N x M row-major): mean[j] = sum_i _data[i, j] "
        "/ N, _out[j, l] = sum_i (_data[i, j] - mean[j]) * (_data[i, l] - mean[l]) / (N - 1) (M x M "
        "row-major).",
        data=data,
        out=out,
        name="covariance",
        flops="2*M*M*N + 2*N*M + M*M",
    )


@dace.program
def covariance_native(data: dace.float64[N, M], out: dace.float64[M, M]):
    mean = np.sum(data, axis=0) / N
    c = data - mean
    out[:] = (np.transpose(c) @ c) / (N - 1)


@dace.program
def mlp(x: dace.float64[N, K], w: dace.float64[K, M], bias: dace.float64[M], out: dace.float64[N, M]):
    dace_ai.ai(
        "Dense layer with ReLU: _out[i, j] = max(0, sum_k _x[i, k] * _w[k, j] + _bias[j]), with _x N x K, "
        "_w K x M, _out N x M, all row-major.",
        x=x,
        w=w,
        bias=bias,
        out=out,
        name="mlp",
        flops="2*N*K*M + 2*N*M",
    )


@dace.program
def mlp_native(x: dace.float64[N, K], w: dace.float64[K, M], bias: dace.float64[M], out: dace.float64[N, M]):
    h = x @ w + bias
    out[:] = np.maximum(h, 0)


@dace.program
def gelu(x: dace.float64[N], out: dace.float64[N]):
    dace_ai.ai(
        "GELU (tanh form): _out[i] = 0.5 * _x[i] * (1 + tanh(0.7978845608028654 * (_x[i] + 0.044715 * "
        "_x[i]^3))) for every 0 <= i < N.",
        x=x,
        out=out,
        name="gelu",
        flops="8*N",
    )


@dace.program
def gelu_native(x: dace.float64[N], out: dace.float64[N]):
    out[:] = 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


@dace.program
def rmsnorm(x: dace.float64[N, M], g: dace.float64[M], out: dace.float64[N, M]):
    dace_ai.ai(
        "RMS normalisation of each row of the N x M row-major matrix _x: r = sqrt(sum_j _x[i, j]^2 / M + "
        "1e-6), _out[i, j] = _x[i, j] / r * _g[j].",
        x=x,
        g=g,
        out=out,
        name="rmsnorm",
        flops="4*N*M",
    )


@dace.program
def rmsnorm_native(x: dace.float64[N, M], g: dace.float64[M], out: dace.float64[N, M]):
    for i in dace.map[0:N]:
        r = np.sqrt(np.sum(x[i] * x[i]) / M + 1e-6)
        out[i] = x[i] / r * g


@dace.program
def row_norms(x: dace.float64[N, M], out: dace.float64[N]):
    dace_ai.ai(
        "Euclidean norm of each row: _out[i] = sqrt(sum_j _x[i, j]^2) for the N x M row-major _x.",
        x=x,
        out=out,
        name="row_norms",
        flops="2*N*M",
    )


@dace.program
def row_norms_native(x: dace.float64[N, M], out: dace.float64[N]):
    for i in dace.map[0:N]:
        out[i] = np.sqrt(np.sum(x[i] * x[i]))


@dace.program
def sumsq(x: dace.float64[N], out: dace.float64[1]):
    dace_ai.ai(
        "Sum of squares: _out[0] = sum over 0 <= i < N of _x[i] * _x[i].", x=x, out=out, name="sumsq", flops="2*N"
    )


@dace.program
def sumsq_native(x: dace.float64[N], out: dace.float64[1]):
    out[0] = np.sum(x * x)


@dace.program
def pairwise_dist(x: dace.float64[N, 3], out: dace.float64[N, N]):
    dace_ai.ai(
        "Squared distances between N points in 3-D (_x is N x 3 row-major): _out[i, j] = sum over "
        "0 <= d < 3 of (_x[i, d] - _x[j, d])^2 (N x N row-major).",
        x=x,
        out=out,
        name="pairwise_dist",
        flops="8*N*N",
    )


@dace.program
def pairwise_dist_native(x: dace.float64[N, 3], out: dace.float64[N, N]):
    for i, j in dace.map[0:N, 0:N]:
        out[i, j] = (
            (x[i, 0] - x[j, 0]) * (x[i, 0] - x[j, 0])
            + (x[i, 1] - x[j, 1]) * (x[i, 1] - x[j, 1])
            + (x[i, 2] - x[j, 2]) * (x[i, 2] - x[j, 2])
        )


@dace.program
def gemv_t(a: dace.float64[M, N], x: dace.float64[M], out: dace.float64[N]):
    dace_ai.ai(
        "Transposed matrix-vector product: _out = _a^T @ _x, with _a an M x N row-major matrix.",
        a=a,
        x=x,
        out=out,
        name="gemv_t",
        flops="2*M*N",
    )


@dace.program
def gemv_t_native(a: dace.float64[M, N], x: dace.float64[M], out: dace.float64[N]):
    out[:] = np.transpose(a) @ x


# ------------------------------------------------------------------ NumPy references: inputs by name -> outputs
def ref_dot(x, y, **_):
    return {"out": np.array([x @ y])}


def ref_gemv(A, x, **_):
    return {"y": A @ x}


def ref_gemm(A, B_, **_):
    return {"C": A @ B_}


def ref_transpose(A, **_):
    return {"At": A.T.copy()}


def ref_sum_axis0(A, **_):
    return {"out": A.sum(axis=0)}


def ref_sum_axis1(A, **_):
    return {"out": A.sum(axis=1)}


def ref_sum_all(A, **_):
    return {"out": np.array([A.sum()])}


def ref_max_axis1(A, **_):
    return {"out": A.max(axis=1)}


def ref_fft(x, **_):
    return {"y": np.fft.fft(x)}


def ref_axpy(a, x, y, **_):
    return {"out": a * x + y}


def ref_softmax(x, **_):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"out": e / e.sum(axis=1, keepdims=True)}


def ref_layernorm(x, gamma, beta, **_):
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return {"out": (x - mean) / np.sqrt(var + 1e-5) * gamma + beta}


def ref_stencil1d(x, **_):
    out = x.copy()
    out[1:-1] = 0.25 * x[:-2] + 0.5 * x[1:-1] + 0.25 * x[2:]
    return {"out": out}


def ref_jacobi2d(x, **_):
    out = x.copy()
    out[1:-1, 1:-1] = 0.2 * (x[1:-1, 1:-1] + x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:])
    return {"out": out}


def ref_conv2d(x, w, **_):
    n, m = x.shape
    out = np.zeros((n - 2, m - 2))
    for di in range(3):
        for dj in range(3):
            out += x[di : di + n - 2, dj : dj + m - 2] * w[di, dj]
    return {"out": out}


def ref_histogram(x, **_):
    return {"hist": np.bincount(x, minlength=64).astype(np.int64)}


def ref_scan(x, **_):
    return {"out": np.cumsum(x)}


def ref_conv1d(x, w, **_):
    return {"out": np.correlate(x, w, mode="valid")}


def ref_outer(x, y, **_):
    return {"out": np.outer(x, y)}


def ref_relu(x, **_):
    return {"out": np.maximum(x, 0)}


def ref_mm2(alpha, beta, a, b, c, d, **_):
    return {"out": alpha * (a @ b) @ c + beta * d}


def ref_mm3(a, b, c, d, **_):
    return {"out": (a @ b) @ (c @ d)}


def ref_atax(a, x, **_):
    return {"out": a.T @ (a @ x)}


def ref_bicg(a, p, r, **_):
    return {"s": a.T @ r, "q": a @ p}


def ref_mvt(a, x1, x2, y1, y2, **_):
    return {"o1": x1 + a @ y1, "o2": x2 + a.T @ y2}


def ref_gesummv(alpha, beta, a, b, x, **_):
    return {"out": alpha * (a @ x) + beta * (b @ x)}


def ref_syrk(alpha, beta, a, c, **_):
    return {"out": alpha * (a @ a.T) + beta * c}


def ref_syr2k(alpha, beta, a, b, c, **_):
    return {"out": alpha * (a @ b.T + b @ a.T) + beta * c}


def ref_doitgen(a, c4, **_):
    return {"out": a @ c4}


def ref_heat3d(x, **_):
    out = x.copy()
    c = x[1:-1, 1:-1, 1:-1]
    out[1:-1, 1:-1, 1:-1] = (
        c
        + 0.125 * (x[2:, 1:-1, 1:-1] - 2.0 * c + x[:-2, 1:-1, 1:-1])
        + 0.125 * (x[1:-1, 2:, 1:-1] - 2.0 * c + x[1:-1, :-2, 1:-1])
        + 0.125 * (x[1:-1, 1:-1, 2:] - 2.0 * c + x[1:-1, 1:-1, :-2])
    )
    return {"out": out}


def ref_batched_softmax(x, **_):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return {"out": e / e.sum(axis=-1, keepdims=True)}


def ref_attention(scale, q, k, v, **_):
    s = scale * (q @ k.T)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return {"out": (e / e.sum(axis=1, keepdims=True)) @ v}


def ref_covariance(data, **_):
    return {"out": np.cov(data, rowvar=False)}


def ref_mlp(x, w, bias, **_):
    return {"out": np.maximum(x @ w + bias, 0)}


def ref_gelu(x, **_):
    return {"out": 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))}


def ref_rmsnorm(x, g, **_):
    return {"out": x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * g}


def ref_row_norms(x, **_):
    return {"out": np.linalg.norm(x, axis=1)}


def ref_sumsq(x, **_):
    return {"out": np.array([x @ x])}


def ref_pairwise_dist(x, **_):
    diff = x[:, None, :] - x[None, :, :]
    return {"out": (diff * diff).sum(axis=-1)}


def ref_gemv_t(a, x, **_):
    return {"out": a.T @ x}
