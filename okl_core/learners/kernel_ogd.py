"""Exact kernel online gradient descent and kernel Perceptron, no budget (spec/fogd_nogd.md).

The "OGD" rows of the FOGD/NOGD paper's tables: the model is a kernel expansion over a
support set that grows with every update,

    f(x) = sum_i alpha_i k(x_i, x),

with the same per-example rules as FOGD (no regularizer, constant step ``eta``):

* ``kernel_ogd``         binary hinge: if ``y f < 1`` (strict) add ``x`` with ``alpha = eta y``.
* ``mkernel_ogd``        multiclass: ``s`` = highest-scoring wrong class (first on ties); if
  ``f_y - f_s < 1`` add ``x`` with the coefficient vector ``+eta`` at ``y``, ``-eta`` at ``s``.
* ``kernel_ogd_r``       regression: if ``|y - f| > eps`` (``threshold='absolute'``, the
  authors' code, default) or ``(y - f)^2 > eps`` (``'squared'``, the paper's text) add ``x``
  with ``alpha = eta (y - f)``.
* ``kernel_perceptron``  binary: on a mistake (``sign(f) != y`` with ``sign(0) = +1``) add
  ``x`` with ``alpha = y``.

Cost per example O(|S| d) and memory O(|S| d): these are references for small streams and
for checking the budgeted and approximate learners (the rules live in
:mod:`okl_core.learners.rules`, shared with FOGD and NOGD). The per-row fold is compiled
(:mod:`okl_core.learners._expansion_folds`, shared with NOGD): a batch's scores against
the support set from before it are one numpy product, the rows it adds are scored by the
exact kernel row against a buffer (:func:`okl_core.kernels.row_against_buffer`'s
arithmetic; MNIST digits from 1,000 support vectors: 55 us per row in a numpy loop, 36
compiled, the batch's product included). ``max_support`` caps the support set (default 100,000): an
update that would exceed it raises a ValueError naming the field
(:mod:`okl_core.learners.support`).

Merge: the states' functions are averaged with weights ``n_seen`` (like FOGD's parameter
averaging), represented exactly by concatenating the support sets in state order with
each ``alpha`` scaled by its weight; the merged support set is the sum of the sizes.
Mixing is refused (``mixable = False``): it would append the merged model's support set,
which already holds every shard's, to each shard at every version, so states would grow
without bound.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, ClassVar, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from okl_core.kernels import Kernel
from okl_core.learners.base import CheckedConfig, Learner, validate_xy
from okl_core.learners.compiled import folds
from okl_core.learners.rules import (
    BinaryHingeRule,
    HingeRuleConfig,
    MulticlassHingeRule,
    MulticlassRuleConfig,
    PerceptronRule,
    RegressionRule,
    RegressionRuleConfig,
    Rule,
    output_shape,
)
from okl_core.learners.support import GrowingArray, SupportBuffer, SupportCap, SupportCapConfig

__all__ = [
    "KernelConfig",
    "KernelHingeConfig",
    "KernelMulticlassConfig",
    "KernelRegressionConfig",
    "SupportCapConfig",
    "KernelOGDConfig",
    "MKernelOGDConfig",
    "KernelOGDRConfig",
    "KernelPerceptronConfig",
    "SupportState",
    "KernelOGD",
    "MKernelOGD",
    "KernelOGDRegressor",
    "KernelPerceptron",
]


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelConfig(CheckedConfig):
    """Parameters shared by exact-kernel learners: input dimension, kernel, bandwidth.

    Parameters
    ----------
    n_inputs : int
        Input dimension ``d``.
    kernel : {'gaussian', 'laplacian', 'cauchy'}
        See :mod:`okl_core.kernels`.
    sigma : float
        Kernel bandwidth; default the median heuristic on the data (``"median"``, see
        :mod:`okl_core.derived`). The papers' 8 (Lu et al.'s, for features in [0, 1]) is
        the fallback of a learner built with no data, and stays reachable as ``sigma=8``:
        a fixed bandwidth suits only data of the scale it was chosen for.
    """

    n_inputs: int
    kernel: str = "gaussian"
    sigma: float = 8.0

    data_defaults: ClassVar[dict] = {"sigma": "median"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelHingeConfig(HingeRuleConfig, KernelConfig):
    """The binary hinge rule on an exact kernel: the step ``eta`` (the NOGD code's 0.2).

    Shared by :class:`KernelOGDConfig` and NOGD's binary config.
    """

    eta: float = 0.2


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelMulticlassConfig(MulticlassRuleConfig, KernelConfig):
    """The multiclass hinge rule on an exact kernel: ``n_classes`` (>= 2) and ``eta`` (0.5)."""

    eta: float = 0.5


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelRegressionConfig(RegressionRuleConfig, KernelConfig):
    """The regression rule on an exact kernel: ``eta`` (0.1), ``eps`` and the ``threshold`` reading."""

    eta: float = 0.1


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelOGDConfig(SupportCapConfig, KernelHingeConfig):
    """Binary kernel OGD: ``eta`` (0.2) and ``max_support``."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MKernelOGDConfig(SupportCapConfig, KernelMulticlassConfig):
    """Multiclass kernel OGD: ``n_classes``, ``eta`` (0.5) and ``max_support``."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelOGDRConfig(SupportCapConfig, KernelRegressionConfig):
    """Kernel OGD regression: ``eta`` (0.1), ``eps``, ``threshold`` and ``max_support``."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelPerceptronConfig(SupportCapConfig, KernelConfig):
    """Binary kernel Perceptron: kernel parameters and ``max_support`` (the rule has no step)."""

    task = "binary"


# -- the learners ---------------------------------------------------------------------


class SupportState(NamedTuple):
    """Support set of a kernel expansion.

    Attributes
    ----------
    support : (n_sv, d) float32, the stored inputs
    alpha : (n_sv,) or (n_sv, C) float64, their coefficients
    n_seen : () int64, examples learned
    """

    support: np.ndarray
    alpha: np.ndarray
    n_seen: np.ndarray


class _KernelExpansion(Learner[SupportState]):
    """Kernel expansion grown by a rule: predict, score, and add the example on an update."""

    state_class = SupportState
    growing_fields = ("support", "alpha")
    rule_class: ClassVar[type[Rule]]
    mix_refusal = (
        "its model is a growing support set; mixing would append the merged model's support vectors "
        "(every shard's) to each shard at every version, so states would grow without bound"
    )

    def __init__(self, config):
        super().__init__(config)
        self.kernel = Kernel.of(config)
        self.rule = self.rule_class(config)
        self.cap = SupportCap(
            self.name,
            "max_support",
            config.max_support,
            "the support set",
            "it holds one row per update: raise max_support, or use a budgeted (nogd) or random-feature (fogd) "
            "learner for long streams",
        )

    def init(self) -> SupportState:
        return SupportState(
            support=np.zeros((0, self.config.n_inputs), dtype=np.float32),
            alpha=np.zeros(output_shape(self.rule, 0)),
            n_seen=np.asarray(0, dtype=np.int64),
        )

    def predict(self, state: SupportState, X: ArrayLike) -> np.ndarray:
        X, _ = validate_xy(self, X)
        return self.kernel.gram(X, state.support) @ state.alpha

    def update(self, state: SupportState, X: ArrayLike, y: ArrayLike) -> tuple[SupportState, np.ndarray]:
        X, y = validate_xy(self, X, y)
        # Scores against the support set from before the batch in one product; the support
        # vectors added during the batch are added row by row.
        scores = self.kernel.gram(X, state.support) @ state.alpha
        support = SupportBuffer(state.support, state.alpha, self.cap, capacity=len(state.alpha) + len(y))
        _GrowingExpansion(self.kernel, self.rule, X, scores, support).learn(y, scores)
        n_seen = np.asarray(int(state.n_seen) + len(y), dtype=np.int64)
        return SupportState(support=support.rows(), alpha=support.alpha.view(), n_seen=n_seen), scores

    def merge_special(self, states: Sequence[SupportState], weights: np.ndarray, base: SupportState | None) -> dict:
        """Average the functions: concatenate the support sets, scaling each state's
        ``alpha`` by its normalised weight (default ``n_seen``; equal weights if all are 0)."""
        # The union may pass max_support: it still predicts (a job's final model), and an update
        # of it is refused before any row (SupportBuffer.check_held), so merging is allowed.
        total = weights.sum()
        weights = weights / total if total > 0 else np.full(len(states), 1.0 / len(states))
        return {
            "support": np.concatenate([s.support for s in states]),
            "alpha": np.concatenate([w * s.alpha for w, s in zip(weights, states)]),
        }


EXPANSION_FOLDS = "okl_core.learners._expansion_folds"
"""The fold module of the exact-kernel expansions (:func:`okl_core.learners.compiled.folds`)."""


class _GrowingExpansion:
    """A kernel expansion learning a batch: row ``i`` scores ``base[i]`` (the support set
    before the batch, in one product) plus the support vectors the batch added so far; an
    update appends the row.

    The added rows are kept as float64 columns with their squared norms, and a row is
    scored against them by the compiled kernel row (``_expansion_folds.fold_expansion``, the
    arithmetic of :meth:`~okl_core.kernels.Kernel.row_against_buffer`).
    """

    def __init__(self, kernel: Kernel, rule: Rule, X: np.ndarray, base: np.ndarray, support: SupportBuffer):
        self.kernel, self.rule, self.X, self.base, self.support = kernel, rule, X, base, support
        self.start = len(support)
        self.added = GrowingArray(np.zeros((X.shape[1], 0)), axis=1)
        self.added_sq = GrowingArray(np.zeros(0))

    def learn(self, y: np.ndarray, scores: np.ndarray) -> None:
        """Learn the batch's rows in order in compiled code, ``scores`` written; the buffers'
        sizes follow the rows it learned, and :meth:`add` learns the rows it leaves to
        Python (a full buffer, the support cap's error)."""
        jit, support = folds(EXPANSION_FOLDS), self.support
        vectors, alpha = support.vectors, support.alpha
        rows = jit.Rows(self.X, self.base, True, y, scores)

        def run(i: int) -> int:
            offset, m = self.start, self.added.size
            defer_at = min(support.cap.limit, vectors.capacity, alpha.capacity) - offset
            defer_at = min(defer_at, self.added.capacity)
            expansion = jit.Expansion(self.added.data, self.added_sq.data, alpha.data[offset:], vectors.data[offset:])
            stop, m = run_expansion(jit, self.rule, self.kernel, rows, expansion, m, defer_at, i)
            for array, size in ((vectors, offset + m), (alpha, offset + m), (self.added, m), (self.added_sq, m)):
                array.set_size(size)
            return stop

        fold_deferring(run, self.add, self.rule, y, scores, 0)

    def add(self, i: int, coef) -> bool:
        """Append row ``i`` with coefficient ``coef`` (growing the buffers; the cap's error)."""
        self.support.append(self.X[i], coef)
        x = self.X[i].astype(np.float64)
        self.added.append(x)
        self.added_sq.append(x @ x)
        return False


def run_expansion(jit: ModuleType, rule: Rule, kernel: Kernel, rows: Any, expansion: Any, m: int, defer_at: int, start: int) -> tuple[int, int]:
    """``_expansion_folds.fold_expansion`` (or its multiclass form) of ``rule`` on ``rows``
    (``Rows``) from ``start``, over ``expansion`` (``Expansion``, ``m`` stored). Returns
    ``(stop, m)``: ``stop < len(y)`` is a row scored whose update needs ``m == defer_at``
    (Python's)."""
    if isinstance(rule, MulticlassHingeRule):
        stop, m = jit.fold_expansion_multiclass(rule.eta, kernel.compiled, rows, start, expansion, m, defer_at)
    else:
        stop, m = jit.fold_expansion(rule.code, kernel.compiled, rows, start, expansion, m, defer_at)
    return int(stop), int(m)


def fold_deferring(run: Callable[[int], int], add: Callable[[int, Any], bool], rule: Rule, y: np.ndarray, scores: np.ndarray, start: int) -> int:
    """The compiled fold ``run(i)`` (rows ``i..``; it returns the row it stopped at) with
    the updates it leaves to Python -- a full buffer, the support cap's error, NOGD's
    transition -- done by ``add(i, coef)`` on the rule's coefficient for the row's score
    (``add`` returns True to stop). Returns the row after the last one learned."""
    i = start
    while i < len(y):
        i = run(i)
        if i == len(y):
            break
        coef = rule(scores[i], y[i])
        if coef is not None and add(i, coef):
            return i + 1
        i += 1
    return len(y)


class KernelOGD(_KernelExpansion):
    """Binary kernel OGD with the hinge loss, no budget (registry name ``kernel_ogd``)."""

    name = "kernel_ogd"
    config_class = KernelOGDConfig
    rule_class = BinaryHingeRule
    conformance_params = {"sigma": 1.0, "eta": 0.5}


class MKernelOGD(_KernelExpansion):
    """Multiclass kernel OGD, no budget (registry name ``mkernel_ogd``)."""

    name = "mkernel_ogd"
    config_class = MKernelOGDConfig
    rule_class = MulticlassHingeRule
    conformance_params = {"sigma": 1.0, "eta": 0.5, "n_classes": 3}


class KernelOGDRegressor(_KernelExpansion):
    """Kernel OGD regression with an eps threshold, no budget (registry name ``kernel_ogd_r``)."""

    name = "kernel_ogd_r"
    config_class = KernelOGDRConfig
    rule_class = RegressionRule
    conformance_params = {"sigma": 1.0, "eta": 0.3, "eps": 0.01}


class KernelPerceptron(_KernelExpansion):
    """Binary kernel Perceptron, no budget (registry name ``kernel_perceptron``)."""

    name = "kernel_perceptron"
    config_class = KernelPerceptronConfig
    rule_class = PerceptronRule
    conformance_params = {"sigma": 1.0}
