"""The budget learners' per-row folds (numba): the implementation of their ``update``.

Each fold learns a batch row by row (predict, score, then learn) on a
:class:`~okl_core.learners.budget._support.SupportArrays` bundle changed in place: the
support vectors ``rows`` (B, d) float32, their float64 ``columns`` (d, B) and squared norms,
the coefficients ``alpha`` as they are scored ((B,): BLAS ddot, (B, C): gemv, numpy's
``k @ alpha[:n]``) and ``A``, the same memory as (B, C) (C = 1 for binary and regression),
which every update writes elementwise, and the ``stamp`` of each vector (the index in the
stream of the example it came from). ``n`` (the slots in use) and each learner's counters go
in as scalars and come back as the fold's result. ``rule`` is a rule's code
``(kind, eta, eps)`` (:mod:`okl_core.learners.rules`, or :data:`MULTICLASS_PERCEPTRON`),
``kernel`` the kernel's code ``(kind, sigma, gauss_scale)``
(:func:`okl_core.kernels.compiled_kernel`), ``options`` the learner's own constants (a
NamedTuple of its module). ``scores`` receives the online scores (N, C) (the scalar Projectrons':
(N,)).

The arithmetic is fixed (the model bytes depend on it): kernel rows by
:func:`~okl_core.learners._jit_folds.kernel_row_into`, scores by BLAS, every update
elementwise, no fastmath; tests/okl_core/reference/budget.py holds the numpy transcription
these folds are tested against, bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

from okl_core.learners._jit_folds import copy_into, kernel_row_into, rival, scalar_coefficient, widen_row
from okl_core.learners.compiled import njit
from okl_core.learners.rules import MULTICLASS

MULTICLASS_PERCEPTRON = -1  # the multiclass Perceptron's rule code (e_y - e_p on a mistake), not a rules.py code
NO_MARGIN, MARGIN_ETA, MARGIN_CODE = 0, 1, 2  # Projectron++'s margin test (projectron.MARGIN_CODES)


# -- the support set ------------------------------------------------------------------------
@njit
def budget_put(X, i, x, slot, support, t):
    """Row ``i`` of ``X`` (float32) and its float64 copy ``x`` into ``slot``, its squared norm
    summed in coordinate order (``_support.squared_norms``), stamp ``t``."""
    s = 0.0
    for j in range(x.shape[0]):
        support.rows[slot, j] = X[i, j]
        support.columns[j, slot] = x[j]
        s += x[j] * x[j]
    support.sq_norms[slot] = s
    support.stamp[slot] = t


@njit
def support_put(X, i, x, slot, support, coef, t):
    """:func:`budget_put` of the vector and ``A[slot] = coef``."""
    budget_put(X, i, x, slot, support, t)
    for c in range(support.A.shape[1]):
        support.A[slot, c] = coef[c]


@njit
def support_scores(k, alpha, n, f):
    """``f = k . alpha[:n]`` into ``f`` (C,): BLAS ddot (binary) or gemv, numpy's ``k @ alpha``; 0 when empty."""
    if n == 0:
        f[:] = 0.0
    else:
        f[:] = np.dot(k[:n], alpha[:n])


@njit
def score_row(X, i, x, support, n, k, f, kernel):
    """Row ``i`` of ``X`` widened into ``x``, its kernel row into ``k`` and its scores into ``f``."""
    widen_row(X, i, x)
    kernel_row_into(kernel[0], kernel[1], kernel[2], x, support.columns, support.sq_norms, n, k)
    support_scores(k, support.alpha, n, f)


@njit
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


@njit
def oldest_slot(stamp, n):
    """The first slot of the smallest stamp among the first ``n`` (the earliest example's vector)."""
    r = 0
    for j in range(1, n):
        if stamp[j] < stamp[r]:
            r = j
    return r


@njit
def uniform_slot(u, n):
    """Slot ``min(floor(u n), n - 1)`` for the example's uniform ``u``."""
    s = int(u * n)
    return s if s < n - 1 else n - 1


@njit
def budget_coefficient(rule, f, y, coef):
    """Whether ``rule`` updates on scores ``f`` (C,) and label ``y``, its coefficient into ``coef``.

    ``rule[0]``: a scalar code of :mod:`~okl_core.learners.rules` (``f[0]``, ``coef[0]``), the
    multiclass hinge (``MulticlassHingeRule``) or :data:`MULTICLASS_PERCEPTRON` (``e_y - e_p``,
    ``p`` the first argmax); multiclass ``coef`` is dense.
    """
    kind, eta, eps = rule
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


@njit
def scale_rows(A, n, factor):
    """``A[:n] *= factor`` elementwise."""
    for j in range(n):
        for c in range(A.shape[1]):
            A[j, c] *= factor


@njit
def row_buffers(X, A):
    """A fold's per-row scratch: the widened row ``x`` (d,), its kernel row ``k`` (B,), its
    scores ``f`` (C,) and the update's coefficient ``coef`` (C,)."""
    return np.empty(X.shape[1]), np.empty(A.shape[0]), np.empty(A.shape[1]), np.empty(A.shape[1])


# -- RBP (rbp, mrbp, rbp_r) -------------------------------------------------------------------
@njit
def fold_rbp(rule, X, y, u, support, n, scores, t0, kernel):
    """RBP over the batch: on an update ``x`` goes to a free slot, or (set full) to slot
    ``floor(u B)``. Returns the support set's size."""
    A = support.A
    B = A.shape[0]
    x, k, f, coef = row_buffers(X, A)
    for i in range(y.shape[0]):
        score_row(X, i, x, support, n, k, f, kernel)
        copy_into(scores[i], f)
        if budget_coefficient(rule, f, y[i], coef):
            slot = uniform_slot(u[i], n) if n == B else n
            support_put(X, i, x, slot, support, coef, t0 + i)
            if slot == n:
                n += 1
    return n


# -- the Forgetron (forgetron, mforgetron, forgetron_r) ----------------------------------------
@njit
def forgetron_phi(sigma, mu, damage, mistakes, ratio, code_root):
    """The self-tuned shrinking coefficient (:func:`okl_core.learners.budget.forgetron_shrink`;
    ``min`` and ``max`` written as comparisons that keep NaN where Python's do)."""
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


@njit
def forgetron_weight_margin(A, r, fr, class_score):
    """Weight and margin of the oldest vector ``r`` with scores ``fr`` (C,) under ``f'``:
    binary / regression ``(|alpha_r|, sign(alpha_r) f'(x_r))``; multiclass the weight at ``y_r``
    (first argmax of ``alpha_r``) and its class score or multiclass margin."""
    if A.shape[1] == 1:
        a = A[r, 0]
        return abs(a), (1.0 if a >= 0 else -1.0) * fr[0]
    y_r = argmax_skipping(A[r], -1)
    if class_score:
        return A[r, y_r], fr[y_r]
    return A[r, y_r], fr[y_r] - fr[argmax_skipping(fr, y_r)]


@njit
def fold_forgetron(rule, options, X, y, support, n, mistakes, damage, scores, t0, kernel):
    """The Forgetron over the batch (``options``: ``forgetron.ForgetronOptions``): returns
    ``(n, mistakes, damage)``."""
    A = support.A
    B, C = A.shape
    x, k, f, coef = row_buffers(X, A)
    xr, kr, fr, _ = row_buffers(X, A)
    for i in range(y.shape[0]):
        score_row(X, i, x, support, n, k, f, kernel)
        copy_into(scores[i], f)
        if not budget_coefficient(rule, f, y[i], coef):
            continue
        mistakes += 1
        if n < B:
            support_put(X, i, x, n, support, coef, t0 + i)
            n += 1
            continue
        r = oldest_slot(support.stamp, n)
        for j in range(x.shape[0]):
            xr[j] = support.columns[j, r]
        kernel_row_into(kernel[0], kernel[1], kernel[2], xr, support.columns, support.sq_norms, n, kr)
        support_scores(kr, support.alpha, n, fr)
        for c in range(C):
            fr[c] = fr[c] + coef[c] * k[r]
        weight, mu = forgetron_weight_margin(A, r, fr, options.class_score)
        phi = forgetron_phi(weight, mu, damage, mistakes, options.ratio, options.code_root) if options.shrinking else 1.0
        lam = phi * weight
        damage = damage + lam * lam + 2.0 * lam - 2.0 * lam * (phi * mu)
        scale_rows(A, n, phi)
        for c in range(C):
            coef[c] = coef[c] * phi
        support_put(X, i, x, r, support, coef, t0 + i)
    return n, mistakes, damage


# -- BOGD (bogd, mbogd, bogd_r) and NORMA (norma_r) ----------------------------------------------
@njit
def bound_coefficients(A, n, limit):
    """BOGD's bound: ``A[:n]`` scaled by ``limit / max |A|`` when the largest exceeds ``limit``
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


@njit
def fold_bogd(rule, options, X, y, u, support, n, scores, t0, kernel):
    """BOGD over the batch (``options``: ``bogd.BOGDOptions``): ``decay`` the factor
    ``1 - eta lam`` (at every example with ``decay_always``, else on updates), ``oldest`` the
    removal (else uniform, with ``rescale = B / (B - 1)``), ``limit = eta gamma``."""
    A = support.A
    B = A.shape[0]
    x, k, f, coef = row_buffers(X, A)
    for i in range(y.shape[0]):
        score_row(X, i, x, support, n, k, f, kernel)
        copy_into(scores[i], f)
        update = budget_coefficient(rule, f, y[i], coef)
        if options.decay_always or update:
            scale_rows(A, n, options.decay)
        if not update:
            continue
        if n < B:
            support_put(X, i, x, n, support, coef, t0 + i)
            n += 1
            continue
        if options.oldest:
            slot = oldest_slot(support.stamp, n)
        else:
            scale_rows(A, n, options.rescale)
            slot = uniform_slot(u[i], n)
        support_put(X, i, x, slot, support, coef, t0 + i)
        bound_coefficients(A, n, options.limit)
    return n


@njit
def fold_norma(options, X, y, support, n, eps, scores, t0, kernel):
    """NORMA over the batch (``options``: ``norma.NORMAOptions``): decay by ``decay``;
    ``|y - f| <= eps``: ``eps -= down`` (``nu eta``), else ``eps += up`` (``(1 - nu) eta``) and
    ``x`` with ``eta sign(y - f)`` in a free slot or the oldest's. Returns ``(n, eps)``."""
    A = support.A
    B = A.shape[0]
    x = np.empty(X.shape[1])
    k = np.empty(B)
    f = np.empty(1)
    coef = np.empty(1)
    for i in range(y.shape[0]):
        score_row(X, i, x, support, n, k, f, kernel)
        scores[i, 0] = f[0]
        scale_rows(A, n, options.decay)
        residual = y[i] - f[0]
        if abs(residual) <= eps:
            eps = eps - options.down
            continue
        eps = eps + options.up
        coef[0] = options.eta * (1.0 if residual > 0 else -1.0)
        slot = oldest_slot(support.stamp, n) if n == B else n
        support_put(X, i, x, slot, support, coef, t0 + i)
        if slot == n:
            n += 1
    return n, eps


# -- the Projectron (projectron, projectron_pp, projectron_r, mprojectron, mprojectron_pp) ------
@njit
def pack_inverse(G, n, H):
    """``H[:n*n] = G[:n, :n]`` (row stride ``n``)."""
    for a in range(n):
        for b in range(n):
            H[a * n + b] = G[a, b]


@njit
def unpack_inverse(H, n, G):
    """``G[:n, :n] = H[:n*n]``, the inverse back in the state's layout."""
    for a in range(n):
        for b in range(n):
            G[a, b] = H[a * n + b]


@njit
def projection(H, k, n):
    """``d = K^{-1} k`` (BLAS gemv on the packed block, numpy's ``G[:n, :n] @ k``) and
    ``delta^2 = max(1 - k . d, 0)``."""
    d = np.dot(H[: n * n].reshape((n, n)), k[:n])
    v = 1.0 - np.dot(k[:n], d)
    return d, (0.0 if 0.0 > v else v)


@njit
def grow_inverse(H, spare, d, delta2, n):
    """``K^{-1}`` grown by one vector (the Schur complement block update), packed into
    ``spare`` with row stride ``n + 1``."""
    m = n + 1
    for a in range(n):
        for b in range(n):
            spare[a * m + b] = H[a * n + b] + d[a] * d[b] / delta2
    for a in range(n):
        spare[a * m + n] = spare[n * m + a] = -d[a] / delta2
    spare[n * m + n] = 1.0 / delta2


@njit
def projectron_margin_tau(options, d, delta2, loss, coef_norm2):
    """Projectron++ on a margin error: ``(update, tau)`` (``options``: ``projectron.ProjectronOptions``)."""
    if options.margin == MARGIN_CODE:
        norm2 = 1.0 - delta2
        if norm2 <= 0.0:
            return False, 0.0
        tau = loss / norm2
        if 1.0 < tau:
            tau = 1.0
        return tau * (2.0 * loss - tau * norm2 - 2.0 * options.U * math.sqrt(delta2)) >= 0.0, tau
    norm2 = (1.0 - delta2) * coef_norm2
    gain = loss - delta2 / options.eta
    if norm2 <= 0.0 or gain <= 0.0:
        return False, 0.0
    tau = loss / norm2
    if 1.0 < tau:
        tau = 1.0
    b = 2.0 * gain / norm2
    return True, (b if b < tau else tau)


@njit
def fold_projectron(rule, options, X, y, support, G, n, scores, t0, kernel):
    """The scalar Projectrons (``projectron``, ``projectron_pp``, ``projectron_r``) over a batch:
    ``rule`` perceptron or regression, ``options.margin`` the Projectron++ test (``NO_MARGIN``
    for the others), ``G`` the inverse kernel matrix (B, B). Returns the support set's size."""
    alpha = support.alpha
    B = alpha.shape[0]
    x = np.empty(X.shape[1])
    k = np.empty(B)
    H, spare = np.empty(B * B), np.empty(B * B)
    pack_inverse(G, n, H)
    f = np.empty(1)
    for i in range(y.shape[0]):
        score_row(X, i, x, support, n, k, f, kernel)
        fi, yi, t = f[0], y[i], t0 + i
        scores[i] = fi
        update, coef = scalar_coefficient(rule[0], rule[1], rule[2], fi, yi)
        if update:
            if n == 0:
                budget_put(X, i, x, 0, support, t)
                alpha[0] = coef
                H[0] = 1.0
                n = 1
                continue
            d, delta2 = projection(H, k, n)
            if delta2 <= options.bound or n == B:
                for j in range(n):
                    alpha[j] += d[j] * coef
                continue
            grow_inverse(H, spare, d, delta2, n)
            H, spare = spare, H
            budget_put(X, i, x, n, support, t)
            alpha[n] = coef
            n += 1
        elif options.margin != NO_MARGIN and yi * fi < 1.0 and n > 0:
            d, delta2 = projection(H, k, n)
            apply, tau = projectron_margin_tau(options, d, delta2, 1.0 - yi * fi, 1.0)
            if apply:
                for j in range(n):
                    alpha[j] += tau * d[j] * yi
    unpack_inverse(H, n, G)
    return n


@njit
def pair_into(coef, y, s, value):
    """``coef = value (e_y - e_s)``."""
    coef[:] = 0.0
    coef[y], coef[s] = value, -value


@njit
def add_outer(alpha, d, tau, coef, n):
    """``alpha[:n] += np.multiply.outer(tau d, coef)``, every class (zeros too, as numpy)."""
    for j in range(n):
        step = tau * d[j]
        for c in range(coef.shape[0]):
            alpha[j, c] += step * coef[c]


@njit
def fold_mprojectron(options, X, y, support, G, n, scores, t0, kernel):
    """:func:`fold_projectron` of the multiclass Projectrons (``mprojectron``,
    ``mprojectron_pp``): the multiclass Perceptron's ``e_y - e_p`` on a mistake, Projectron++'s
    ``e_y - e_s`` on a margin error."""
    alpha = support.alpha
    B, C = alpha.shape
    x = np.empty(X.shape[1])
    k = np.empty(B)
    H, spare = np.empty(B * B), np.empty(B * B)
    pack_inverse(G, n, H)
    f = np.empty(C)
    coef = np.empty(C)
    for i in range(y.shape[0]):
        score_row(X, i, x, support, n, k, f, kernel)
        yi, t = y[i], t0 + i
        copy_into(scores[i], f)
        p = argmax_skipping(f, -1)
        if p != yi:
            pair_into(coef, yi, p, 1.0)
            if n == 0:
                budget_put(X, i, x, 0, support, t)
                copy_into(alpha[0], coef)
                H[0] = 1.0
                n = 1
                continue
            d, delta2 = projection(H, k, n)
            if delta2 <= options.bound or n == B:
                add_outer(alpha, d, 1.0, coef, n)
                continue
            grow_inverse(H, spare, d, delta2, n)
            H, spare = spare, H
            budget_put(X, i, x, n, support, t)
            copy_into(alpha[n], coef)
            n += 1
        elif options.margin != NO_MARGIN:
            s = argmax_skipping(f, yi)
            gap = f[yi] - f[s]
            if gap < 1.0 and n > 0:
                pair_into(coef, yi, s, 1.0)
                d, delta2 = projection(H, k, n)
                apply, tau = projectron_margin_tau(options, d, delta2, 1.0 - gap, 2.0)
                if apply:
                    add_outer(alpha, d, tau, coef, n)
    unpack_inverse(H, n, G)
    return n


# -- BPA-S (bpa_s, mbpa_s) -----------------------------------------------------------------------
@njit
def bpa_s_slot(alpha, k, n):
    """BPA-S's removal: the first slot minimising ``|alpha_r|^2 (1 - k_r^2)`` (first NaN, as
    ``np.argmin``); ``|alpha_r|^2`` summed over the classes in order (``_support.squared_norms``)."""
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


@njit
def fold_bpa_s(C, X, y, support, n, scores, t0, kernel):
    """BPA-S (``bpa_s``; ``mbpa_s`` when ``A`` has more than one column): PA-I on the
    (multiclass) hinge, and when full the replacement of :func:`bpa_s_slot`, the new vector
    taking ``alpha_r k_r`` plus the step. ``scores`` (N, C). Returns the support set's size."""
    A = support.A
    B = A.shape[0]
    multiclass = A.shape[1] > 1
    x, k, f, step = row_buffers(X, A)
    for i in range(y.shape[0]):
        score_row(X, i, x, support, n, k, f, kernel)
        copy_into(scores[i], f)
        t = t0 + i
        if multiclass:
            yi = int(y[i])
            s = argmax_skipping(f, yi)
            loss = 1.0 - (f[yi] - f[s])
            if not loss > 0.0:
                continue
            half = loss / 2.0
            pair_into(step, yi, s, C if not half < C else half)
        else:
            loss = 1.0 - y[i] * f[0]
            if not loss > 0.0:
                continue
            step[0] = (C if not loss < C else loss) * y[i]
        slot = n
        if n == B:
            slot = bpa_s_slot(support.alpha, k, n)
            kr = k[slot]
            for c in range(step.shape[0]):
                step[c] = A[slot, c] * kr + step[c]
        else:
            n += 1
        budget_put(X, i, x, slot, support, t)
        copy_into(A[slot], step)
    return n
