"""Divergence: a learner whose scores, state or errors stop being finite numbers, or explode.

A step size that is too large, or targets far from the scale a learner expects, make its
iterates grow until they overflow to inf and then turn into NaN. Long before that they
are finite and useless: BOGD-R with a step too large for its budget reaches an online MSE
of 5e16 on targets in [0, 1] without a single inf. Both are outcomes of the run, not
errors: okl finishes the job, reports the first batch where it happened
(:func:`okl_core.evaluation.run_online`, the training pipeline's summary and
``metrics.json``, a sweep's and a reproduction's ``diverged`` rows), and never hands a
non-finite model to ``predict`` (:func:`okl_core.state.model_from_bytes` refuses it).

:func:`exploded` is the finite rule, read from the *cumulative* online metrics (never from
one batch, whose few rows could make any ratio large):

* regression: the online MSE is more than :data:`EXPLOSION_FACTOR` (1000) times the mean of
  the squared targets, ``E[y^2]`` -- the MSE of answering 0 for every row, which is what
  every learner answers before it has learned anything. The reference is ``E[y^2]``
  rather than the mean predictor's MSE (the variance), because a healthy learner that
  starts at 0 on targets far from 0 (years, prices) is legitimately many variances off
  during its first rows, while no learner that only ever moves its answers towards the
  targets is 30 times the targets' size off on average over the stream.
* classification: mistake rates cannot explode, so the rule is on the scores: the mean
  over the stream of the largest score magnitude (``|f|``, or ``max_c |f_c|``) is more
  than :data:`EXPLOSION_FACTOR` times the number of rows scored. Every kernel learner here
  adds to its function at most a step times a loss gradient bounded by 1 times a kernel
  bounded by 1 (Gaussian, Laplacian, Cauchy: ``|k| <= 1``; random features of norm 1) per
  row, so after ``t`` rows ``|f| <= eta t`` and the stream's mean is at most ``eta n / 2``:
  the rule cannot fire below a step of 2000. Perceptron-style learners without a step
  (kernel perceptron, RBP, Forgetron, the Projectrons, BPA-S) add coefficients of size at
  most 1 and never reach it; scores that grow geometrically reach it within a few rows.
"""

from __future__ import annotations

import math

import numpy as np

from okl_core.metrics import Prequential

__all__ = ["non_finite_fields", "diverged", "divergence_reason", "metrics_finite", "exploded", "explosion_text", "EXPLOSION_FACTOR"]

EXPLOSION_FACTOR = 1e3
"""How far past the scale of the targets (regression: ``E[y^2]``) or of a bounded learner's
scores (classification: rows scored) the cumulative online loss must be to count as
divergence (see the module docstring for why no healthy learner reaches it)."""


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


def exploded(metrics: Prequential) -> bool:
    """Whether cumulative online ``metrics`` show a finite explosion (module docstring's rule).

    Regression: ``mse > EXPLOSION_FACTOR * E[y^2]`` (never when every target is 0).
    Classification: ``mean max|score| > EXPLOSION_FACTOR * n``. False before any row, and for
    accumulators serialized before the sums it reads were kept.
    """
    n = metrics.n
    if not n:
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        if metrics.task == "regression":
            mean_y = metrics.sum_y / n
            zero_mse = metrics.sum_sq_dev_y / n + mean_y * mean_y  # E[y^2]: the MSE of answering 0
            return bool(zero_mse > 0 and metrics.mse > EXPLOSION_FACTOR * zero_mse)
        return bool(metrics.sum_abs_score / n > EXPLOSION_FACTOR * n)


def explosion_text(metrics: Prequential) -> str:
    """What exploded, in words: ``online mse 5.6e+04, over 1000 times the mean squared target 0.6``."""
    n = max(metrics.n, 1)
    if metrics.task == "regression":
        mean_y = metrics.sum_y / n
        return (f"online mse {metrics.mse:.3g}, over {EXPLOSION_FACTOR:.0f} times the mean squared target "
                f"{metrics.sum_sq_dev_y / n + mean_y * mean_y:.3g}")
    return f"mean score magnitude {metrics.sum_abs_score / n:.3g}, over {EXPLOSION_FACTOR:.0f} times the {metrics.n} rows scored"


def divergence_reason(state, scores, metrics: Prequential | None = None) -> str | None:
    """Why a batch counts as diverged: ``"not finite"`` (its online ``scores``, the ``state``
    after it or ``metrics`` hold NaN or inf), ``"exploded"`` (:func:`exploded` ``metrics``), or None.

    ``metrics`` must be the cumulative online metrics of the stream so far (the explosion
    rule is meaningless on one batch). Checking the state costs one pass over its arrays,
    less than the update that made it.
    """
    if not np.isfinite(np.asarray(scores)).all() or (metrics is not None and not metrics_finite(metrics)):
        return "not finite"
    if non_finite_fields(state):
        return "not finite"
    if metrics is not None and exploded(metrics):
        return "exploded"
    return None


def diverged(state, scores, metrics: Prequential | None = None) -> bool:
    """True when :func:`divergence_reason` gives a reason (NaN or inf, or an explosion)."""
    return divergence_reason(state, scores, metrics) is not None
