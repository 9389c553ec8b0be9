"""Fourier Online Gradient Descent (Lu, Hoi et al., JMLR 2016; spec/fogd_nogd.md).

Linear online gradient descent on a seeded random Fourier feature map ``z(x)``: no
regularizer, constant step ``eta``, predict-score-update per example.

* ``fogd``   binary, hinge loss: if ``y w.z < 1`` (strict) then ``w += eta y z``.
* ``mfogd``  multiclass: one ``w^r`` per class; ``s`` = highest-scoring wrong class; if
  ``w^y.z - w^s.z < 1`` then ``w^y += eta z`` and ``w^s -= eta z``.
* ``fogd_r`` regression: ``f = w.z``; update ``w += eta (y - f) z`` when the threshold test
  fires: ``|y - f| > eps`` (``threshold='absolute'``, the authors' code, default) or
  ``(y - f)^2 > eps`` (``threshold='squared'``, the paper's text).

Step rule (``step``): ``'constant'`` is the paper's fixed ``eta`` (default; files written
before the option load with it). ``'adagrad'`` is okl's option beside it: per-coordinate
AdaGrad steps (Duchi, Hazan & Singer, JMLR 2011, diagonal, no regularizer) on the same
update decisions: with ``g = -u z`` the loss subgradient of the row (``u = y`` for the
hinge rules, ``+1`` / ``-1`` for the true / rival class, ``y - f`` for regression),
``G += g^2`` and ``w -= eta g / (delta + sqrt(G))`` coordinate by coordinate
(``delta = 1e-8``); the state then holds ``G`` too (``AdaGradState.g2``, shaped as ``w``).
Merging averages ``w`` (weighted by rows seen) and *sums* ``g2`` (from a base: the base
once plus each shard's increase): ``G`` is a sum over the rows learned, so the merged
model steps as a learner that had seen all the shards' rows would; mixing keeps the
local ``g2`` (the shard's own history, so a later merge counts each row once).

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
    ADAGRAD_DELTA,
    AdaGradRows,
    RegressionRule,
    RegressionRuleConfig,
    Rule,
    RuleCode,
    RowModel,
    StepConfig,
    fold,
)

__all__ = [
    "FOGDConfig",
    "MFOGDConfig",
    "FOGDRConfig",
    "LinearState",
    "AdaGradState",
    "FOGD",
    "MFOGD",
    "FOGDRegressor",
    "merge_linear_states",
]


@dataclasses.dataclass(frozen=True, kw_only=True)
class FOGDConfig(HingeRuleConfig, StepConfig, RandomFeatureConfig):
    """Binary FOGD: ``RandomFeatureConfig`` plus the step ``eta`` (> 0) and its rule ``step``."""

    eta: float = 0.002


@dataclasses.dataclass(frozen=True, kw_only=True)
class MFOGDConfig(MulticlassRuleConfig, StepConfig, RandomFeatureConfig):
    """Multiclass FOGD: adds ``n_classes`` (>= 2), ``eta`` and ``step``."""

    eta: float = 0.005


@dataclasses.dataclass(frozen=True, kw_only=True)
class FOGDRConfig(RegressionRuleConfig, StepConfig, RandomFeatureConfig):
    """FOGD regression: adds ``eta``, ``step``, ``eps`` and the ``threshold`` reading."""

    eta: float = 6e-4


class LinearState(NamedTuple):
    """Coefficients on the feature map (``(2D,)`` or ``(C, 2D)`` float64) and rows seen."""

    w: np.ndarray
    n_seen: np.ndarray


class AdaGradState(NamedTuple):
    """``step='adagrad'``: coefficients ``w``, the sums of squared gradients ``g2`` (shaped
    as ``w``, float64) and rows seen."""

    w: np.ndarray
    g2: np.ndarray
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
    of models, a convex combination of two), ``n_seen`` counted; with AdaGrad steps ``g2``
    is summed by merge and kept local by mix (module docstring).
    """

    conformance_params = {"n_components": 32, "sigma": 1.0, "eta": 0.2}
    state_class: ClassVar[type[Any]] = LinearState  # AdaGradState with step="adagrad" (per instance)
    averaged_fields = ("w",)
    mixable = True
    legacy_config = {"step": "constant"}  # files from before the option: the paper's rule
    rule_class: ClassVar[type[Rule]]  # a rule of okl_core.learners.rules, set by each learner

    def __init__(self, config):
        super().__init__(config)
        self.features = FourierFeatures(config.feature_spec())
        self.adagrad = config.step == "adagrad"
        # AdaGrad: the rule at eta = 1 gives the loss derivative u; eta scales the AdaGrad step.
        self.rule = self.rule_class(dataclasses.replace(config, eta=1.0) if self.adagrad else config)
        if self.adagrad:  # the state gains the accumulator only with this option (old files unchanged)
            self.state_class = AdaGradState  # type: ignore[misc]

    def feature_spec(self):
        return self.features.spec

    def _n_outputs(self) -> int | None:
        return None

    def init(self) -> LinearState:
        shape: tuple[int, ...] = (self.features.spec.n_outputs,)
        n_outputs = self._n_outputs()
        if n_outputs is not None:
            shape = (n_outputs,) + shape
        n_seen = np.asarray(0, dtype=np.int64)
        if self.adagrad:
            return AdaGradState(w=np.zeros(shape), g2=np.zeros(shape), n_seen=n_seen)  # type: ignore[return-value]
        return LinearState(w=np.zeros(shape), n_seen=n_seen)

    def predict(self, state: LinearState, X: ArrayLike) -> np.ndarray:
        X, _ = validate_xy(self, X)
        return self.features.transform(X).astype(np.float64) @ state.w.T

    def update(self, state: LinearState, X: ArrayLike, y: ArrayLike) -> tuple[LinearState, np.ndarray]:
        X, y = validate_xy(self, X, y)
        # float32 features; each row is widened to float64 as it is learned (cheaper than
        # widening the whole batch, and the same numbers).
        Z = self.features.transform(X)
        w = state.w.copy()
        g2 = state.g2.copy() if self.adagrad else None  # type: ignore[attr-defined]
        scores = np.empty((len(y),) + w.shape[:-1])
        decide, model = self._fold_parts(w, g2, Z, y)
        fold(decide, model, y, scores)
        n_seen = np.asarray(int(state.n_seen) + len(y), dtype=np.int64)
        if g2 is not None:
            return AdaGradState(w=w, g2=g2, n_seen=n_seen), scores  # type: ignore[return-value]
        return LinearState(w=w, n_seen=n_seen), scores

    def _fold_parts(self, w: np.ndarray, g2: np.ndarray | None, Z: np.ndarray, y: np.ndarray) -> tuple[Callable[[Any, Any], Any], RowModel[Any]]:
        """The rule and the model of :func:`~okl_core.learners.rules.fold`: ``w += rule(f, y) z``
        (``g2`` given: the AdaGrad step of :class:`~okl_core.learners.rules.AdaGradRows`)."""
        if g2 is not None:
            return self.rule, AdaGradRows(w, g2, Z, self.config.eta)
        return self.rule, LinearRows(w, Z)

    def merge_special(self, states, weights, base):
        """``g2`` (AdaGrad) is summed in list order; from a base, the base once plus each increase."""
        if not self.adagrad:
            return {}
        total = np.zeros_like(states[0].g2) if base is None else base.g2.copy()
        for s in states:
            total = total + (s.g2 if base is None else s.g2 - base.g2)
        return {"g2": total}

    def mix_special(self, local, merged, weight):
        """``g2`` (AdaGrad) stays the local one: the shard's own rows, counted once by later merges."""
        return {"g2": local.g2} if self.adagrad else {}


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

    def _fold_parts(self, W: np.ndarray, g2: np.ndarray | None, Z: np.ndarray, y: np.ndarray) -> tuple[Callable[[Any, Any], Any], RowModel[Any]]:
        # Only the true and the rival class change: update those two rows rather than
        # adding the rule's dense (C,) coefficient vector times z (C times the traffic).
        if g2 is not None:
            return self.rule.rival, _AdaGradClassRows(W, g2, Z, y, self.config.eta)
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


class _AdaGradClassRows(_ClassRows):
    """:class:`_ClassRows` with AdaGrad steps: ``G`` (C, 2D) sums the squared gradients;
    learning a row adds ``z^2`` to ``G[y]`` and ``G[s]``, then ``eta z / (delta + sqrt(G[y]))``
    to ``W[y]`` and ``-eta z / (delta + sqrt(G[s]))`` to ``W[s]`` (the gradient is ``-z`` on
    the true class's row and ``+z`` on the rival's)."""

    __slots__ = ("G",)

    def __init__(self, W: np.ndarray, G: np.ndarray, Z: np.ndarray, y: np.ndarray, eta: float):
        super().__init__(W, Z, y, float(eta))
        self.G = G

    def add(self, i: int, rival: int) -> bool:
        for row, u in ((self.y[i], 1.0), (rival, -1.0)):
            g = u * self._z
            self.G[row] += g * g
            self.W[row] += (self.eta * g) / (ADAGRAD_DELTA + np.sqrt(self.G[row]))
        return False

    def compiled_fold(self, jit: ModuleType, code: RuleCode, y: np.ndarray, scores: np.ndarray, start: int) -> int | None:
        """:func:`~okl_core.learners.rules.fold` of this model in compiled code (same bytes)."""
        if code[0] != MULTICLASS or not all(a.dtype == np.float64 and a.flags.c_contiguous for a in (self.W, self.G, scores)):
            return None
        return int(jit.fold_multiclass_adagrad(self.eta, ADAGRAD_DELTA, self.Z, self.W, self.G, y, scores, start))


class FOGDRegressor(_FourierLinear):
    """FOGD regression (registry name ``fogd_r``), absolute or squared eps threshold."""

    name = "fogd_r"
    config_class = FOGDRConfig
    conformance_params = {"n_components": 32, "sigma": 1.0, "eta": 0.01, "eps": 0.01}
    rule_class = RegressionRule
