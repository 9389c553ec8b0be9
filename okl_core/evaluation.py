"""Evaluation protocols on in-memory arrays: the online (prequential) run and test scoring.

The papers report two kinds of numbers (docs/papers.md):

* the *online* metric: every example is predicted, scored, then learned from, in stream
  order; the metric is the cumulative mistake rate (or mean loss) over the whole stream.
  :func:`run_online` folds ``learner.update`` over consecutive batches and accumulates a
  :class:`~okl_core.metrics.Prequential`; it also records the metric after a few
  log-spaced numbers of examples (the papers' "online error vs examples seen" figures);
* the *test* metric: a trained state predicts a held-out set (:func:`evaluate`).

Multiple runs are random permutations of one data set; :func:`permuted` gives run ``r``'s
order from :func:`okl_core.random.permutation` keyed by ``(shuffle_seed, r)``.

Metric names used across okl (sweeps, reports, reproductions): ``mistake_rate``
(classification; ``error`` is accepted as its old name), ``mse`` and ``mae`` (regression),
all fractions; :func:`metric_value` reads them from
a :class:`Prequential`. Everything here is plain numpy: the Dask sweeps and the Beam
pipelines call it, never the other way round.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np

from okl_core.divergence import divergence_reason
from okl_core.learners.base import Learner, check_int, validate_xy
from okl_core.metrics import BASELINE_MARGIN, Prequential, beats_baseline  # re-exported (they live beside Prequential)
from okl_core.random import permutation

__all__ = [
    "METRICS",
    "METRIC_ALIASES",
    "canonical_metric",
    "OnlineRun",
    "run_online",
    "evaluate",
    "permuted",
    "metric_value",
    "default_metric",
    "task_metrics",
    "curve_checkpoints",
    "effective_batch_rows",
    "mean_std",
    "BASELINE_MARGIN",
    "constant_baseline",
    "beats_baseline",
]

METRICS = {
    "mistake_rate": "mistakes of sign / first argmax over examples scored (classification)",
    "mse": "mean squared error (regression)",
    "mae": "mean absolute error (regression)",
}
"""Metric name -> meaning. All are "lower is better", and fractions (never percent)."""

METRIC_ALIASES = {"error": "mistake_rate"}
"""Names accepted for a metric besides its own (okl <= 0.1 called the mistake rate ``error``)."""


def canonical_metric(name: str) -> str:
    """The metric's own name: ``name`` itself, or what an alias of :data:`METRIC_ALIASES` stands for."""
    return METRIC_ALIASES.get(name, name)


def task_metrics(task: str) -> tuple[str, ...]:
    """The metric names meaningful for ``task``."""
    return ("mse", "mae") if task == "regression" else ("mistake_rate",)


def default_metric(task: str) -> str:
    """The papers' headline metric of ``task``: ``mistake_rate`` or ``mse``."""
    return task_metrics(task)[0]


def metric_value(metrics: Prequential, name: str) -> float:
    """Read metric ``name`` (see :data:`METRICS`) from an accumulator.

    Raises
    ------
    ValueError
        Unknown name, or a metric that does not exist for the accumulator's task.
    """
    name = canonical_metric(name)
    if name not in task_metrics(metrics.task):
        raise ValueError(f"metric {name!r} is not defined for {metrics.task} (choose from {task_metrics(metrics.task)})")
    return {"mistake_rate": metrics.mistake_rate, "mse": metrics.mse, "mae": metrics.mae}[name]


@dataclasses.dataclass
class OnlineRun:
    """Result of :func:`run_online`.

    Attributes
    ----------
    state : NamedTuple
        The learner's state after the whole stream.
    metrics : Prequential
        Online (predict-then-learn) metrics over the stream.
    curve_n : ndarray of int64
        Numbers of examples seen at the checkpoints (increasing, last = n).
    curve_value : ndarray of float64
        The task's default metric (:func:`default_metric`) over the first ``curve_n[k]``
        examples.
    seconds : float
        Wall time of the updates.
    diverged_at : int or None
        Rows learned before the first batch whose online scores, resulting state or
        accumulated errors hold NaN or inf (:func:`okl_core.divergence.diverged`); None
        when the run stayed finite. A diverged run still folds every batch. Also set by a
        finite explosion (:func:`okl_core.divergence.exploded` on the metrics so far).
    diverged_reason : str or None
        ``"not finite"`` or ``"exploded"`` (:func:`okl_core.divergence.divergence_reason`)
        at ``diverged_at``.
    """

    state: Any
    metrics: Prequential
    curve_n: np.ndarray
    curve_value: np.ndarray
    seconds: float
    diverged_at: int | None = None
    diverged_reason: str | None = None

    @property
    def diverged(self) -> bool:
        """Whether the run diverged (see :attr:`diverged_at`)."""
        return self.diverged_at is not None


def curve_checkpoints(n: int, points: int) -> np.ndarray:
    """Example counts in ``[1, n]`` where a curve is sampled, always ending at ``n``.

    The union of ``points`` log-spaced and ``points`` evenly spaced counts (at most
    ``2 points``), so that the curve reads well on a log and on a linear axis.
    """
    if n <= 0 or points <= 0:
        return np.zeros(0, dtype=np.int64)
    log_spaced = np.round(np.geomspace(1, n, num=points))
    even = np.round(np.linspace(n / points, n, num=points))
    grid = np.concatenate([log_spaced, even, [n]]).astype(np.int64)
    return np.unique(grid[(grid >= 1) & (grid <= n)])


def effective_batch_rows(learner: Learner, batch_rows: int) -> int:
    """``batch_rows`` rounded up to a multiple of the learner's mini-batch, if it has one.

    A mini-batch-defined learner (DSG) cuts each ``update`` batch into mini-batches; a
    batch that is not a multiple of its ``batch_size`` would end in a short mini-batch
    and change the algorithm.
    """
    batch_rows = int(batch_rows)
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be >= 1, got {batch_rows}")
    mini = getattr(learner.config, "batch_size", None) if learner.minibatch_defined else None
    if mini:
        batch_rows = -(-batch_rows // mini) * mini
    return batch_rows


def run_online(learner: Learner, X, y, batch_rows: int = 4096, state=None, curve_points: int = 64) -> OnlineRun:
    """Fold ``learner.update`` over ``(X, y)`` in order, in batches; prequential metrics.

    Parameters
    ----------
    learner : Learner
    X : array-like (n, d)
    y : array-like (n,)
    batch_rows : int
        Rows per ``update`` call (rounded up to a multiple of a mini-batch learner's
        ``batch_size``, see :func:`effective_batch_rows`). For per-row learners the result
        does not depend on it, up to rounding: the random-feature learners map a batch to
        its features with one float32 matrix product, whose last digit for a row can depend
        on the rows in the product (FOGD, d = 20, 5,000 rows: weights within 2.6e-8 across
        batches of 1 to 4,096 rows). The same ``batch_rows`` gives the same bytes.
    state : NamedTuple, optional
        Start from this state instead of ``learner.init()``.
    curve_points : int
        Checkpoints of the online curve: ``curve_points`` log-spaced plus as many evenly
        spaced (see :func:`curve_checkpoints`; 0: no curve).

    Returns
    -------
    OnlineRun

    Raises
    ------
    ValueError
        A stream the learner refuses up front (:meth:`~okl_core.learners.base.Learner.check_stream`:
        the exact kernel ridge learners past ``max_rows``).
    """
    X = np.asarray(X)
    y = np.asarray(y)
    if len(X) != len(y):
        raise ValueError(f"X has {len(X)} rows but y has {len(y)}")
    batch_rows = effective_batch_rows(learner, batch_rows)
    state = learner.init() if state is None else state
    learner.check_stream(int(state.n_seen) + len(y))  # a state that would outgrow its cap: refused before the first row
    metrics = Prequential(task=learner.task)
    checkpoints = curve_checkpoints(len(y), curve_points)
    curve = []
    next_cp = 0
    diverged_at, diverged_reason = None, None
    start_time = time.perf_counter()
    for start in range(0, len(y), batch_rows):
        stop = min(start + batch_rows, len(y))
        state, scores = learner.update(state, X[start:stop], y[start:stop])
        # Account the batch in pieces cut at the checkpoints so the curve is exact.
        lo = start
        while next_cp < len(checkpoints) and checkpoints[next_cp] <= stop:
            cp = int(checkpoints[next_cp])
            metrics.add(scores[lo - start : cp - start], y[lo:cp])
            curve.append(metric_value(metrics, default_metric(learner.task)))
            lo = cp
            next_cp += 1
        if lo < stop:
            metrics.add(scores[lo - start :], y[lo:stop])
        if diverged_at is None:
            diverged_reason = divergence_reason(state, scores, metrics)
            diverged_at = None if diverged_reason is None else start
    seconds = time.perf_counter() - start_time
    return OnlineRun(
        state=state,
        metrics=metrics,
        curve_n=checkpoints[: len(curve)].astype(np.int64),
        curve_value=np.asarray(curve, dtype=np.float64),
        seconds=seconds,
        diverged_at=diverged_at,
        diverged_reason=diverged_reason,
    )


def evaluate(learner: Learner, state, X, y, batch_rows: int = 4096) -> Prequential:
    """Score a trained ``state`` on held-out rows (predictions in chunks of ``batch_rows``).

    Raises
    ------
    ValueError
        What ``learner.update`` refuses in ``(X, y)`` (:func:`~okl_core.learners.base.validate_xy`:
        shapes, non-finite features, labels outside the task's set), or ``batch_rows < 1``.
    """
    X = np.asarray(X)
    y = np.asarray(y)
    if len(X) != len(y):
        raise ValueError(f"X has {len(X)} rows but y has {len(y)}")
    check_int("batch_rows", batch_rows, 1)
    X, y = validate_xy(learner, X, y)  # the labels update would refuse (0/1 for binary, 7 of 3 classes) are not scored as mistakes
    metrics = Prequential(task=learner.task)
    for start in range(0, len(y), batch_rows):
        metrics.add(learner.predict(state, X[start : start + batch_rows]), y[start : start + batch_rows])
    return metrics


def permuted(X, y, shuffle_seed: int, run: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``(X, y)`` in the order of run ``run``: permutation keyed ``(shuffle_seed, run)``."""
    X, y = np.asarray(X), np.asarray(y)
    if len(X) != len(y):  # the permutation is sized by y: X's extra rows would be dropped silently
        raise ValueError(f"X has {len(X)} rows but y has {len(y)}")
    order = permutation(len(y), shuffle_seed, run)
    return X[order], y[order]


def mean_std(values) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof = 1, as Matlab's ``std``; NaN for one value)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return math.nan, math.nan
    std = float(values.std(ddof=1)) if values.size > 1 else math.nan
    return float(values.mean()), std


def constant_baseline(task: str, y) -> dict[str, float]:
    """The metrics of the best constant answer over the rows of ``y``.

    Classification: always answering the most frequent label (``mistake_rate`` = 1 - its
    share). Regression: always answering the mean (``mse``: the variance of ``y``) and, for
    ``mae``, the median (the constant that minimises the absolute error).

    Parameters
    ----------
    task : str
        ``binary``, ``multiclass`` or ``regression``.
    y : array-like of shape (n,)
        The labels or targets of the rows the model was scored on.

    Returns
    -------
    dict
        Metric name (:func:`task_metrics`) -> value; NaN for every metric when ``y`` is empty.
    """
    y = np.asarray(y).ravel()
    if task == "regression":
        if y.size == 0:
            return {"mse": math.nan, "mae": math.nan}
        y = y.astype(np.float64)
        return {"mse": float(np.mean((y - y.mean()) ** 2)), "mae": float(np.mean(np.abs(y - np.median(y))))}
    if y.size == 0:
        return {"mistake_rate": math.nan}
    _, counts = np.unique(y, return_counts=True)
    return {"mistake_rate": 1.0 - float(counts.max()) / y.size}
