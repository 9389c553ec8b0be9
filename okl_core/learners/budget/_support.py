"""What every budget learner shares: the configs' common fields, the support set's storage and
state, and the learner base that runs a batch through its compiled fold.

A budget learner (one module each: :mod:`.rbp`, :mod:`.forgetron`, :mod:`.projectron`,
:mod:`.bpa_s`, :mod:`.bogd`, :mod:`.norma`) declares its config, its state (when it keeps
more than :class:`BudgetState`) and :meth:`BudgetLearner._fold`, which calls its fold of
:mod:`okl_core.learners.budget._folds` on the working arrays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from types import ModuleType
from typing import Any, ClassVar, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from okl_core.kernels import Kernel
from okl_core.learners.base import CheckedConfig, Learner, NotMergeableError, validate_xy
from okl_core.learners.compiled import folds
from okl_core.learners.kernel_ogd import KernelConfig
from okl_core.learners.rules import PerceptronRule, RegressionRule, RuleCode
from okl_core.random import row_uniforms

__all__ = ["SupportBudgetConfig", "SeededConfig", "ClassesConfig", "BudgetState", "SupportArrays", "BudgetSet", "squared_norms"]
# BudgetLearner, SeededLearner and fold_module are the algorithm modules' (not re-exported by the package)

FOLDS = "okl_core.learners.budget._folds"


# -- configs --------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class SupportBudgetConfig(KernelConfig):
    """Kernel parameters and the budget ``B`` (most support vectors held; default 100, the paper's)."""

    budget: int = 100


@dataclasses.dataclass(frozen=True, kw_only=True)
class SeededConfig(SupportBudgetConfig):
    """A budget learner that removes at random: ``seed`` keys the draws (with the example index)."""

    seed: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassesConfig(CheckedConfig):
    """``n_classes`` (>= 2) of a multiclass budget learner (labels 0..C-1)."""

    n_classes: int
    task = "multiclass"


# -- state and storage ----------------------------------------------------------------------
class BudgetState(NamedTuple):
    """A budgeted support set (fixed shapes: ``B`` slots, the first ``n_support`` in use).

    Attributes
    ----------
    support : (B, d) float32, the support vectors
    alpha : (B,) float64, or (B, C) for multiclass, their coefficients (0 in unused slots)
    stamp : (B,) int64, index in the stream of the example each vector came from (-1 unused)
    n_support : () int64, slots in use
    n_seen : () int64, examples learned
    """

    support: np.ndarray
    alpha: np.ndarray
    stamp: np.ndarray
    n_support: np.ndarray
    n_seen: np.ndarray


_BASE_FIELDS = BudgetState._fields


def squared_norms(rows: np.ndarray) -> np.ndarray:
    """``||r||^2`` of C-ordered float64 rows, summed in coordinate order (``cumsum``), as the
    folds do when they store a vector (``_folds.budget_put``): a vector stored during an update
    and the same vector read back from a state get the same bits, so a model does not depend on
    where the stream is cut into batches (einsum's SIMD partial sums depend on the CPU)."""
    return np.ascontiguousarray(np.cumsum(rows * rows, axis=1)[:, -1])


class SupportArrays(NamedTuple):
    """The support set as the folds take it (changed in place): ``rows`` (B, d) float32,
    ``columns`` (d, B) float64 and ``sq_norms`` (B,), ``alpha`` (the state's coefficients,
    (B,) or (B, C)), ``A`` (the same memory as (B, C), C = 1 unless multiclass) and ``stamp``."""

    rows: np.ndarray
    columns: np.ndarray
    sq_norms: np.ndarray
    alpha: np.ndarray
    A: np.ndarray
    stamp: np.ndarray


class BudgetSet:
    """A state's support set while an update runs: copies of its arrays, changed in place.

    The vectors are also held as float64 columns with their squared norms, which the folds'
    kernel rows read (a fixed summation order). ``extra`` holds copies of the state's other
    fields (learner bookkeeping).
    """

    def __init__(self, state: Any):
        self.rows = state.support.copy()
        self.alpha = state.alpha.copy()
        self.stamp = state.stamp.copy()
        self.n = int(state.n_support)
        self.columns = np.ascontiguousarray(self.rows.T, dtype=np.float64)
        self.sq_norms = squared_norms(self.rows.astype(np.float64))
        self.extra = {name: np.array(value, copy=True) for name, value in state._asdict().items() if name not in _BASE_FIELDS}

    @property
    def full(self) -> bool:
        """Whether all ``B`` slots hold a vector."""
        return self.n == len(self.alpha)

    def arrays(self) -> SupportArrays:
        """The folds' view of these arrays (no copies)."""
        B = len(self.alpha)
        return SupportArrays(self.rows, self.columns, self.sq_norms, self.alpha, self.alpha.reshape(B, -1), self.stamp)

    def state(self, state_class: type, n_seen: int) -> Any:
        """The learner's state of these arrays (they are not copied again)."""
        return state_class(
            support=self.rows,
            alpha=self.alpha,
            stamp=self.stamp,
            n_support=np.asarray(self.n, dtype=np.int64),
            n_seen=np.asarray(n_seen, dtype=np.int64),
            **self.extra,
        )


def fold_module() -> ModuleType:
    """The budget folds (:mod:`okl_core.learners.budget._folds`), loaded through
    :func:`okl_core.learners.compiled.folds` (compile cache, BLAS pinning)."""
    return folds(FOLDS)


# -- the learners' base -----------------------------------------------------------------------
class BudgetLearner(Learner[Any]):
    """Shared parts: fixed-shape state, prediction, the batch through the fold, no merge.

    One class per algorithm learns every task its config gives (``config.task``); the
    registry's per-task names are subclasses that only name the config. A learner implements
    :meth:`_fold` and, for extra state fields, :meth:`_extra_init`.
    """

    state_class: ClassVar[type] = BudgetState
    merge_semantics = "none"
    mix_refusal = (
        "its model is a budgeted support set chosen by each shard; averaging would concatenate the sets "
        "beyond the budget, so states are neither merged nor mixed"
    )

    def __init__(self, config: Any):
        super().__init__(config)
        self.kernel = Kernel.of(config)

    def _extra_init(self) -> dict[str, np.ndarray]:
        return {}

    def init(self) -> Any:
        B, d = self.config.budget, self.config.n_inputs
        return self.state_class(
            support=np.zeros((B, d), dtype=np.float32),
            alpha=np.zeros((B,) if self.task != "multiclass" else (B, self.config.n_classes)),
            stamp=np.full(B, -1, dtype=np.int64),
            n_support=np.asarray(0, dtype=np.int64),
            n_seen=np.asarray(0, dtype=np.int64),
            **self._extra_init(),
        )

    def predict(self, state: Any, X: ArrayLike) -> np.ndarray:
        X, _ = validate_xy(self, X)
        n = int(state.n_support)
        return self.kernel.gram(X, state.support[:n]) @ state.alpha[:n]

    def _draws(self, start: int, stop: int) -> np.ndarray | None:
        """Uniforms of examples ``start..stop-1`` for learners that draw (None otherwise)."""
        return None

    def update(self, state: Any, X: ArrayLike, y: ArrayLike) -> tuple[Any, np.ndarray]:
        X, y = validate_xy(self, X, y)
        work = BudgetSet(state)
        start = int(state.n_seen)
        scores = np.zeros((len(y),) + work.alpha.shape[1:])
        self._fold(fold_module(), work, np.ascontiguousarray(X), y, scores, start)
        return work.state(self.state_class, start + len(y)), scores

    def _fold(self, folds: ModuleType, work: BudgetSet, X: np.ndarray, y: np.ndarray, scores: np.ndarray, start: int) -> None:
        """Learn the batch with this learner's fold of ``folds``, changing ``work`` in place
        (``n`` and ``extra`` included) and filling ``scores``; ``X`` C-ordered float32 rows,
        ``y`` labels (floats, or class indices), ``start`` the first row's stream position."""
        raise NotImplementedError

    def _rule(self, folds: ModuleType) -> RuleCode:
        """The update rule's code for the folds: the Perceptron (binary), the multiclass
        Perceptron, or the FOGD-R rule of :class:`~okl_core.learners.rules.RegressionRule`."""
        if self.task == "regression":
            return RegressionRule(self.config).code
        if self.task == "multiclass":
            return folds.MULTICLASS_PERCEPTRON, 0.0, 0.0
        return PerceptronRule(self.config).code

    def merge(self, states: Sequence[Any], weights: ArrayLike | None = None, base: Any = None) -> Any:
        raise NotMergeableError(
            f"{self.name} states cannot be merged: each shard keeps its own budget of {self.config.budget} support "
            "vectors and averaging would exceed it (train with one shard, or use fogd)"
        )


class SeededLearner(BudgetLearner):
    """A budget learner that removes at random: example ``t``'s uniform is
    :func:`okl_core.random.row_uniforms` ``(seed, t)``."""

    def _draws(self, start: int, stop: int) -> np.ndarray:
        return row_uniforms(self.config.seed, start, stop, 1)[:, 0]


def scores_2d(scores: np.ndarray) -> np.ndarray:
    """The scores as the folds that write rows of ``C`` take them: (N, C), C = 1 unless multiclass."""
    return scores.reshape(len(scores), scores.shape[1] if scores.ndim == 2 else 1)


def labels_f64(y: np.ndarray) -> np.ndarray:
    """Labels as float64 (class indices too: the folds with a rule code read them so)."""
    return np.asarray(y, dtype=np.float64)
