"""Nystrom Online Gradient Descent (Lu, Hoi et al., JMLR 2016; spec/fogd_nogd.md).

Two phases, predict-score-update per example:

1. **Budgeted kernel OGD.** ``f(x) = sum_i alpha_i k(x_i, x)`` over the landmarks ``S``.
   While ``|S| < B`` an update-triggering example is appended with the rule's coefficient
   (the rules of :mod:`okl_core.learners.kernel_ogd`: hinge ``eta y``; multiclass ``+eta``
   at ``y`` and ``-eta`` at the best wrong class; regression ``eta (y - f)`` when the
   ``eps`` threshold fires, absolute or squared as in FOGD-R). The landmarks are the first
   ``B`` update-triggering examples.
2. **Nystrom transition.** ``K`` = kernel matrix of ``S`` (B x B); top-``k`` eigenpairs
   ``(V_k, D_k)``; eigenpairs with eigenvalue ``<= eig_rtol * lambda_max`` (or ``<= 0``) are
   dropped (their rows stay zero). ``M = D_k^{-1/2} V_k^T`` (k x B) and
   ``w = D_k^{1/2} V_k^T alpha`` -- the pseudo-inverse of the paper's ``M^{-1}``, so that
   ``w.z(x) = alpha^T V_k V_k^T k_x`` (exactly the kernel model when ``k = B`` and ``K`` is
   non-singular).
3. **Linear phase.** ``z(x) = M k_x`` with ``k_x = (k(x, x_i))_i``; the same rules as
   FOGD on ``z``; landmarks frozen.

Switch timing (``switch``): ``'immediate'`` (default, the paper's text) transitions as soon
as the ``B``-th landmark is added; ``'next_update'`` (the authors' code) keeps predicting
with the full kernel expansion until the next update-triggering example, transitions
then, and uses that example (with the coefficient computed from its kernel prediction)
for the first linear update.

State: fixed-shape arrays whatever the phase -- ``landmarks`` (B x d), ``alpha`` (B or
B x C), ``projection`` (k x B), ``w`` (k or k x C), counts and a ``phase`` flag -- so a model
file has the same layout at every point of the stream.

Merge: not mergeable (:class:`~okl_core.learners.base.NotMergeableError`): every shard
picks its own landmarks, so the linear models live in different feature spaces.

Both phases' per-row folds are compiled (:mod:`okl_core.learners.compiled`): the kernel
phase scores each row by the exact kernel row against the landmarks
(``_expansion_folds.fold_expansion``; MNIST digits, budget 2,000: 185 us per row in a numpy
loop, 12 compiled), the linear phase as FOGD (:func:`~okl_core.learners.rules.fold_linear`);
the transition (an eigendecomposition) stays numpy's.

Defaults are the paper's: sigma = 8, B = 100, k = 0.2 B = 20; eta from the authors' code
(binary 0.2, multiclass 0.5, regression 0.1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from okl_core.learners.base import Learner, NotMergeableError, validate_xy
from okl_core.kernels import Kernel
from okl_core.learners.kernel_ogd import (
    KernelConfig,
    KernelHingeConfig,
    KernelMulticlassConfig,
    KernelRegressionConfig,
    EXPANSION_FOLDS,
    fold_deferring,
    run_expansion,
)
from okl_core.learners.compiled import folds
from okl_core.learners.rules import (
    BinaryHingeRule,
    MulticlassHingeRule,
    RegressionRule,
    Rule,
    fold_linear,
    output_shape,
)

__all__ = ["BudgetFields", "NOGDConfig", "MNOGDConfig", "NOGDRConfig", "NOGDState", "NOGD", "MNOGD", "NOGDRegressor", "nystrom_transition"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class BudgetFields(KernelConfig):
    """NOGD's own parameters, mixed into the kernel OGD configs.

    Parameters
    ----------
    budget : int
        Number of landmarks ``B``.
    rank : int
        Eigenpairs kept ``k`` (``1 <= k <= B``).
    switch : {'immediate', 'next_update'}
        When the transition happens (see the module docstring).
    eig_rtol : float
        Eigenpairs with ``lambda <= eig_rtol * lambda_max`` are dropped (in ``[0, 1)``).
    """

    budget: int = 100
    rank: int = 20
    switch: str = "immediate"
    eig_rtol: float = 1e-10


@dataclasses.dataclass(frozen=True, kw_only=True)
class NOGDConfig(BudgetFields, KernelHingeConfig):
    """Binary NOGD: kernel, sigma, ``eta`` (0.2) and :class:`BudgetFields` (B = 100, k = 20)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MNOGDConfig(BudgetFields, KernelMulticlassConfig):
    """Multiclass NOGD: adds ``n_classes``; ``eta`` defaults to the code's 0.5."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class NOGDRConfig(BudgetFields, KernelRegressionConfig):
    """NOGD regression: ``eta`` 0.1, ``eps`` and ``threshold`` as FOGD-R; B = 30, k = 6."""

    budget: int = 30
    rank: int = 6


class NOGDState(NamedTuple):
    """NOGD state (fixed shapes in both phases).

    Attributes
    ----------
    landmarks : (B, d) float32, the first ``n_landmarks`` rows are used
    alpha : (B,) or (B, C) float64, kernel-phase coefficients
    n_landmarks : () int64
    projection : (k, B) float64, ``M`` (zero before the transition and in dropped rows)
    w : (k,) or (k, C) float64, linear-phase weights
    phase : () int64, 0 = kernel phase, 1 = linear phase
    n_seen : () int64
    """

    landmarks: np.ndarray
    alpha: np.ndarray
    n_landmarks: np.ndarray
    projection: np.ndarray
    w: np.ndarray
    phase: np.ndarray
    n_seen: np.ndarray


def nystrom_transition(K: np.ndarray, alpha: np.ndarray, rank: int, eig_rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """Projection ``M`` (rank x B) and initial weights ``w`` from the landmark kernel matrix.

    Parameters
    ----------
    K : (B, B) kernel matrix of the landmarks.
    alpha : (B,) or (B, C) kernel-expansion coefficients.
    rank : number of leading eigenpairs ``k``.
    eig_rtol : eigenpairs with ``lambda <= eig_rtol * lambda_max`` (or ``<= 0``) are dropped.

    Returns
    -------
    projection : (rank, B) ``D_k^{-1/2} V_k^T`` with zero rows for dropped pairs.
    w : (rank,) or (rank, C) ``D_k^{1/2} V_k^T alpha`` with zero rows for dropped pairs.
    """
    K = 0.5 * (K + K.T)  # exact symmetry for eigh
    values, vectors = np.linalg.eigh(K)
    values, vectors = values[::-1][:rank], vectors[:, ::-1][:, :rank]
    keep = values > max(eig_rtol * values[0], 0.0)
    projection = np.zeros((rank, K.shape[0]))
    projection[keep] = (vectors[:, keep] / np.sqrt(values[keep])).T
    w = np.zeros((rank,) + alpha.shape[1:])
    w[keep] = np.sqrt(values[keep]).reshape((-1,) + (1,) * (alpha.ndim - 1)) * (vectors[:, keep].T @ alpha)
    return projection, w


class _NOGDBase(Learner[NOGDState]):
    """Both phases of NOGD over a rule from :mod:`okl_core.learners.kernel_ogd`."""

    state_class = NOGDState
    merge_semantics = "none"
    mix_refusal = "each shard chooses its own landmarks, so states live in different Nystrom feature spaces and cannot be merged or mixed"
    rule_class: ClassVar[type[Rule]]

    def __init__(self, config):
        super().__init__(config)
        self.kernel = Kernel.of(config)
        self.rule = self.rule_class(config)

    def init(self) -> NOGDState:
        cfg = self.config
        return NOGDState(
            landmarks=np.zeros((cfg.budget, cfg.n_inputs), dtype=np.float32),
            alpha=np.zeros(output_shape(self.rule, cfg.budget)),
            n_landmarks=np.asarray(0, dtype=np.int64),
            projection=np.zeros((cfg.rank, cfg.budget)),
            w=np.zeros(output_shape(self.rule, cfg.rank)),
            phase=np.asarray(0, dtype=np.int64),
            n_seen=np.asarray(0, dtype=np.int64),
        )

    def predict(self, state: NOGDState, X: ArrayLike) -> np.ndarray:
        X, _ = validate_xy(self, X)
        if int(state.phase) == 1:
            return self.kernel.gram(X, state.landmarks) @ state.projection.T @ state.w
        n = int(state.n_landmarks)
        return self.kernel.gram(X, state.landmarks[:n]) @ state.alpha[:n]

    def _transition(self, landmarks, alpha):
        K = self.kernel.gram(landmarks, landmarks)
        return nystrom_transition(K, alpha, self.config.rank, self.config.eig_rtol)

    def update(self, state: NOGDState, X: ArrayLike, y: ArrayLike) -> tuple[NOGDState, np.ndarray]:
        X, y = validate_xy(self, X, y)
        landmarks, alpha = state.landmarks.copy(), state.alpha.copy()
        projection, w = state.projection.copy(), state.w.copy()
        n_l, phase = int(state.n_landmarks), int(state.phase)
        scores = np.zeros(output_shape(self.rule, len(y)))
        start = 0
        if phase == 0:
            expansion = _BudgetedExpansion(self, X, landmarks, alpha, n_l)
            start = expansion.learn(y, scores)
            n_l = expansion.n
            if expansion.linear is not None:
                (projection, w), phase = expansion.linear, 1
        if start < len(y):  # the linear phase: the FOGD-style fold on z = M k_x
            Z = self.kernel.gram(X[start:], landmarks) @ projection.T
            fold_linear(self.rule, Z, w, y[start:], scores[start:])
        new_state = NOGDState(
            landmarks=landmarks,
            alpha=alpha,
            n_landmarks=np.asarray(n_l, dtype=np.int64),
            projection=projection,
            w=w,
            phase=np.asarray(phase, dtype=np.int64),
            n_seen=np.asarray(int(state.n_seen) + len(y), dtype=np.int64),
        )
        return new_state, scores

    def merge(self, states: Sequence[NOGDState], weights: ArrayLike | None = None, base: NOGDState | None = None) -> NOGDState:
        raise NotMergeableError(
            f"{self.name} states cannot be merged: each shard chooses its own landmarks, so "
            "their Nystrom feature spaces differ (train with one shard, or use fogd)"
        )


class _BudgetedExpansion:
    """NOGD's kernel phase learning a batch (arrays updated in place).

    Scores against the first ``n`` landmarks; an update appends the row while the budget
    has room. The fold stops at the transition: when the ``B``-th landmark is added
    (``'immediate'``), or at the next update once the budget is full (``'next_update'``,
    which learns that row in the new linear model). ``linear`` is then ``(projection, w)``.

    The landmarks are also kept as float64 columns with their squared norms (``x . x``,
    BLAS ddot), which the compiled fold (``_expansion_folds.fold_expansion``) scores rows
    against; the transition, which it leaves to :meth:`add`, is numpy's.
    """

    def __init__(self, learner: _NOGDBase, X: np.ndarray, landmarks: np.ndarray, alpha: np.ndarray, n: int):
        self.learner, self.config = learner, learner.config
        self.X, self.landmarks, self.alpha, self.n = X, landmarks, alpha, n
        self.linear: tuple[np.ndarray, np.ndarray] | None = None
        rows = landmarks.astype(np.float64)
        self.columns = np.ascontiguousarray(rows.T)
        self.sq_norms = np.zeros(len(rows))
        for j in range(n):
            self.sq_norms[j] = rows[j] @ rows[j]  # as the fold computes it, so batch splits agree

    def learn(self, y: np.ndarray, scores: np.ndarray) -> int:
        """Learn rows in order in compiled code until the transition, with the update that
        fills the budget (``'immediate'``) or comes after it (``'next_update'``) left to
        :meth:`add`. Returns the row after the last one learned here."""
        jit = folds(EXPANSION_FOLDS)
        budget = self.config.budget
        defer_at = budget - 1 if self.config.switch == "immediate" else budget
        rows = jit.Rows(self.X, scores, False, y, scores)
        expansion = jit.Expansion(self.columns, self.sq_norms, self.alpha, self.landmarks)

        def run(i: int) -> int:
            stop, self.n = run_expansion(jit, self.learner.rule, self.learner.kernel, rows, expansion, self.n, defer_at, i)
            return stop

        return fold_deferring(run, self.add, self.learner.rule, y, scores, 0)

    def add(self, i: int, coef) -> bool:
        """Learn row ``i`` with ``coef``: append it while the budget has room, and make the
        transition when the budget fills (``'immediate'``, True) or is full (``'next_update'``:
        learn the row in the new linear model, True)."""
        if self.n < self.config.budget:
            x = self.X[i].astype(np.float64)
            self.landmarks[self.n], self.alpha[self.n] = self.X[i], coef
            self.columns[:, self.n], self.sq_norms[self.n] = x, x @ x
            self.n += 1
            if self.n == self.config.budget and self.config.switch == "immediate":
                self.linear = self.learner._transition(self.landmarks, self.alpha)
                return True
            return False
        # 'next_update': transition, then learn this example linearly.
        projection, w = self.linear = self.learner._transition(self.landmarks, self.alpha)
        z = projection @ self.learner.kernel.gram(self.X[i : i + 1], self.landmarks)[0]
        w += np.multiply.outer(z, coef)
        return True


class NOGD(_NOGDBase):
    """Binary NOGD with the hinge loss (registry name ``nogd``)."""

    name = "nogd"
    config_class = NOGDConfig
    rule_class = BinaryHingeRule
    conformance_params = {"sigma": 1.0, "budget": 30, "rank": 15, "eta": 0.5}


class MNOGD(_NOGDBase):
    """Multiclass NOGD (registry name ``mnogd``): ``alpha`` (B, C), ``w`` (k, C)."""

    name = "mnogd"
    config_class = MNOGDConfig
    rule_class = MulticlassHingeRule
    conformance_params = {"sigma": 1.0, "budget": 30, "rank": 15, "eta": 0.5, "n_classes": 3}


class NOGDRegressor(_NOGDBase):
    """NOGD regression with FOGD-R's eps threshold (registry name ``nogd_r``)."""

    name = "nogd_r"
    config_class = NOGDRConfig
    rule_class = RegressionRule
    conformance_params = {"sigma": 1.0, "budget": 30, "rank": 15, "eta": 0.3, "eps": 0.01}
