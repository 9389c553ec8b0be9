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


@njit
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


@njit
def clipped_step(w, z, coef, clip):
    """oks._FeatureWeights.step: ``w += coef z``, then every coordinate clipped to ``+-clip``."""
    for j in range(w.shape[0]):
        v = w[j] + coef * z[j]
        w[j] = min(max(v, -clip), clip)


@njit
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


@njit
def tsallis_total(base, eta, mu, power):
    """oks.tsallis_step's ``total``: ``sum (base - eta mu)^power`` (inf if a term is <= 0)."""
    for k in range(base.shape[0]):
        if base[k] - eta[k] * mu <= 0.0:
            return np.inf
    s = 0.0
    for k in range(base.shape[0]):
        s += math.pow(base[k] - eta[k] * mu, power)
    return s


@njit
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


@njit
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


@njit
def oks_probabilities(log_w, delta, q, p):
    """oks.OKSRule.distribution into ``q`` and ``p``."""
    K = log_w.shape[0]
    fold_weights_into(log_w, q)
    for k in range(K):
        p[k] = (1.0 - delta) * q[k] + delta / K


@njit
def oks_learn(i, f, y, kind, log_w, p, eta, lam):
    """oks.OKSRule.step after the draw: ``log_w`` (normalised); returns ``(grad, coef)``."""
    loss, grad = paper_loss(kind, f, y)
    log_w[i] = log_w[i] - eta * loss / p[i]
    log_normalize_in_place(log_w)
    return grad, -lam * grad / p[i]


@njit
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


@njit
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


@njit
def ioks_probabilities(q, delta, p):
    """oks.IOKSRule._p into ``p``."""
    K = q.shape[0]
    for k in range(K):
        p[k] = (1.0 - delta) * q[k] + delta / K


@njit
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


@njit
def support_views(store, i, d):
    """Kernel ``i``'s buffers in ``store``: columns (d, capacity), squared norms, coefficients."""
    columns, sq_norms, alpha, offsets, capacities = store[:5]
    o, c = offsets[i], capacities[i]
    return columns[d * o : d * (o + c)].reshape((d, c)), sq_norms[o : o + c], alpha[o : o + c]


@njit
def support_full(store, i):
    """Whether kernel ``i``'s buffers have no room for one more support vector."""
    capacities, counts = store[4:6]
    return counts[i] >= capacities[i]


@njit
def support_capped(store):
    """Whether one more support vector would exceed ``max_support`` (all kernels together)."""
    counts, limit = store[5], store[10]
    total = 0
    for k in range(counts.shape[0]):
        total += counts[k]
    return total + 1 > limit


@njit
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


@njit
def support_learn(store, i, x, f, grad, coef, bound, project):
    """The storage's part of a rule's step: if ``grad != 0``, :func:`support_step`. False
    (nothing done) when that would exceed ``max_support``."""
    if grad == 0.0:
        return True
    if support_capped(store):
        return False
    support_step(store, i, x, f, coef, bound, project)
    return True


@njit
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


@njit
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


@njit
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


@njit
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
