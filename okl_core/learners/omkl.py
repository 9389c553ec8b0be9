"""Online multi-kernel regression: OMKL-GF (Ghari, Shen, ICML 2020) and Raker (spec/omkl_gf.md).

Both learners keep, for each kernel ``n`` of the dictionary (:mod:`.multikernel`), a
random-feature regressor ``f_n(x) = theta_n . z_n(x)`` (``z_n``: ``2 D`` seeded Fourier
features ``[cos, sin] / sqrt(D)``, kernel ``n`` seeded by ``kernel_seed(seed, n)``) and a
weight ``w_n > 0`` kept as a log-weight (normalised with log-sum-exp after every step).
The per-kernel loss is ``L_n = (f_n(x) - y)^2 + lam ||theta_n||^2`` (twice the
``square`` loss of :mod:`okl_core.losses` plus the ridge term), its gradient
``2 (f_n - y) z_n + 2 lam theta_n``.

Step sizes: ``eta_t = eta / sqrt(t)`` and ``eta_e,t = eta_e / sqrt(t)`` (``schedule =
'inv_sqrt_t'``, the paper's experiments with ``eta = eta_e = 1``, ``t`` = 1-based example
count) or the constants (``schedule = 'constant'``).

Raker (``raker``)
    Every kernel every step: predict ``sum_n (w_n / sum w) f_n(x)``, then
    ``theta_n -= eta_t grad L_n`` and ``w_n *= exp(-eta_t L_n)`` for all ``n``.
    Cost O(d D N) per example.

OMKL-GF (``omkl_gf``), Algorithms 1 and 2 of the paper, for example ``t``:

1. graph ``G_t`` (N kernel nodes, J selective nodes): for ``j = 1..J``,
   ``p_{t,j}(n) = (1 - eta_e^j) w_n / sum w + eta_e^j / N`` (``eta_e`` to the power
   ``j``); draw ``M`` kernels with replacement from ``p_{t,j}``; ``A(n, j) = 1`` for each;
2. ``u_j = sum_{n: A(n,j)=1} w_n``, ``p_j = (1 - eta_e) u_j / sum u + eta_e / J``;
3. draw ``j_t ~ p``; ``S_t = {n : A(n, j_t) = 1}``;
4. predict ``sum_{n in S_t} (w_n / sum_{m in S_t} w_m) f_n(x)``;
5. ``theta_n -= eta_t grad L_n`` for ``n in S_t`` (not importance weighted);
6. ``q_n = sum_j p_j [1 - (1 - p_{t,j}(n))^M]``, the probability that ``n`` is observed
   (exact for ``J = 1``; for ``J > 1`` the paper's formula takes the ``p_j`` of the graph
   at hand, which depend on the drawn graph, so it approximates the marginal probability);
7. ``w_n *= exp(-(eta_t / 2^b) 1[n in S_t] L_n / q_n)``, ``b = floor(log2 J)``.

Cost O(d D M + J N) per example: only the kernels in ``S_t`` are evaluated.

Graph freezing (the paper's experiments; ``freeze_below > 0``, the paper uses 1e-4): once the
loss falls below ``freeze_below``, ``G_t`` is no longer regenerated (the last one is kept
in the state) while the selective node is still drawn and the weights still updated. Which
loss is read two ways (``freeze_on``): ``'mse'`` (default) the running MSE of the paper's
eq. (24), ``(1/t) sum_{tau <= t} (y_hat - y)^2``, the quantity its tables report;
``'example'`` one example's ``(y_hat - y)^2`` (spec/omkl_gf.md's reading). The per-example
reading fires after a handful of examples (3 to 95 on Friedman #1, ``bench/repro_gaps.py
omkl_freeze``) while the weights are still near uniform, and leaves M = 7 above Raker
(14.8 vs 10.2 x 1e-3), against Table 1; the MSE reading never fires on data whose MSE stays
above the threshold (every row of Tables 1-5) and keeps M = 7, 10, 17 at or below Raker.
The paper does not say how ``q`` is computed then. ``frozen_q = 'conditional'`` (default) uses
the probability that ``n`` is observed given the fixed graph, ``q_n = sum_j p_j A(n, j)``;
``frozen_q = 'marginal'`` keeps formula 6 with the current weights.

Draws: example ``t`` (0-based counter ``n_seen``) uses the words of generator
``(seed, t)`` (:func:`.multikernel.example_uniforms`): word 0 draws the selective node
(unused when ``J = 1``), words ``1 + j M`` to ``(j + 1) M`` (inclusive) the ``M`` kernels
of selective node ``j`` (0-based), by inverse CDF. The words are drawn (and ignored) while
the graph is frozen, so the layout never depends on the state. An update draws all its
examples' words before its fold (:func:`.multikernel.example_uniform_rows`).

Reports: :meth:`~.multikernel.MultiKernelLearner.kernel_weights` (normalised weights),
``kernel_usage`` (examples on which each kernel was evaluated), ``best_kernel``;
``kernel_feature_specs()`` gives each kernel's FeatureSpec. Memory: ``theta`` is
``N x 2D`` float64; the frequencies (``N x d x D`` float32) are regenerated from the seed.

``predict(state, X)`` (not the online protocol) uses all kernels with the normalised
weights, ``sum_n (w_n / sum w) f_n(x)``.

Merging (one-shot parameter averaging): ``theta`` is averaged kernel by kernel with
weights ``n_seen``; the normalised log-weights are averaged with the same weights (a
weighted geometric mean of the kernel weights) and renormalised; usage counts add. An
OMKL-GF merge keeps a frozen graph only when every state froze the same graph; otherwise
the merged model regenerates its graph on the next example.

Mixing (streaming) is the two-state version of the merge with weights ``1 - w`` (local)
and ``w`` (merged): ``theta`` blends, the normalised log-weights blend and are
renormalised (so the kernel weights are a weighted geometric mean), the usage counts and
``n_seen`` stay the shard's own, and an OMKL-GF shard keeps its frozen graph only if the
merged model froze the same graph. Predictions are not linear in the mixed parameters
(the kernel weights multiply the per-kernel predictions).
"""

from __future__ import annotations

import dataclasses
import math
from types import ModuleType
from typing import Any, ClassVar, NamedTuple, Protocol, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from okl_core.derived import scaled_dictionary
from okl_core.learners.base import State, validate_xy, weighted_average
from okl_core.learners.compiled import folds
from okl_core.learners.multikernel import (
    OMKL_DICTIONARY,
    KernelFeatureBank,
    MultiKernelLearner,
    RandomFeatureMultiKernelConfig,
    example_uniform_rows,
    fold_on_demand,
    log_normalize,
    normalized_weights,
)

__all__ = [
    "RakerConfig",
    "OMKLGFConfig",
    "RakerState",
    "OMKLGFState",
    "Raker",
    "OMKLGF",
    "graph_probabilities",
]

MULTIKERNEL_FOLDS = "okl_core.learners._multikernel_folds"
"""The fold module of Raker and OMKL-GF (:func:`okl_core.learners.compiled.folds`)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RakerConfig(RandomFeatureMultiKernelConfig):
    """Parameters of :class:`Raker` (and the shared part of :class:`OMKLGFConfig`).

    Parameters
    ----------
    n_inputs, kernels, seed, n_components, block_size, feature_cache_mb
        See :class:`~okl_core.learners.multikernel.RandomFeatureMultiKernelConfig`;
        defaults: the 17 Gaussians ``2^-8 .. 2^8`` times the median heuristic on the data
        (the paper's bandwidths were chosen for data scaled to [0, 1]; the median makes
        them a unit-free range around the data's own scale; ``kernels=OMKL_DICTIONARY``
        or ``sigma=1`` keeps the paper's) and ``D = 50`` (the paper's).
    eta : float
        Step size scale (> 0), for both ``theta`` and the weights.
    schedule : {'inv_sqrt_t', 'constant'}
        ``eta_t = eta / sqrt(t)`` (the paper's experiments) or ``eta``.
    lam : float
        Ridge coefficient ``lambda`` of the per-kernel loss (>= 0; the paper's 1e-3).
    """

    kernels: str = OMKL_DICTIONARY
    n_components: int = 50
    eta: float = 1.0
    schedule: str = "inv_sqrt_t"
    lam: float = 1e-3
    task = "regression"

    data_defaults: ClassVar[dict] = {"kernels": scaled_dictionary(OMKL_DICTIONARY, "median")}

    def rate(self, value: float, t: int) -> float:
        """``value / sqrt(t)`` or ``value``, by :attr:`schedule` (``t`` 1-based)."""
        return value / math.sqrt(t) if self.schedule == "inv_sqrt_t" else value


@dataclasses.dataclass(frozen=True, kw_only=True)
class OMKLGFConfig(RakerConfig):
    """Parameters of :class:`OMKLGF`: :class:`RakerConfig` plus the graph's.

    Parameters
    ----------
    draws_per_node : int
        ``M``: kernels drawn (with replacement) for each selective node (>= 1).
    selective_nodes : int
        ``J``: selective nodes of the graph (>= 1); ``b = floor(log2 J)``.
    eta_e : float
        Exploration rate in (0, 1], following :attr:`schedule` like ``eta``.
    freeze_below : float
        Stop regenerating the graph once the loss of ``freeze_on`` is below it (0: never; the
        paper's experiments use 1e-4).
    freeze_on : {'mse', 'example'}
        The loss the freeze rule reads: the running MSE (eq. 24, default) or one example's
        squared error (module docstring).
    frozen_q : {'conditional', 'marginal'}
        Observation probability used while the graph is frozen (module docstring).
    """

    draws_per_node: int = 7
    selective_nodes: int = 1
    eta_e: float = 1.0
    freeze_below: float = 0.0
    freeze_on: str = "mse"
    frozen_q: str = "conditional"


class RakerState(NamedTuple):
    """Raker state: ``theta`` (N, 2D) float64, normalised ``log_w`` (N,), ``n_seen``."""

    theta: np.ndarray
    log_w: np.ndarray
    n_seen: np.ndarray


class OMKLGFState(NamedTuple):
    """OMKL-GF state.

    Attributes
    ----------
    theta : (N, 2D) float64, per-kernel coefficients
    log_w : (N,) float64, log-weights normalised so that ``sum exp(log_w) = 1``
    graph : (N, J) bool, the last generated adjacency ``A`` (reused while frozen)
    frozen : () bool, whether the graph is frozen
    n_used : (N,) int64, examples on which each kernel was in ``S_t``
    sq_error : () float64, sum of the online squared errors (the ``freeze_on='mse'`` rule)
    n_seen : () int64
    """

    theta: np.ndarray
    log_w: np.ndarray
    graph: np.ndarray
    frozen: np.ndarray
    n_used: np.ndarray
    sq_error: np.ndarray
    n_seen: np.ndarray


# -- the graph's probabilities (Algorithm 1), as a pure function (tested alone) -------------
# The fold computes them itself (_multikernel_folds.graph_draws); OMKLGF._fold uses this one to
# guess which kernels a block's rows will draw, and powers come from the C library (math.pow)
# and sums in order (np.cumsum), as the fold's.
def graph_probabilities(weights: np.ndarray, eta_e: float, n_selective: int) -> np.ndarray:
    """``p_{t,j}(n) = (1 - eta_e^j) w_n / sum w + eta_e^j / N`` for ``j = 1..J``: ``(J, N)``."""
    w = np.asarray(weights, dtype=np.float64)
    w = w / np.cumsum(w)[-1]
    explore = np.array([math.pow(eta_e, j) for j in range(1, n_selective + 1)])[:, None]
    return (1.0 - explore) * w[None, :] + explore / len(w)


class _WeightedKernelsState(State, Protocol):
    """What Raker's and OMKL-GF's states share: ``theta`` (N, 2D) and ``log_w`` (N,)."""

    @property
    def theta(self) -> np.ndarray: ...

    @property
    def log_w(self) -> np.ndarray: ...


WeightedStateT = TypeVar("WeightedStateT", bound=_WeightedKernelsState)


class _RandomFeatureMultiKernel(MultiKernelLearner[WeightedStateT]):
    """Shared parts: the feature bank, the per-kernel loss, mixture prediction, merging."""

    runtime_fields = ("feature_cache_mb",)
    averaged_fields = ("theta",)
    mixable = True

    def __init__(self, config):
        super().__init__(config)
        self.bank = KernelFeatureBank(config)

    def kernel_feature_specs(self):
        """Each kernel's :class:`~okl_core.features.FeatureSpec` (kernel ``n`` seeded by ``kernel_seed(seed, n)``)."""
        return self.bank.specs

    def kernel_distribution(self, state):
        return normalized_weights(state.log_w)

    def _steps(self, jit: ModuleType) -> Any:
        """The folds' ``Steps`` bundle of this config (``eta_e`` 0 where the learner has none)."""
        cfg = self.config
        return jit.Steps(float(cfg.eta), float(getattr(cfg, "eta_e", 0.0)), cfg.schedule == "constant", float(cfg.lam))

    def predict(self, state: WeightedStateT, X: ArrayLike) -> np.ndarray:
        """Mixture of all kernels with the normalised weights ``sum_n (w_n / sum w) f_n(X)``."""
        X, _ = validate_xy(self, X)
        weights = normalized_weights(state.log_w)
        out = np.zeros(len(X))
        for n in range(self.n_kernels):
            if weights[n] > 0 and np.any(state.theta[n]):
                out += weights[n] * (self.bank.transform(n, X) @ state.theta[n])
        return out

    def merge_special(self, states, weights: np.ndarray, base) -> dict:
        """Log-weights: weighted mean of the normalised log-weights, renormalised."""
        return {"log_w": log_normalize(weighted_average([log_normalize(s.log_w) for s in states], weights))}

    def mix_special(self, local, merged, weight: float) -> dict:
        """Log-weights: ``(1 - weight)`` local plus ``weight`` merged normalised log-weights, renormalised."""
        return {"log_w": log_normalize((1.0 - weight) * log_normalize(local.log_w) + weight * log_normalize(merged.log_w))}


class Raker(_RandomFeatureMultiKernel[RakerState]):
    """Raker: random-feature online multi-kernel regression with all kernels (``raker``).

    See the module docstring for the algorithm, :meth:`kernel_weights` for the weights.
    Merge: per-kernel ``theta`` averaged by ``n_seen``, weighted mean of normalised
    log-weights.
    """

    name = "raker"
    config_class = RakerConfig
    state_class = RakerState
    conformance_params = {
        "kernels": "gaussian:0.5,gaussian:1,gaussian:4",
        "n_components": 32,
        "eta": 0.3,
        "schedule": "constant",
    }

    def init(self) -> RakerState:
        N, D = self.n_kernels, self.config.n_components
        return RakerState(
            theta=np.zeros((N, 2 * D)),
            log_w=np.full(N, -math.log(N)),
            n_seen=np.asarray(0, dtype=np.int64),
        )

    def kernel_counts(self, state):
        return np.full(self.n_kernels, int(state.n_seen), dtype=np.int64)

    def update(self, state: RakerState, X: ArrayLike, y: ArrayLike) -> tuple[RakerState, np.ndarray]:
        X, y = validate_xy(self, X, y)
        theta, log_w, n_seen = state.theta.copy(), state.log_w.copy(), int(state.n_seen)
        scores = np.empty(len(y))
        jit = folds(MULTIKERNEL_FOLDS)
        state_arrays, steps = jit.Weighted(theta, log_w), self._steps(jit)
        omega = self.bank.stack() if len(y) else np.empty((0, 0, 0), np.float32)  # no rows: no frequencies
        for start, Z in self.bank.row_blocks(omega, X):  # (n, N, 2D): all kernels every step
            part = slice(start, start + len(Z))
            jit.fold_raker(Z, y[part], scores[part], state_arrays, n_seen + start, steps)
        new = RakerState(theta=theta, log_w=log_w, n_seen=np.asarray(n_seen + len(y), dtype=np.int64))
        return new, scores

class OMKLGF(_RandomFeatureMultiKernel[OMKLGFState]):
    """OMKL-GF: online multi-kernel regression with graph-structured feedback (``omkl_gf``).

    See the module docstring for the algorithm, the draws, freezing and merging;
    :meth:`kernel_weights` gives the normalised weights and :meth:`kernel_usage` how often
    each kernel was in the evaluated subset ``S_t``.
    """

    name = "omkl_gf"
    config_class = OMKLGFConfig
    state_class = OMKLGFState
    counted_fields = ("n_used", "n_seen")
    summed_fields = ("sq_error",)  # squared errors add like the counters: the base's once, each shard's own since
    conformance_params = {**Raker.conformance_params, "eta_e": 0.2, "draws_per_node": 2}

    def init(self) -> OMKLGFState:
        N, D, J = self.n_kernels, self.config.n_components, self.config.selective_nodes
        return OMKLGFState(
            theta=np.zeros((N, 2 * D)),
            log_w=np.full(N, -math.log(N)),
            graph=np.zeros((N, J), dtype=bool),
            frozen=np.asarray(False),
            n_used=np.zeros(N, dtype=np.int64),
            sq_error=np.asarray(0.0),
            n_seen=np.asarray(0, dtype=np.int64),
        )

    def kernel_counts(self, state):
        return state.n_used

    def update(self, state: OMKLGFState, X: ArrayLike, y: ArrayLike) -> tuple[OMKLGFState, np.ndarray]:
        X, y = validate_xy(self, X, y)
        # The update's working copy; _step replaces its fields example by example.
        work = OMKLGFState(
            theta=state.theta.copy(),
            log_w=state.log_w.copy(),
            graph=state.graph.copy(),
            frozen=np.asarray(bool(state.frozen)),
            n_used=state.n_used.copy(),
            sq_error=np.asarray(float(state.sq_error)),
            n_seen=state.n_seen,
        )
        n_seen = int(state.n_seen)
        cfg = self.config
        uniforms = example_uniform_rows(cfg.seed, n_seen, n_seen + len(y), 1 + cfg.selective_nodes * cfg.draws_per_node)
        scores = np.empty(len(y))
        if len(y):
            work = self._fold(folds(MULTIKERNEL_FOLDS), work, X, y, uniforms, scores)
        return work._replace(n_seen=np.asarray(n_seen + len(y), dtype=np.int64)), scores

    @property
    def _b_scale(self) -> float:
        """``2^b``, ``b = floor(log2 J)``."""
        return float(2 ** int(math.floor(math.log2(self.config.selective_nodes))))

    def _fold(self, jit: ModuleType, work: OMKLGFState, X: np.ndarray, y: np.ndarray, uniforms: np.ndarray, scores: np.ndarray) -> OMKLGFState:
        """The rows in compiled code (``_multikernel_folds.fold_omkl_gf``), features computed for
        the kernels the rows draw (:func:`~okl_core.learners.multikernel.fold_on_demand`)."""
        cfg, n_seen = self.config, int(work.n_seen)
        frozen, sq_error = np.array([bool(work.frozen)]), np.array([float(work.sq_error)])
        J, M = cfg.selective_nodes, cfg.draws_per_node
        state_arrays, steps = jit.Weighted(work.theta, work.log_w), self._steps(jit)
        graph_state = jit.Graph(work.graph, frozen, work.n_used, sq_error)
        rule = jit.GraphRule(int(M), self._b_scale, float(cfg.freeze_below), cfg.freeze_on == "mse", cfg.frozen_q == "conditional")

        def guess(start, stop):
            # Every node's draws with the weights at the block's start (a superset for J > 1).
            need = np.zeros((stop - start, self.n_kernels), dtype=bool)
            if frozen[0]:
                need[:, work.graph.any(axis=1)] = True
                return need
            P = graph_probabilities(np.exp(work.log_w), cfg.rate(cfg.eta_e, n_seen + start + 1), J)
            for j in range(J):
                cdf = np.cumsum(P[j])
                picks = np.searchsorted(cdf, uniforms[start:stop, 1 + j * M : 1 + (j + 1) * M] * cdf[-1], side="right")
                need[np.arange(stop - start)[:, None], np.minimum(picks, self.n_kernels - 1)] = True
            return need

        def run(start, Z, have, r):
            part = slice(start, start + len(Z))
            return jit.fold_omkl_gf(Z, have, r, y[part], uniforms[part], scores[part], state_arrays, graph_state, n_seen + start, steps, rule)

        fold_on_demand(self.bank, self.bank.stack(), X, guess, run)
        return work._replace(frozen=np.asarray(bool(frozen[0])), sq_error=np.asarray(float(sq_error[0])))

    def _graph_fields(self, states) -> dict:
        """The first state's graph, frozen only when every state froze that same graph."""
        first = states[0]
        keep = all(bool(s.frozen) for s in states) and all(np.array_equal(s.graph, first.graph) for s in states)
        return {"graph": first.graph.copy(), "frozen": np.asarray(keep)}

    def merge_special(self, states, weights, base) -> dict:
        return {**super().merge_special(states, weights, base), **self._graph_fields(states)}

    def mix_special(self, local, merged, weight) -> dict:
        return {**super().mix_special(local, merged, weight), **self._graph_fields((local, merged))}
