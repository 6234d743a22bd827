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
    dace_ai.ai("Write _out[i] = _a * _x[i] + _y[i] for every 0 <= i < N.", a=a, x=x, y=y, out=out, name="axpy")


@dace.program
def axpy_native(a: dace.float64, x: dace.float64[N], y: dace.float64[N], out: dace.float64[N]):
    out[:] = a * x + y


@dace.program
def softmax(x: dace.float64[N, M], out: dace.float64[N, M]):
    dace_ai.ai("Row-wise softmax of the N x M row-major matrix _x: for each row i, "
               "_out[i, j] = exp(_x[i, j] - max_j _x[i, :]) / sum_j exp(_x[i, j] - max_j _x[i, :]).",
               x=x, out=out, name="softmax")


@dace.program
def softmax_native(x: dace.float64[N, M], out: dace.float64[N, M]):
    for i in dace.map[0:N]:
        mx = np.max(x[i])
        e = np.exp(x[i] - mx)
        out[i] = e / np.sum(e)


@dace.program
def layernorm(x: dace.float64[N, M], gamma: dace.float64[M], beta: dace.float64[M], out: dace.float64[N, M]):
    dace_ai.ai("Layer normalisation over the last axis of the N x M row-major matrix _x: for each row i, "
               "mean = sum_j _x[i, j] / M, var = sum_j (_x[i, j] - mean)^2 / M, "
               "_out[i, j] = (_x[i, j] - mean) / sqrt(var + 1e-5) * _gamma[j] + _beta[j].",
               x=x, gamma=gamma, beta=beta, out=out, name="layernorm")


@dace.program
def layernorm_native(x: dace.float64[N, M], gamma: dace.float64[M], beta: dace.float64[M],
                     out: dace.float64[N, M]):
    for i in dace.map[0:N]:
        mean = np.sum(x[i]) / M
        d = x[i] - mean
        var = np.sum(d * d) / M
        out[i] = d / np.sqrt(var + 1e-5) * gamma + beta


@dace.program
def stencil1d(x: dace.float64[N], out: dace.float64[N]):
    dace_ai.ai("Three-point stencil: _out[i] = 0.25 * _x[i - 1] + 0.5 * _x[i] + 0.25 * _x[i + 1] for 1 <= i < N - 1; "
               "_out[0] = _x[0] and _out[N - 1] = _x[N - 1].", x=x, out=out, name="stencil1d")


@dace.program
def stencil1d_native(x: dace.float64[N], out: dace.float64[N]):
    out[0] = x[0]
    out[N - 1] = x[N - 1]
    out[1:N - 1] = 0.25 * x[0:N - 2] + 0.5 * x[1:N - 1] + 0.25 * x[2:N]


@dace.program
def jacobi2d(x: dace.float64[N, M], out: dace.float64[N, M]):
    dace_ai.ai("Five-point Jacobi step on the N x M row-major grid _x: for 1 <= i < N - 1 and 1 <= j < M - 1, "
               "_out[i, j] = 0.2 * (_x[i, j] + _x[i - 1, j] + _x[i + 1, j] + _x[i, j - 1] + _x[i, j + 1]); "
               "boundary elements are copied: _out[i, j] = _x[i, j].", x=x, out=out, name="jacobi2d")


@dace.program
def jacobi2d_native(x: dace.float64[N, M], out: dace.float64[N, M]):
    out[:] = x[:]
    out[1:N - 1, 1:M - 1] = 0.2 * (x[1:N - 1, 1:M - 1] + x[0:N - 2, 1:M - 1] + x[2:N, 1:M - 1]
                                   + x[1:N - 1, 0:M - 2] + x[1:N - 1, 2:M])


@dace.program
def conv2d(x: dace.float64[N, M], w: dace.float64[3, 3], out: dace.float64[N - 2, M - 2]):
    dace_ai.ai("Valid 2-D convolution (cross-correlation) of the N x M row-major image _x with the 3 x 3 "
               "row-major kernel _w: _out[i, j] = sum over 0 <= di, dj < 3 of _x[i + di, j + dj] * _w[di, dj] "
               "for 0 <= i < N - 2, 0 <= j < M - 2 (_out is (N - 2) x (M - 2), row-major).",
               x=x, w=w, out=out, name="conv2d")


@dace.program
def conv2d_native(x: dace.float64[N, M], w: dace.float64[3, 3], out: dace.float64[N - 2, M - 2]):
    for i, j in dace.map[0:N - 2, 0:M - 2]:
        out[i, j] = (x[i, j] * w[0, 0] + x[i, j + 1] * w[0, 1] + x[i, j + 2] * w[0, 2]
                     + x[i + 1, j] * w[1, 0] + x[i + 1, j + 1] * w[1, 1] + x[i + 1, j + 2] * w[1, 2]
                     + x[i + 2, j] * w[2, 0] + x[i + 2, j + 1] * w[2, 1] + x[i + 2, j + 2] * w[2, 2])


@dace.program
def histogram(x: dace.int32[N], hist: dace.int64[64]):
    dace_ai.ai("Histogram with 64 bins: _hist[b] = number of indices i < N with _x[i] == b; every _x[i] is in "
               "[0, 64). Every bin must be written (zero bins included).", x=x, out=hist, name="histogram")


@dace.program
def histogram_native(x: dace.int32[N], hist: dace.int64[64]):
    hist[:] = 0
    for i in range(N):
        hist[x[i]] = hist[x[i]] + 1


@dace.program
def scan(x: dace.float64[N], out: dace.float64[N]):
    dace_ai.ai("Inclusive prefix sum: _out[i] = _x[0] + _x[1] + ... + _x[i] for every 0 <= i < N.",
               x=x, out=out, name="scan")


@dace.program
def scan_native(x: dace.float64[N], out: dace.float64[N]):
    out[0] = x[0]
    for i in range(1, N):
        out[i] = out[i - 1] + x[i]


@dace.program
def conv1d(x: dace.float64[N], w: dace.float64[K], out: dace.float64[N - K + 1]):
    dace_ai.ai("Valid 1-D correlation: _out[i] = sum over 0 <= k < K of _x[i + k] * _w[k] for 0 <= i < N - K + 1.",
               x=x, w=w, out=out, name="conv1d")


@dace.program
def conv1d_native(x: dace.float64[N], w: dace.float64[K], out: dace.float64[N - K + 1]):
    for i in dace.map[0:N - K + 1]:
        out[i] = np.sum(x[i:i + K] * w)


@dace.program
def outer(x: dace.float64[M], y: dace.float64[N], out: dace.float64[M, N]):
    dace_ai.ai("Outer product: _out[i, j] = _x[i] * _y[j] for 0 <= i < M, 0 <= j < N (_out row-major).",
               x=x, y=y, out=out, name="outer")


@dace.program
def outer_native(x: dace.float64[M], y: dace.float64[N], out: dace.float64[M, N]):
    for i, j in dace.map[0:M, 0:N]:
        out[i, j] = x[i] * y[j]


@dace.program
def relu(x: dace.float64[N], out: dace.float64[N]):
    dace_ai.ai("Rectified linear unit: _out[i] = max(_x[i], 0) for every 0 <= i < N.", x=x, out=out, name="relu")


@dace.program
def relu_native(x: dace.float64[N], out: dace.float64[N]):
    out[:] = np.maximum(x, 0)


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
            out += x[di:di + n - 2, dj:dj + m - 2] * w[di, dj]
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
