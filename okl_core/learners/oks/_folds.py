"""The compiled folds of online kernel selection: OKS, OKS++ and IOKS on growing support sets
(``oks``, ``oks_pp``, ``ioks``) and on random features (``rf_oks_pp``, ``rf_ioks``).

Imported only through :func:`okl_core.learners.compiled.folds` (which sets up the compile cache
and pins scipy's BLAS first). These folds are the implementation: the numpy per-row fold they
are tested against, byte for byte, is ``tests/okl_core/reference/oks.py``.

Each rule is split in two: the distributions before the draw (``*_probabilities``), then what
the observed loss does to the statistics (``*_learn``), which returns the storage's step
coefficient. The storage's step reads none of the statistics, so it runs after them. The
arithmetic is written for fixed bytes: exp, log and pow from the C library, sums sequential,
dot products by BLAS ddot, no fastmath.

A fold takes four bundles (NamedTuples): the rows (:class:`~.storage.SupportRows` or
:class:`~.storage.FeatureRows`, with the usage counts and scores written in place), the storage
(:class:`~.storage.SupportStore`, support sets only; the random-feature weights travel with
the rows), the rule's statistics (:class:`~.rules.OKSStats`, ...: in place) and the rule's
constants (:class:`~.rules.OKSConstants`, ...).

The support sets come as one :class:`~.storage.SupportStore`: three arenas holding every
kernel's buffers one after the other -- float64 columns (kernel i: a (d, capacity) C-ordered
block at d * offsets[i]), their squared norms and their coefficients (at offsets[i]) -- the K
offsets, capacities and counts (in place), the RKHS norms^2 (K,) (in place), the kernels'
codes, sigmas and Gaussian scales, and ``max_support`` (the limit). One arena per kind rather
than a tuple of K arrays: a tuple would compile the folds once per K (3-5 s each). A fold
stops before a row whose drawn kernel's buffers are full (the driver packs again with that
kernel's capacity doubled and resumes) and before an append that would exceed max_support
(the driver raises the cap's error).
"""

from __future__ import annotations

import math

import numpy as np

from okl_core.learners._jit_folds import draw_index, fold_weights_into, kernel_row_into, log_normalize_in_place
from okl_core.learners.compiled import njit

SUPPORT_CAP = -2  # a support fold's "kernel" when an append would exceed max_support


# -- the paper's losses and the rules ---------------------------------------------------------
@njit
def paper_loss(kind, f, y):
    """``(value, derivative)`` of the paper's loss ``kind`` (:data:`~.config.LOSS_CODES`):
    logistic ``log(1 + exp(-y f))`` (as okl_core.losses' ``np.logaddexp(0, -y f)``), square
    ``(f - y)^2`` (twice okl_core.losses' square), absolute ``|f - y|`` (derivative: np.sign,
    NaN kept)."""
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
def oks_probabilities(log_w, delta, q, p):
    """OKS's ``q = w / sum w`` and ``p = (1 - delta) q + delta / K`` into ``q`` and ``p``."""
    K = log_w.shape[0]
    fold_weights_into(log_w, q)
    for k in range(K):
        p[k] = (1.0 - delta) * q[k] + delta / K


@njit
def oks_learn(i, f, y, stats, rule, p):
    """OKS after the draw of kernel ``i``: ``log_w_i -= eta l / p_i`` (normalised, in place);
    returns ``(grad, coef)`` with the step coefficient ``-lambda l' / p_i``."""
    loss, grad = paper_loss(rule.kind, f, y)
    log_w = stats.log_w
    log_w[i] = log_w[i] - rule.eta * loss / p[i]
    log_normalize_in_place(log_w)
    return grad, -rule.lam * grad / p[i]


@njit
def oks_pp_probabilities(stats, eta_scale, v, q, p):
    """OKS++'s ``q`` and ``p`` (Theorem 3.1) into ``q`` and ``p`` (``v`` (K,) scratch); returns
    ``delta``. ``stats``' ``sq_loss_sum`` and ``delta_constant`` have shape (1,)."""
    loss_sum = stats.loss_sum
    K = loss_sum.shape[0]
    eta = eta_scale / math.sqrt(1.0 + stats.sq_loss_sum[0])
    for k in range(K):
        v[k] = -eta * loss_sum[k]
    fold_weights_into(v, q)
    total = 0.0
    for k in range(K):
        total += loss_sum[k]
    a = stats.delta_constant[0]
    delta = a / (2.0 * max(a, 2.0 * math.pow(total, 1.0 / 3.0)))
    for k in range(K):
        p[k] = (1.0 - delta) * q[k] + delta / K
    return delta


@njit
def oks_pp_learn(i, f, y, stats, rule, q, p):
    """OKS++ after the draw of kernel ``i``: ``L~``, ``S`` and (released-code tuning) ``a`` in
    place; returns ``(grad, coef)``."""
    loss_sum, sq_loss_sum, delta_constant = stats.loss_sum, stats.sq_loss_sum, stats.delta_constant
    loss, grad = paper_loss(rule.kind, f, y)
    if rule.code_constant:
        delta_constant[0] = math.exp(min(-y * f, 700.0))
    a = delta_constant[0]
    c_tilde = loss / p[i]
    loss_sum[i] += c_tilde
    total = 0.0
    for k in range(loss_sum.shape[0]):
        total += loss_sum[k]
    lam = (rule.lam_top * math.pow(max(math.pow(a, 3.0), 8.0 * total), -1.0 / 6.0)) / (
        rule.lam_bottom * math.sqrt(1.0 + loss_sum[i])
    )
    sq_loss_sum[0] = sq_loss_sum[0] + q[i] * c_tilde * c_tilde
    return grad, -lam * grad / p[i]


@njit
def tsallis_total(base, eta, mu, power):
    """``sum (base - eta mu)^power`` (inf if a term is <= 0)."""
    for k in range(base.shape[0]):
        if base[k] - eta[k] * mu <= 0.0:
            return np.inf
    s = 0.0
    for k in range(base.shape[0]):
        s += math.pow(base[k] - eta[k] * mu, power)
    return s


@njit
def tsallis_step(q, eta, c_tilde, out, tol, max_iter, alpha):
    """IOKS's mirror step ``q'_i = (q_i^{1/alpha - 1} + eta_i (c~_i - mu))^{alpha / (1 - alpha)}``
    into ``out``, with ``mu`` found by bisection (the paper's interval ``[0, max c~]``, widened
    while it does not bracket) until ``|sum q' - 1| <= tol``; returns ``mu``."""
    K = q.shape[0]
    base = np.empty(K)
    for k in range(K):
        base[k] = math.pow(q[k], 1.0 / alpha - 1.0) + eta[k] * c_tilde[k]
    power = alpha / (1.0 - alpha)
    lo, hi = 0.0, np.max(c_tilde)
    width = max(hi, 1.0)
    while tsallis_total(base, eta, lo, power) > 1.0 + tol:  # sum q' decreases as mu decreases
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
    return mu


@njit
def ioks_probabilities(q, delta, p):
    """IOKS's ``p = (1 - delta) q + delta / K`` into ``p``."""
    K = q.shape[0]
    for k in range(K):
        p[k] = (1.0 - delta) * q[k] + delta / K


@njit
def ioks_learn(i, f, y, feature_sq, stats, rule, p, c_tilde, q_next):
    """IOKS after the draw of kernel ``i`` (``feature_sq``: ``||k(x, .)||^2``): ``grad_sq_sum``,
    the Tsallis step of ``q`` and the growth of ``rho`` and ``eta``, in place (``c_tilde``,
    ``q_next`` (K,) scratch); returns ``(grad, coef)``."""
    q, eta, rho, grad_sq_sum = stats.q, stats.eta, stats.rho, stats.grad_sq_sum
    K = q.shape[0]
    loss, grad = paper_loss(rule.kind, f, y)
    g = grad / p[i]
    grad_sq_sum[i] += g * g * feature_sq
    coef = 0.0
    if grad != 0.0:
        lam = rule.radius / (math.sqrt(2.0) * math.sqrt(1.0 + grad_sq_sum[i]))
        coef = -lam * grad / p[i]
    c = min(loss / rule.loss_max, rule.loss_ceiling)
    max_eta = np.max(eta)
    c_tilde[:] = 0.0
    c_tilde[i] = c / p[i] if p[i] >= max_eta else c / (p[i] + max_eta)
    tsallis_step(q, eta, c_tilde, q_next, 1e-5, 200, rule.alpha)
    for k in range(K):
        q[k] = q_next[k]
        p_next = (1.0 - rule.delta) * q[k] + rule.delta / K
        if 1.0 / p_next > rho[k]:
            rho[k] = 2.0 / p_next
            eta[k] = eta[k] * rule.upsilon
    return grad, coef


# -- random-feature weights ----------------------------------------------------------------
@njit
def clipped_step(w, z, coef, clip):
    """``w += coef z``, then every coordinate clipped to ``+-clip``."""
    for j in range(w.shape[0]):
        v = w[j] + coef * z[j]
        w[j] = min(max(v, -clip), clip)


@njit
def fold_rf_oks_pp(block, stats, rule):
    """RF-OKS++ on rows ``block.start..`` of a feature block (:class:`~.storage.FeatureRows`:
    ``Z[r, i]`` holds row ``r``'s features for kernel ``i`` where ``have[r, i]``); ``w``,
    ``stats``, ``n_used`` and ``scores`` in place. Returns ``(rows done, -1)``, or ``(r, i)``
    when row ``r`` drew kernel ``i`` whose features are missing (row ``r`` not learned)."""
    w, Z, y, u = block.w, block.Z, block.y, block.u
    K = w.shape[0]
    v = np.empty(K)
    q = np.empty(K)
    p = np.empty(K)
    for r in range(block.start, y.shape[0]):
        oks_pp_probabilities(stats, rule.eta_scale, v, q, p)
        i = draw_index(p, u[r])
        if not block.have[r, i]:
            return r, i
        f = np.dot(Z[r, i], w[i])
        grad, coef = oks_pp_learn(i, f, y[r], stats, rule, q, p)
        if grad != 0.0:
            clipped_step(w[i], Z[r, i], coef, block.clip)
        block.scores[r] = f
        block.n_used[i] += 1
    return y.shape[0], -1


@njit
def fold_rf_ioks(block, stats, rule):
    """RF-IOKS on a feature block (arguments and return as :func:`fold_rf_oks_pp`)."""
    w, Z, y, u = block.w, block.Z, block.y, block.u
    K = w.shape[0]
    p = np.empty(K)
    c_tilde = np.zeros(K)
    q_next = np.empty(K)
    for r in range(block.start, y.shape[0]):
        ioks_probabilities(stats.q, rule.delta, p)
        i = draw_index(p, u[r])
        if not block.have[r, i]:
            return r, i
        z = Z[r, i]
        f = np.dot(z, w[i])
        grad, coef = ioks_learn(i, f, y[r], np.dot(z, z), stats, rule, p, c_tilde, q_next)
        if grad != 0.0:
            clipped_step(w[i], z, coef, block.clip)
        block.scores[r] = f
        block.n_used[i] += 1
    return y.shape[0], -1


# -- growing support sets ----------------------------------------------------------------------
@njit
def support_views(store, i, d):
    """Kernel ``i``'s buffers in ``store``: columns (d, capacity), squared norms, coefficients."""
    o, c = store.offsets[i], store.capacities[i]
    return store.columns[d * o : d * (o + c)].reshape((d, c)), store.sq_norms[o : o + c], store.alpha[o : o + c]


@njit
def support_full(store, i):
    """Whether kernel ``i``'s buffers have no room for one more support vector."""
    return store.counts[i] >= store.capacities[i]


@njit
def support_capped(store):
    """Whether one more support vector would exceed ``max_support`` (all kernels together)."""
    counts = store.counts
    total = 0
    for k in range(counts.shape[0]):
        total += counts[k]
    return total + 1 > store.limit


@njit
def support_value(store, i, x, row):
    """``f_i(x) = sum_j alpha_j k_i(s_j, x)`` summed in order (the kernel row into the scratch
    ``row``); 0 for an empty set."""
    m = store.counts[i]
    if m == 0:
        return 0.0
    columns, sq_norms, a = support_views(store, i, x.shape[0])
    kernel_row_into(store.codes[i], store.sigmas[i], store.scales[i], x, columns, sq_norms, m, row)
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
    """Append ``x`` with ``coef`` to kernel ``i``'s set (room checked by the caller), update
    ``||f_i||^2 = ||f_i||^2 + 2 c f(x) + c^2 k(x, x)`` and, if ``project``, rescale onto
    ``||f_i|| <= bound``."""
    counts, sq_norm = store.counts, store.sq_norm
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
def fold_oks(rows, store, stats, rule):
    """OKS on support sets: rows ``rows.start..`` of the float64 rows ``rows.X``
    (:class:`~.storage.SupportRows`); ``store``, ``stats``, ``n_used`` and ``scores`` in place.
    Returns ``(rows done, -1)``; ``(r, i)`` when row ``r`` drew kernel ``i`` whose buffers are
    full (row ``r`` not started); ``(r, SUPPORT_CAP)`` when row ``r`` would exceed
    ``max_support`` (its statistics already changed: the driver raises)."""
    X, y, u = rows.X, rows.y, rows.u
    K = stats.log_w.shape[0]
    q = np.empty(K)
    p = np.empty(K)
    row = np.empty(np.max(store.capacities))
    for r in range(rows.start, y.shape[0]):
        oks_probabilities(stats.log_w, rule.delta, q, p)
        i = draw_index(p, u[r])
        if support_full(store, i):
            return r, i
        f = support_value(store, i, X[r], row)
        grad, coef = oks_learn(i, f, y[r], stats, rule, p)
        if not support_learn(store, i, X[r], f, grad, coef, 0.0, False):
            return r, SUPPORT_CAP
        rows.scores[r] = f
        rows.n_used[i] += 1
    return y.shape[0], -1


@njit
def fold_oks_pp(rows, store, stats, rule):
    """OKS++ on support sets (arguments and return as :func:`fold_oks`); projected onto
    ``||f_i|| <= radius``."""
    X, y, u = rows.X, rows.y, rows.u
    K = stats.loss_sum.shape[0]
    v = np.empty(K)
    q = np.empty(K)
    p = np.empty(K)
    row = np.empty(np.max(store.capacities))
    for r in range(rows.start, y.shape[0]):
        oks_pp_probabilities(stats, rule.eta_scale, v, q, p)
        i = draw_index(p, u[r])
        if support_full(store, i):
            return r, i
        f = support_value(store, i, X[r], row)
        grad, coef = oks_pp_learn(i, f, y[r], stats, rule, q, p)
        if not support_learn(store, i, X[r], f, grad, coef, rule.radius, True):
            return r, SUPPORT_CAP
        rows.scores[r] = f
        rows.n_used[i] += 1
    return y.shape[0], -1


@njit
def fold_ioks(rows, store, stats, rule):
    """IOKS on support sets (arguments and return as :func:`fold_oks`); ``||k(x, .)||^2 = 1``,
    projected onto ``||f_i|| <= radius``."""
    X, y, u = rows.X, rows.y, rows.u
    K = stats.q.shape[0]
    p = np.empty(K)
    c_tilde = np.zeros(K)
    q_next = np.empty(K)
    row = np.empty(np.max(store.capacities))
    for r in range(rows.start, y.shape[0]):
        ioks_probabilities(stats.q, rule.delta, p)
        i = draw_index(p, u[r])
        if support_full(store, i):
            return r, i
        f = support_value(store, i, X[r], row)
        grad, coef = ioks_learn(i, f, y[r], 1.0, stats, rule, p, c_tilde, q_next)
        if not support_learn(store, i, X[r], f, grad, coef, rule.radius, True):
            return r, SUPPORT_CAP
        rows.scores[r] = f
        rows.n_used[i] += 1
    return y.shape[0], -1
