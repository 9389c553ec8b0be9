"""The compiled folds of weights on feature rows: FOGD, MFOGD, FOGD-R (constant, AdaGrad and
NAG steps) and NOGD's linear phase (spec/fogd_nogd.md).

Each fold learns rows ``start, start + 1, ...`` of a :class:`Batch` in the papers' order --
score the row with the current weights, record the score, let the rule decide, step
before the next row -- with a rule coded ``(kind, eta, eps)``
(:data:`okl_core.learners.rules.RuleCode`). The arithmetic is fixed so that every runner
gives the same bytes:

* scores are ``np.dot`` products, which numba hands to BLAS (``ddot``; ``dgemv`` for the
  multiclass shapes), pinned to one thread (:func:`okl_core.numerics.pin_new_libraries`);
* the learning step is elementwise (``w[j] += coef * z[j]``: one rounded product, one
  rounded sum); no fastmath, so no fused multiply-adds and no reassociation, and no
  parallel loops;
* the rules' comparisons are those of :mod:`okl_core.learners.rules` (strict ``y f < 1``;
  the multiclass rival is the first maximum with NaN first, as ``argmax``).

tests/okl_core/reference/linear.py holds the numpy loops these replaced, which the tests
compare them with byte for byte.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from okl_core.learners._jit_folds import copy_into, rival, scalar_coefficient, widen_row
from okl_core.learners.compiled import njit


class Batch(NamedTuple):
    """The rows a fold learns: features ``Z`` (n, k) (float32 or float64; widened to float64
    one row at a time), labels ``y`` (n,) and ``scores`` (n,) or (n, C) float64, written."""

    Z: np.ndarray
    y: np.ndarray
    scores: np.ndarray


class AdaGrad(NamedTuple):
    """AdaGrad's step (``rules.ADAGRAD_DELTA``): the sums of squared gradients ``G`` (shaped as
    the weights, updated in place; empty: the constant step), ``eta`` and ``delta``."""

    G: np.ndarray
    eta: float
    delta: float


class Normalized(NamedTuple):
    """NAG's step (Ross, Mineiro & Langford 2013): the features' scales ``s`` (k,), the sums of
    squared gradients ``G`` (shaped as the weights), ``N`` (1,) the sum of the rows'
    normalized squared norms (all updated in place), ``t0`` rows learned before the batch
    and ``eta``."""

    s: np.ndarray
    G: np.ndarray
    N: np.ndarray
    t0: int
    eta: float


@njit
def fold_weights(rule, batch, start, w, adagrad):
    """Weights ``w`` (k,): ``f = z . w``, then a scalar rule's step.

    ``adagrad.G`` empty: the constant step, ``w += coef z``. Otherwise the rule (coded with
    ``eta = 1``) gives ``u``, and :func:`adagrad_step` updates ``G`` (k,) and ``w``.
    Returns the number of rows.
    """
    kind, eta, eps = rule
    Z, y, scores = batch
    k = Z.shape[1]
    z = np.empty(k)
    G = adagrad.G
    with_adagrad = G.shape[0] > 0
    for i in range(start, y.shape[0]):
        widen_row(Z, i, z)
        f = np.dot(z, w)
        scores[i] = f
        update, coef = scalar_coefficient(kind, eta, eps, f, y[i])
        if update:
            if with_adagrad:
                adagrad_step(adagrad.eta, adagrad.delta, coef, z, w, G)
            else:
                for j in range(k):
                    w[j] += coef * z[j]
    return y.shape[0]


@njit
def fold_multiclass(eta, batch, start, W, class_rows):
    """The multiclass rule on weights ``W``, as either model of it takes the decision.

    ``class_rows``: ``W`` is (C, k), one row per class (MFOGD): ``f = W z``; an update adds
    ``eta z`` to ``W[y]`` and subtracts it from ``W[rival]``. Otherwise ``W`` is (k, C)
    (NOGD's linear phase): ``f = z W``; an update adds ``z (x) coef`` with the rule's dense
    coefficient (``+eta`` at ``y``, ``-eta`` at the rival), zeros included.
    """
    Z, y, scores = batch
    k = W.shape[1] if class_rows else W.shape[0]
    z = np.empty(k)
    step = np.empty(k)
    coef = np.empty(scores.shape[1])
    for i in range(start, y.shape[0]):
        widen_row(Z, i, z)
        f = np.dot(W, z) if class_rows else np.dot(z, W)
        copy_into(scores[i], f)
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


@njit
def adagrad_step(eta, delta, u, z, w, G):
    """``G += (u z)^2``, ``w += eta (u z) / (delta + sqrt(G))`` elementwise."""
    for j in range(z.shape[0]):
        g = u * z[j]
        G[j] += g * g
        w[j] += (eta * g) / (delta + np.sqrt(G[j]))


@njit
def fold_multiclass_adagrad(batch, start, W, adagrad):
    """MFOGD's multiclass rule (``W`` (C, k), one row per class) with AdaGrad steps: an
    update adds ``eta z / (delta + sqrt(G[y]))`` to ``W[y]`` and subtracts
    ``eta z / (delta + sqrt(G[s]))`` from ``W[s]``, each after adding ``z^2`` to its ``G`` row."""
    Z, y, scores = batch
    G, eta, delta = adagrad
    k = W.shape[1]
    z = np.empty(k)
    for i in range(start, y.shape[0]):
        widen_row(Z, i, z)
        f = np.dot(W, z)
        copy_into(scores[i], f)
        s = rival(f, y[i])
        if s < 0:
            continue
        adagrad_step(eta, delta, 1.0, z, W[y[i]], G[y[i]])
        adagrad_step(eta, delta, -1.0, z, W[s], G[s])
    return y.shape[0]


@njit
def normalize_row(z, s, W, q, N):
    """NAG's steps before the prediction (Algorithm 2, steps 2 and 4): rescale ``W[:, j]`` by
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


@njit
def normalized_rate(eta, t, N):
    """NAG's global factor ``eta sqrt(t / N)``, 0 while ``N = 0`` (no coordinate has a step)."""
    return eta * np.sqrt(t / N[0]) if N[0] > 0 else 0.0


@njit
def normalized_step(rate, u, z, s, w, G):
    """NAG's step 5: ``G_j += (u z_j)^2``; where ``G_j > 0``, ``w_j += rate (u z_j) / (s_j sqrt(G_j))``."""
    for j in range(z.shape[0]):
        g = u * z[j]
        G[j] += g * g
        if G[j] > 0:
            w[j] += (rate * g) / (s[j] * np.sqrt(G[j]))


@njit
def fold_weights_normalized(rule, batch, start, w, nag):
    """Weights ``w`` (k,) learned with NAG: per row, :func:`normalize_row`, ``f = z . w``, and
    on an update (the scalar rule coded with ``eta = 1`` gives ``u``) :func:`normalized_step`
    at row ``t = t0 + i + 1``."""
    kind, _, eps = rule
    Z, y, scores = batch
    s, G, N, t0, eta = nag
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


@njit
def fold_multiclass_normalized(batch, start, W, nag):
    """MFOGD's multiclass rule (``W`` (C, k)) with NAG: the scales ``s`` (k,) and ``N`` are
    the features' (shared by the classes), ``G`` (C, k) per weight; an update steps
    ``W[y]`` with ``u = +1`` and ``W[rival]`` with ``u = -1``."""
    Z, y, scores = batch
    s, G, N, t0, eta = nag
    k = W.shape[1]
    z = np.empty(k)
    q = np.empty(k)
    for i in range(start, y.shape[0]):
        widen_row(Z, i, z)
        normalize_row(z, s, W, q, N)
        f = np.dot(W, z)
        copy_into(scores[i], f)
        r = rival(f, y[i])
        if r < 0:
            continue
        rate = normalized_rate(eta, t0 + i + 1, N)
        normalized_step(rate, 1.0, z, s, W[y[i]], G[y[i]])
        normalized_step(rate, -1.0, z, s, W[r], G[r])
    return y.shape[0]
