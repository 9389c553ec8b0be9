"""Per-example update rules and the linear fold shared by FOGD, kernel OGD / Perceptron and
NOGD (spec/fogd_nogd.md).

A rule maps a score ``f`` and a label ``y`` to the coefficient to add -- a float, or a
``(C,)`` array for multiclass -- or None when the example triggers no update. FOGD adds
``coefficient * z(x)`` to its weights, the kernel expansions add ``x`` with that
coefficient to their support set, and NOGD does one or the other depending on its phase,
so the papers' rules are written once, here.

:func:`fold_linear` learns rows of precomputed features with the constant step (FOGD's
and NOGD's linear phase), in compiled code (:mod:`okl_core.learners._linear_folds`, through
:func:`okl_core.learners.compiled.folds`): the folds take a rule as its code
(:data:`RuleCode`, :attr:`BinaryHingeRule.code` ...). The learners' AdaGrad and NAG steps
(:class:`StepConfig`) are folds of the same module. The rules' ``__call__`` is the same
decision in Python, for the rows a compiled fold leaves to Python (a full buffer, NOGD's
transition).
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Any

import numpy as np

from okl_core.learners.base import CheckedConfig
from okl_core.learners.compiled import folds

__all__ = [
    "HingeRuleConfig",
    "MulticlassRuleConfig",
    "RegressionRuleConfig",
    "BinaryHingeRule",
    "PerceptronRule",
    "MulticlassHingeRule",
    "RegressionRule",
    "Rule",
    "RuleCode",
    "StepConfig",
    "ADAGRAD_DELTA",
    "LINEAR_FOLDS",
    "fold_linear",
    "constant_step",
    "output_shape",
]

ADAGRAD_DELTA = 1e-8
"""AdaGrad's ``delta`` (Duchi, Hazan & Singer 2011): the step of coordinate ``j`` is
``eta / (delta + sqrt(G_j))``; it only keeps a coordinate whose gradients were all zero
finite (no step there)."""

LINEAR_FOLDS = "okl_core.learners._linear_folds"
"""The fold module of weights on feature rows (:func:`okl_core.learners.compiled.folds`)."""


def fold_linear(rule: Rule, Z: np.ndarray, w: np.ndarray, y: np.ndarray, scores: np.ndarray) -> None:
    """Learn the rows of features ``Z`` (n, k) in order with the constant step, ``w`` and
    ``scores`` in place: for each row ``f = z . w`` is recorded in ``scores``, then
    ``w += z (x) rule(f, y)`` when the rule fires. ``w`` is (k,) for a scalar rule, (k, C)
    for the multiclass one (its dense coefficient, zeros included). Compiled
    (``_linear_folds.fold_weights``, ``fold_multiclass``)."""
    jit = folds(LINEAR_FOLDS)
    batch = jit.Batch(Z, y, scores)
    if isinstance(rule, MulticlassHingeRule):
        jit.fold_multiclass(rule.eta, batch, 0, w, False)
    else:
        jit.fold_weights(rule.code, batch, 0, w, constant_step(jit))


def constant_step(jit: ModuleType) -> Any:
    """The linear folds' ``AdaGrad`` bundle meaning "no AdaGrad": the constant step."""
    return jit.AdaGrad(np.zeros(0), 0.0, 0.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class HingeRuleConfig(CheckedConfig):
    """The binary hinge rule's parameter: the step ``eta`` (> 0; each learner sets its default)."""

    eta: float
    task = "binary"


@dataclasses.dataclass(frozen=True, kw_only=True)
class MulticlassRuleConfig(CheckedConfig):
    """The multiclass hinge rule's parameters: ``n_classes`` (>= 2) and the step ``eta`` (> 0)."""

    n_classes: int
    eta: float
    task = "multiclass"


@dataclasses.dataclass(frozen=True, kw_only=True)
class RegressionRuleConfig(CheckedConfig):
    """The regression rule's parameters: the step ``eta`` (> 0), ``eps`` (>= 0) and the
    ``threshold`` reading (``'absolute'``: ``|y - f| > eps``, the authors' code, default;
    ``'squared'``: ``(y - f)^2 > eps``, the paper's text)."""

    eta: float
    eps: float = 0.1
    threshold: str = "absolute"
    task = "regression"


STEPS = ("constant", "adagrad", "normalized")
"""Step rules of the random-feature learners: the papers' constant ``eta``, AdaGrad, or NAG."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepConfig(CheckedConfig):
    """The step rule: ``'constant'`` (the papers' ``eta``, default), ``'adagrad'``
    (per-coordinate ``eta / (delta + sqrt(G_j))``, ``_linear_folds.adagrad_step``) or ``'normalized'``
    (NAG, ``eta sqrt(t / N) / (s_j sqrt(G_j))``, ``_linear_folds.normalized_step``)."""

    step: str = "constant"


# numba freezes these values into the folds' machine code: this module's source is part of
# the compile cache's key (okl_core.learners.compiled._FROZEN_SOURCES).
HINGE, PERCEPTRON, ABSOLUTE, SQUARED, MULTICLASS = 0, 1, 2, 3, 4
"""Kinds of :data:`RuleCode` (the compiled folds' encoding of a rule)."""

RuleCode = tuple[int, float, float]
"""A rule as the compiled folds take it: ``(kind, eta, eps)``."""


class BinaryHingeRule:
    """Hinge loss: ``eta y`` when ``y f < 1`` (strict)."""

    n_outputs = None

    def __init__(self, config):
        self.eta = float(config.eta)
        self.code: RuleCode = (HINGE, self.eta, 0.0)

    def __call__(self, f, y):
        return self.eta * y if y * f < 1.0 else None


class PerceptronRule:
    """Perceptron: ``y`` on a mistake of ``sign(f)`` (``sign(0) = +1``)."""

    n_outputs = None

    def __init__(self, config):
        self.code: RuleCode = (PERCEPTRON, 0.0, 0.0)

    def __call__(self, f, y):
        return y if (1.0 if f >= 0 else -1.0) != y else None


class MulticlassHingeRule:
    """Multiclass hinge: ``+eta`` at ``y``, ``-eta`` at the best wrong class ``s`` when
    ``f_y - f_s < 1``; ``s`` is the first index on ties."""

    def __init__(self, config):
        self.eta = float(config.eta)
        self.n_outputs = int(config.n_classes)
        self.code: RuleCode = (MULTICLASS, self.eta, 0.0)

    def rival(self, f, y) -> int | None:
        """The class ``s`` whose coefficient drops by ``eta`` (None: no update).

        ``f`` is left as it was; a writable float64 array is masked in place and restored
        rather than copied (this runs once per example in FOGD's hot loop).
        """
        scores = f if isinstance(f, np.ndarray) and f.dtype == np.float64 and f.flags.writeable else np.array(f, dtype=np.float64)
        true_score = scores[y]
        scores[y] = -np.inf
        try:
            s = int(scores.argmax())
            rival_score = scores[s]
        finally:
            scores[y] = true_score
        return None if true_score - rival_score >= 1.0 else s

    def __call__(self, f, y):
        s = self.rival(f, y)
        if s is None:
            return None
        coef = np.zeros(self.n_outputs)
        coef[y], coef[s] = self.eta, -self.eta
        return coef


class RegressionRule:
    """``eta (y - f)`` when ``|y - f| > eps`` (absolute) or ``(y - f)^2 > eps`` (squared)."""

    n_outputs = None

    def __init__(self, config):
        self.eta, self.eps = float(config.eta), float(config.eps)
        self.squared = config.threshold == "squared"
        self.code: RuleCode = (SQUARED if self.squared else ABSOLUTE, self.eta, self.eps)

    def __call__(self, f, y):
        residual = y - f
        size = residual * residual if self.squared else abs(residual)
        return self.eta * residual if size > self.eps else None


Rule = BinaryHingeRule | PerceptronRule | MulticlassHingeRule | RegressionRule
"""The rules of this module (each maps ``(f, y)`` to a coefficient or None)."""

def output_shape(rule: Rule, n: int) -> tuple[int, ...]:
    """Shape of ``n`` coefficients (or scores) of ``rule``: ``(n,)`` or ``(n, C)``."""
    return (n,) if rule.n_outputs is None else (n, rule.n_outputs)
