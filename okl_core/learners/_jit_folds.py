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

One module, in sections per learner family, on purpose: numba invalidates a function's
cached machine code when *its own* source file changes, not when a function it calls from
another file does, so folds split across files could keep running a stale kernel row or
rule after an edit. In one file every edit recompiles every fold.
"""

from __future__ import annotations

import math

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
def copy_into(dst, src):
    """``dst[:] = src`` for vectors of one length: an array assigned to a slice compiles numba's
    shape check, whose error message formats the shapes (~2.5 s of a first compilation, once
    per process, for the string functions alone); the values copied are the same."""
    for j in range(src.shape[0]):
        dst[j] = src[j]


@njit(cache=True)
def copy_matrix_into(dst, src):
    """``dst[:, :] = src`` for matrices of one shape (:func:`copy_into`'s reason)."""
    for r in range(src.shape[0]):
        for c in range(src.shape[1]):
            dst[r, c] = src[r, c]


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
        copy_into(scores[i], f)
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
        copy_into(scores[i], f)
        r = rival(f, y[i])
        if r < 0:
            continue
        rate = normalized_rate(eta, t0 + i + 1, N)
        normalized_step(rate, 1.0, z, s, W[y[i]], G[y[i]])
        normalized_step(rate, -1.0, z, s, W[r], G[r])
    return y.shape[0]


# -- the multi-kernel folds (okl_core.learners.omkl, okl_core.learners.oks) ---------------
# Their numpy folds take exp and log from the C library, sum sequentially and take dot
# products with ddot (okl_core.learners.multikernel, "the per-example arithmetic of the
# folds"), which is what math.exp, math.log, a loop and np.dot are here. Features come
# precomputed in numpy by KernelFeatureBank.row_blocks and multikernel.FeatureBlock (numpy's
# float32 cos and sin are not the C library's: numba's float32 cos differed from numpy's on
# 17% of 200,000 arguments).
@njit(cache=True)
def fold_weights_into(log_w, out):
    """``out = exp(log_w - max) / sum``: multikernel.fold_weights."""
    top = np.max(log_w)
    s = 0.0
    for n in range(log_w.shape[0]):
        out[n] = math.exp(log_w[n] - top)
        s += out[n]
    for n in range(log_w.shape[0]):
        out[n] = out[n] / s


@njit(cache=True)
def log_normalize_in_place(log_w):
    """multikernel.fold_log_normalize, in place."""
    top = np.max(log_w)
    s = 0.0
    for n in range(log_w.shape[0]):
        s += math.exp(log_w[n] - top)
    lse = top + math.log(s)
    for n in range(log_w.shape[0]):
        log_w[n] = log_w[n] - lse


@njit(cache=True)
def step_theta(theta, Zr, rows, m, f, y, eta_t, lam, losses):
    """omkl._step_theta on the kernels ``rows[:m]`` of ``theta`` (N, 2D), features ``Zr``
    (N, 2D) and scores ``f[:m]``; ``losses[:m]`` receives the losses before the step."""
    for k in range(m):
        n = rows[k]
        r = f[k] - y
        losses[k] = 2.0 * (0.5 * (r * r)) + lam * np.dot(theta[n], theta[n])
        g = 2.0 * r
        for j in range(theta.shape[1]):
            theta[n, j] -= eta_t * (g * Zr[n, j] + (2.0 * lam) * theta[n, j])


@njit(cache=True)
def fold_raker(Z, y, theta, log_w, scores, counter, eta, constant, lam):
    """omkl.Raker._fold: rows with features ``Z`` (n, N, 2D); ``theta``, ``log_w`` and
    ``scores`` in place; ``counter`` examples seen before the first row."""
    N = theta.shape[0]
    rows = np.arange(N)
    f = np.empty(N)
    q = np.empty(N)
    losses = np.empty(N)
    for r in range(y.shape[0]):
        eta_t = eta if constant else eta / math.sqrt(counter + r + 1)
        for n in range(N):
            f[n] = np.dot(Z[r, n], theta[n])
        fold_weights_into(log_w, q)
        scores[r] = np.dot(q, f)
        step_theta(theta, Z[r], rows, N, f, y[r], eta_t, lam, losses)
        for n in range(N):
            log_w[n] = log_w[n] - eta_t * losses[n]
        log_normalize_in_place(log_w)


@njit(cache=True)
def draw_index(weights, u):
    """multikernel.draw_index: inverse CDF of ``u`` on the running sums of ``weights``."""
    cdf = np.cumsum(weights)
    return min(np.searchsorted(cdf, u * cdf[-1], side="right"), weights.shape[0] - 1)


@njit(cache=True)
def graph_draws(log_w, eta_e, U, M, P, A):
    """omkl.graph_probabilities of ``fold_weights(log_w)`` into ``P`` (J, N) and, into ``A``
    (N, J), omkl.draw_graph with the uniforms ``U``."""
    J, N = P.shape
    w = np.empty(N)
    fold_weights_into(log_w, w)
    s = 0.0
    for n in range(N):
        s += w[n]
    for j in range(J):
        e = math.pow(eta_e, float(j + 1))  # a float exponent: the C library pow, as math.pow in Python
        for n in range(N):
            P[j, n] = (1.0 - e) * (w[n] / s) + e / N
    A[:, :] = False
    for j in range(J):
        for m in range(M):
            A[draw_index(P[j], U[j * M + m]), j] = True


@njit(cache=True)
def selective_into(log_w, A, eta_e, p_sel):
    """omkl.selective_probabilities into ``p_sel`` (J,)."""
    N, J = A.shape
    log_u = np.empty(J)
    for j in range(J):
        top = -np.inf
        for n in range(N):
            if A[n, j] and log_w[n] > top:
                top = log_w[n]
        s = 0.0
        for n in range(N):
            s += math.exp((log_w[n] if A[n, j] else -np.inf) - top)
        log_u[j] = top + math.log(s)
    fold_weights_into(log_u, p_sel)
    for j in range(J):
        p_sel[j] = (1.0 - eta_e) * p_sel[j] + eta_e / J


@njit(cache=True)
def observation_into(A, P, p_sel, M, given_graph, q):
    """``q`` (N,): omkl._conditional_probabilities of ``A`` if ``given_graph``, else
    omkl.observation_probabilities of ``P``."""
    N, J = A.shape
    for n in range(N):
        s = 0.0
        for j in range(J):
            if given_graph:
                s += (1.0 if A[n, j] else 0.0) * p_sel[j]
            else:
                s += p_sel[j] * (1.0 - math.pow(1.0 - P[j, n], float(M)))
        q[n] = s


@njit(cache=True)
def fold_omkl_gf(Z, have, start, y, U, theta, log_w, graph, frozen, n_used, sq_error, scores, counter, eta, eta_e0,
                 constant, lam, M, b_scale, freeze_below, freeze_mse, conditional):
    """omkl.OMKLGF._draw and _step on rows ``start..`` of a feature block ``Z`` (n, N, 2D)
    whose pairs ``have`` are computed; the state's arrays (and ``frozen``, ``sq_error`` of
    shape (1,)) in place. Returns ``(rows done, -1)``, or ``(r, j)`` when row ``r`` needs
    kernel ``j``'s features (row ``r`` not learned)."""
    N, J = graph.shape
    P = np.empty((J, N))
    A = np.empty((N, J), dtype=np.bool_)
    p_sel = np.ones(J)
    chosen = np.empty(N, dtype=np.int64)
    f = np.empty(N)
    weights = np.empty(N)
    picked = np.empty(N)
    losses = np.empty(N)
    q = np.empty(N)
    for r in range(start, y.shape[0]):
        t = counter + r + 1
        eta_t = eta if constant else eta / math.sqrt(t)
        eta_e = eta_e0 if constant else eta_e0 / math.sqrt(t)
        graph_draws(log_w, eta_e, U[r, 1:], M, P, A)
        if frozen[0]:
            copy_matrix_into(A, graph)
        if J > 1:
            selective_into(log_w, A, eta_e, p_sel)
        node = draw_index(p_sel, U[r, 0]) if J > 1 else 0
        m = 0
        for n in range(N):
            if A[n, node]:
                if not have[r, n]:
                    return r, n
                chosen[m] = n
                m += 1
        for k in range(m):
            f[k] = np.dot(Z[r, chosen[k]], theta[chosen[k]])
            picked[k] = log_w[chosen[k]]
        fold_weights_into(picked[:m], weights[:m])
        y_hat = np.dot(weights[:m], f[:m])
        step_theta(theta, Z[r], chosen, m, f, y[r], eta_t, lam, losses)
        observation_into(A, P, p_sel, M, frozen[0] and conditional, q)
        for k in range(m):
            n = chosen[k]
            log_w[n] = log_w[n] - (eta_t / b_scale) * losses[k] / q[n]
            n_used[n] += 1
        error = y_hat - y[r]
        sq_error[0] = sq_error[0] + error * error
        if not frozen[0]:
            loss = sq_error[0] / t if freeze_mse else error * error
            copy_matrix_into(graph, A)
            frozen[0] = loss < freeze_below
        log_normalize_in_place(log_w)
        scores[r] = y_hat
    return y.shape[0], -1


# -- exact kernel rows (okl_core.kernels.row_against_buffer, compiled) ----------------------
GAUSSIAN, LAPLACIAN, CAUCHY = 0, 1, 2  # okl_core.kernels.KERNEL_CODES


@njit(cache=True)
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


# -- budget learners: RBP, Forgetron, BOGD, NORMA (rbp, mrbp, rbp_r, forgetron, mforgetron,
# forgetron_r, bogd, mbogd, bogd_r, norma_r); okl_core.learners.budget --------------------
# Each fold is ``_BudgetLearner.update`` with that learner's ``_learn`` over the batch, on the
# ``BudgetSet`` arrays in place. ``alpha`` is the state's coefficients as numpy scores them
# ((B,): ddot, (B, C): gemv, as ``k @ alpha[:n]``); ``A`` is the same memory as (B, C) (C = 1
# for binary and regression), which every update writes elementwise, as numpy's ``*=`` and
# slot assignments do. ``cls_coef`` (C,) holds a row's coefficient (numpy's ``coef``).
from okl_core.learners.rules import MULTICLASS  # noqa: E402  (kept in this section: merges stay trivial)

MULTICLASS_PERCEPTRON = -1  # the multiclass Perceptron (budget.multiclass_mistake), not a rules.py code


@njit(cache=True)
def budget_put(X, i, x, slot, rows, columns, sq_norms, stamp, t):
    """``BudgetSet.put`` of the vector: row ``i`` of ``X`` (float32) and its float64 copy ``x``
    into ``slot``, its squared norm summed in order (``budget.squared_norms``), stamp ``t``."""
    s = 0.0
    for j in range(x.shape[0]):
        rows[slot, j] = X[i, j]
        columns[j, slot] = x[j]
        s += x[j] * x[j]
    sq_norms[slot] = s
    stamp[slot] = t


@njit(cache=True)
def support_put(X, i, x, slot, rows, columns, sq_norms, A, coef, stamp, t):
    """:func:`budget_put` of the vector and ``A[slot] = coef`` (the whole ``BudgetSet.put``)."""
    budget_put(X, i, x, slot, rows, columns, sq_norms, stamp, t)
    for c in range(A.shape[1]):
        A[slot, c] = coef[c]


@njit(cache=True)
def support_scores(k, alpha, n, f):
    """``f = k . alpha[:n]`` into ``f`` (C,): BLAS ddot (binary) or gemv, numpy's ``k @ alpha``; 0 when empty."""
    if n == 0:
        f[:] = 0.0
    else:
        f[:] = np.dot(k[:n], alpha[:n])


@njit(cache=True)
def score_row(X, i, x, columns, sq_norms, alpha, n, k, f, kernel, sigma, gauss_scale):
    """Row ``i`` of ``X`` widened into ``x``, its kernel row into ``k`` and its scores into ``f``
    (``BudgetSet.kernel_row`` and ``BudgetSet.score``)."""
    widen_row(X, i, x)
    kernel_row_into(kernel, sigma, gauss_scale, x, columns, sq_norms, n, k)
    support_scores(k, alpha, n, f)


@njit(cache=True)
def argmax_skipping(f, skip):
    """``np.argmax(f)`` with ``f[skip]`` read as -inf (``skip < 0``: none): the first maximum, or the first NaN."""
    best_i, best = 0, -np.inf if skip == 0 else f[0]
    if np.isnan(best):
        return 0
    for c in range(1, f.shape[0]):
        v = -np.inf if c == skip else f[c]
        if np.isnan(v):
            return c
        if v > best:
            best_i, best = c, v
    return best_i


@njit(cache=True)
def oldest_slot(stamp, n):
    """``BudgetSet.oldest``: the first slot of the smallest stamp among the first ``n``."""
    r = 0
    for j in range(1, n):
        if stamp[j] < stamp[r]:
            r = j
    return r


@njit(cache=True)
def uniform_slot(u, n):
    """``budget.random_slot``: ``min(floor(u n), n - 1)``."""
    s = int(u * n)
    return s if s < n - 1 else n - 1


@njit(cache=True)
def budget_coefficient(kind, eta, eps, f, y, coef):
    """Whether the rule updates on scores ``f`` (C,) and label ``y``, its coefficient into ``coef``.

    ``kind``: a scalar code of :mod:`~okl_core.learners.rules` (``f[0]``, ``coef[0]``), the
    multiclass hinge (``MulticlassHingeRule``) or ``MULTICLASS_PERCEPTRON`` (``e_y - e_p``,
    ``p`` the first argmax, ``budget.multiclass_mistake``); multiclass ``coef`` is dense.
    """
    if kind == MULTICLASS or kind == MULTICLASS_PERCEPTRON:
        label = int(y)
        if kind == MULTICLASS:
            s, value = rival(f, label), eta
        else:
            s, value = argmax_skipping(f, -1), 1.0
            if s == label:
                s = -1
        if s < 0:
            return False
        coef[:] = 0.0
        coef[label] = value
        coef[s] = -value
        return True
    update, c = scalar_coefficient(kind, eta, eps, f[0], y)
    coef[0] = c
    return update


@njit(cache=True)
def fold_rbp(kind, eta, eps, X, y, u, rows, columns, sq_norms, alpha, A, stamp, n, S, t0, kernel, sigma, gauss_scale):
    """RBP (``rbp``, ``mrbp``, ``rbp_r``) over the batch: on an update ``x`` goes to a free slot,
    or (set full) to slot ``floor(u B)``. ``S`` (N, C) the scores; returns the support set's size."""
    B = A.shape[0]
    x = np.empty(X.shape[1])
    k = np.empty(B)
    f = np.empty(A.shape[1])
    coef = np.empty(A.shape[1])
    for i in range(y.shape[0]):
        score_row(X, i, x, columns, sq_norms, alpha, n, k, f, kernel, sigma, gauss_scale)
        copy_into(S[i], f)
        if budget_coefficient(kind, eta, eps, f, y[i], coef):
            slot = uniform_slot(u[i], n) if n == B else n
            support_put(X, i, x, slot, rows, columns, sq_norms, A, coef, stamp, t0 + i)
            if slot == n:
                n += 1
    return n


@njit(cache=True)
def forgetron_phi(sigma, mu, damage, mistakes, ratio, code_root):
    """``budget.forgetron_shrink`` (Python's ``min``/``max`` as written there, NaN included)."""
    a = sigma * sigma - 2.0 * sigma * mu
    b = 2.0 * sigma
    v = damage - ratio * mistakes
    c = 0.0 if 0.0 < v else v
    if a + b + c <= 0.0:
        return 1.0
    w = b * b - 4.0 * a * c
    disc = math.sqrt(0.0 if 0.0 > w else w)
    if code_root and a < 0.0:
        return (-b - disc) / (2.0 * a)
    return -2.0 * c / (b + disc)


@njit(cache=True)
def forgetron_weight_margin(A, r, fr, class_score):
    """``_weight_and_margin`` of the oldest vector ``r`` with scores ``fr`` (C,) under ``f'``:
    binary / regression ``(|alpha_r|, sign(alpha_r) f'(x_r))``; multiclass (``MForgetron``) the
    weight at ``y_r`` (first argmax of ``alpha_r``) and its class score or multiclass margin."""
    if A.shape[1] == 1:
        a = A[r, 0]
        return abs(a), (1.0 if a >= 0 else -1.0) * fr[0]
    y_r = argmax_skipping(A[r], -1)
    if class_score:
        return A[r, y_r], fr[y_r]
    return A[r, y_r], fr[y_r] - fr[argmax_skipping(fr, y_r)]


@njit(cache=True)
def fold_forgetron(kind, eta, eps, shrinking, code_root, class_score, ratio, X, y, rows, columns, sq_norms, alpha, A,
                   stamp, n, mistakes, damage, S, t0, kernel, sigma, gauss_scale):
    """The Forgetron (``forgetron``, ``mforgetron``, ``forgetron_r``) over the batch
    (``Forgetron._forget``): returns ``(n, mistakes, damage)``."""
    B, C = A.shape
    x = np.empty(X.shape[1])
    xr = np.empty(X.shape[1])
    k = np.empty(B)
    kr = np.empty(B)
    f = np.empty(C)
    fr = np.empty(C)
    coef = np.empty(C)
    for i in range(y.shape[0]):
        score_row(X, i, x, columns, sq_norms, alpha, n, k, f, kernel, sigma, gauss_scale)
        copy_into(S[i], f)
        if not budget_coefficient(kind, eta, eps, f, y[i], coef):
            continue
        mistakes += 1
        if n < B:
            support_put(X, i, x, n, rows, columns, sq_norms, A, coef, stamp, t0 + i)
            n += 1
            continue
        r = oldest_slot(stamp, n)
        for j in range(x.shape[0]):
            xr[j] = columns[j, r]
        kernel_row_into(kernel, sigma, gauss_scale, xr, columns, sq_norms, n, kr)
        support_scores(kr, alpha, n, fr)
        for c in range(C):
            fr[c] = fr[c] + coef[c] * k[r]
        weight, mu = forgetron_weight_margin(A, r, fr, class_score)
        phi = forgetron_phi(weight, mu, damage, mistakes, ratio, code_root) if shrinking else 1.0
        lam = phi * weight
        damage = damage + lam * lam + 2.0 * lam - 2.0 * lam * (phi * mu)
        for j in range(n):
            for c in range(C):
                A[j, c] *= phi
        for c in range(C):
            coef[c] = coef[c] * phi
        support_put(X, i, x, r, rows, columns, sq_norms, A, coef, stamp, t0 + i)
    return n, mistakes, damage


@njit(cache=True)
def scale_rows(A, n, factor):
    """``A[:n] *= factor`` elementwise."""
    for j in range(n):
        for c in range(A.shape[1]):
            A[j, c] *= factor


@njit(cache=True)
def bound_coefficients(A, n, limit):
    """``BOGD._bound``: ``A[:n]`` scaled by ``limit / max |A|`` when the largest exceeds ``limit``
    (a NaN largest, as numpy's ``max``, scales nothing)."""
    largest = 0.0
    for j in range(n):
        for c in range(A.shape[1]):
            v = abs(A[j, c])
            if np.isnan(v):
                return
            if v > largest:
                largest = v
    if largest > limit:
        scale_rows(A, n, limit / largest)


@njit(cache=True)
def fold_bogd(kind, eta, eps, decay_always, decay, oldest, rescale, limit, X, y, u, rows, columns, sq_norms, alpha, A,
              stamp, n, S, t0, kernel, sigma, gauss_scale):
    """BOGD (``bogd``, ``mbogd``, ``bogd_r``) over the batch (``BOGD._step``): ``decay`` the
    factor ``1 - eta lam`` (at every example with ``decay_always``, else on updates), ``oldest``
    the removal (else uniform, with ``rescale = B / (B - 1)``), ``limit = eta gamma``."""
    B, C = A.shape
    x = np.empty(X.shape[1])
    k = np.empty(B)
    f = np.empty(C)
    coef = np.empty(C)
    for i in range(y.shape[0]):
        score_row(X, i, x, columns, sq_norms, alpha, n, k, f, kernel, sigma, gauss_scale)
        copy_into(S[i], f)
        update = budget_coefficient(kind, eta, eps, f, y[i], coef)
        if decay_always or update:
            scale_rows(A, n, decay)
        if not update:
            continue
        if n < B:
            support_put(X, i, x, n, rows, columns, sq_norms, A, coef, stamp, t0 + i)
            n += 1
            continue
        if oldest:
            slot = oldest_slot(stamp, n)
        else:
            scale_rows(A, n, rescale)
            slot = uniform_slot(u[i], n)
        support_put(X, i, x, slot, rows, columns, sq_norms, A, coef, stamp, t0 + i)
        bound_coefficients(A, n, limit)
    return n


@njit(cache=True)
def fold_norma(eta, decay, down, up, X, y, rows, columns, sq_norms, alpha, A, stamp, n, eps, S, t0, kernel, sigma,
               gauss_scale):
    """NORMA (``norma_r``) over the batch: decay by ``decay``; ``|y - f| <= eps``: ``eps -= down``
    (``nu eta``), else ``eps += up`` (``(1 - nu) eta``) and ``x`` with ``eta sign(y - f)`` in a
    free slot or the oldest's. Returns ``(n, eps)``."""
    B = A.shape[0]
    x = np.empty(X.shape[1])
    k = np.empty(B)
    f = np.empty(1)
    coef = np.empty(1)
    for i in range(y.shape[0]):
        score_row(X, i, x, columns, sq_norms, alpha, n, k, f, kernel, sigma, gauss_scale)
        S[i, 0] = f[0]
        scale_rows(A, n, decay)
        residual = y[i] - f[0]
        if abs(residual) <= eps:
            eps = eps - down
            continue
        eps = eps + up
        coef[0] = eta * (1.0 if residual > 0 else -1.0)
        slot = oldest_slot(stamp, n) if n == B else n
        support_put(X, i, x, slot, rows, columns, sq_norms, A, coef, stamp, t0 + i)
        if slot == n:
            n += 1
    return n, eps


# -- budget learners: Projectron, Projectron++ (projectron, mprojectron, projectron_r,
# projectron_pp, mprojectron_pp) and BPA-S (bpa_s, mbpa_s); okl_core.learners.budget --------
NO_MARGIN, MARGIN_ETA, MARGIN_CODE = 0, 1, 2  # Projectron++'s margin test (budget.MARGIN_CODES)


@njit(cache=True)
def pack_inverse(G, n, H):
    """``H[:n*n] = G[:n, :n]`` (row stride ``n``)."""
    for a in range(n):
        for b in range(n):
            H[a * n + b] = G[a, b]


@njit(cache=True)
def unpack_inverse(H, n, G):
    """``G[:n, :n] = H[:n*n]``, the inverse back in the state's layout."""
    for a in range(n):
        for b in range(n):
            G[a, b] = H[a * n + b]


@njit(cache=True)
def projection(H, k, n):
    """``d = K^{-1} k`` (BLAS gemv on the packed block, numpy's ``G[:n, :n] @ k``) and
    ``delta^2 = max(1 - k . d, 0)``."""
    d = np.dot(H[: n * n].reshape((n, n)), k[:n])
    v = 1.0 - np.dot(k[:n], d)
    return d, (0.0 if 0.0 > v else v)


@njit(cache=True)
def grow_inverse(H, spare, d, delta2, n):
    """``K^{-1}`` grown by one vector (the Schur complement block update of
    ``Projectron._mistake``), packed into ``spare`` with row stride ``n + 1``."""
    m = n + 1
    for a in range(n):
        for b in range(n):
            spare[a * m + b] = H[a * n + b] + d[a] * d[b] / delta2
    for a in range(n):
        spare[a * m + n] = spare[n * m + a] = -d[a] / delta2
    spare[n * m + n] = 1.0 / delta2


@njit(cache=True)
def projectron_margin_tau(margin, eta, U, d, delta2, loss, coef_norm2):
    """Projectron++ on a margin error: ``(update, tau)`` of ``Projectron._margin_update``."""
    if margin == MARGIN_CODE:
        norm2 = 1.0 - delta2
        if norm2 <= 0.0:
            return False, 0.0
        tau = loss / norm2
        if 1.0 < tau:
            tau = 1.0
        return tau * (2.0 * loss - tau * norm2 - 2.0 * U * math.sqrt(delta2)) >= 0.0, tau
    norm2 = (1.0 - delta2) * coef_norm2
    gain = loss - delta2 / eta
    if norm2 <= 0.0 or gain <= 0.0:
        return False, 0.0
    tau = loss / norm2
    if 1.0 < tau:
        tau = 1.0
    b = 2.0 * gain / norm2
    return True, (b if b < tau else tau)


@njit(cache=True)
def fold_projectron(kind, rule_eta, eps, margin, eta, bound, U, X, y, rows, columns, sq_norms, alpha, stamp, G, n, scores,
                    t0, kernel, sigma, gauss_scale):
    """``_BudgetLearner.update`` of the scalar Projectrons (``projectron``, ``projectron_pp``,
    ``projectron_r``) over a batch: ``kind, rule_eta, eps`` the rule's code
    (perceptron or regression), ``margin`` the Projectron++ test (``NO_MARGIN`` for the
    others), ``eta`` its ``eta``, ``bound`` the projection bound on ``delta^2``, ``U`` the
    code test's norm bound; ``t0`` the first row's stream index. Returns the support set's size."""
    B = alpha.shape[0]
    x = np.empty(X.shape[1])
    k = np.empty(B)
    H, spare = np.empty(B * B), np.empty(B * B)
    pack_inverse(G, n, H)
    f = np.empty(1)
    for i in range(y.shape[0]):
        widen_row(X, i, x)
        kernel_row_into(kernel, sigma, gauss_scale, x, columns, sq_norms, n, k)
        support_scores(k, alpha, n, f)
        fi, yi, t = f[0], y[i], t0 + i
        scores[i] = fi
        update, coef = scalar_coefficient(kind, rule_eta, eps, fi, yi)
        if update:
            if n == 0:
                budget_put(X, i, x, 0, rows, columns, sq_norms, stamp, t)
                alpha[0] = coef
                H[0] = 1.0
                n = 1
                continue
            d, delta2 = projection(H, k, n)
            if delta2 <= bound or n == B:
                for j in range(n):
                    alpha[j] += d[j] * coef
                continue
            grow_inverse(H, spare, d, delta2, n)
            H, spare = spare, H
            budget_put(X, i, x, n, rows, columns, sq_norms, stamp, t)
            alpha[n] = coef
            n += 1
        elif margin != NO_MARGIN and yi * fi < 1.0 and n > 0:
            d, delta2 = projection(H, k, n)
            apply, tau = projectron_margin_tau(margin, eta, U, d, delta2, 1.0 - yi * fi, 1.0)
            if apply:
                for j in range(n):
                    alpha[j] += tau * d[j] * yi
    unpack_inverse(H, n, G)
    return n


@njit(cache=True)
def pair_into(coef, y, s, value):
    """``coef = value (e_y - e_s)`` (``budget.pair``)."""
    coef[:] = 0.0
    coef[y], coef[s] = value, -value


@njit(cache=True)
def add_outer(alpha, d, tau, coef, n):
    """``alpha[:n] += np.multiply.outer(tau d, coef)``, every class (zeros too, as numpy)."""
    for j in range(n):
        step = tau * d[j]
        for c in range(coef.shape[0]):
            alpha[j, c] += step * coef[c]


@njit(cache=True)
def fold_mprojectron(kind, rule_eta, eps, margin, eta, bound, U, X, y, rows, columns, sq_norms, alpha, stamp, G, n, scores,
                     t0, kernel, sigma, gauss_scale):
    """:func:`fold_projectron` of the multiclass Projectrons (``mprojectron``,
    ``mprojectron_pp``): the multiclass Perceptron's ``e_y - e_p`` on a mistake, Projectron++'s
    ``e_y - e_s`` on a margin error (``kind``, ``rule_eta``, ``eps`` unused)."""
    B, C = alpha.shape
    x = np.empty(X.shape[1])
    k = np.empty(B)
    H, spare = np.empty(B * B), np.empty(B * B)
    pack_inverse(G, n, H)
    f = np.empty(C)
    coef = np.empty(C)
    for i in range(y.shape[0]):
        widen_row(X, i, x)
        kernel_row_into(kernel, sigma, gauss_scale, x, columns, sq_norms, n, k)
        support_scores(k, alpha, n, f)
        yi, t = y[i], t0 + i
        copy_into(scores[i], f)
        p = argmax_skipping(f, -1)
        if p != yi:
            pair_into(coef, yi, p, 1.0)
            if n == 0:
                budget_put(X, i, x, 0, rows, columns, sq_norms, stamp, t)
                copy_into(alpha[0], coef)
                H[0] = 1.0
                n = 1
                continue
            d, delta2 = projection(H, k, n)
            if delta2 <= bound or n == B:
                add_outer(alpha, d, 1.0, coef, n)
                continue
            grow_inverse(H, spare, d, delta2, n)
            H, spare = spare, H
            budget_put(X, i, x, n, rows, columns, sq_norms, stamp, t)
            copy_into(alpha[n], coef)
            n += 1
        elif margin != NO_MARGIN:
            s = argmax_skipping(f, yi)
            gap = f[yi] - f[s]
            if gap < 1.0 and n > 0:
                pair_into(coef, yi, s, 1.0)
                d, delta2 = projection(H, k, n)
                apply, tau = projectron_margin_tau(margin, eta, U, d, delta2, 1.0 - gap, 2.0)
                if apply:
                    add_outer(alpha, d, tau, coef, n)
    unpack_inverse(H, n, G)
    return n


@njit(cache=True)
def bpa_s_slot(alpha, k, n):
    """BPA-S's removal: the first slot minimising ``|alpha_r|^2 (1 - k_r^2)`` (first NaN, as
    ``np.argmin``); ``|alpha_r|^2`` summed over the classes in order (``budget.squared_norms``)."""
    best_r, best = 0, 0.0
    for r in range(n):
        if alpha.ndim == 1:
            w = alpha[r] * alpha[r]
        else:
            w = 0.0
            for c in range(alpha.shape[1]):
                w += alpha[r, c] * alpha[r, c]
        v = w * (1.0 - k[r] * k[r])
        if np.isnan(v):
            return r
        if r == 0 or v < best:
            best_r, best = r, v
    return best_r


@njit(cache=True)
def fold_bpa_s(C, X, y, rows, columns, sq_norms, alpha, stamp, n, scores, t0, kernel, sigma, gauss_scale):
    """``_BudgetLearner.update`` of BPA-S (``bpa_s``; ``mbpa_s`` when ``alpha`` is (B, C)): PA-I
    on the (multiclass) hinge, and when full the replacement of :func:`bpa_s_slot`, the new
    vector taking ``alpha_r k_r`` plus the step. Returns the support set's size."""
    B = alpha.shape[0]
    multiclass = alpha.ndim == 2
    x = np.empty(X.shape[1])
    k = np.empty(B)
    f = np.empty(alpha.shape[1] if multiclass else 1)
    step = np.empty(f.shape[0])
    for i in range(y.shape[0]):
        widen_row(X, i, x)
        kernel_row_into(kernel, sigma, gauss_scale, x, columns, sq_norms, n, k)
        support_scores(k, alpha, n, f)
        t = t0 + i
        if multiclass:
            copy_into(scores[i], f)
            yi = int(y[i])
            s = argmax_skipping(f, yi)
            loss = 1.0 - (f[yi] - f[s])
            if not loss > 0.0:
                continue
            half = loss / 2.0
            pair_into(step, yi, s, C if not half < C else half)
        else:
            scores[i] = f[0]
            loss = 1.0 - y[i] * f[0]
            if not loss > 0.0:
                continue
            step[0] = (C if not loss < C else loss) * y[i]
        slot = n
        if n == B:
            slot = bpa_s_slot(alpha, k, n)
            kr = k[slot]
            for c in range(step.shape[0]):
                step[c] = alpha[slot, c] * kr + step[c] if multiclass else alpha[slot] * kr + step[c]
        else:
            n += 1
        budget_put(X, i, x, slot, rows, columns, sq_norms, stamp, t)
        if multiclass:
            copy_into(alpha[slot], step)
        else:
            alpha[slot] = step[0]
    return n


# -- the exact-kernel expansions (okl_core.learners.kernel_ogd: kernel_ogd, mkernel_ogd,
# kernel_ogd_r, kernel_perceptron; okl_core.learners.nogd's kernel phase: nogd, mnogd, nogd_r).
# The rows learned so far are float64 columns with their squared norms (BLAS ddot, as the
# numpy fold's x @ x); each row is scored by kernel_row_into and a ddot (dgemv for the
# multiclass (m, C) coefficients), as Kernel.row_against_buffer and numpy's @ in the numpy
# fold. An update at m == defer_at is left to Python (the support cap, a full buffer,
# NOGD's transition): the fold returns (that row, m) with the row scored, not learned.
@njit(cache=True)
def store_row(X, i, x, columns, sq_norms, vectors, m):
    """Row ``i`` of ``X`` (widened into ``x``) as column ``m`` with its squared norm, and as row ``m`` of ``vectors``."""
    for j in range(x.shape[0]):
        columns[j, m] = x[j]
        vectors[m, j] = X[i, j]
    sq_norms[m] = np.dot(x, x)


@njit(cache=True)
def fold_expansion(kind, eta, eps, kernel, sigma, gauss_scale, X, base, has_base, columns, sq_norms, alpha, vectors,
                   m, defer_at, y, scores, start):
    """A scalar rule on ``f = base[i] + sum_j alpha_j k(s_j, x_i)`` over the ``m`` stored rows
    (no ``base`` unless ``has_base``); an update stores ``x_i`` with ``alpha_m = coef``.
    Returns ``(rows done, m)``."""
    x = np.empty(X.shape[1])
    k = np.empty(columns.shape[1])
    for i in range(start, y.shape[0]):
        widen_row(X, i, x)
        if m == 0:
            f = base[i] if has_base else 0.0
        else:
            kernel_row_into(kernel, sigma, gauss_scale, x, columns, sq_norms, m, k)
            f = np.dot(k[:m], alpha[:m])
            if has_base:
                f = base[i] + f
        scores[i] = f
        update, coef = scalar_coefficient(kind, eta, eps, f, y[i])
        if update:
            if m == defer_at:
                return i, m
            store_row(X, i, x, columns, sq_norms, vectors, m)
            alpha[m] = coef
            m += 1
    return y.shape[0], m


@njit(cache=True)
def fold_expansion_multiclass(eta, kernel, sigma, gauss_scale, X, base, has_base, columns, sq_norms, alpha, vectors,
                              m, defer_at, y, scores, start):
    """:func:`fold_expansion` for the multiclass rule: ``alpha`` (capacity, C), and an update
    stores the rule's dense coefficient (``+eta`` at ``y``, ``-eta`` at the rival)."""
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
            kernel_row_into(kernel, sigma, gauss_scale, x, columns, sq_norms, m, k)
            g = np.dot(k[:m], alpha[:m])
            for c in range(C):
                f[c] = base[i, c] + g[c] if has_base else g[c]
        copy_into(scores[i], f)
        s = rival(f, y[i])
        if s < 0:
            continue
        if m == defer_at:
            return i, m
        store_row(X, i, x, columns, sq_norms, vectors, m)
        alpha[m, :] = 0.0
        alpha[m, y[i]] = eta
        alpha[m, s] = -eta
        m += 1
    return y.shape[0], m
