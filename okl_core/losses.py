"""Losses as value and derivative with respect to the prediction, vectorized.

Every loss has ``value(f, y)`` and ``grad(f, y)`` (d loss / d f) over arrays, and a
``task``: ``'binary'`` (y in {-1, +1}, f of shape (n,)), ``'multiclass'`` (integer y in
0..C-1, f of shape (n, C)) or ``'regression'`` (float y, f of shape (n,)). Learners take a
loss by name from :data:`LOSSES`; parameterised losses (Huber's threshold, the
eps-insensitive width, the quantile tau) are built with :func:`make_loss`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Loss", "LOSSES", "make_loss", "loss_names", "sigmoid", "softmax"]


@dataclasses.dataclass(frozen=True)
class Loss:
    """A loss: name, task, and vectorized value / derivative functions of ``(f, y)``."""

    name: str
    task: str
    value: Callable[[Any, Any], Any]
    grad: Callable[[Any, Any], Any]


def _hinge(f, y):
    return np.maximum(0.0, 1.0 - y * f)


def _hinge_grad(f, y):
    return np.where(y * f < 1.0, -y, 0.0).astype(np.float64)


def _squared_hinge(f, y):
    return np.maximum(0.0, 1.0 - y * f) ** 2


def _squared_hinge_grad(f, y):
    return -2.0 * y * np.maximum(0.0, 1.0 - y * f)


def _logistic(f, y):
    return np.logaddexp(0.0, -y * f)


def _logistic_grad(f, y):
    # d/df log(1 + exp(-y f)) = -y sigmoid(-y f), computed without overflow.
    return -y * _sigmoid(-y * f)


def _sigmoid(t):
    t = np.asarray(t, dtype=np.float64)
    out = np.empty_like(t)
    pos = t >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-t[pos]))
    e = np.exp(t[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def sigmoid(t) -> np.ndarray:
    """The logistic function ``1 / (1 + exp(-t))`` elementwise, without overflow for large ``|t|``."""
    return _sigmoid(t)


def softmax(f: np.ndarray) -> np.ndarray:
    """Row-wise softmax of ``(n, C)`` scores, shifted by the row maximum for stability."""
    f = np.asarray(f, dtype=np.float64)
    e = np.exp(f - f.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _softmax_value(f, y):
    f = np.asarray(f, dtype=np.float64)
    y = np.asarray(y, dtype=np.intp)
    m = f.max(axis=1)
    lse = m + np.log(np.exp(f - m[:, None]).sum(axis=1))
    return lse - f[np.arange(len(y)), y]


def _softmax_grad(f, y):
    p = softmax(f)
    p[np.arange(len(y)), np.asarray(y, dtype=np.intp)] -= 1.0
    return p


def _square(f, y):
    return 0.5 * (f - y) ** 2


def _square_grad(f, y):
    return np.asarray(f - y, dtype=np.float64)


def _absolute(f, y):
    return np.abs(f - y)


def _absolute_grad(f, y):
    return np.sign(f - y).astype(np.float64)


def _huber(delta):
    def value(f, y):
        r = np.abs(f - y)
        return np.where(r <= delta, 0.5 * r**2, delta * (r - 0.5 * delta))

    def grad(f, y):
        return np.clip(f - y, -delta, delta).astype(np.float64)

    return value, grad


def _eps_insensitive(eps):
    def value(f, y):
        return np.maximum(0.0, np.abs(f - y) - eps)

    def grad(f, y):
        r = f - y
        return np.where(np.abs(r) > eps, np.sign(r), 0.0).astype(np.float64)

    return value, grad


def _quantile(tau):
    # Pinball loss of the residual r = y - f: tau r if r >= 0 else (tau - 1) r.
    def value(f, y):
        r = y - f
        return np.maximum(tau * r, (tau - 1.0) * r)

    def grad(f, y):
        return np.where(y - f >= 0, -tau, 1.0 - tau).astype(np.float64)

    return value, grad


LOSSES = {
    "hinge": Loss("hinge", "binary", _hinge, _hinge_grad),
    "squared_hinge": Loss("squared_hinge", "binary", _squared_hinge, _squared_hinge_grad),
    "logistic": Loss("logistic", "binary", _logistic, _logistic_grad),
    "softmax": Loss("softmax", "multiclass", _softmax_value, _softmax_grad),
    "square": Loss("square", "regression", _square, _square_grad),
    "absolute": Loss("absolute", "regression", _absolute, _absolute_grad),
    "huber": Loss("huber", "regression", *_huber(1.0)),
    "eps_insensitive": Loss("eps_insensitive", "regression", *_eps_insensitive(0.1)),
    "quantile": Loss("quantile", "regression", *_quantile(0.5)),
}
"""Losses with their default parameters (Huber threshold 1, eps 0.1, tau 0.5)."""

_PARAMETRISED = {"huber": _huber, "eps_insensitive": _eps_insensitive, "quantile": _quantile}


def loss_names() -> list[str]:
    """Names accepted by :func:`make_loss`."""
    return sorted(LOSSES)


def make_loss(name: str, param: float | None = None) -> Loss:
    """Return loss ``name``; ``param`` sets Huber's threshold, the eps width or tau.

    Raises
    ------
    ValueError
        Unknown name, a parameter for a loss without one, or an out-of-range parameter.
    """
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose from {loss_names()}")
    if param is None:
        return LOSSES[name]
    if name not in _PARAMETRISED:
        raise ValueError(f"loss {name!r} takes no parameter (got {param!r})")
    if isinstance(param, (bool, np.bool_)) or not isinstance(param, (int, float, np.integer, np.floating)):
        raise ValueError(f"loss_param of loss {name!r} must be a number, got {param!r}")
    param = float(param)
    if name == "quantile" and not 0.0 < param < 1.0:
        raise ValueError(f"quantile tau must be in (0, 1), got {param}")
    if name == "huber" and not (param > 0.0 and math.isfinite(param)):  # 0: a zero gradient everywhere, nothing is learned
        raise ValueError(f"huber threshold must be a finite number > 0, got {param}")
    if name == "eps_insensitive" and not (param >= 0.0 and math.isfinite(param)):
        raise ValueError(f"eps_insensitive parameter must be a finite number >= 0, got {param}")
    base = LOSSES[name]
    return Loss(name, base.task, *_PARAMETRISED[name](param))
