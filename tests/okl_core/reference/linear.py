"""The numpy per-row folds of weights on feature rows (FOGD, MFOGD, FOGD-R with constant,
AdaGrad and NAG steps; NOGD's linear phase): the reference that
``okl_core.learners._linear_folds`` is tested against, byte for byte.

The functions have the fold module's names and arguments (:func:`fold_weights` ...), so
:func:`tests.okl_core.reference.folds.use_reference_folds` can run a learner on them. Each is
:func:`fold` (predict, score, learn, row after row) over a model whose ``score`` and ``add``
are numpy's: scores by ``@`` (BLAS ddot / dgemv, as ``np.dot`` in numba), steps elementwise.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from okl_core.learners import rules
from okl_core.learners._linear_folds import AdaGrad, Batch, Normalized  # noqa: F401  (the bundles the learners build)


def fold(decide: Callable[[Any, Any], Any], model: Any, y: np.ndarray, scores: np.ndarray, start: int = 0) -> int:
    """Learn rows ``start, start + 1, ...`` of ``y`` in order: ``f = model.score(i)``,
    ``scores[i] = f``, ``coef = decide(f, y[i])`` and, unless None, ``model.add(i, coef)``
    (True: stop after this row). Returns the row after the last one learned."""
    for i in range(start, len(y)):
        f = model.score(i)
        scores[i] = f
        coef = decide(f, y[i])
        if coef is not None and model.add(i, coef):
            return i + 1
    return len(y)


def rule_of(code: rules.RuleCode) -> Any:
    """The rule of :mod:`okl_core.learners.rules` whose code is ``code``."""
    kind, eta, eps = code
    config = SimpleNamespace(eta=eta, eps=eps, threshold="squared" if kind == rules.SQUARED else "absolute")
    if kind == rules.HINGE:
        return rules.BinaryHingeRule(config)
    if kind == rules.PERCEPTRON:
        return rules.PerceptronRule(config)
    return rules.RegressionRule(config)


class LinearRows:
    """Weights ``w`` ((k,) or (k, C)) on feature rows ``Z``: ``f = z . w``, ``w += z (x) coef``."""

    def __init__(self, w: np.ndarray, Z: np.ndarray):
        self.w, self.Z = w, Z
        self._z = np.zeros(0)

    def score(self, i: int) -> Any:
        z = self._z = self.Z[i].astype(np.float64, copy=False)
        return z @ self.w

    def add(self, i: int, coef: Any) -> bool:
        if isinstance(coef, np.ndarray):  # (C,): an outer product
            self.w += np.multiply.outer(self._z, coef)
        else:
            self.w += coef * self._z
        return False


class AdaGradRows(LinearRows):
    """AdaGrad: ``G += (u z)^2``, ``w += eta (u z) / (delta + sqrt(G))``."""

    def __init__(self, w: np.ndarray, G: np.ndarray, Z: np.ndarray, eta: float):
        super().__init__(w, Z)
        self.G, self.eta = G, float(eta)

    def add(self, i: int, coef: Any) -> bool:
        g = coef * self._z
        self.G += g * g
        self.w += (self.eta * g) / (rules.ADAGRAD_DELTA + np.sqrt(self.G))
        return False


def normalize_row(z: np.ndarray, s: np.ndarray, W: np.ndarray, N: np.ndarray) -> None:
    """NAG's steps 2 and 4 in place: rescale ``W[..., j]`` by ``s_j / |z_j|`` where ``|z_j| > s_j``
    (then ``s_j = |z_j|``), and ``N += q . q`` with ``q_j = z_j / s_j`` (0 where ``s_j = 0``)."""
    a = np.abs(z)
    grow = a > s
    if grow.any():
        W[..., grow] *= s[grow] / a[grow]
        s[grow] = a[grow]
    q = np.divide(z, s, out=np.zeros_like(z), where=s > 0)
    N += q @ q


def normalized_rate(eta: float, t: int, N: np.ndarray) -> float:
    """NAG's ``eta sqrt(t / N)`` (0 while ``N = 0``)."""
    return eta * math.sqrt(t / float(N[0])) if N[0] > 0 else 0.0


def normalized_step(rate: float, u: float, z: np.ndarray, s: np.ndarray, w: np.ndarray, G: np.ndarray) -> None:
    """NAG's step 5: ``G_j += (u z_j)^2`` and, where ``G_j > 0``, ``w_j += rate (u z_j) / (s_j sqrt(G_j))``."""
    g = u * z
    G += g * g
    seen = G > 0
    np.add(w, np.divide(rate * g, s * np.sqrt(G), out=np.zeros_like(g), where=seen), out=w, where=seen)


class NormalizedRows(LinearRows):
    """NAG on weights ``w`` (k,): :func:`normalize_row` before the score, :func:`normalized_step` on an update."""

    def __init__(self, w, s, G, N, Z, eta, t0):
        super().__init__(w, Z)
        self.s, self.G, self.N, self.eta, self.t0 = s, G, N, float(eta), int(t0)

    def score(self, i: int) -> Any:
        z = self._z = self.Z[i].astype(np.float64)
        normalize_row(z, self.s, self.w, self.N)
        return z @ self.w

    def add(self, i: int, coef: Any) -> bool:
        normalized_step(normalized_rate(self.eta, self.t0 + i + 1, self.N), coef, self._z, self.s, self.w, self.G)
        return False


class ClassRows:
    """MFOGD's ``W`` (C, k): scores ``W z``; a row with rival ``s`` adds ``eta z`` to ``W[y]``, subtracts it from ``W[s]``."""

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


class AdaGradClassRows(ClassRows):
    """:class:`ClassRows` with AdaGrad steps on the true (``u = +1``) and rival (``u = -1``) rows."""

    def __init__(self, W, G, Z, y, eta):
        super().__init__(W, Z, y, float(eta))
        self.G = G

    def add(self, i: int, rival: int) -> bool:
        for row, u in ((self.y[i], 1.0), (rival, -1.0)):
            g = u * self._z
            self.G[row] += g * g
            self.W[row] += (self.eta * g) / (rules.ADAGRAD_DELTA + np.sqrt(self.G[row]))
        return False


class NormalizedClassRows(ClassRows):
    """:class:`ClassRows` with NAG: the features' scales ``s`` and ``N`` shared by the classes, ``G`` per weight."""

    def __init__(self, W, s, G, N, Z, y, eta, t0):
        super().__init__(W, Z, y, float(eta))
        self.s, self.G, self.N, self.t0 = s, G, N, int(t0)

    def score(self, i: int) -> np.ndarray:
        self._z = z = self.Z[i].astype(np.float64)
        normalize_row(z, self.s, self.W, self.N)
        return self.W @ z

    def add(self, i: int, rival: int) -> bool:
        rate = normalized_rate(self.eta, self.t0 + i + 1, self.N)
        for row, u in ((self.y[i], 1.0), (rival, -1.0)):
            normalized_step(rate, u, self._z, self.s, self.W[row], self.G[row])
        return False


def multiclass_rule(eta: float, n_classes: int) -> rules.MulticlassHingeRule:
    """The multiclass rule with step ``eta``."""
    return rules.MulticlassHingeRule(SimpleNamespace(eta=eta, n_classes=n_classes))


# -- the fold module's functions ---------------------------------------------------------
def fold_weights(rule, batch, start, w, adagrad):
    """``_linear_folds.fold_weights``: a scalar rule on ``w`` (k,), constant or AdaGrad step."""
    Z, y, scores = batch
    model = AdaGradRows(w, adagrad.G, Z, adagrad.eta) if adagrad.G.size else LinearRows(w, Z)
    return fold(rule_of(rule), model, y, scores, start)


def fold_multiclass(eta, batch, start, W, class_rows):
    """``_linear_folds.fold_multiclass``: MFOGD's class rows, or ``W`` (k, C) with dense coefficients."""
    Z, y, scores = batch
    rule = multiclass_rule(eta, scores.shape[1])
    if class_rows:
        return fold(rule.rival, ClassRows(W, Z, y, eta), y, scores, start)
    return fold(rule, LinearRows(W, Z), y, scores, start)


def fold_multiclass_adagrad(batch, start, W, adagrad):
    """``_linear_folds.fold_multiclass_adagrad``: MFOGD with AdaGrad steps."""
    Z, y, scores = batch
    return fold(multiclass_rule(adagrad.eta, scores.shape[1]).rival, AdaGradClassRows(W, adagrad.G, Z, y, adagrad.eta), y, scores, start)


def fold_weights_normalized(rule, batch, start, w, nag):
    """``_linear_folds.fold_weights_normalized``: a scalar rule with NAG steps."""
    Z, y, scores = batch
    return fold(rule_of(rule), NormalizedRows(w, nag.s, nag.G, nag.N, Z, nag.eta, nag.t0), y, scores, start)


def fold_multiclass_normalized(batch, start, W, nag):
    """``_linear_folds.fold_multiclass_normalized``: MFOGD with NAG steps."""
    Z, y, scores = batch
    model = NormalizedClassRows(W, nag.s, nag.G, nag.N, Z, y, nag.eta, nag.t0)
    return fold(multiclass_rule(nag.eta, scores.shape[1]).rival, model, y, scores, start)
