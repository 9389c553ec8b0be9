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


@njit(cache=True)
def paper_loss(kind, f, y):
    """``(value, derivative)`` of oks's paper loss ``kind`` (oks.LOSS_CODES), as oks computes them."""
    if kind == 0:  # logistic
        t = -y * f
        if t == 0.0:
            value = math.log(2.0)
        elif t < 0.0:
            value = math.log1p(math.exp(t))
        else:
            value = t + math.log1p(math.exp(-t))
        if t >= 0.0:
            grad = -y * (1.0 / (1.0 + math.exp(-t)))
        else:
            e = math.exp(t)
            grad = -y * (e / (1.0 + e))
        return value, grad
    r = f - y
    if kind == 1:  # square, twice okl's
        return 2.0 * (0.5 * (r * r)), 2.0 * r
    return abs(r), (1.0 if r > 0.0 else (-1.0 if r < 0.0 else r))


@njit(cache=True)
def clipped_step(w, z, coef, clip):
    """oks._FeatureWeights.step: ``w += coef z``, then every coordinate clipped to ``+-clip``."""
    for j in range(w.shape[0]):
        v = w[j] + coef * z[j]
        w[j] = min(max(v, -clip), clip)


@njit(cache=True)
def fold_rf_oks_pp(Z, have, start, y, u, w, loss_sum, sq_loss_sum, delta_constant, n_used, scores, kind,
                   code_constant, eta_scale, lam_top, lam_bottom, radius, clip):
    """oks.OKSPlusPlusRule.step on random features: rows ``start..`` of a feature block (see
    fold_omkl_gf for ``Z``, ``have`` and the return); ``sq_loss_sum`` and ``delta_constant``
    of shape (1,). ``eta_scale = sqrt(2 ln K)``, ``lam_top = U^(4/3)``,
    ``lam_bottom = sqrt(4/3) K^(1/6) (G C0)^(1/3)`` (:func:`oks_pp_probabilities`,
    :func:`oks_pp_learn`)."""
    K = w.shape[0]
    v = np.empty(K)
    q = np.empty(K)
    p = np.empty(K)
    for r in range(start, y.shape[0]):
        oks_pp_probabilities(loss_sum, sq_loss_sum, delta_constant, eta_scale, v, q, p)
        i = draw_index(p, u[r])
        if not have[r, i]:
            return r, i
        f = np.dot(Z[r, i], w[i])
        grad, coef = oks_pp_learn(i, f, y[r], kind, loss_sum, sq_loss_sum, delta_constant, q, p, code_constant, lam_top,
                                  lam_bottom)
        if grad != 0.0:
            clipped_step(w[i], Z[r, i], coef, clip)
        scores[r] = f
        n_used[i] += 1
    return y.shape[0], -1


@njit(cache=True)
def tsallis_total(base, eta, mu, power):
    """oks.tsallis_step's ``total``: ``sum (base - eta mu)^power`` (inf if a term is <= 0)."""
    for k in range(base.shape[0]):
        if base[k] - eta[k] * mu <= 0.0:
            return np.inf
    s = 0.0
    for k in range(base.shape[0]):
        s += math.pow(base[k] - eta[k] * mu, power)
    return s


@njit(cache=True)
def tsallis_step(q, eta, c_tilde, out, tol, max_iter, alpha):
    """oks.tsallis_step, the new ``q`` into ``out``."""
    K = q.shape[0]
    base = np.empty(K)
    for k in range(K):
        base[k] = math.pow(q[k], 1.0 / alpha - 1.0) + eta[k] * c_tilde[k]
    power = alpha / (1.0 - alpha)
    lo, hi = 0.0, np.max(c_tilde)
    width = max(hi, 1.0)
    while tsallis_total(base, eta, lo, power) > 1.0 + tol:
        lo, width = lo - width, 2.0 * width
    while tsallis_total(base, eta, hi, power) < 1.0 - tol:
        hi, width = hi + width, 2.0 * width
    mu = lo
    for _ in range(max_iter):
        value = tsallis_total(base, eta, mu, power)
        if abs(value - 1.0) <= tol:
            break
        if value > 1.0:
            hi = mu
        else:
            lo = mu
        mu = 0.5 * (lo + hi)
    for k in range(K):
        out[k] = math.pow(base[k] - eta[k] * mu, power)


@njit(cache=True)
def fold_rf_ioks(Z, have, start, y, u, w, q, eta, rho, grad_sq_sum, n_used, scores, kind, delta, upsilon, radius,
                 loss_max, loss_ceiling, clip, alpha):
    """oks.IOKSRule.step on random features (rows and return as fold_rf_oks_pp;
    :func:`ioks_probabilities`, :func:`ioks_learn`)."""
    K = w.shape[0]
    p = np.empty(K)
    c_tilde = np.zeros(K)
    q_next = np.empty(K)
    for r in range(start, y.shape[0]):
        ioks_probabilities(q, delta, p)
        i = draw_index(p, u[r])
        if not have[r, i]:
            return r, i
        z = Z[r, i]
        f = np.dot(z, w[i])
        grad, coef = ioks_learn(i, f, y[r], kind, np.dot(z, z), q, eta, rho, grad_sq_sum, p, c_tilde, q_next, delta,
                                upsilon, radius, loss_max, loss_ceiling, alpha)
        if grad != 0.0:
            clipped_step(w[i], z, coef, clip)
        scores[r] = f
        n_used[i] += 1
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


# -- online kernel selection: the rules (shared by both storages) and the kernel versions'
# folds on growing support sets (okl_core.learners.oks: oks, oks_pp, ioks) -------------------
# Each rule is split as its numpy step is: the distributions before the draw, then what the
# observed loss does to the statistics, which returns the storage's step coefficient. The
# storage's step reads none of the statistics, so it runs after them.
#
# The support sets (oks._SupportSets.pack) come as ``store``, one tuple (columns, sq_norms,
# alpha, offsets, capacities, counts, sq_norm, codes, sigmas, scales, limit): three arenas
# holding every kernel's buffers one after the other -- float64 columns (kernel i: a
# (d, capacity) C-ordered block at d * offsets[i]), their squared norms and their
# coefficients (at offsets[i]) -- the K offsets, capacities and counts (in place), the RKHS
# norms^2 (K,) (in place), the kernels' codes, sigmas and Gaussian scales, and max_support
# (the limit). One arena per
# kind rather than a tuple of K arrays: a tuple would compile the folds once per K (3-5 s
# each). A fold stops before a row whose drawn kernel's buffers are full (the driver packs
# again with that kernel's capacity doubled and resumes) and before an append that would
# exceed max_support (the driver raises the cap's error).
SUPPORT_CAP = -2  # a support fold's "kernel" when an append would exceed max_support


@njit(cache=True)
def oks_probabilities(log_w, delta, q, p):
    """oks.OKSRule.distribution into ``q`` and ``p``."""
    K = log_w.shape[0]
    fold_weights_into(log_w, q)
    for k in range(K):
        p[k] = (1.0 - delta) * q[k] + delta / K


@njit(cache=True)
def oks_learn(i, f, y, kind, log_w, p, eta, lam):
    """oks.OKSRule.step after the draw: ``log_w`` (normalised); returns ``(grad, coef)``."""
    loss, grad = paper_loss(kind, f, y)
    log_w[i] = log_w[i] - eta * loss / p[i]
    log_normalize_in_place(log_w)
    return grad, -lam * grad / p[i]


@njit(cache=True)
def oks_pp_probabilities(loss_sum, sq_loss_sum, delta_constant, eta_scale, v, q, p):
    """oks.oks_pp_distribution into ``q`` and ``p`` (``v`` (K,) scratch)."""
    K = loss_sum.shape[0]
    eta = eta_scale / math.sqrt(1.0 + sq_loss_sum[0])
    for k in range(K):
        v[k] = -eta * loss_sum[k]
    fold_weights_into(v, q)
    total = 0.0
    for k in range(K):
        total += loss_sum[k]
    a = delta_constant[0]
    delta = a / (2.0 * max(a, 2.0 * math.pow(total, 1.0 / 3.0)))
    for k in range(K):
        p[k] = (1.0 - delta) * q[k] + delta / K


@njit(cache=True)
def oks_pp_learn(i, f, y, kind, loss_sum, sq_loss_sum, delta_constant, q, p, code_constant, lam_top, lam_bottom):
    """oks.OKSPlusPlusRule.step after the draw: ``loss_sum``, ``sq_loss_sum`` and
    ``delta_constant`` (shape (1,)); returns ``(grad, coef)``."""
    loss, grad = paper_loss(kind, f, y)
    if code_constant:
        delta_constant[0] = math.exp(min(-y * f, 700.0))
    a = delta_constant[0]
    c_tilde = loss / p[i]
    loss_sum[i] += c_tilde
    total = 0.0
    for k in range(loss_sum.shape[0]):
        total += loss_sum[k]
    lam = (lam_top * math.pow(max(math.pow(a, 3.0), 8.0 * total), -1.0 / 6.0)) / (lam_bottom * math.sqrt(1.0 + loss_sum[i]))
    sq_loss_sum[0] = sq_loss_sum[0] + q[i] * c_tilde * c_tilde
    return grad, -lam * grad / p[i]


@njit(cache=True)
def ioks_probabilities(q, delta, p):
    """oks.IOKSRule._p into ``p``."""
    K = q.shape[0]
    for k in range(K):
        p[k] = (1.0 - delta) * q[k] + delta / K


@njit(cache=True)
def ioks_learn(i, f, y, kind, feature_sq, q, eta, rho, grad_sq_sum, p, c_tilde, q_next, delta, upsilon, radius, loss_max,
               loss_ceiling, alpha):
    """oks.IOKSRule.step after the draw (``feature_sq``: ``||k(x, .)||^2``; ``loss_ceiling``: 1, or
    infinity without the cap): ``grad_sq_sum``, the
    Tsallis step of ``q`` and the growth of ``rho`` and ``eta`` (``c_tilde``, ``q_next`` (K,)
    scratch); returns ``(grad, coef)``."""
    K = q.shape[0]
    loss, grad = paper_loss(kind, f, y)
    g = grad / p[i]
    grad_sq_sum[i] += g * g * feature_sq
    coef = 0.0
    if grad != 0.0:
        lam = radius / (math.sqrt(2.0) * math.sqrt(1.0 + grad_sq_sum[i]))
        coef = -lam * grad / p[i]
    c = min(loss / loss_max, loss_ceiling)
    max_eta = np.max(eta)
    c_tilde[:] = 0.0
    c_tilde[i] = c / p[i] if p[i] >= max_eta else c / (p[i] + max_eta)
    tsallis_step(q, eta, c_tilde, q_next, 1e-5, 200, alpha)
    for k in range(K):
        q[k] = q_next[k]
        p_next = (1.0 - delta) * q[k] + delta / K
        if 1.0 / p_next > rho[k]:
            rho[k] = 2.0 / p_next
            eta[k] = eta[k] * upsilon
    return grad, coef


@njit(cache=True)
def support_views(store, i, d):
    """Kernel ``i``'s buffers in ``store``: columns (d, capacity), squared norms, coefficients."""
    columns, sq_norms, alpha, offsets, capacities = store[:5]
    o, c = offsets[i], capacities[i]
    return columns[d * o : d * (o + c)].reshape((d, c)), sq_norms[o : o + c], alpha[o : o + c]


@njit(cache=True)
def support_full(store, i):
    """Whether kernel ``i``'s buffers have no room for one more support vector."""
    capacities, counts = store[4:6]
    return counts[i] >= capacities[i]


@njit(cache=True)
def support_capped(store):
    """Whether one more support vector would exceed ``max_support`` (all kernels together)."""
    counts, limit = store[5], store[10]
    total = 0
    for k in range(counts.shape[0]):
        total += counts[k]
    return total + 1 > limit


@njit(cache=True)
def support_value(store, i, x, row):
    """oks._SupportSets.evaluate: ``f_i(x) = sum_j alpha_j k_i(s_j, x)`` summed in order
    (:func:`kernel_row_into` into the scratch ``row``); 0 for an empty set."""
    counts, codes, sigmas, scales = store[5], store[7], store[8], store[9]
    m = counts[i]
    if m == 0:
        return 0.0
    columns, sq_norms, a = support_views(store, i, x.shape[0])
    kernel_row_into(codes[i], sigmas[i], scales[i], x, columns, sq_norms, m, row)
    s = row[0] * a[0]
    for j in range(1, m):
        s += row[j] * a[j]
    return s


@njit(cache=True)
def support_learn(store, i, x, f, grad, coef, bound, project):
    """The storage's part of a rule's step: if ``grad != 0``, :func:`support_step`. False
    (nothing done) when that would exceed ``max_support``."""
    if grad == 0.0:
        return True
    if support_capped(store):
        return False
    support_step(store, i, x, f, coef, bound, project)
    return True


@njit(cache=True)
def support_step(store, i, x, f, coef, bound, project):
    """oks._SupportSets.step (room checked by the caller): append ``x`` with ``coef``, update
    ``||f_i||^2`` and, if ``project``, rescale onto ``||f_i|| <= bound``."""
    counts, sq_norm = store[5], store[6]
    columns, sq_norms, a = support_views(store, i, x.shape[0])
    m = counts[i]
    for k in range(x.shape[0]):
        columns[k, m] = x[k]
    sq_norms[m] = np.dot(x, x)
    a[m] = coef
    counts[i] = m + 1
    sq = sq_norm[i] + 2.0 * coef * f + coef * coef * 1.0  # k(x, x) = 1
    if 0.0 > sq:  # Python's max(sq, 0.0), NaN kept
        sq = 0.0
    if project and sq > bound * bound:
        scale = bound / math.sqrt(sq)
        for j in range(m + 1):
            a[j] = a[j] * scale
        sq = bound * bound
    sq_norm[i] = sq


@njit(cache=True)
def fold_oks(X, start, y, u, store, n_used, scores, log_w, kind, delta, eta, lam):
    """oks.OKSRule.step on support sets: rows ``start..`` of float64 rows ``X``; ``store``,
    ``log_w``, ``n_used`` and ``scores`` in place. Returns ``(rows done, -1)``; ``(r, i)`` when
    row ``r`` drew kernel ``i`` whose buffers are full (row ``r`` not started);
    ``(r, SUPPORT_CAP)`` when row ``r`` would exceed ``max_support`` (its statistics already
    changed: the driver raises)."""
    K = log_w.shape[0]
    q = np.empty(K)
    p = np.empty(K)
    row = np.empty(np.max(store[4]))
    for r in range(start, y.shape[0]):
        oks_probabilities(log_w, delta, q, p)
        i = draw_index(p, u[r])
        if support_full(store, i):
            return r, i
        f = support_value(store, i, X[r], row)
        grad, coef = oks_learn(i, f, y[r], kind, log_w, p, eta, lam)
        if not support_learn(store, i, X[r], f, grad, coef, 0.0, False):
            return r, SUPPORT_CAP
        scores[r] = f
        n_used[i] += 1
    return y.shape[0], -1


@njit(cache=True)
def fold_oks_pp(X, start, y, u, store, n_used, scores, loss_sum, sq_loss_sum, delta_constant, kind, code_constant,
                eta_scale, lam_top, lam_bottom, radius):
    """oks.OKSPlusPlusRule.step on support sets (arguments and return as :func:`fold_oks`, the
    rule's as :func:`fold_rf_oks_pp`); projected onto ``||f_i|| <= radius``."""
    K = loss_sum.shape[0]
    v = np.empty(K)
    q = np.empty(K)
    p = np.empty(K)
    row = np.empty(np.max(store[4]))
    for r in range(start, y.shape[0]):
        oks_pp_probabilities(loss_sum, sq_loss_sum, delta_constant, eta_scale, v, q, p)
        i = draw_index(p, u[r])
        if support_full(store, i):
            return r, i
        f = support_value(store, i, X[r], row)
        grad, coef = oks_pp_learn(i, f, y[r], kind, loss_sum, sq_loss_sum, delta_constant, q, p, code_constant, lam_top,
                                  lam_bottom)
        if not support_learn(store, i, X[r], f, grad, coef, radius, True):
            return r, SUPPORT_CAP
        scores[r] = f
        n_used[i] += 1
    return y.shape[0], -1


@njit(cache=True)
def fold_ioks(X, start, y, u, store, n_used, scores, q, eta, rho, grad_sq_sum, kind, delta, upsilon, radius, loss_max,
              loss_ceiling, alpha):
    """oks.IOKSRule.step on support sets (arguments and return as :func:`fold_oks`, the rule's
    as :func:`fold_rf_ioks`); ``||k(x, .)||^2 = 1``, projected onto ``||f_i|| <= radius``."""
    K = q.shape[0]
    p = np.empty(K)
    c_tilde = np.zeros(K)
    q_next = np.empty(K)
    row = np.empty(np.max(store[4]))
    for r in range(start, y.shape[0]):
        ioks_probabilities(q, delta, p)
        i = draw_index(p, u[r])
        if support_full(store, i):
            return r, i
        f = support_value(store, i, X[r], row)
        grad, coef = ioks_learn(i, f, y[r], kind, 1.0, q, eta, rho, grad_sq_sum, p, c_tilde, q_next, delta, upsilon, radius,
                                loss_max, loss_ceiling, alpha)
        if not support_learn(store, i, X[r], f, grad, coef, radius, True):
            return r, SUPPORT_CAP
        scores[r] = f
        n_used[i] += 1
    return y.shape[0], -1
