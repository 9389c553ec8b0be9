"""The numba helpers the learner families' folds share, and the folds not yet moved beside
their families (imported only through :func:`okl_core.learners.compiled.folds`).

Shared: the rules' coefficients (:func:`scalar_coefficient`, :func:`rival`, coded as
:func:`okl_core.learners.rules.rule_code` codes them), exact kernel rows
(:func:`kernel_row_into`, the arithmetic of :func:`okl_core.kernels.row_against_buffer`),
copies without numba's shape checks, and the multi-kernel weights' exp / log-sum-exp and
inverse-CDF draws. The arithmetic is fixed so that every runner gives the same bytes:

* dot products are ``np.dot``, which numba hands to BLAS (``ddot``; ``dgemv`` for matrix
  shapes) -- here through scipy's OpenBLAS build, pinned to one thread
  (:func:`okl_core.numerics.pin_new_libraries`);
* elementwise steps are one rounded product and one rounded sum; no fastmath, so no fused
  multiply-adds and no reassociation, and no parallel loops, so nothing depends on threads;
* exp, log and pow are the C library's (``math``), sums sequential loops;
* the rules' comparisons are written as in :mod:`~okl_core.learners.rules` (strict
  ``y f < 1``; the multiclass rival is the first maximum with NaN first, as ``argmax``).

Every fold module's cache is keyed by all the fold sources together
(:func:`okl_core.learners.compiled.fold_cache_dir`), so an edit here recompiles the folds
that call these helpers from other files.
"""

from __future__ import annotations

import math

import numpy as np

from okl_core.learners.compiled import njit
from okl_core.learners.rules import HINGE, PERCEPTRON, SQUARED


@njit
def scalar_coefficient(kind, eta, eps, f, y):
    """``(update, coefficient)`` of a scalar rule (hinge, perceptron, regression)."""
    if kind == HINGE:
        if y * f < 1.0:
            return True, eta * y
    elif kind == PERCEPTRON:
        if (1.0 if f >= 0 else -1.0) != y:
            return True, 1.0 * y
    else:
        residual = y - f
        size = residual * residual if kind == SQUARED else abs(residual)
        if size > eps:
            return True, eta * residual
    return False, 0.0


@njit
def rival(f, y):
    """The multiclass rule's rival class of scores ``f`` and label ``y``, or -1 (no update)."""
    s = 0
    best = -np.inf if y == 0 else f[0]
    if not np.isnan(best):
        for c in range(1, f.shape[0]):
            v = -np.inf if c == y else f[c]
            if np.isnan(v):
                s, best = c, v
                break
            if v > best:
                s, best = c, v
    if f[y] - best >= 1.0:
        return -1
    return s


@njit
def copy_into(dst, src):
    """``dst[:] = src`` for vectors of one length: an array assigned to a slice compiles numba's
    shape check, whose error message formats the shapes (~2.5 s of a first compilation, once
    per process, for the string functions alone); the values copied are the same."""
    for j in range(src.shape[0]):
        dst[j] = src[j]


@njit
def copy_matrix_into(dst, src):
    """``dst[:, :] = src`` for matrices of one shape (:func:`copy_into`'s reason)."""
    for r in range(src.shape[0]):
        for c in range(src.shape[1]):
            dst[r, c] = src[r, c]


@njit
def widen_row(Z, i, z):
    """``z[:] = Z[i]`` in float64 (exact from float32), without allocating per row."""
    for j in range(z.shape[0]):
        z[j] = Z[i, j]


# -- the multi-kernel weights and draws (okl_core.learners.omkl, okl_core.learners.oks) ----
# exp and log from the C library (math.exp, math.log), sums in a sequential loop; the
# features come precomputed in numpy (KernelFeatureBank.row_blocks, multikernel.FeatureBlock:
# numpy's float32 cos and sin are not the C library's: numba's float32 cos differed from
# numpy's on 17% of 200,000 arguments).
@njit
def fold_weights_into(log_w, out):
    """``out = exp(log_w - max) / sum`` (the normalized weights of log-weights ``log_w``)."""
    top = np.max(log_w)
    s = 0.0
    for n in range(log_w.shape[0]):
        out[n] = math.exp(log_w[n] - top)
        s += out[n]
    for n in range(log_w.shape[0]):
        out[n] = out[n] / s


@njit
def log_normalize_in_place(log_w):
    """``log_w -= log sum exp(log_w)`` in place (log-sum-exp after the maximum)."""
    top = np.max(log_w)
    s = 0.0
    for n in range(log_w.shape[0]):
        s += math.exp(log_w[n] - top)
    lse = top + math.log(s)
    for n in range(log_w.shape[0]):
        log_w[n] = log_w[n] - lse


@njit
def draw_index(weights, u):
    """multikernel.draw_index: inverse CDF of ``u`` on the running sums of ``weights``."""
    cdf = np.cumsum(weights)
    return min(np.searchsorted(cdf, u * cdf[-1], side="right"), weights.shape[0] - 1)


# -- exact kernel rows (okl_core.kernels.row_against_buffer, compiled) ----------------------
GAUSSIAN, LAPLACIAN, CAUCHY = 0, 1, 2  # okl_core.kernels.KERNEL_CODES


@njit
def kernel_row_into(kind, sigma, gauss_scale, x, columns, sq_norms, m, out):
    """``k(s_j, x)`` for the first ``m`` columns ``s_j`` of ``columns`` (d, capacity) into ``out[:m]``.

    :func:`okl_core.kernels.row_against_buffer`'s arithmetic: Gaussian dot products summed
    over the row's non-zero coordinates in order (as its einsum), ``x . x`` by BLAS ddot,
    ``exp(max(|s|^2 + |x|^2 - 2 s.x, 0) * gauss_scale)``; Laplacian ``exp(-sum_k |s_k - x_k|
    / sigma)`` and Cauchy ``prod_k 1 / (1 + ((s_k - x_k) / sigma)^2)`` summed / multiplied
    over ``k`` in order; exp from the C library.
    """
    d = x.shape[0]
    if kind == GAUSSIAN:
        for j in range(m):
            out[j] = 0.0
        for k in range(d):
            xk = x[k]
            if xk != 0.0:
                for j in range(m):
                    out[j] += xk * columns[k, j]
        xx = np.dot(x, x)
        for j in range(m):
            sq = sq_norms[j] + xx - 2.0 * out[j]
            out[j] = math.exp((sq if sq > 0.0 else 0.0) * gauss_scale)
        return
    if kind == LAPLACIAN:
        for j in range(m):
            out[j] = abs(columns[0, j] - x[0])
        for k in range(1, d):
            xk = x[k]
            for j in range(m):
                out[j] += abs(columns[k, j] - xk)
        for j in range(m):
            out[j] = math.exp(-out[j] / sigma)
        return
    for j in range(m):
        a = abs(columns[0, j] - x[0]) / sigma
        out[j] = 1.0 / (1.0 + a * a)
    for k in range(1, d):
        xk = x[k]
        for j in range(m):
            a = abs(columns[k, j] - xk) / sigma
            out[j] *= 1.0 / (1.0 + a * a)


