"""Divergence: a learner whose scores, state or errors stop being finite numbers.

A step size that is too large, or targets far from the scale a learner expects, make its
iterates grow until they overflow to inf and then turn into NaN. That is an outcome of
the run, not an error: okl finishes the job, reports the first batch where it happened
(:func:`okl_core.evaluation.run_online`, the training pipeline's summary and
``metrics.json``, a sweep's ``diverged`` points), and never hands such a model to
``predict`` (:func:`okl_core.state.model_from_bytes` refuses non-finite models).
"""

from __future__ import annotations

import math

import numpy as np

from okl_core.metrics import Prequential

__all__ = ["non_finite_fields", "diverged", "metrics_finite"]


def non_finite_fields(state) -> list[str]:
    """Names of the state's floating-point arrays that hold NaN or inf (empty: all finite)."""
    out = []
    for name, value in state._asdict().items():
        a = np.asarray(value)
        if a.dtype.kind in "fc" and not np.isfinite(a).all():
            out.append(name)
    return out


def metrics_finite(metrics: Prequential) -> bool:
    """Whether the accumulated errors are finite (regression sums overflow to inf, or turn NaN)."""
    return math.isfinite(metrics.sum_squared_error) and math.isfinite(metrics.sum_absolute_error)


def diverged(state, scores, metrics: Prequential | None = None) -> bool:
    """True when a batch's online ``scores``, the ``state`` after it, or ``metrics`` are not finite.

    Checking the state costs one pass over its arrays, less than the update that made it.
    """
    if not np.isfinite(np.asarray(scores)).all():
        return True
    if metrics is not None and not metrics_finite(metrics):
        return True
    return bool(non_finite_fields(state))
