"""Budget Passive-Aggressive with simple removal (Wang & Vucetic 2010).

Registry names ``bpa_s`` and ``mbpa_s`` (multiclass).
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from okl_core.learners.budget._support import BudgetLearner, BudgetSet, ClassesConfig, SupportBudgetConfig, scores_2d

__all__ = ["BPASConfig", "MBPASConfig", "BPAS", "MBPAS"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class BPASConfig(SupportBudgetConfig):
    """Budget Passive-Aggressive (simple removal): the PA-I aggressiveness ``C`` (> 0, default 1).

    ``budget`` defaults to 300 (also for ``mbpa_s``), not the paper's comparison point of 100:
    at 100 one pass over a9a makes more online mistakes than the majority class (25.9% against
    24.1%); 300 support vectors learn it (19.9% online, 20.5% on a9a.t). ``budget=100`` keeps the
    paper's setting."""

    budget: int = 300
    C: float = 1.0
    task = "binary"


@dataclasses.dataclass(frozen=True, kw_only=True)
class MBPASConfig(ClassesConfig, BPASConfig):
    """Multiclass BPA-S: ``n_classes``, kernel, ``budget`` and the PA-I ``C``."""

    task = "multiclass"


class BPAS(BudgetLearner):
    """Budget Passive-Aggressive, simple removal (Wang & Vucetic 2010; registry ``bpa_s``).

    On a hinge loss ``l = 1 - y f > 0``: ``tau = min(C, l / k(x, x)) = min(C, l)`` (PA-I). While
    the set has room, add ``x`` with ``alpha = tau y``. When full, BPA-S solves the PA-I
    problem with one vector ``r`` removed and only the new vector's coefficient free: the
    new coefficient is ``beta = alpha_r k(x_r, x) + tau y`` (``alpha_r k(x_r, .)`` projected on
    ``k(x, .)``, plus the PA step; the prediction at ``x`` is the same with or without ``r``, so
    ``tau`` does not depend on ``r``) and ``r`` minimises the resulting objective, i.e.
    ``alpha_r^2 (1 - k(x_r, x)^2)`` (first slot on ties). Cost O(B). Binary and multiclass
    (``config.task``, :class:`MBPAS`); fold: ``_folds.fold_bpa_s``.
    """

    name = "bpa_s"
    config_class: ClassVar[type[Any]] = BPASConfig
    conformance_params = {"sigma": 0.5, "budget": 30}

    def _fold(self, folds: ModuleType, work: BudgetSet, X: np.ndarray, y: np.ndarray, scores: np.ndarray, start: int) -> None:
        work.n = int(folds.fold_bpa_s(float(self.config.C), X, y, work.arrays(), work.n, scores_2d(scores), start, self.kernel.compiled))


class MBPAS(BPAS):
    """Multiclass BPA-S (registry ``mbpa_s``): PA-I on the multiclass hinge
    ``l = 1 - (f_y - f_s)`` (``s`` the best wrong class): ``tau = min(C, l / 2)``
    (``|e_y - e_s|^2 k(x, x) = 2``), step ``tau (e_y - e_s)``. When full, the removed ``r``
    minimises ``|alpha_r|^2 (1 - k_r^2)`` (the binary derivation with the coefficient vector's
    squared norm; the loss after the step does not depend on ``r``) and ``x`` takes
    ``alpha_r k_r + tau (e_y - e_s)``: every class of the new vector can change, O(B C) per
    update as the FOGD paper notes."""

    name = "mbpa_s"
    config_class = MBPASConfig
    conformance_params = {"sigma": 0.5, "budget": 30, "n_classes": 3}
