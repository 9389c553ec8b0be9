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

``'normalized'`` is NAG, the normalized adaptive gradient of Ross, Mineiro & Langford
("Normalized Online Learning", UAI 2013, Algorithm 2), on the same decisions. Before
row ``t`` is scored (``t`` counts every row learned, ``n_seen + 1``): each feature ``j``
with ``|z_j| > s_j`` has its weights multiplied by ``s_j / |z_j|`` and ``s_j = |z_j|`` (the
first power: each past NAG step on ``j`` was proportional to ``1 / s_j``, so this makes it
the step the new scale would have given; the squared ratio belongs to the paper's
non-adaptive NG, Algorithm 1, whose steps go as ``1 / s_j^2``); then ``N += sum_j (z_j / s_j)^2``. When the rule fires,
``G_j += g_j^2`` and ``w_j -= eta sqrt(t / N) g_j / (s_j sqrt(G_j))`` (``g = -u z`` as for
AdaGrad). This is Vowpal Wabbit's ``--adaptive --normalized`` update with its default
``power_t = 0.5`` (the two square roots), *without* ``--invariant`` (VW's default also
makes each step importance-invariant; okl's rows all have weight 1 and the rules keep
their own decisions); the scales and ``N`` advance on every row, as in the paper
(VW's implementation may differ in such bookkeeping). The state then holds ``scale`` (``s``,
per feature ``(2D,)``, shared by MFOGD's classes), ``g2`` (``G``, shaped as ``w``) and
``norm_sum`` (``N``). Merging averages ``w`` (so the merged model is the average of the
shards' functions), takes the elementwise maximum of ``scale`` (the largest ``|z_j|`` any
shard saw), and sums ``g2`` and ``norm_sum`` as AdaGrad sums ``g2`` (from a base: the base
once plus each increase), so ``t / N`` stays the mean over all rows learned (``n_seen`` is
summed the same way); mixing keeps the local ``g2`` and ``norm_sum`` and the maximum scale.
Unlike the paper's rescale on a new row, neither rescales ``w`` (that would change the
averaged function).

Defaults are the paper's: sigma = 8, D = 400 frequencies, unscaled features, eta from the
authors' code (binary 0.002, multiclass 0.005, regression 6e-4).

The update is an exact per-row fold: the batch's features are computed at once (one
matrix product) and the rows are then learned one by one in order. The update decisions
are the shared rules of :mod:`okl_core.learners.rules` (also used by kernel OGD and NOGD).
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Any, ClassVar, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from okl_core.features import FourierFeatures
from okl_core.learners.base import Learner, RandomFeatureConfig, validate_xy
from okl_core.learners.compiled import folds
from okl_core.learners.rules import (
    ADAGRAD_DELTA,
    LINEAR_FOLDS,
    BinaryHingeRule,
    HingeRuleConfig,
    MulticlassHingeRule,
    MulticlassRuleConfig,
    RegressionRule,
    RegressionRuleConfig,
    Rule,
    StepConfig,
    constant_step,
)

__all__ = [
    "FOGDConfig",
    "MFOGDConfig",
    "FOGDRConfig",
    "LinearState",
    "AdaGradState",
    "NormalizedState",
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


class NormalizedState(NamedTuple):
    """``step='normalized'`` (NAG): coefficients ``w``, the features' scales ``scale``
    (largest ``|z_j|`` seen, ``(2D,)``), the sums of squared gradients ``g2`` (shaped as ``w``),
    the sum of the rows' normalized squared norms ``norm_sum`` (0-d), all float64, and rows seen."""

    w: np.ndarray
    scale: np.ndarray
    g2: np.ndarray
    norm_sum: np.ndarray
    n_seen: np.ndarray


_STEP_STATES: dict[str, type[Any]] = {"constant": LinearState, "adagrad": AdaGradState, "normalized": NormalizedState}
# Summed by merge (the base once plus each shard's increase), kept local by mix (module docstring).
_STEP_SUMS: dict[str, tuple[str, ...]] = {"constant": (), "adagrad": ("g2",), "normalized": ("g2", "norm_sum")}


def merge_linear_states(learner: Learner, states: list[LinearState], weights=None) -> LinearState:
    """Average ``w`` weighted by ``n_seen`` (one-shot parameter averaging), add ``n_seen``.

    Kept for callers of the old helper: it is ``learner.merge(states, weights)``, the
    protocol's default for a learner declaring ``averaged_fields = ('w',)``.
    """
    return learner.merge(states, weights)


class _FourierLinear(Learner[LinearState]):
    """Shared machinery: the seeded feature map, scores, state.

    Merge and mix are the protocol's defaults on ``w`` (linear in ``w``: a weighted average
    of models, a convex combination of two), ``n_seen`` counted; with adaptive steps ``g2``
    (and NAG's ``norm_sum``) is summed by merge and kept local by mix, NAG's ``scale`` is a
    maximum (module docstring).
    """

    conformance_params = {"n_components": 32, "sigma": 1.0, "eta": 0.2}
    state_class: ClassVar[type[Any]] = LinearState  # per instance: the step's state (_STEP_STATES)
    averaged_fields = ("w",)
    mixable = True
    legacy_config = {"step": "constant"}  # files from before the option: the paper's rule
    rule_class: ClassVar[type[Rule]]  # a rule of okl_core.learners.rules, set by each learner

    def __init__(self, config):
        super().__init__(config)
        self.features = FourierFeatures(config.feature_spec())
        self.adagrad = config.step == "adagrad"
        self.normalized = config.step == "normalized"
        # Adaptive steps: the rule at eta = 1 gives the loss derivative u; eta scales the step.
        self.rule = self.rule_class(dataclasses.replace(config, eta=1.0) if config.step != "constant" else config)
        # the state gains the accumulators only with an adaptive step (old files unchanged)
        self.state_class = _STEP_STATES[config.step]  # type: ignore[misc]
        self.summed_fields = _STEP_SUMS[config.step]  # type: ignore[misc]
        if self.normalized:
            self.maximum_fields = ("scale",)  # type: ignore[misc]

    def feature_spec(self):
        return self.features.spec

    def _n_outputs(self) -> int | None:
        return None

    def init(self) -> LinearState:
        shape: tuple[int, ...] = (self.features.spec.n_outputs,)
        n_outputs = self._n_outputs()
        if n_outputs is not None:
            shape = (n_outputs,) + shape
        fields = {"w": np.zeros(shape), "n_seen": np.asarray(0, dtype=np.int64)}
        if self.state_class is not LinearState:
            fields["g2"] = np.zeros(shape)
        if self.normalized:
            fields.update(scale=np.zeros(shape[-1]), norm_sum=np.asarray(0.0))
        return self.state_class(**fields)

    def predict(self, state: LinearState, X: ArrayLike) -> np.ndarray:
        X, _ = validate_xy(self, X)
        return self.features.transform(X).astype(np.float64) @ state.w.T

    def update(self, state: LinearState, X: ArrayLike, y: ArrayLike) -> tuple[LinearState, np.ndarray]:
        X, y = validate_xy(self, X, y)
        # float32 features; each row is widened to float64 as it is learned (cheaper than
        # widening the whole batch, and the same numbers).
        Z = self.features.transform(X)
        arrays = {f: np.array(getattr(state, f), copy=True) for f in self.state_class._fields if f != "n_seen"}
        scores = np.empty((len(y),) + arrays["w"].shape[:-1])
        self._fold(folds(LINEAR_FOLDS), arrays, Z, y, scores, int(state.n_seen))
        n_seen = np.asarray(int(state.n_seen) + len(y), dtype=np.int64)
        return self.state_class(**arrays, n_seen=n_seen), scores

    def _fold(self, jit: ModuleType, arrays: dict[str, np.ndarray], Z: np.ndarray, y: np.ndarray, scores: np.ndarray, t0: int) -> None:
        """Learn the rows of features ``Z`` in order on the state's ``arrays`` (updated in place;
        ``t0`` rows learned before) with the linear folds ``jit``: ``w += rule(f, y) z``, or
        the rule's decision with AdaGrad's or NAG's step."""
        batch, w = jit.Batch(Z, y, scores), arrays["w"]
        if self.normalized:
            jit.fold_weights_normalized(self.rule.code, batch, 0, w, _nag(jit, arrays, t0, self.config.eta))
        elif self.adagrad:
            jit.fold_weights(self.rule.code, batch, 0, w, jit.AdaGrad(arrays["g2"], float(self.config.eta), ADAGRAD_DELTA))
        else:
            jit.fold_weights(self.rule.code, batch, 0, w, constant_step(jit))


def _nag(jit: ModuleType, arrays: dict[str, np.ndarray], t0: int, eta: float) -> Any:
    """The linear folds' ``Normalized`` bundle on the state's arrays (``norm_sum`` as a (1,) view)."""
    return jit.Normalized(arrays["scale"], arrays["g2"], arrays["norm_sum"].reshape(1), int(t0), float(eta))


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

    def _fold(self, jit: ModuleType, arrays: dict[str, np.ndarray], Z: np.ndarray, y: np.ndarray, scores: np.ndarray, t0: int) -> None:
        # Only the true and the rival class change: the folds update those two rows of
        # W (C, 2D) rather than adding the rule's dense (C,) coefficient vector times z.
        batch, W = jit.Batch(Z, y, scores), arrays["w"]
        if self.normalized:
            jit.fold_multiclass_normalized(batch, 0, W, _nag(jit, arrays, t0, self.config.eta))
        elif self.adagrad:
            jit.fold_multiclass_adagrad(batch, 0, W, jit.AdaGrad(arrays["g2"], float(self.config.eta), ADAGRAD_DELTA))
        else:
            jit.fold_multiclass(self.rule.eta, batch, 0, W, True)


class FOGDRegressor(_FourierLinear):
    """FOGD regression (registry name ``fogd_r``), absolute or squared eps threshold."""

    name = "fogd_r"
    config_class = FOGDRConfig
    conformance_params = {"n_components": 32, "sigma": 1.0, "eta": 0.01, "eps": 0.01}
    rule_class = RegressionRule
