"""NORMA, regularised online learning with kernels (Kivinen, Smola & Williamson 2004).

Registry name ``norma_r`` (regression).
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import ClassVar, NamedTuple

import numpy as np

from okl_core.learners.budget._support import BudgetLearner, BudgetSet, SupportBudgetConfig, labels_f64, scores_2d

__all__ = ["NORMARConfig", "NORMAState", "NORMARegressor"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class NORMARConfig(SupportBudgetConfig):
    """NORMA regression: step ``eta`` (0.03), regulariser ``lam`` (0.03), ``nu`` in (0, 1] (0.4; the
    fraction of examples that end up updating), the initial threshold ``eps`` (0.1, the paper's
    fixed eps of the other learners) and the truncation ``budget``; defaults of the authors' code,
    except ``budget`` (1,000, not 100) and ``lam`` (0.01, not 0.03): on unscaled mixed-scale
    features (the median distance is the largest feature's scale) the authors' values end no
    better than the mean; a longer memory (more vectors, slower decay) learns."""

    budget: int = 1000
    eta: float = 0.03
    lam: float = 0.01
    nu: float = 0.4
    eps: float = 0.1
    task = "regression"


class NORMAState(NamedTuple):
    """:class:`~okl_core.learners.budget.BudgetState` plus NORMA's adaptive threshold ``eps`` (() float64)."""

    support: np.ndarray
    alpha: np.ndarray
    stamp: np.ndarray
    n_support: np.ndarray
    n_seen: np.ndarray
    eps: np.ndarray


class NORMAOptions(NamedTuple):
    """NORMA's constants as ``_folds.fold_norma`` takes them."""

    eta: float
    decay: float  # 1 - eta lam
    down: float  # nu eta
    up: float  # (1 - nu) eta


class NORMARegressor(BudgetLearner):
    """NORMA for regression (Kivinen, Smola & Williamson 2004; registry ``norma_r``).

    At every example the coefficients decay by ``1 - eta lam``; if ``|y - f| > eps`` the
    example is added with ``alpha = eta sign(y - f)`` and ``eps += (1 - nu) eta``, otherwise
    ``eps -= nu eta`` (the nu-adaptive eps-insensitive loss, with the authors' code's
    defaults, spec/fogd_nogd.md). Truncation: when ``budget`` vectors are held, the oldest
    goes (its coefficient has decayed by ``(1 - eta lam)^age``). The paper runs NORMA without
    a budget: pass a budget at least the stream's length for that. Fold: ``_folds.fold_norma``.
    """

    name = "norma_r"
    config_class: ClassVar[type] = NORMARConfig
    state_class = NORMAState
    conformance_params = {"sigma": 1.0, "budget": 40, "eta": 0.3, "lam": 0.01, "nu": 0.3, "eps": 0.05}

    def _extra_init(self) -> dict[str, np.ndarray]:
        return {"eps": np.asarray(float(self.config.eps))}

    def _fold(self, folds: ModuleType, work: BudgetSet, X: np.ndarray, y: np.ndarray, scores: np.ndarray, start: int) -> None:
        cfg = self.config
        options = NORMAOptions(float(cfg.eta), float(1.0 - cfg.eta * cfg.lam), float(cfg.nu * cfg.eta), float((1.0 - cfg.nu) * cfg.eta))
        n, eps = folds.fold_norma(options, X, labels_f64(y), work.arrays(), work.n, float(work.extra["eps"]), scores_2d(scores),
                                  start, self.kernel.compiled)
        work.n, work.extra["eps"] = int(n), np.asarray(float(eps))
