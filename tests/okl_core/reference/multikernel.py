"""The numpy per-row folds of Raker and OMKL-GF (spec/omkl_gf.md): the reference that
``okl_core.learners._multikernel_folds`` is tested against, byte for byte.

The functions have the fold module's names and arguments, so
:func:`tests.okl_core.reference.folds.use_reference_folds` can run a learner on them. They
take exp, log and pow from the C library and sum sequentially (``np.cumsum``), as the
compiled folds do (``okl_core.learners.multikernel``: ``fold_weights``,
``fold_log_normalize``, ``row_dots``); the graph's pieces are the paper's Algorithm 1 and 2
written with whole arrays.
"""

from __future__ import annotations

import math

import numpy as np

from okl_core.learners._multikernel_folds import Graph, GraphRule, Steps, Weighted  # noqa: F401  (the bundles the learners build)
from okl_core.learners.multikernel import draw_index, fold_log_normalize, fold_weights, row_dots
from okl_core.learners.omkl import graph_probabilities
from okl_core.losses import LOSSES

_SQUARE = LOSSES["square"]  # 0.5 (f - y)^2: the papers' (f - y)^2 is twice it


def draw_graph(probabilities: np.ndarray, uniforms: np.ndarray, n_draws: int) -> np.ndarray:
    """Adjacency ``A`` (N, J) bool: selective node ``j`` draws ``n_draws`` kernels from
    row ``j`` of ``probabilities`` with ``uniforms[j M:(j + 1) M]`` (inverse CDF)."""
    n_selective, n_kernels = probabilities.shape
    A = np.zeros((n_kernels, n_selective), dtype=bool)
    for j in range(n_selective):
        cdf = np.cumsum(probabilities[j])
        picks = np.searchsorted(cdf, uniforms[j * n_draws : (j + 1) * n_draws] * cdf[-1], side="right")
        A[np.minimum(picks, n_kernels - 1), j] = True
    return A


def selective_probabilities(log_w: np.ndarray, A: np.ndarray, eta_e: float) -> np.ndarray:
    """``p_j = (1 - eta_e) u_j / sum u + eta_e / J`` with ``u_j = sum_{A(n,j)=1} w_n`` (log domain)."""
    masked = np.where(A, log_w[:, None], -np.inf)  # (N, J)
    top = masked.max(axis=0)
    e = np.fromiter(map(math.exp, (masked - top).ravel().tolist()), np.float64, masked.size).reshape(masked.shape)
    log_u = top + np.fromiter(map(math.log, np.cumsum(e, axis=0)[-1].tolist()), np.float64, A.shape[1])
    return (1.0 - eta_e) * fold_weights(log_u) + eta_e / A.shape[1]


def observation_probabilities(probabilities: np.ndarray, p_selective: np.ndarray, n_draws: int) -> np.ndarray:
    """``q_n = sum_j p_j [1 - (1 - p_{t,j}(n))^M]``: probability that kernel ``n`` is in ``S_t``."""
    miss = 1.0 - probabilities
    powers = np.fromiter((math.pow(v, n_draws) for v in miss.ravel().tolist()), np.float64, miss.size)
    return np.cumsum(p_selective[:, None] * (1.0 - powers.reshape(miss.shape)), axis=0)[-1]


def conditional_probabilities(A: np.ndarray, p_selective: np.ndarray) -> np.ndarray:
    """``q_n = sum_j p_j A(n, j)``: the probability that ``n`` is observed given the graph."""
    return np.cumsum(A * p_selective[None, :], axis=1)[:, -1]


def step_theta(theta: np.ndarray, Z: np.ndarray, f: np.ndarray, y: float, eta_t: float, lam: float) -> np.ndarray:
    """In place, for the kernels of the rows of ``theta``: ``theta_n -= eta_t grad L_n``;
    returns the losses ``L_n`` before the step."""
    losses = 2.0 * _SQUARE.value(f, y) + lam * row_dots(theta, theta)
    grad = (2.0 * _SQUARE.grad(f, y))[:, None] * Z + (2.0 * lam) * theta
    theta -= eta_t * grad
    return losses


def _rate(value: float, t: int, constant: bool) -> float:
    """``value``, or ``value / sqrt(t)`` unless ``constant``."""
    return value if constant else value / math.sqrt(t)


# -- the fold module's functions ---------------------------------------------------------
def fold_raker(Z, y, scores, state, counter, steps):
    """``_multikernel_folds.fold_raker``: every kernel scores and steps, the log-weights follow the losses."""
    theta, log_w = state
    for r in range(len(y)):
        eta_t = _rate(steps.eta, counter + r + 1, steps.constant)
        f = row_dots(Z[r], theta)
        scores[r] = fold_weights(log_w) @ f
        losses = step_theta(theta, Z[r], f, y[r], eta_t, steps.lam)
        log_w[:] = fold_log_normalize(log_w - eta_t * losses)


def fold_omkl_gf(Z, have, start, y, U, scores, state, graph_state, counter, steps, rule):
    """``_multikernel_folds.fold_omkl_gf``: Algorithm 2 per row; ``(r, j)`` when row ``r`` lacks kernel ``j``'s features."""
    theta, log_w = state
    graph, frozen, n_used, sq_error = graph_state
    J = graph.shape[1]
    for r in range(start, len(y)):
        t = counter + r + 1
        eta_t, eta_e = _rate(steps.eta, t, steps.constant), _rate(steps.eta_e, t, steps.constant)
        # Algorithm 2 steps 1-3: the graph (or the frozen one), a selective node, its kernels.
        P = graph_probabilities(fold_weights(log_w), eta_e, J)
        A = graph.copy() if frozen[0] else draw_graph(P, U[r, 1:], rule.draws)
        p_sel = selective_probabilities(log_w, A, eta_e) if J > 1 else np.ones(1)
        chosen = np.flatnonzero(A[:, draw_index(p_sel, U[r, 0]) if J > 1 else 0])
        missing = chosen[~have[r, chosen]]
        if len(missing):
            return r, int(missing[0])
        # Steps 4-7: predict with the chosen kernels, step them, weigh their losses.
        sub = theta[chosen]
        f = row_dots(Z[r, chosen], sub)
        y_hat = float(fold_weights(log_w[chosen]) @ f)
        losses = step_theta(sub, Z[r, chosen], f, y[r], eta_t, steps.lam)
        theta[chosen] = sub
        if frozen[0] and rule.conditional:
            q = conditional_probabilities(A, p_sel)
        else:
            q = observation_probabilities(P, p_sel, rule.draws)
        log_w[chosen] -= (eta_t / rule.b_scale) * losses / q[chosen]
        n_used[chosen] += 1
        error = y_hat - y[r]
        sq_error[0] = float(sq_error[0]) + error * error
        if not frozen[0]:
            loss = sq_error[0] / t if rule.freeze_mse else error * error
            graph[:] = A
            frozen[0] = loss < rule.freeze_below
        log_w[:] = fold_log_normalize(log_w)
        scores[r] = y_hat
    return len(y), -1
