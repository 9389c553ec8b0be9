"""The compiled folds of the exact-kernel expansions: kernel OGD and the kernel Perceptron
(``kernel_ogd``, ``mkernel_ogd``, ``kernel_ogd_r``, ``kernel_perceptron``) and NOGD's kernel
phase (``nogd``, ``mnogd``, ``nogd_r``); spec/fogd_nogd.md.

The rows learned so far are float64 columns with their squared norms (BLAS ddot); each row
is scored by ``_jit_folds.kernel_row_into`` (the arithmetic of
:func:`okl_core.kernels.row_against_buffer`) and a ddot (dgemv for the multiclass (m, C)
coefficients). An update at ``m == defer_at`` is left to Python (the support cap, a full
buffer, NOGD's transition): the fold returns ``(that row, m)`` with the row scored, not
learned. tests/okl_core/reference/expansions.py holds the numpy loops these replaced.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from okl_core.learners._jit_folds import copy_into, kernel_row_into, rival, scalar_coefficient, widen_row
from okl_core.learners.compiled import njit


class Rows(NamedTuple):
    """The rows a fold learns: ``X`` (n, d), the scores ``base`` (n,) or (n, C) of a part of the
    model held elsewhere (added when ``has_base``), labels ``y`` (n,) and ``scores``, written."""

    X: np.ndarray
    base: np.ndarray
    has_base: bool
    y: np.ndarray
    scores: np.ndarray


class Expansion(NamedTuple):
    """The stored rows as float64 ``columns`` (d, capacity) with their ``sq_norms`` (capacity,),
    their coefficients ``alpha`` (capacity,) or (capacity, C), and ``vectors`` (capacity, d)
    receiving the learned rows as given (all updated in place)."""

    columns: np.ndarray
    sq_norms: np.ndarray
    alpha: np.ndarray
    vectors: np.ndarray


@njit
def store_row(X, i, x, expansion, m):
    """Row ``i`` of ``X`` (widened into ``x``) as column ``m`` with its squared norm, and as row ``m`` of ``vectors``."""
    columns, sq_norms, _, vectors = expansion
    for j in range(x.shape[0]):
        columns[j, m] = x[j]
        vectors[m, j] = X[i, j]
    sq_norms[m] = np.dot(x, x)


@njit
def fold_expansion(rule, kernel, rows, start, expansion, m, defer_at):
    """A scalar rule on ``f = base[i] + sum_j alpha_j k(s_j, x_i)`` over the ``m`` stored rows
    (no ``base`` unless ``has_base``); an update stores ``x_i`` with ``alpha_m = coef``.
    ``kernel`` is :attr:`okl_core.kernels.Kernel.compiled`. Returns ``(rows done, m)``."""
    kind, eta, eps = rule
    code, sigma, gauss_scale = kernel
    X, base, has_base, y, scores = rows
    columns, sq_norms, alpha, _ = expansion
    x = np.empty(X.shape[1])
    k = np.empty(columns.shape[1])
    for i in range(start, y.shape[0]):
        widen_row(X, i, x)
        if m == 0:
            f = base[i] if has_base else 0.0
        else:
            kernel_row_into(code, sigma, gauss_scale, x, columns, sq_norms, m, k)
            f = np.dot(k[:m], alpha[:m])
            if has_base:
                f = base[i] + f
        scores[i] = f
        update, coef = scalar_coefficient(kind, eta, eps, f, y[i])
        if update:
            if m == defer_at:
                return i, m
            store_row(X, i, x, expansion, m)
            alpha[m] = coef
            m += 1
    return y.shape[0], m


@njit
def fold_expansion_multiclass(eta, kernel, rows, start, expansion, m, defer_at):
    """:func:`fold_expansion` for the multiclass rule: ``alpha`` (capacity, C), and an update
    stores the rule's dense coefficient (``+eta`` at ``y``, ``-eta`` at the rival)."""
    code, sigma, gauss_scale = kernel
    X, base, has_base, y, scores = rows
    columns, sq_norms, alpha, _ = expansion
    C = scores.shape[1]
    x = np.empty(X.shape[1])
    k = np.empty(columns.shape[1])
    f = np.zeros(C)
    for i in range(start, y.shape[0]):
        widen_row(X, i, x)
        if m == 0:
            for c in range(C):
                f[c] = base[i, c] if has_base else 0.0
        else:
            kernel_row_into(code, sigma, gauss_scale, x, columns, sq_norms, m, k)
            g = np.dot(k[:m], alpha[:m])
            for c in range(C):
                f[c] = base[i, c] + g[c] if has_base else g[c]
        copy_into(scores[i], f)
        s = rival(f, y[i])
        if s < 0:
            continue
        if m == defer_at:
            return i, m
        store_row(X, i, x, expansion, m)
        alpha[m, :] = 0.0
        alpha[m, y[i]] = eta
        alpha[m, s] = -eta
        m += 1
    return y.shape[0], m
