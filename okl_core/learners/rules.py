"""Per-example update rules and the per-row fold shared by FOGD, kernel OGD / Perceptron and
NOGD (spec/fogd_nogd.md).

A rule maps a score ``f`` and a label ``y`` to the coefficient to add -- a float, or a
``(C,)`` array for multiclass -- or None when the example triggers no update. FOGD adds
``coefficient * z(x)`` to its weights, the kernel expansions add ``x`` with that
coefficient to their support set, and NOGD does one or the other depending on its phase,
so the papers' rules are written once, here.

:func:`fold` is the papers' online protocol, also written once: for each row, score it
with the current model, record the score, let the rule decide, and add the coefficient
before the next row. What "score" and "add" mean is the model's (a :class:`RowModel`):
weights on precomputed features, a growing support set, NOGD's budgeted expansion.

:class:`AdaGradRows` is the same model with per-coordinate AdaGrad steps (the learners'
``step='adagrad'``, :class:`StepConfig`): the rule, built with ``eta = 1``, decides and
gives the loss derivative, and the model scales each coordinate's step.
:class:`NormalizedRows` does the same with the normalized adaptive gradient of Ross,
Mineiro & Langford (``step='normalized'``).

A model may also offer the same fold compiled (a ``compiled_fold`` method, as
:class:`LinearRows` does): :func:`fold` then runs it for the rules of this module, with
the same bytes (:mod:`okl_core.learners.compiled`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol, TypeVar

import numpy as np

from okl_core.learners.base import CheckedConfig
from okl_core.learners.compiled import kernels

__all__ = [
    "HingeRuleConfig",
    "MulticlassRuleConfig",
    "RegressionRuleConfig",
    "BinaryHingeRule",
    "PerceptronRule",
    "MulticlassHingeRule",
    "RegressionRule",
    "Rule",
    "RowModel",
    "LinearRows",
    "AdaGradRows",
    "NormalizedRows",
    "normalize_row",
    "normalized_rate",
    "normalized_step",
    "StepConfig",
    "ADAGRAD_DELTA",
    "fold",
    "rule_code",
    "compiled_writable",
    "output_shape",
]

CoefT = TypeVar("CoefT")
CoefT_contra = TypeVar("CoefT_contra", contravariant=True)


class RowModel(Protocol[CoefT_contra]):
    """A model learned row by row by :func:`fold`.

    ``score(i)`` returns the model's current score of row ``i`` (a float, or a ``(C,)``
    array); ``add(i, coef)`` learns row ``i`` with the coefficient the rule decided and
    returns True when the fold must stop after this row (NOGD leaving its kernel phase).
    """

    def score(self, i: int) -> Any: ...

    def add(self, i: int, coef: CoefT_contra) -> bool: ...


def fold(decide: Callable[[Any, Any], CoefT | None], model: RowModel[CoefT], y: np.ndarray, scores: np.ndarray, start: int = 0) -> int:
    """Learn rows ``start, start + 1, ...`` of ``y`` in order: predict, score, then learn.

    For each row ``i``: ``f = model.score(i)``, ``scores[i] = f``, ``coef = decide(f, y[i])``
    and, unless ``coef`` is None, ``model.add(i, coef)``. ``decide`` is a rule (or, for a
    model that takes another form of the decision, a method of one such as
    :meth:`MulticlassHingeRule.rival`).

    When the model has a ``compiled_fold(kernels, code, y, scores, start)`` and ``decide``
    is one of this module's rules (:func:`rule_code`), that compiled loop learns the rows
    instead (the same arithmetic, so the same bytes; ``OKL_NO_JIT=1`` forces the loop
    below); it may decline by returning None.

    Returns
    -------
    int
        The row after the last one learned: ``len(y)``, or earlier when ``add`` asked to stop.
    """
    compiled = getattr(model, "compiled_fold", None)
    if compiled is not None:
        code = rule_code(decide)
        jit = kernels() if code is not None else None
        stop = None if jit is None else compiled(jit, code, y, scores, start)
        if stop is not None:
            return stop
    score, add = model.score, model.add
    for i in range(start, len(y)):
        f = score(i)
        scores[i] = f
        coef = decide(f, y[i])
        if coef is not None and add(i, coef):
            return i + 1
    return len(y)


class LinearRows:
    """Weights ``w`` on precomputed feature rows ``Z``: ``f = z . w``, learning ``w += z (x) coef``.

    ``w`` is ``(k,)`` or ``(k, C)`` float64 and is updated in place; ``Z`` rows (float32 or
    float64) are widened to float64 one at a time, as they are learned. Compiled: a scalar
    rule on ``(k,)`` weights, the multiclass rule on ``(k, C)``.
    """

    __slots__ = ("w", "Z", "_z")

    def __init__(self, w: np.ndarray, Z: np.ndarray):
        self.w, self.Z = w, Z
        self._z = np.zeros(0)

    def score(self, i: int) -> Any:
        z = self._z = self.Z[i].astype(np.float64, copy=False)
        return z @ self.w

    def add(self, i: int, coef: Any) -> bool:
        w = self.w
        if isinstance(coef, np.ndarray):  # (C,): an outer product
            w += np.multiply.outer(self._z, coef)
        else:
            w += coef * self._z
        return False

    def compiled_fold(self, jit: ModuleType, code: RuleCode, y: np.ndarray, scores: np.ndarray, start: int) -> int | None:
        """:func:`fold` of this model in compiled code (None: not this shape, use the loop)."""
        kind, eta, eps = code
        w, Z = self.w, self.Z
        if not (compiled_writable(w) and compiled_writable(scores) and Z.ndim == 2):
            return None
        if w.ndim == 1 and kind != MULTICLASS:
            return int(jit.fold_weights(kind, eta, eps, Z, w, y, scores, start, _NO_ACCUMULATOR, 0.0, 0.0))
        if w.ndim == 2 and kind == MULTICLASS:
            return int(jit.fold_multiclass(eta, Z, w, False, y, scores, start))
        return None


ADAGRAD_DELTA = 1e-8
"""AdaGrad's ``delta`` (Duchi, Hazan & Singer 2011): the step of coordinate ``j`` is
``eta / (delta + sqrt(G_j))``; it only keeps a coordinate whose gradients were all zero
finite (no step there)."""


class AdaGradRows(LinearRows):
    """Weights ``w`` (k,) on feature rows ``Z`` learned with per-coordinate AdaGrad steps.

    The rule is built with ``eta = 1``, so its coefficient ``u`` is the negative loss
    derivative (hinge ``y``, regression ``y - f``); the gradient is ``g = -u z``.
    Diagonal AdaGrad without a regularizer (Duchi, Hazan & Singer 2011, the diagonal
    composite mirror descent update with ``phi = 0``)::

        G_j += (u z_j)^2
        w_j += eta (u z_j) / (delta + sqrt(G_j))

    ``G`` (k,) is updated in place with ``w``. Compiled: ``_jit_folds.fold_weights`` given ``G``.
    """

    __slots__ = ("G", "eta")

    def __init__(self, w: np.ndarray, G: np.ndarray, Z: np.ndarray, eta: float):
        super().__init__(w, Z)
        self.G, self.eta = G, float(eta)

    def add(self, i: int, coef: Any) -> bool:
        g = coef * self._z
        self.G += g * g
        self.w += (self.eta * g) / (ADAGRAD_DELTA + np.sqrt(self.G))
        return False

    def compiled_fold(self, jit: ModuleType, code: RuleCode, y: np.ndarray, scores: np.ndarray, start: int) -> int | None:
        """:func:`fold` of this model in compiled code (None: not this shape, use the loop)."""
        kind, _, eps = code  # the rule's eta is 1 (its coefficient is u)
        if not (self.G.size and self.w.ndim == 1 and kind != MULTICLASS and all(compiled_writable(a) for a in (self.w, self.G, scores)) and self.Z.ndim == 2):
            return None
        return int(jit.fold_weights(kind, 1.0, eps, self.Z, self.w, y, scores, start, self.G, self.eta, ADAGRAD_DELTA))


def normalize_row(z: np.ndarray, s: np.ndarray, W: np.ndarray, N: np.ndarray) -> None:
    """NAG's steps before the prediction (Ross, Mineiro & Langford 2013, Algorithm 2, steps
    2 and 4), in place: each coordinate ``j`` with ``|z_j| > s_j`` has its weights (``W[..., j]``,
    every class) multiplied by ``s_j / |z_j|`` and ``s_j = |z_j|``; then ``N += q . q`` with
    ``q_j = z_j / s_j`` (0 where ``s_j = 0``: a coordinate never seen non-zero).

    ``s`` (k,) is the largest ``|z_j|`` seen, ``N`` (1,) the running sum of the rows' squared
    norms in those units. Compiled: ``_jit_folds.normalize_row`` (same operations).
    """
    a = np.abs(z)
    grow = a > s
    if grow.any():
        W[..., grow] *= s[grow] / a[grow]
        s[grow] = a[grow]
    q = np.divide(z, s, out=np.zeros_like(z), where=s > 0)
    N += q @ q


def normalized_rate(eta: float, t: int, N: np.ndarray) -> float:
    """NAG's global factor ``eta sqrt(t / N)`` (0 while ``N = 0``: no coordinate has a step)."""
    return eta * math.sqrt(t / float(N[0])) if N[0] > 0 else 0.0


def normalized_step(rate: float, u: float, z: np.ndarray, s: np.ndarray, w: np.ndarray, G: np.ndarray) -> None:
    """NAG's step 5 for the rule's coefficient ``u`` (gradient ``-u z``), in place:
    ``G_j += (u z_j)^2`` and, where ``G_j > 0``, ``w_j += rate (u z_j) / (s_j sqrt(G_j))``."""
    g = u * z
    G += g * g
    seen = G > 0
    np.add(w, np.divide(rate * g, s * np.sqrt(G), out=np.zeros_like(g), where=seen), out=w, where=seen)


class NormalizedRows(LinearRows):
    """Weights ``w`` (k,) on feature rows ``Z`` learned with NAG, the normalized adaptive
    gradient of Ross, Mineiro & Langford ("Normalized Online Learning", UAI 2013, Algorithm 2).

    For row ``t`` (``t`` counts every row learned, from ``t0 + 1``): :func:`normalize_row`
    (rescale on a larger ``|z_j|``, accumulate ``N``), then the prediction ``f = z . w``;
    when the rule (built with ``eta = 1``) gives ``u``, :func:`normalized_step` with
    :func:`normalized_rate`. ``s`` (k,), ``G`` (k,) and ``N`` (1,) are updated in place with
    ``w``. Compiled: ``_jit_folds.fold_weights_normalized``.
    """

    __slots__ = ("s", "G", "N", "eta", "t0")

    def __init__(self, w: np.ndarray, s: np.ndarray, G: np.ndarray, N: np.ndarray, Z: np.ndarray, eta: float, t0: int):
        super().__init__(w, Z)
        self.s, self.G, self.N, self.eta, self.t0 = s, G, N, float(eta), int(t0)

    def score(self, i: int) -> Any:
        z = self._z = self.Z[i].astype(np.float64)
        normalize_row(z, self.s, self.w, self.N)
        return z @ self.w

    def add(self, i: int, coef: Any) -> bool:
        normalized_step(normalized_rate(self.eta, self.t0 + i + 1, self.N), coef, self._z, self.s, self.w, self.G)
        return False

    def compiled_fold(self, jit: ModuleType, code: RuleCode, y: np.ndarray, scores: np.ndarray, start: int) -> int | None:
        """:func:`fold` of this model in compiled code (None: not this shape, use the loop)."""
        kind, _, eps = code  # the rule's eta is 1 (its coefficient is u)
        if not (self.w.ndim == 1 and kind != MULTICLASS and self.Z.ndim == 2 and all(compiled_writable(a) for a in (self.w, self.s, self.G, self.N, scores))):
            return None
        return int(jit.fold_weights_normalized(kind, eps, self.Z, self.w, self.s, self.G, self.N, self.t0, self.eta, y, scores, start))


_NO_ACCUMULATOR = np.zeros(0)  # the compiled fold's "constant step" (no AdaGrad sums)


def compiled_writable(a: np.ndarray) -> bool:
    """True for a C-contiguous writable float64 array (what the compiled folds update)."""
    return a.dtype == np.float64 and a.flags.c_contiguous and a.flags.writeable


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
    (per-coordinate ``eta / (delta + sqrt(G_j))``, :class:`AdaGradRows`) or ``'normalized'``
    (NAG, ``eta sqrt(t / N) / (s_j sqrt(G_j))``, :class:`NormalizedRows`)."""

    step: str = "constant"


# numba's on-disk cache is keyed by _jit_folds.py alone and freezes these values into the
# machine code: changing them needs a change there too (the compiled-vs-rule tests notice).
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

_RULE_CLASSES = (BinaryHingeRule, PerceptronRule, MulticlassHingeRule, RegressionRule)


def rule_code(decide: Callable[[Any, Any], Any]) -> RuleCode | None:
    """The code of ``decide`` for the compiled folds: a rule of this module (its exact class,
    so a subclass that changes the decision runs the numpy fold) or
    :meth:`MulticlassHingeRule.rival`; None for anything else."""
    if type(decide) in _RULE_CLASSES:
        return decide.code  # type: ignore[attr-defined]
    owner = getattr(decide, "__self__", None)
    if type(owner) is MulticlassHingeRule and getattr(decide, "__func__", None) is MulticlassHingeRule.rival:
        return owner.code
    return None


def output_shape(rule: Rule, n: int) -> tuple[int, ...]:
    """Shape of ``n`` coefficients (or scores) of ``rule``: ``(n,)`` or ``(n, C)``."""
    return (n,) if rule.n_outputs is None else (n, rule.n_outputs)
