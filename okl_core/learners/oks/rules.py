"""Online kernel selection's rules: OKS, OKS++ and IOKS, each a set of statistics and constants.

A rule (:class:`OKSRule`, :class:`OKSPlusPlusRule`, :class:`IOKSRule`) holds its constants
(tuned from the config: :class:`OKSConstants`, ...), makes and reads its statistics (the
rule's part of a state: :class:`OKSStats`, ...), gives the distributions they define
(``q``, the selection one; ``p``, the sampling one with exploration) and runs its compiled
fold on a storage (``_folds.fold_oks`` ...). The rules' formulas are in the docstring of
:mod:`okl_core.learners.oks`; their arithmetic is in :mod:`okl_core.learners.oks._folds`,
which the distributions here call too, so that a state's ``q`` and ``p`` are the fold's.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Generic, NamedTuple, TypeVar

import numpy as np

from okl_core.learners.compiled import folds
from okl_core.learners.oks.config import (
    ALPHA,
    LIPSCHITZ,
    LOSS_CODES,
    OKS_STEP_SCALE,
    SMOOTHNESS,
    IOKSConfig,
    OKSConfig,
    OKSPlusPlusConfig,
    RFIOKSConfig,
    RFOKSPlusPlusConfig,
)
from okl_core.learners.oks.storage import FeatureRows, SupportRows, SupportStore

__all__ = [
    "OKSStats",
    "OKSPlusPlusStats",
    "IOKSStats",
    "OKSConstants",
    "OKSPlusPlusConstants",
    "IOKSConstants",
    "SelectionRule",
    "OKSRule",
    "OKSPlusPlusRule",
    "IOKSRule",
    "fold_module",
    "tsallis_step",
    "oks_pp_constant",
    "oks_pp_distribution",
]

FOLDS = "okl_core.learners.oks._folds"


def fold_module() -> ModuleType:
    """The compiled folds of this family (:func:`okl_core.learners.compiled.folds`)."""
    return folds(FOLDS)


# -- the rules' statistics: each rule's part of the state ----------------------------------
class OKSStats(NamedTuple):
    """OKS: ``log_w`` (K,) normalised log-weights."""

    log_w: np.ndarray


class OKSPlusPlusStats(NamedTuple):
    """OKS++: ``loss_sum`` (K,) ``L~``, ``sq_loss_sum`` () ``S``, ``delta_constant`` () ``a``
    (shape (1,) in a fold: :meth:`OKSPlusPlusRule.fold_stats`)."""

    loss_sum: np.ndarray
    sq_loss_sum: np.ndarray
    delta_constant: np.ndarray


class IOKSStats(NamedTuple):
    """IOKS: ``q`` (K,), rates ``eta`` (K,), thresholds ``rho`` (K,), ``grad_sq_sum`` (K,)."""

    q: np.ndarray
    eta: np.ndarray
    rho: np.ndarray
    grad_sq_sum: np.ndarray


StatsT = TypeVar("StatsT", OKSStats, OKSPlusPlusStats, IOKSStats)


# -- the rules' constants, as the compiled folds take them ---------------------------------
class OKSConstants(NamedTuple):
    """OKS: the loss's code (:data:`~.config.LOSS_CODES`), ``delta``, ``eta`` and ``lambda``."""

    kind: int
    delta: float
    eta: float
    lam: float


class OKSPlusPlusConstants(NamedTuple):
    """OKS++: the loss's code, whether ``a`` is the released code's ``exp(-y f)``,
    ``sqrt(2 ln K)`` (of ``eta_t``), ``U^(4/3)`` and ``sqrt(4/3) K^(1/6) (G C0)^(1/3)`` (of
    ``lambda_t``) and ``U``."""

    kind: int
    code_constant: bool
    eta_scale: float
    lam_top: float
    lam_bottom: float
    radius: float


class IOKSConstants(NamedTuple):
    """IOKS: the loss's code, ``delta``, ``upsilon``, ``U``, ``l_max``, the largest scaled loss
    (1, or infinity without the cap) and the Tsallis exponent ``alpha``."""

    kind: int
    delta: float
    upsilon: float
    radius: float
    loss_max: float
    loss_ceiling: float
    alpha: float


# -- the selection rules' formulas, callable alone ------------------------------------------
def oks_pp_constant(radius: float, c0: float, g: float, n_kernels: int) -> float:
    """OKS++'s ``a = (G C0)^{1/3} (U K)^{2/3}`` (so ``a^3 = G C0 U^2 K^2``)."""
    return (g * c0) ** (1.0 / 3.0) * (radius * n_kernels) ** (2.0 / 3.0)


def oks_pp_distribution(loss_sum: np.ndarray, sq_loss_sum: float, a: float) -> tuple[np.ndarray, np.ndarray, float]:
    """OKS++'s ``(q, p, delta)`` from its running sums (Theorem 3.1, Algorithm 3 lines 12-13).

    ``eta = sqrt(2 ln K) / sqrt(1 + S)``, ``q ~ exp(-eta L~)``,
    ``delta = a / (2 max{a, 2 C~^{1/3}})`` (``a``: :func:`oks_pp_constant`) with
    ``C~ = sum L~``; ``p = (1 - delta) q + delta / K``, so ``p_i >= delta / K``.
    """
    loss_sum = np.asarray(loss_sum, dtype=np.float64)
    K = len(loss_sum)
    stats = OKSPlusPlusStats(loss_sum, np.asarray([sq_loss_sum], dtype=np.float64), np.asarray([a], dtype=np.float64))
    q, p = np.empty(K), np.empty(K)
    delta = fold_module().oks_pp_probabilities(stats, math.sqrt(2.0 * math.log(K)), np.empty(K), q, p)
    return q, p, float(delta)


def tsallis_step(q: np.ndarray, eta: np.ndarray, c_tilde: np.ndarray, tol: float = 1e-5, max_iter: int = 200) -> tuple[np.ndarray, float]:
    """IOKS's mirror step: ``q'_i = (q_i^{-7/8} + eta_i (c~_i - mu))^{-8/7}`` with ``sum q' = 1``.

    ``mu`` is found by bisection (the paper's interval ``[0, max c~]``, widened if the
    bracket does not hold) until ``|sum q' - 1| <= tol`` (``_folds.tsallis_step``, the step
    IOKS's fold takes).

    Returns
    -------
    q_new : ndarray (K,)
    mu : float
    """
    out = np.empty(len(q))
    as_float = (np.asarray(v, dtype=np.float64) for v in (q, eta, c_tilde))
    mu = fold_module().tsallis_step(*as_float, out, float(tol), int(max_iter), ALPHA)
    return out, float(mu)


# -- rules: draw a kernel, predict with it, update it and the selection statistics -------
class SelectionRule(Generic[StatsT]):
    """A kernel-selection rule: its statistics (a NamedTuple), the distributions they define
    and its compiled folds.

    Parameters
    ----------
    config
        The learner's config (``loss``, ``radius`` and the rule's own fields).
    n_kernels : int
        ``K``.
    """

    stats_class: type[StatsT]

    def __init__(self, config, n_kernels: int):
        self.K = n_kernels
        self.loss = config.loss
        self.kind = LOSS_CODES[config.loss]

    def init(self) -> StatsT:
        """The statistics before any example."""
        raise NotImplementedError

    def stats_of(self, state) -> StatsT:
        """The rule's statistics in ``state`` (the arrays themselves, not copies)."""
        return self.stats_class(*(getattr(state, name) for name in self.stats_class._fields))

    def fold_stats(self, stats: StatsT) -> StatsT:
        """``stats`` as the compiled folds take them (views: the folds write through them)."""
        return stats

    def distribution(self, stats: StatsT) -> tuple[np.ndarray, np.ndarray]:
        """``(q, p)``: the selection distribution and the sampling one (with exploration)."""
        raise NotImplementedError

    def support_fold(self, jit: ModuleType, rows: SupportRows, store: SupportStore, stats: StatsT) -> tuple[int, int]:
        """The rule over rows on support sets (``_folds.fold_oks`` ...), ``stats`` in place:
        returns ``(rows done, -1)`` or where and why it stopped."""
        raise NotImplementedError


class OKSRule(SelectionRule[OKSStats]):
    """OKS (Algorithm 1) with the spec's tuning from the horizon T."""

    stats_class = OKSStats

    def __init__(self, config: OKSConfig, n_kernels: int):
        super().__init__(config, n_kernels)
        K, T = n_kernels, config.horizon
        self.delta = min(1.0, (K / T) ** (1.0 / 3.0))
        scale = config.step_scale if config.step_scale is not None else OKS_STEP_SCALE[config.loss]
        self.lam = scale * math.sqrt(self.delta / (K * T))
        self.eta = math.sqrt(2.0 * (1.0 - self.delta) * math.log(K)) / math.sqrt(K * T)
        self.constants = OKSConstants(self.kind, self.delta, self.eta, self.lam)

    def init(self) -> OKSStats:
        return OKSStats(log_w=np.full(self.K, -math.log(self.K)))

    def distribution(self, stats: OKSStats) -> tuple[np.ndarray, np.ndarray]:
        q, p = np.empty(self.K), np.empty(self.K)
        fold_module().oks_probabilities(stats.log_w, self.delta, q, p)
        return q, p

    def support_fold(self, jit: ModuleType, rows: SupportRows, store: SupportStore, stats: OKSStats) -> tuple[int, int]:
        return jit.fold_oks(rows, store, stats, self.constants)


class OKSPlusPlusRule(SelectionRule[OKSPlusPlusStats]):
    """OKS++ (Theorem 3.1; Algorithm 3 for the random-feature version)."""

    stats_class = OKSPlusPlusStats

    def __init__(self, config: OKSPlusPlusConfig | RFOKSPlusPlusConfig, n_kernels: int):
        super().__init__(config, n_kernels)
        self.c0, self.g = SMOOTHNESS[config.loss]
        K, U = n_kernels, config.radius
        self.radius = U
        self.code_constant = config.tuning == "released_code" and config.loss == "logistic"
        self.constants = OKSPlusPlusConstants(
            self.kind,
            self.code_constant,
            math.sqrt(2.0 * math.log(K)),
            U ** (4.0 / 3.0),
            math.sqrt(4.0 / 3.0) * K ** (1.0 / 6.0) * (self.g * self.c0) ** (1.0 / 3.0),
            U,
        )

    def init(self) -> OKSPlusPlusStats:
        a = oks_pp_constant(self.radius, self.c0, self.g, self.K)
        return OKSPlusPlusStats(loss_sum=np.zeros(self.K), sq_loss_sum=np.asarray(0.0), delta_constant=np.asarray(a))

    def fold_stats(self, stats: OKSPlusPlusStats) -> OKSPlusPlusStats:
        """The scalars as shape (1,) views (written through by the folds)."""
        return OKSPlusPlusStats(stats.loss_sum, stats.sq_loss_sum.reshape(1), stats.delta_constant.reshape(1))

    def distribution(self, stats: OKSPlusPlusStats) -> tuple[np.ndarray, np.ndarray]:
        q, p = np.empty(self.K), np.empty(self.K)
        fold_module().oks_pp_probabilities(self.fold_stats(stats), self.constants.eta_scale, np.empty(self.K), q, p)
        return q, p

    def support_fold(self, jit: ModuleType, rows: SupportRows, store: SupportStore, stats: OKSPlusPlusStats) -> tuple[int, int]:
        return jit.fold_oks_pp(rows, store, self.fold_stats(stats), self.constants)

    def feature_fold(self, jit: ModuleType, block: FeatureRows, stats: OKSPlusPlusStats) -> tuple[int, int]:
        """The rule over a feature block (``_folds.fold_rf_oks_pp``), ``stats`` in place."""
        return jit.fold_rf_oks_pp(block, self.fold_stats(stats), self.constants)


class IOKSRule(SelectionRule[IOKSStats]):
    """IOKS (Algorithm 2; Algorithm 4 for the random-feature version)."""

    stats_class = IOKSStats

    def __init__(self, config: IOKSConfig | RFIOKSConfig, n_kernels: int):
        super().__init__(config, n_kernels)
        K, T, U = n_kernels, config.horizon, config.radius
        self.delta = T**-0.75
        self.upsilon = math.exp(2.0 / (3.0 * math.log(T)))
        self.eta0 = 8.0 * config.loss_max * K ** (3.0 / 8.0) / (U * LIPSCHITZ[config.loss] * math.sqrt(T * math.log(T)))
        self.radius = U
        self.constants = IOKSConstants(
            self.kind, self.delta, self.upsilon, U, float(config.loss_max), config.loss_ceiling, ALPHA
        )

    def init(self) -> IOKSStats:
        K = self.K
        return IOKSStats(q=np.full(K, 1.0 / K), eta=np.full(K, self.eta0), rho=np.full(K, 2.0 * K), grad_sq_sum=np.zeros(K))

    def distribution(self, stats: IOKSStats) -> tuple[np.ndarray, np.ndarray]:
        p = np.empty(self.K)
        fold_module().ioks_probabilities(stats.q, self.delta, p)
        return stats.q, p

    def support_fold(self, jit: ModuleType, rows: SupportRows, store: SupportStore, stats: IOKSStats) -> tuple[int, int]:
        return jit.fold_ioks(rows, store, stats, self.constants)

    def feature_fold(self, jit: ModuleType, block: FeatureRows, stats: IOKSStats) -> tuple[int, int]:
        """The rule over a feature block (``_folds.fold_rf_ioks``), ``stats`` in place."""
        return jit.fold_rf_ioks(block, stats, self.constants)
