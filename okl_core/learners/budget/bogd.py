"""Bounded Online Gradient Descent, uniform sampling (Zhao, Wang, Wu, Jin & Hoi 2012).

Registry names ``bogd``, ``mbogd`` (multiclass) and ``bogd_r`` (regression).
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Any, ClassVar, NamedTuple

import numpy as np

from okl_core.learners.budget._support import BudgetSet, ClassesConfig, SeededConfig, SeededLearner, labels_f64, scores_2d
from okl_core.learners.rules import HINGE, MulticlassHingeRule, RegressionRuleConfig, RuleCode

__all__ = ["BOGDConfig", "MBOGDConfig", "BOGDRConfig", "BOGD", "MBOGD", "BOGDRegressor"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class BOGDConfig(SeededConfig):
    """Bounded OGD (uniform sampling): step ``eta`` (0.2), regulariser ``lam`` (0.05, >= 0; with
    ``(1 - eta lam) B / (B - 1) > 1`` the rescaling outgrows the decay and old coefficients grow
    without bound -- at the defaults the two cancel),
    ``decay`` (when ``1 - eta lam`` applies: ``'every_example'`` or ``'on_update'``), ``budget``
    (>= 2: the rescaling is ``B / (B - 1)``), ``seed``, and two readings of the authors' code:
    ``gamma`` (> 0; default inf, none: after a removal the coefficients are scaled so the
    largest is at most ``eta gamma``; their binary code uses 10) and ``removal``
    (``'random'``, the paper's uniform sampling with rescaling, or ``'oldest'``, their
    multiclass code: the oldest goes, no rescaling).

    ``budget`` defaults to 1,000 and ``lam`` to 0.005, not the paper's 100 and 0.05: those
    forget a row within about a hundred rows, and one pass over a9a ends at the majority class
    (the paper's own online rate, 27.9%, is above the majority's 24.1%). ``lam = 1 / (eta B)``
    keeps the paper's balance of decay and rescaling (``(1 - eta lam) B / (B - 1) = 1``) at
    ``B = 1000``. ``budget=100, lam=0.05`` keeps the paper's setting."""

    budget: int = 1000
    eta: float = 0.2
    lam: float = 0.005
    decay: str = "every_example"
    gamma: float = float("inf")
    removal: str = "random"
    task = "binary"


@dataclasses.dataclass(frozen=True, kw_only=True)
class MBOGDConfig(ClassesConfig, BOGDConfig):
    """Multiclass BOGD: ``n_classes`` and BOGD's ``eta``, ``lam``, ``decay``, ``budget``, ``seed``."""

    task = "multiclass"


@dataclasses.dataclass(frozen=True, kw_only=True)
class BOGDRConfig(RegressionRuleConfig, BOGDConfig):
    """BOGD regression: the FOGD-R rule (``eta`` 0.1, ``eps``, ``threshold``) and BOGD's ``lam``,
    ``decay``, ``budget``, ``seed``. ``removal`` defaults to ``'oldest'`` (the authors' code):
    the paper's uniform sampling with the ``B / (B - 1)`` rescaling lets the coefficients grow
    on targets far from 0 (a mean squared error of 5e16 on CASP at ``B = 30``), while
    ``'oldest'`` gives the paper's numbers on abalone and CASP; ``removal='random'`` keeps the
    published rule. ``lam`` defaults to 0.01, BOGD's ``1 / (eta B)`` at this ``eta`` and BOGD's
    ``budget`` of 1,000 (on unscaled mixed-scale features a larger ``lam`` forgets the few
    vectors that see the small-scale features)."""

    eta: float = 0.1
    lam: float = 0.01
    removal: str = "oldest"
    task = "regression"


class BOGDOptions(NamedTuple):
    """BOGD's constants as ``_folds.fold_bogd`` takes them."""

    decay_always: bool  # decay == 'every_example'
    decay: float  # 1 - eta lam
    oldest: bool  # removal == 'oldest'
    rescale: float  # B / (B - 1)
    limit: float  # eta gamma


class BOGD(SeededLearner):
    """Bounded Online Gradient Descent, uniform sampling (Zhao et al. 2012; registry ``bogd``).

    OGD on ``lam/2 ||f||^2 + hinge``: the coefficients decay by ``1 - eta lam`` (at every
    example, or only on updates: ``decay``) and on ``y f < 1`` the example is added with
    ``alpha = eta y``. When full, the vector in slot ``floor(u B)`` is removed and the other
    ``B - 1`` are multiplied by ``B / (B - 1)`` (each kept with probability ``(B-1)/B``: the
    expected model is unchanged), then the new vector takes the freed slot. With
    ``removal='oldest'`` (the authors' multiclass code) the oldest vector goes and nothing is
    rescaled. A finite ``gamma`` (the authors' binary code) then scales all coefficients by
    ``min(1, eta gamma / max_i |alpha_i|)``. Every task (``config.task``: :class:`MBOGD`,
    :class:`BOGDRegressor`); fold: ``_folds.fold_bogd``.
    """

    name = "bogd"
    config_class: ClassVar[type[Any]] = BOGDConfig
    conformance_params = {"sigma": 0.5, "budget": 30, "eta": 0.5, "lam": 0.05}

    def _rule(self, folds: ModuleType) -> RuleCode:
        """The hinge (binary: ``eta y`` on ``y f < 1``), the multiclass hinge of
        :class:`~okl_core.learners.rules.MulticlassHingeRule`, or the FOGD-R rule."""
        if self.task == "binary":
            return HINGE, float(self.config.eta), 0.0
        if self.task == "multiclass":
            return MulticlassHingeRule(self.config).code
        return super()._rule(folds)

    def _fold(self, folds: ModuleType, work: BudgetSet, X: np.ndarray, y: np.ndarray, scores: np.ndarray, start: int) -> None:
        cfg, B = self.config, self.config.budget
        options = BOGDOptions(cfg.decay == "every_example", float(1.0 - cfg.eta * cfg.lam), cfg.removal == "oldest", B / (B - 1.0),
                              float(cfg.eta * cfg.gamma))
        draws = self._draws(start, start + len(y))
        work.n = int(folds.fold_bogd(self._rule(folds), options, X, labels_f64(y), draws, work.arrays(), work.n, scores_2d(scores),
                                     start, self.kernel.compiled))


class MBOGD(BOGD):
    """Multiclass BOGD (registry ``mbogd``): :class:`BOGD` with the multiclass hinge of
    :class:`~okl_core.learners.rules.MulticlassHingeRule` (``+eta`` at ``y``, ``-eta`` at the
    best wrong class when ``f_y - f_s < 1``)."""

    name = "mbogd"
    config_class = MBOGDConfig
    conformance_params = {"sigma": 0.5, "budget": 30, "eta": 0.5, "lam": 0.05, "n_classes": 3}


class BOGDRegressor(BOGD):
    """BOGD for regression (registry ``bogd_r``): :class:`BOGD` with the FOGD-R coefficient
    ``eta (y - f)`` when the ``eps`` threshold fires."""

    name = "bogd_r"
    config_class = BOGDRConfig
    conformance_params = {"sigma": 0.5, "budget": 40, "eta": 0.3, "lam": 0.05, "eps": 0.05, "removal": "random"}  # the seeded rule
