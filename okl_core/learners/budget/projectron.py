"""The Projectron and Projectron++ (Orabona, Keshet & Caputo 2009).

Registry names ``projectron``, ``projectron_pp``, ``mprojectron``, ``mprojectron_pp`` (multiclass)
and ``projectron_r`` (regression).
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Any, ClassVar, NamedTuple

import numpy as np

from okl_core.learners.budget._support import BudgetLearner, BudgetSet, ClassesConfig, SupportBudgetConfig
from okl_core.learners.rules import RegressionRuleConfig

__all__ = ["ProjectronConfig", "MProjectronConfig", "ProjectronRConfig", "ProjectronState", "Projectron",
           "ProjectronPlusPlus", "MProjectron", "MProjectronPlusPlus", "ProjectronRegressor", "MARGIN_CODES"]

MARGIN_CODES = {"eta": 1, "code": 2}  # the folds' codes (_folds.MARGIN_ETA, MARGIN_CODE)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProjectronConfig(SupportBudgetConfig):
    """Projectron and Projectron++: ``eta`` (> 0) bounds the squared distance ``delta^2`` of a
    projected vector to the span of the support set (0.1, the default of Orabona's code);
    ``margin_test`` (Projectron++ only) decides the margin updates: ``'eta'`` (the published
    rule, see :class:`ProjectronPlusPlus`) or ``'code'`` (the FOGD authors' code, with
    ``U = (1/4) sqrt((B + 1) / log(B + 1))`` in place of ``1 / eta``)."""

    eta: float = 0.1
    margin_test: str = "eta"
    task = "binary"


@dataclasses.dataclass(frozen=True, kw_only=True)
class MProjectronConfig(ClassesConfig, ProjectronConfig):
    """Multiclass Projectron: ``n_classes``, kernel, ``budget`` and the threshold ``eta``."""

    task = "multiclass"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProjectronRConfig(RegressionRuleConfig, SupportBudgetConfig):
    """Projectron regression: the FOGD-R rule (step ``eta`` 0.1, ``eps``, ``threshold``), the
    ``budget`` and ``projection_eta`` (> 0, 0.1), the Projectron's bound on the squared
    distance ``delta^2`` (its ``eta``, renamed: ``eta`` is the regression step here)."""

    eta: float = 0.1
    projection_eta: float = 0.1
    task = "regression"


class ProjectronState(NamedTuple):
    """:class:`~okl_core.learners.budget.BudgetState` plus ``gram_inverse`` ((B, B) float64):
    the inverse kernel matrix of the support set in its upper-left ``n_support`` block."""

    support: np.ndarray
    alpha: np.ndarray
    stamp: np.ndarray
    n_support: np.ndarray
    n_seen: np.ndarray
    gram_inverse: np.ndarray


class ProjectronOptions(NamedTuple):
    """The Projectron's constants as ``_folds.fold_projectron`` / ``fold_mprojectron`` take them."""

    margin: int  # Projectron++'s margin test (MARGIN_CODES), 0: no margin updates
    eta: float  # Projectron++'s eta (its published test)
    bound: float  # the bound on delta^2 under which a mistake is projected
    U: float  # the code test's norm bound


class Projectron(BudgetLearner):
    """The Projectron (Orabona, Keshet & Caputo 2009; registry ``projectron``).

    On a mistake: ``d = K^{-1} k`` (``K`` the support set's kernel matrix, ``k`` the row of
    ``x``), ``delta^2 = k(x, x) - k . d`` (the squared distance of ``k(x, .)`` to the span). If
    ``delta^2 <= eta`` or the set is full, project: ``alpha += y d`` (the set is unchanged);
    otherwise add ``x`` with ``alpha = y`` and grow ``K^{-1}`` by the block (Schur complement)
    update ``[[K^{-1} + d d^T / delta^2, -d / delta^2], [-d^T / delta^2, 1 / delta^2]]``.
    Cost O(B^2) per update (the product ``K^{-1} k``), memory O(B^2). Every task
    (``config.task``: :class:`MProjectron`, :class:`ProjectronRegressor`); folds:
    ``_folds.fold_projectron``, ``fold_mprojectron`` for the multiclass versions.
    """

    name = "projectron"
    config_class: ClassVar[type[Any]] = ProjectronConfig
    state_class = ProjectronState
    conformance_params = {"sigma": 0.5, "budget": 30, "eta": 0.1}
    margin_updates: ClassVar[bool] = False

    def _extra_init(self) -> dict[str, np.ndarray]:
        B = self.config.budget
        return {"gram_inverse": np.zeros((B, B))}

    def _options(self) -> ProjectronOptions:
        cfg = self.config
        margin = MARGIN_CODES[cfg.margin_test] if self.margin_updates else 0
        B = cfg.budget
        U = 0.25 * np.sqrt((B + 1) / np.log(B + 1)) if margin == MARGIN_CODES["code"] else 0.0
        eta = float(cfg.eta) if self.margin_updates else 0.0
        bound = cfg.projection_eta if self.task == "regression" else cfg.eta
        return ProjectronOptions(margin, eta, float(bound), float(U))

    def _fold(self, folds: ModuleType, work: BudgetSet, X: np.ndarray, y: np.ndarray, scores: np.ndarray, start: int) -> None:
        arrays, G = work.arrays(), work.extra["gram_inverse"]
        if self.task == "multiclass":
            n = folds.fold_mprojectron(self._options(), X, y, arrays, G, work.n, scores, start, self.kernel.compiled)
        else:
            n = folds.fold_projectron(self._rule(folds), self._options(), X, y, arrays, G, work.n, scores, start, self.kernel.compiled)
        work.n = int(n)


class ProjectronPlusPlus(Projectron):
    """Projectron++ (Orabona, Keshet & Caputo 2009; registry ``projectron_pp``): the Projectron,
    plus projected updates on margin errors (``y f < 1`` without a mistake; ``f = 0`` with
    ``y = +1`` is one, loss 1).

    On a margin error (``0 < loss``, no mistake): if ``loss - delta^2 / eta > 0``,
    ``alpha += tau d coef`` with ``tau = min(loss / N, 1, 2 (loss - delta^2 / eta) / N)``,
    ``N = |coef|^2 |P k|^2`` the squared norm of the projected update and ``|P k|^2 = k . d``;
    ``coef`` is ``y`` (binary, ``|coef|^2 = 1``) or ``e_y - e_s`` (multiclass, 2). The set never
    grows here. ``margin_test='code'`` (the authors' code): ``tau = min(loss / |P k|^2, 1)``,
    applied when ``tau (2 loss - tau |P k|^2 - 2 U delta) >= 0`` with
    ``U = (1/4) sqrt((B+1) / log(B+1))`` (the Forgetron paper's norm bound; ``|coef|^2`` is not
    used)."""

    name = "projectron_pp"
    margin_updates = True


class MProjectron(Projectron):
    """Multiclass Projectron (Orabona, Keshet & Caputo 2009; registry ``mprojectron``): on a
    mistake the coefficient vector ``c = e_y - e_p`` is added with ``x``, or projected --
    ``alpha += d c^T`` with ``d = K^{-1} k`` -- under the same rule as :class:`Projectron`."""

    name = "mprojectron"
    config_class = MProjectronConfig
    conformance_params = {"sigma": 0.5, "budget": 30, "eta": 0.1, "n_classes": 3}


class MProjectronPlusPlus(ProjectronPlusPlus):
    """Multiclass Projectron++ (registry ``mprojectron_pp``): :class:`MProjectron`, plus on a
    margin error (prediction right, ``f_y - f_s < 1`` with ``s`` the best wrong class) the
    projected update ``alpha += tau d (e_y - e_s)^T`` of :class:`ProjectronPlusPlus` with
    ``loss = 1 - (f_y - f_s)`` and ``|e_y - e_s|^2 = 2``."""

    name = "mprojectron_pp"
    config_class = MProjectronConfig
    conformance_params = {"sigma": 0.5, "budget": 30, "eta": 0.1, "n_classes": 3}


class ProjectronRegressor(Projectron):
    """The Projectron for regression (registry ``projectron_r``).

    When the FOGD-R threshold fires, the update ``c = eta (y - f)`` takes the place of the
    Perceptron's ``y``: with ``d = K^{-1} k`` and ``delta^2 = 1 - k . d``, ``x`` is projected
    (``alpha += c d``, the set unchanged) when ``delta^2 <= projection_eta`` or the set is full,
    and added with ``c`` otherwise (``K^{-1}`` grown as in :class:`Projectron`). Reading: the
    projection is that of the update ``c k(x, .)`` onto the span, exactly as in the binary
    rule; only the coefficient changes. There is no regression Projectron++ (its margin
    updates are defined by the hinge loss). Cost O(B^2).
    """

    name = "projectron_r"
    config_class = ProjectronRConfig
    conformance_params = {"sigma": 0.5, "budget": 40, "eta": 0.3, "eps": 0.05, "projection_eta": 0.1}
