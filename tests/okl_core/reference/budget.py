"""The budget learners' per-row fold in numpy: the reference their compiled folds are tested against.

:func:`fold` is ``update`` of a budget learner (:mod:`okl_core.learners.budget`) written
with numpy, row by row, as the package ran it before its folds were compiled: the kernel row
of :meth:`okl_core.kernels.Kernel.row_against_buffer`, scores by the same BLAS products
(``k @ alpha``), the updates elementwise. It gives the compiled folds' bytes
(tests/okl_core/test_compiled_budget.py, test_compiled_projectron.py). ``seen``, when given,
counts what the updates did (``add``, ``project_room``, ``project_full``, ``margin``,
``replace``), so a test can check that its case exercises the maintenance it is there for.
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from okl_core.kernels import Kernel
from okl_core.learners.base import validate_xy
from okl_core.learners.budget import (
    BOGD,
    BPAS,
    FORGETRON_RATIO,
    RBP,
    BudgetSet,
    Forgetron,
    NORMARegressor,
    Projectron,
    squared_norms,
)
from okl_core.learners.rules import MulticlassHingeRule, PerceptronRule, RegressionRule


class ReferenceSet(BudgetSet):
    """:class:`~okl_core.learners.budget.BudgetSet` with the numpy fold's operations."""

    def __init__(self, kernel: Kernel, state: Any):
        super().__init__(state)
        self.kernel = kernel

    def kernel_row(self, x: np.ndarray) -> np.ndarray:
        """``k(s_j, x)`` for the ``n`` support vectors (float64 ``x``)."""
        return self.kernel.row_against_buffer(x, self.columns[:, : self.n], self.sq_norms[: self.n])

    def score(self, k: np.ndarray) -> np.ndarray:
        """``f(x) = k . alpha`` from a kernel row (0-d, or ``(C,)`` for multiclass)."""
        return k @ self.alpha[: self.n]

    def put(self, slot: int, x32: np.ndarray, x64: np.ndarray, coef: Any, stamp: int) -> None:
        """Store ``x`` with ``coef`` in ``slot`` (``n``: a new slot; below: replace that vector)."""
        self.rows[slot] = x32
        self.columns[:, slot] = x64
        self.sq_norms[slot] = squared_norms(x64[None, :])[0]
        self.alpha[slot] = coef
        self.stamp[slot] = stamp
        if slot == self.n:
            self.n += 1

    def oldest(self) -> int:
        """The slot holding the vector of the earliest example."""
        return int(np.argmin(self.stamp[: self.n]))


def random_slot(u: float, n: int) -> int:
    """Slot ``floor(u n)`` for a uniform ``u`` in (0, 1)."""
    return min(int(u * n), n - 1)


def pair(n_classes: int, y: int, s: int, value: float = 1.0) -> np.ndarray:
    """The multiclass coefficient ``value (e_y - e_s)``."""
    coef = np.zeros(n_classes)
    coef[y], coef[s] = value, -value
    return coef


def multiclass_mistake(f: np.ndarray, y: int) -> np.ndarray | None:
    """``e_y - e_p`` when the prediction ``p`` (first argmax of ``f``) is not ``y``, else None."""
    p = int(np.argmax(f))
    return None if p == y else pair(len(f), y, p)


def best_wrong_class(f: np.ndarray, y: int) -> tuple[int, float]:
    """``s``, the highest-scoring class other than ``y`` (first on ties), and the margin ``f_y - f_s``."""
    scores = np.array(f, dtype=np.float64)
    scores[y] = -np.inf
    s = int(np.argmax(scores))
    return s, float(f[y] - f[s])


def forgetron_shrink(sigma: float, mu: float, damage: float, mistakes: int, root: str = "feasible") -> float:
    """The Forgetron's self-tuned ``phi`` (:func:`okl_core.learners.budget.forgetron_shrink`) in numpy."""
    a = sigma * sigma - 2.0 * sigma * mu
    b = 2.0 * sigma
    c = min(damage - FORGETRON_RATIO * mistakes, 0.0)
    if a + b + c <= 0.0:
        return 1.0
    disc = np.sqrt(max(b * b - 4.0 * a * c, 0.0))
    if root == "code" and a < 0.0:
        return float((-b - disc) / (2.0 * a))
    return float(-2.0 * c / (b + disc))


def coefficient(learner: Any, f: Any, y: Any) -> Any:
    """The update rule's coefficient (None: no update): the Perceptron, the multiclass
    Perceptron or the FOGD-R rule by task (BOGD: the hinge, the multiclass hinge)."""
    if learner.task == "regression":
        return RegressionRule(learner.config)(f, y)
    if isinstance(learner, BOGD) and learner.task == "multiclass":
        return MulticlassHingeRule(learner.config)(f, y)
    if isinstance(learner, BOGD):
        return learner.config.eta * y if y * f < 1.0 else None
    if learner.task == "multiclass":
        return multiclass_mistake(f, y)
    return PerceptronRule(learner.config)(f, y)


# -- one row of each algorithm ----------------------------------------------------------------
def learn_rbp(learner, work, x32, x64, y, k, f, t, u, seen):
    coef = coefficient(learner, f, y)
    if coef is not None:
        work.put(random_slot(u, work.n) if work.full else work.n, x32, x64, coef, t)


def learn_forgetron(learner, work, x32, x64, y, k, f, t, u, seen):
    coef = coefficient(learner, f, y)
    if coef is None:
        return
    cfg, extra = learner.config, work.extra
    mistakes = int(extra["mistakes"]) + 1
    extra["mistakes"] = np.asarray(mistakes, dtype=np.int64)
    if not work.full:
        work.put(work.n, x32, x64, coef, t)
        return
    r = work.oldest()
    f_r = work.score(work.kernel_row(work.columns[:, r].copy())) + np.multiply(coef, float(k[r]))
    sigma, mu = forgetron_weight_and_margin(learner, work.alpha[r], f_r)
    damage = float(extra["damage"])
    phi = forgetron_shrink(sigma, mu, damage, mistakes, cfg.phi_root) if cfg.shrinking else 1.0
    lam = phi * sigma
    extra["damage"] = np.asarray(damage + lam * lam + 2.0 * lam - 2.0 * lam * (phi * mu))
    work.alpha[: work.n] *= phi
    work.put(r, x32, x64, np.multiply(coef, phi), t)


def forgetron_weight_and_margin(learner, alpha_r, f_r) -> tuple[float, float]:
    """``sigma`` and ``mu`` of the oldest vector: ``(|alpha_r|, sign(alpha_r) f'(x_r))``, or
    multiclass the weight at ``y_r`` and its class score or multiclass margin."""
    if learner.task != "multiclass":
        alpha_r = float(alpha_r)
        return abs(alpha_r), (1.0 if alpha_r >= 0 else -1.0) * float(f_r)
    y_r = int(np.argmax(alpha_r))
    if learner.config.margin == "class_score":
        return float(alpha_r[y_r]), float(f_r[y_r])
    return float(alpha_r[y_r]), best_wrong_class(f_r, y_r)[1]


def learn_projectron(learner, work, x32, x64, y, k, f, t, u, seen):
    if learner.task == "multiclass":
        coef = multiclass_mistake(f, y)
        if coef is not None:
            projectron_mistake(learner, work, x32, x64, coef, k, t, seen)
        elif learner.margin_updates:
            s, margin = best_wrong_class(f, y)
            if margin < 1.0:
                projectron_margin(learner, work, pair(len(f), y, s), k, 1.0 - margin, 2.0, seen)
        return
    coef = coefficient(learner, f, y)
    if coef is not None:
        projectron_mistake(learner, work, x32, x64, coef, k, t, seen)
    elif learner.margin_updates and y * f < 1.0:
        projectron_margin(learner, work, y, k, 1.0 - y * f, 1.0, seen)


def projection(work, k):
    """``d = K^{-1} k`` and ``delta^2`` (clipped at 0 against rounding)."""
    n = work.n
    d = work.extra["gram_inverse"][:n, :n] @ k
    return d, max(1.0 - float(k @ d), 0.0)


def projectron_mistake(learner, work, x32, x64, coef, k, t, seen):
    """Add ``x`` with ``coef`` (a float, or a ``(C,)`` vector), or project it."""
    cfg = learner.config
    if work.n == 0:
        seen["add"] += 1
        work.put(0, x32, x64, coef, t)
        work.extra["gram_inverse"][0, 0] = 1.0  # 1 / k(x, x)
        return
    d, delta2 = projection(work, k)
    if delta2 <= (cfg.projection_eta if learner.task == "regression" else cfg.eta) or work.full:
        seen["project_full" if work.full else "project_room"] += 1
        work.alpha[: work.n] += np.multiply.outer(d, coef)
        return
    seen["add"] += 1
    n, inverse = work.n, work.extra["gram_inverse"]
    inverse[:n, :n] += np.outer(d, d) / delta2
    inverse[:n, n] = inverse[n, :n] = -d / delta2
    inverse[n, n] = 1.0 / delta2
    work.put(n, x32, x64, coef, t)


def projectron_margin(learner, work, coef, k, loss, coef_norm2, seen):
    """Projectron++'s margin update (published rule, or the authors' code's)."""
    if work.n == 0:
        return
    cfg = learner.config
    d, delta2 = projection(work, k)
    if cfg.margin_test == "code":
        B = cfg.budget
        U = 0.25 * np.sqrt((B + 1) / np.log(B + 1))
        norm2 = 1.0 - delta2
        if norm2 <= 0.0:
            return
        tau = min(loss / norm2, 1.0)
        if not tau * (2.0 * loss - tau * norm2 - 2.0 * U * np.sqrt(delta2)) >= 0.0:
            return
    else:
        norm2 = (1.0 - delta2) * coef_norm2
        gain = loss - delta2 / cfg.eta
        if norm2 <= 0.0 or gain <= 0.0:
            return
        tau = min(loss / norm2, 1.0, 2.0 * gain / norm2)
    before = work.alpha.copy()
    work.alpha[: work.n] += np.multiply.outer(tau * d, coef)
    seen["margin"] += int(not np.array_equal(before, work.alpha))


def learn_bpa_s(learner, work, x32, x64, y, k, f, t, u, seen):
    C = learner.config.C
    if learner.task == "multiclass":
        s, margin = best_wrong_class(f, y)
        loss = 1.0 - margin
        step = pair(len(f), y, s, min(C, loss / 2.0)) if loss > 0.0 else None
    else:
        loss = 1.0 - y * f
        step = min(C, loss) * y if loss > 0.0 else None
    if step is None:
        return
    seen["replace" if work.full else "add"] += 1
    if not work.full:
        work.put(work.n, x32, x64, step, t)
        return
    alpha = work.alpha[: work.n]
    weights = alpha * alpha if alpha.ndim == 1 else squared_norms(alpha)
    r = int(np.argmin(weights * (1.0 - k * k)))
    work.put(r, x32, x64, alpha[r] * float(k[r]) + step, t)


def learn_bogd(learner, work, x32, x64, y, k, f, t, u, seen):
    cfg = learner.config
    coef = coefficient(learner, f, y)
    if cfg.decay == "every_example" or coef is not None:
        work.alpha[: work.n] *= 1.0 - cfg.eta * cfg.lam
    if coef is None:
        return
    if not work.full:
        work.put(work.n, x32, x64, coef, t)
        return
    B = work.n
    if cfg.removal == "oldest":
        work.put(work.oldest(), x32, x64, coef, t)
    else:
        work.alpha[:B] *= B / (B - 1.0)
        work.put(random_slot(u, B), x32, x64, coef, t)
    largest = float(np.max(np.abs(work.alpha[:B])))  # the authors' code's bound eta gamma (no-op for inf)
    limit = cfg.eta * cfg.gamma
    if largest > limit:
        work.alpha[:B] *= limit / largest


def learn_norma(learner, work, x32, x64, y, k, f, t, u, seen):
    cfg = learner.config
    work.alpha[: work.n] *= 1.0 - cfg.eta * cfg.lam
    residual, eps = y - f, float(work.extra["eps"])
    if abs(residual) <= eps:
        work.extra["eps"] = np.asarray(eps - cfg.nu * cfg.eta)
        return
    work.extra["eps"] = np.asarray(eps + (1.0 - cfg.nu) * cfg.eta)
    slot = work.oldest() if work.full else work.n
    work.put(slot, x32, x64, cfg.eta * (1.0 if residual > 0 else -1.0), t)


ALGORITHMS = ((RBP, learn_rbp), (Forgetron, learn_forgetron), (Projectron, learn_projectron), (BPAS, learn_bpa_s),
              (BOGD, learn_bogd), (NORMARegressor, learn_norma))


def fold(learner: Any, state: Any, X: Any, y: Any, seen: collections.Counter | None = None) -> tuple[Any, np.ndarray]:
    """``learner.update(state, X, y)`` by the numpy per-row fold: ``(state, online scores)``."""
    [learn] = [fn for cls, fn in ALGORITHMS if isinstance(learner, cls)]
    seen = collections.Counter() if seen is None else seen
    X, y = validate_xy(learner, X, y)
    work = ReferenceSet(learner.kernel, state)
    start = int(state.n_seen)
    draws = learner._draws(start, start + len(y))
    scores = np.zeros((len(y),) + work.alpha.shape[1:])
    labels = y.tolist()  # floats, or class indices for multiclass
    for i in range(len(y)):
        x64 = X[i].astype(np.float64)
        k = work.kernel_row(x64)
        raw = work.score(k)
        f: Any = float(raw) if raw.ndim == 0 else raw
        scores[i] = f
        u = 0.0 if draws is None else float(draws[i])
        learn(learner, work, X[i], x64, labels[i], k, f, start + i, u, seen)
    return work.state(learner.state_class, start + len(y)), scores
