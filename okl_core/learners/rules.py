"""Per-example update rules shared by FOGD, kernel OGD / Perceptron and NOGD (spec/fogd_nogd.md).

A rule maps a score ``f`` and a label ``y`` to the coefficient to add -- a float, or a
``(C,)`` array for multiclass -- or None when the example triggers no update. FOGD adds
``coefficient * z(x)`` to its weights, the kernel expansions add ``x`` with that
coefficient to their support set, and NOGD does one or the other depending on its phase,
so the papers' rules are written once, here.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BinaryHingeRule", "PerceptronRule", "MulticlassHingeRule", "RegressionRule", "output_shape"]


class BinaryHingeRule:
    """Hinge loss: ``eta y`` when ``y f < 1`` (strict)."""

    n_outputs = None

    def __init__(self, config):
        self.eta = float(config.eta)

    def __call__(self, f, y):
        return self.eta * y if y * f < 1.0 else None


class PerceptronRule:
    """Perceptron: ``y`` on a mistake of ``sign(f)`` (``sign(0) = +1``)."""

    n_outputs = None

    def __init__(self, config):
        pass

    def __call__(self, f, y):
        return y if (1.0 if f >= 0 else -1.0) != y else None


class MulticlassHingeRule:
    """Multiclass hinge: ``+eta`` at ``y``, ``-eta`` at the best wrong class ``s`` when
    ``f_y - f_s < 1``; ``s`` is the first index on ties."""

    def __init__(self, config):
        self.eta = float(config.eta)
        self.n_outputs = int(config.n_classes)

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

    def __call__(self, f, y):
        residual = y - f
        size = residual * residual if self.squared else abs(residual)
        return self.eta * residual if size > self.eps else None


def output_shape(rule, n: int) -> tuple:
    """Shape of ``n`` coefficients (or scores) of ``rule``: ``(n,)`` or ``(n, C)``."""
    return (n,) if rule.n_outputs is None else (n, rule.n_outputs)
