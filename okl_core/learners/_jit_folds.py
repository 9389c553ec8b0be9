"""The numba kernels behind :mod:`okl_core.learners.compiled` (imported only through it).

Each kernel is :func:`okl_core.learners.rules.fold` for one model shape, with the rule
passed as its code ``(kind, eta, eps)`` (:func:`okl_core.learners.rules.rule_code`). The
arithmetic is the numpy fold's, operation for operation, so the bytes are the same:

* scores are ``np.dot`` products, which numba hands to BLAS (``ddot``; ``dgemv`` for the
  multiclass shapes) -- the same routines numpy's ``@`` calls, here through scipy's
  OpenBLAS build (the compiled fold pins it to one thread, see
  :func:`okl_core.numerics.pin_new_libraries`);
* the learning step is elementwise (``w[j] += coef * z[j]``: one rounded product, one
  rounded sum, as numpy's ``w += coef * z``); no fastmath, so no fused multiply-adds and no
  reassociation, and no parallel loops, so nothing depends on threads;
* the rules' comparisons are written as in :mod:`~okl_core.learners.rules` (strict
  ``y f < 1``; the multiclass rival is the first maximum with NaN first, as ``argmax``).

``cache=True`` keeps the machine code next to this file (``__pycache__``, or
``NUMBA_CACHE_DIR``), so a fresh process loads it instead of compiling.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from okl_core.learners.rules import HINGE, PERCEPTRON, SQUARED


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
def widen_row(Z, i, z):
    """``z[:] = Z[i]`` in float64 (exact from float32), without allocating per row."""
    for j in range(z.shape[0]):
        z[j] = Z[i, j]


@njit(cache=True)
def fold_weights(kind, eta, eps, Z, w, y, scores, start, G, step_eta, delta):
    """Weights ``w`` (k,) on feature rows ``Z``: ``f = z . w``, then a scalar rule's step.

    ``G`` empty: the constant step, ``w += coef z``. Otherwise AdaGrad (``AdaGradRows``): the
    rule (coded with ``eta = 1``) gives ``u``, and :func:`adagrad_step` with ``step_eta``
    updates ``G`` (k,) and ``w``.
    """
    k = Z.shape[1]
    z = np.empty(k)
    adagrad = G.shape[0] > 0
    for i in range(start, y.shape[0]):
        widen_row(Z, i, z)
        f = np.dot(z, w)
        scores[i] = f
        update, coef = scalar_coefficient(kind, eta, eps, f, y[i])
        if update:
            if adagrad:
                adagrad_step(step_eta, delta, coef, z, w, G)
            else:
                for j in range(k):
                    w[j] += coef * z[j]
    return y.shape[0]


@njit(cache=True)
def fold_multiclass(eta, Z, W, class_rows, y, scores, start):
    """The multiclass rule on weights ``W``, as either model of it takes the decision.

    ``class_rows``: ``W`` is (C, k), one row per class (MFOGD): ``f = W z``; an update adds
    ``eta z`` to ``W[y]`` and subtracts it from ``W[rival]``. Otherwise ``W`` is (k, C)
    (NOGD's linear phase): ``f = z W``; an update adds ``z (x) coef`` with the rule's dense
    coefficient (``+eta`` at ``y``, ``-eta`` at the rival), zeros included, as numpy does.
    """
    k = W.shape[1] if class_rows else W.shape[0]
    z = np.empty(k)
    step = np.empty(k)
    coef = np.empty(scores.shape[1])
    for i in range(start, y.shape[0]):
        widen_row(Z, i, z)
        f = np.dot(W, z) if class_rows else np.dot(z, W)
        scores[i, :] = f
        s = rival(f, y[i])
        if s < 0:
            continue
        t = y[i]
        if class_rows:
            for j in range(k):
                step[j] = eta * z[j]
            for j in range(k):
                W[t, j] += step[j]
            for j in range(k):
                W[s, j] -= step[j]
        else:
            coef[:] = 0.0
            coef[t] = eta
            coef[s] = -eta
            for j in range(k):
                for c in range(coef.shape[0]):
                    W[j, c] += z[j] * coef[c]
    return y.shape[0]


@njit(cache=True)
def adagrad_step(eta, delta, u, z, w, G):
    """``G += (u z)^2``, ``w += eta (u z) / (delta + sqrt(G))`` elementwise, as numpy does."""
    for j in range(z.shape[0]):
        g = u * z[j]
        G[j] += g * g
        w[j] += (eta * g) / (delta + np.sqrt(G[j]))


@njit(cache=True)
def fold_multiclass_adagrad(eta, delta, Z, W, G, y, scores, start):
    """MFOGD's multiclass rule (``W`` (C, k), one row per class) with AdaGrad steps: an
    update adds ``eta z / (delta + sqrt(G[y]))`` to ``W[y]`` and subtracts
    ``eta z / (delta + sqrt(G[s]))`` from ``W[s]``, each after adding ``z^2`` to its ``G`` row."""
    k = W.shape[1]
    z = np.empty(k)
    for i in range(start, y.shape[0]):
        widen_row(Z, i, z)
        f = np.dot(W, z)
        scores[i, :] = f
        s = rival(f, y[i])
        if s < 0:
            continue
        adagrad_step(eta, delta, 1.0, z, W[y[i]], G[y[i]])
        adagrad_step(eta, delta, -1.0, z, W[s], G[s])
    return y.shape[0]


@njit(cache=True)
def normalize_row(z, s, W, q, N):
    """NAG's steps before the prediction, as ``rules.normalize_row``: rescale ``W[:, j]`` by
    ``s_j / |z_j|`` and set ``s_j = |z_j|`` where ``|z_j| > s_j``; ``N[0] += q . q`` with
    ``q_j = z_j / s_j`` (0 where ``s_j = 0``), ``q`` (k,) scratch."""
    for j in range(z.shape[0]):
        a = abs(z[j])
        if a > s[j]:
            r = s[j] / a
            for c in range(W.shape[0]):
                W[c, j] *= r
            s[j] = a
        q[j] = z[j] / s[j] if s[j] > 0 else 0.0
    N[0] += np.dot(q, q)


@njit(cache=True)
def normalized_rate(eta, t, N):
    """``eta sqrt(t / N)``, 0 while ``N = 0`` (``rules.normalized_rate``)."""
    return eta * np.sqrt(t / N[0]) if N[0] > 0 else 0.0


@njit(cache=True)
def normalized_step(rate, u, z, s, w, G):
    """``G_j += (u z_j)^2``; where ``G_j > 0``, ``w_j += rate (u z_j) / (s_j sqrt(G_j))``."""
    for j in range(z.shape[0]):
        g = u * z[j]
        G[j] += g * g
        if G[j] > 0:
            w[j] += (rate * g) / (s[j] * np.sqrt(G[j]))


@njit(cache=True)
def fold_weights_normalized(kind, eps, Z, w, s, G, N, t0, eta, y, scores, start):
    """Weights ``w`` (k,) learned with NAG (``rules.NormalizedRows``): per row,
    :func:`normalize_row`, ``f = z . w``, and on an update (the scalar rule coded with
    ``eta = 1`` gives ``u``) :func:`normalized_step` at row ``t = t0 + i + 1``."""
    k = Z.shape[1]
    z = np.empty(k)
    q = np.empty(k)
    W = w.reshape((1, k))
    for i in range(start, y.shape[0]):
        widen_row(Z, i, z)
        normalize_row(z, s, W, q, N)
        f = np.dot(z, w)
        scores[i] = f
        update, u = scalar_coefficient(kind, 1.0, eps, f, y[i])
        if update:
            normalized_step(normalized_rate(eta, t0 + i + 1, N), u, z, s, w, G)
    return y.shape[0]


@njit(cache=True)
def fold_multiclass_normalized(eta, Z, W, s, G, N, t0, y, scores, start):
    """MFOGD's multiclass rule (``W`` (C, k)) with NAG: the scales ``s`` (k,) and ``N`` are
    the features' (shared by the classes), ``G`` (C, k) per weight; an update steps
    ``W[y]`` with ``u = +1`` and ``W[rival]`` with ``u = -1``."""
    k = W.shape[1]
    z = np.empty(k)
    q = np.empty(k)
    for i in range(start, y.shape[0]):
        widen_row(Z, i, z)
        normalize_row(z, s, W, q, N)
        f = np.dot(W, z)
        scores[i, :] = f
        r = rival(f, y[i])
        if r < 0:
            continue
        rate = normalized_rate(eta, t0 + i + 1, N)
        normalized_step(rate, 1.0, z, s, W[y[i]], G[y[i]])
        normalized_step(rate, -1.0, z, s, W[r], G[r])
    return y.shape[0]
