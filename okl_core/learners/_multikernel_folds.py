"""The compiled folds of the random-feature multi-kernel learners of
:mod:`okl_core.learners.omkl`: Raker and OMKL-GF (spec/omkl_gf.md).

Features come precomputed in numpy (``KernelFeatureBank.row_blocks``,
``multikernel.FeatureBlock``: numpy's float32 cos and sin are not the C library's). Here
exp, log and pow are the C library's (``math``), sums are sequential loops and dot products
BLAS ddot, on every runner. tests/okl_core/reference/multikernel.py holds the numpy loops
these replaced, which the tests compare them with byte for byte.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from okl_core.learners._jit_folds import copy_matrix_into, draw_index, fold_weights_into, log_normalize_in_place
from okl_core.learners.compiled import njit


class Steps(NamedTuple):
    """The step sizes: ``eta`` (and OMKL-GF's exploration ``eta_e``), both divided by
    ``sqrt(t)`` unless ``constant``, and the ridge ``lam``."""

    eta: float
    eta_e: float
    constant: bool
    lam: float


class Weighted(NamedTuple):
    """Raker's state arrays: ``theta`` (N, 2D) and ``log_w`` (N,), updated in place."""

    theta: np.ndarray
    log_w: np.ndarray


class Graph(NamedTuple):
    """OMKL-GF's state arrays besides :class:`Weighted`'s, updated in place: the last ``graph``
    (N, J) bool, ``frozen`` (1,) bool, ``n_used`` (N,) int64 and ``sq_error`` (1,) float64."""

    graph: np.ndarray
    frozen: np.ndarray
    n_used: np.ndarray
    sq_error: np.ndarray


class GraphRule(NamedTuple):
    """OMKL-GF's settings: ``draws`` per selective node (``M``), ``b_scale`` (``2^b``), the
    freezing rule (``freeze_below``, on the running MSE when ``freeze_mse``) and whether a
    frozen graph's probabilities are ``conditional`` on it."""

    draws: int
    b_scale: float
    freeze_below: float
    freeze_mse: bool
    conditional: bool


@njit
def step_theta(theta, Zr, rows, m, f, y, eta_t, lam, losses):
    """The squared loss's gradient step on the kernels ``rows[:m]`` of ``theta`` (N, 2D), with
    features ``Zr`` (N, 2D) and scores ``f[:m]``: ``theta_n -= eta_t (2 (f_n - y) z_n + 2 lam
    theta_n)``; ``losses[:m]`` receives ``2 L_n + lam |theta_n|^2`` before the step."""
    for k in range(m):
        n = rows[k]
        r = f[k] - y
        losses[k] = 2.0 * (0.5 * (r * r)) + lam * np.dot(theta[n], theta[n])
        g = 2.0 * r
        for j in range(theta.shape[1]):
            theta[n, j] -= eta_t * (g * Zr[n, j] + (2.0 * lam) * theta[n, j])


@njit
def fold_raker(Z, y, scores, state, counter, steps):
    """Raker on rows with features ``Z`` (n, N, 2D): every kernel scores and steps, the
    mixture's score is recorded, and the log-weights drop by ``eta_t`` times the losses.
    ``state`` (:class:`Weighted`) and ``scores`` in place; ``counter`` rows seen before."""
    theta, log_w = state
    N = theta.shape[0]
    rows = np.arange(N)
    f = np.empty(N)
    q = np.empty(N)
    losses = np.empty(N)
    for r in range(y.shape[0]):
        eta_t = steps.eta if steps.constant else steps.eta / math.sqrt(counter + r + 1)
        for n in range(N):
            f[n] = np.dot(Z[r, n], theta[n])
        fold_weights_into(log_w, q)
        scores[r] = np.dot(q, f)
        step_theta(theta, Z[r], rows, N, f, y[r], eta_t, steps.lam, losses)
        for n in range(N):
            log_w[n] = log_w[n] - eta_t * losses[n]
        log_normalize_in_place(log_w)


@njit
def graph_draws(log_w, eta_e, U, M, P, A):
    """``omkl.graph_probabilities`` of the normalized weights into ``P`` (J, N) and, into ``A``
    (N, J), the graph: node ``j`` draws ``M`` kernels from ``P[j]`` with the uniforms ``U``."""
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


@njit
def selective_into(log_w, A, eta_e, p_sel):
    """The selective nodes' probabilities into ``p_sel`` (J,): ``(1 - eta_e) u_j / sum u +
    eta_e / J`` with ``u_j`` the weight of node ``j``'s kernels (log domain)."""
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


@njit
def observation_into(A, P, p_sel, M, given_graph, q):
    """``q`` (N,), the probability that each kernel is observed: ``sum_j p_j A(n, j)`` given the
    graph, else ``sum_j p_j [1 - (1 - P[j, n])^M]``."""
    N, J = A.shape
    for n in range(N):
        s = 0.0
        for j in range(J):
            if given_graph:
                s += (1.0 if A[n, j] else 0.0) * p_sel[j]
            else:
                s += p_sel[j] * (1.0 - math.pow(1.0 - P[j, n], float(M)))
        q[n] = s


@njit
def fold_omkl_gf(Z, have, start, y, U, scores, state, graph_state, counter, steps, rule):
    """OMKL-GF (Algorithm 2) on rows ``start..`` of a feature block ``Z`` (n, N, 2D) whose
    pairs ``have`` are computed, with the rows' uniforms ``U``: draw the graph (unless
    frozen) and a selective node, score with its kernels, step them, weigh the losses by the
    observation probabilities, and freeze the graph when the loss falls below the threshold.
    ``state`` (:class:`Weighted`), ``graph_state`` (:class:`Graph`) and ``scores`` in place.
    Returns ``(rows done, -1)``, or ``(r, j)`` when row ``r`` needs kernel ``j``'s features
    (row ``r`` not learned)."""
    theta, log_w = state
    graph, frozen, n_used, sq_error = graph_state
    M = rule.draws
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
        eta_t = steps.eta if steps.constant else steps.eta / math.sqrt(t)
        eta_e = steps.eta_e if steps.constant else steps.eta_e / math.sqrt(t)
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
        step_theta(theta, Z[r], chosen, m, f, y[r], eta_t, steps.lam, losses)
        observation_into(A, P, p_sel, M, frozen[0] and rule.conditional, q)
        for k in range(m):
            n = chosen[k]
            log_w[n] = log_w[n] - (eta_t / rule.b_scale) * losses[k] / q[n]
            n_used[n] += 1
        error = y_hat - y[r]
        sq_error[0] = sq_error[0] + error * error
        if not frozen[0]:
            loss = sq_error[0] / t if rule.freeze_mse else error * error
            copy_matrix_into(graph, A)
            frozen[0] = loss < rule.freeze_below
        log_normalize_in_place(log_w)
        scores[r] = y_hat
    return y.shape[0], -1
