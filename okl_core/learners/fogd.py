"""Fourier Online Gradient Descent (Lu, Hoi et al., JMLR 2016; spec/fogd_nogd.md).

Linear online gradient descent on a seeded random Fourier feature map ``z(x)``: no
regularizer, constant step ``eta``, predict-score-update per example.

* ``fogd``   binary, hinge loss: if ``y w.z < 1`` (strict) then ``w += eta y z``.
* ``mfogd``  multiclass: one ``w^r`` per class; ``s`` = highest-scoring wrong class; if
  ``w^y.z - w^s.z < 1`` then ``w^y += eta z`` and ``w^s -= eta z``.
* ``fogd_r`` regression: ``f = w.z``; update ``w += eta (y - f) z`` when the threshold test
  fires: ``|y - f| > eps`` (``threshold='absolute'``, the authors' code, default) or
  ``(y - f)^2 > eps`` (``threshold='squared'``, the paper's text).

Defaults are the paper's: sigma = 8, D = 400 frequencies, unscaled features, eta from the
authors' code (binary 0.002, multiclass 0.005, regression 6e-4).

The update is an exact per-row fold: the batch's features are computed at once (one
matrix product) and the rows are then learned one by one in order. The update decisions
are the shared rules of :mod:`okl_core.learners.rules` (also used by kernel OGD and NOGD).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import ModuleType
from typing import Any, ClassVar, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from okl_core.features import FourierFeatures
from okl_core.learners.base import Learner, RandomFeatureConfig, validate_xy
from okl_core.learners.rules import (
    MULTICLASS,
    BinaryHingeRule,
    HingeRuleConfig,
    LinearRows,
    MulticlassHingeRule,
    MulticlassRuleConfig,
    RegressionRule,
    RegressionRuleConfig,
    Rule,
    RuleCode,
    RowModel,
    fold,
)

__all__ = [
    "FOGDConfig",
    "MFOGDConfig",
    "FOGDRConfig",
    "LinearState",
    "FOGD",
    "MFOGD",
    "FOGDRegressor",
    "merge_linear_states",
]


@dataclasses.dataclass(frozen=True, kw_only=True)
class FOGDConfig(HingeRuleConfig, RandomFeatureConfig):
    """Binary FOGD: ``RandomFeatureConfig`` plus the step ``eta`` (> 0)."""

    eta: float = 0.002


@dataclasses.dataclass(frozen=True, kw_only=True)
class MFOGDConfig(MulticlassRuleConfig, RandomFeatureConfig):
    """Multiclass FOGD: adds ``n_classes`` (>= 2) and ``eta``."""

    eta: float = 0.005


@dataclasses.dataclass(frozen=True, kw_only=True)
class FOGDRConfig(RegressionRuleConfig, RandomFeatureConfig):
    """FOGD regression: adds ``eta``, ``eps`` and the ``threshold`` reading."""

    eta: float = 6e-4


class LinearState(NamedTuple):
    """Coefficients on the feature map (``(2D,)`` or ``(C, 2D)`` float64) and rows seen."""

    w: np.ndarray
    n_seen: np.ndarray


def merge_linear_states(learner: Learner, states: list[LinearState], weights=None) -> LinearState:
    """Average ``w`` weighted by ``n_seen`` (one-shot parameter averaging), add ``n_seen``.

    Kept for callers of the old helper: it is ``learner.merge(states, weights)``, the
    protocol's default for a learner declaring ``averaged_fields = ('w',)``.
    """
    return learner.merge(states, weights)


class _FourierLinear(Learner[LinearState]):
    """Shared machinery: the seeded feature map, scores, state.

    Merge and mix are the protocol's defaults on ``w`` (linear in ``w``: a weighted average
    of models, a convex combination of two), ``n_seen`` counted.
    """

    conformance_params = {"n_components": 32, "sigma": 1.0, "eta": 0.2}
    state_class = LinearState
    averaged_fields = ("w",)
    mixable = True
    rule_class: ClassVar[type[Rule]]  # a rule of okl_core.learners.rules, set by each learner

    def __init__(self, config):
        super().__init__(config)
        self.features = FourierFeatures(config.feature_spec())
        self.rule = self.rule_class(config)

    def feature_spec(self):
        return self.features.spec

    def _n_outputs(self) -> int | None:
        return None

    def init(self) -> LinearState:
        shape: tuple[int, ...] = (self.features.spec.n_outputs,)
        n_outputs = self._n_outputs()
        if n_outputs is not None:
            shape = (n_outputs,) + shape
        return LinearState(w=np.zeros(shape), n_seen=np.asarray(0, dtype=np.int64))

    def predict(self, state: LinearState, X: ArrayLike) -> np.ndarray:
        X, _ = validate_xy(self, X)
        return self.features.transform(X).astype(np.float64) @ state.w.T

    def update(self, state: LinearState, X: ArrayLike, y: ArrayLike) -> tuple[LinearState, np.ndarray]:
        X, y = validate_xy(self, X, y)
        # float32 features; each row is widened to float64 as it is learned (cheaper than
        # widening the whole batch, and the same numbers).
        Z = self.features.transform(X)
        w = state.w.copy()
        scores = np.empty((len(y),) + w.shape[:-1])
        decide, model = self._fold_parts(w, Z, y)
        fold(decide, model, y, scores)
        n_seen = np.asarray(int(state.n_seen) + len(y), dtype=np.int64)
        return LinearState(w=w, n_seen=n_seen), scores

    def _fold_parts(self, w: np.ndarray, Z: np.ndarray, y: np.ndarray) -> tuple[Callable[[Any, Any], Any], RowModel[Any]]:
        """The rule and the model of :func:`~okl_core.learners.rules.fold`: ``w += rule(f, y) z``."""
        return self.rule, LinearRows(w, Z)


class FOGD(_FourierLinear):
    """Binary FOGD with the hinge loss (registry name ``fogd``)."""

    name = "fogd"
    config_class = FOGDConfig
    rule_class = BinaryHingeRule


class MFOGD(_FourierLinear):
    """Multiclass FOGD (registry name ``mfogd``): ``w`` is ``(n_classes, 2D)``."""

    name = "mfogd"
    config_class = MFOGDConfig
    conformance_params = {**_FourierLinear.conformance_params, "n_classes": 3}
    rule_class = MulticlassHingeRule
    rule: MulticlassHingeRule

    def _n_outputs(self):
        return self.config.n_classes

    def _fold_parts(self, W: np.ndarray, Z: np.ndarray, y: np.ndarray) -> tuple[Callable[[Any, Any], Any], RowModel[Any]]:
        # Only the true and the rival class change: update those two rows rather than
        # adding the rule's dense (C,) coefficient vector times z (C times the traffic).
        return self.rule.rival, _ClassRows(W, Z, y, self.rule.eta)


class _ClassRows:
    """MFOGD's weights ``W`` (C, 2D) on feature rows ``Z``: scores ``W z``; learning a row
    with rival class ``s`` adds ``eta z`` to ``W[y]`` and subtracts it from ``W[s]``."""

    __slots__ = ("W", "Z", "y", "eta", "_z")

    def __init__(self, W: np.ndarray, Z: np.ndarray, y: np.ndarray, eta: float):
        self.W, self.Z, self.y, self.eta = W, Z, y, eta
        self._z = np.zeros(0)

    def score(self, i: int) -> np.ndarray:
        self._z = z = self.Z[i].astype(np.float64)
        return self.W @ z

    def add(self, i: int, rival: int) -> bool:
        step = self.eta * self._z
        self.W[self.y[i]] += step
        self.W[rival] -= step
        return False

    def compiled_fold(self, jit: ModuleType, code: RuleCode, y: np.ndarray, scores: np.ndarray, start: int) -> int | None:
        """:func:`~okl_core.learners.rules.fold` of this model in compiled code (same bytes)."""
        if code[0] != MULTICLASS or not all(a.dtype == np.float64 and a.flags.c_contiguous for a in (self.W, scores)):
            return None
        return int(jit.fold_multiclass(self.eta, self.Z, self.W, True, y, scores, start))


class FOGDRegressor(_FourierLinear):
    """FOGD regression (registry name ``fogd_r``), absolute or squared eps threshold."""

    name = "fogd_r"
    config_class = FOGDRConfig
    conformance_params = {"n_components": 32, "sigma": 1.0, "eta": 0.01, "eps": 0.01}
    rule_class = RegressionRule
