"""Prequential (online) metrics that merge across shards.

The papers' online metric: each example is scored by the model *before* it learns from
it. :class:`Prequential` accumulates sums (mistakes, squared and absolute errors,
per-class counts); two accumulators add, so per-shard metrics merge exactly (up to the
order of float additions, which callers fix by sorting shards).

Beside the model's errors it keeps what the best *constant* answer over the same rows
needs -- the true labels' counts (majority class) or the targets' sum and squared
deviations (mean predictor) -- so that every merged accumulator knows its own
:attr:`Prequential.baseline`, equal to :func:`okl_core.evaluation.constant_baseline` of the
rows it holds. It also counts the labels the model predicted (a model answering one class
for every row is reported, :attr:`Prequential.one_class`) and sums the scores' magnitudes
(a classifier's scores that explode, :mod:`okl_core.divergence`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from okl_core.labels import check_task
from okl_core.learners.base import labels_from_scores

__all__ = ["BASELINE_MARGIN", "Prequential", "beats_baseline"]

BASELINE_MARGIN = 0.01
"""How much lower than the constant baseline a metric must be to count as better: 1% of the
baseline. A model within it (a9a's always-"-1" answer is 0.236, RBP's default 0.239) learned
nothing a user could rely on."""


def beats_baseline(value: float, baseline: float, margin: float = BASELINE_MARGIN) -> bool:
    """Whether a lower-is-better metric ``value`` is clearly below ``baseline``.

    Clearly: at most ``(1 - margin) * baseline``. NaN on either side is not better; a zero
    baseline (every row the same label or target) is beaten only by a zero metric.
    """
    if not (math.isfinite(value) and math.isfinite(baseline)):
        return False
    if baseline == 0:
        return value == 0
    return value <= (1.0 - margin) * baseline


@dataclasses.dataclass
class Prequential:
    """Running prequential metrics of one task.

    Attributes
    ----------
    task : str
    n : int
        Examples scored.
    mistakes : int
        Classification mistakes (sign / first argmax).
    sum_squared_error, sum_absolute_error : float
        Regression errors (0 for classification tasks).
    class_counts, class_mistakes : list of int
        Per-class examples and mistakes (index = label for multiclass; binary: index 0 is
        label -1, index 1 label +1; binary ``class_mistakes`` stays empty).
    predicted_counts : list of int
        Rows the model labelled with each class (same indexing as ``class_counts``).
    sum_y, sum_sq_dev_y : float
        Regression: the targets' sum, and the sum of their squared deviations from their
        own mean (the mean predictor's squared error). Kept as deviations, not as a sum of
        squares, so that the baseline does not cancel away when the targets' mean is large
        against their spread; two accumulators combine them exactly (Chan et al.'s update).
    sum_abs_score : float
        Classification: the sum over rows of the largest score magnitude (``|f|`` binary,
        ``max_c |f_c|`` multiclass), for :func:`okl_core.divergence.exploded`.

    Accumulators serialized before a field existed load with its default (``Prequential(**d)``);
    their baseline is then unknown (NaN).
    """

    task: str
    n: int = 0
    mistakes: int = 0
    sum_squared_error: float = 0.0
    sum_absolute_error: float = 0.0
    class_counts: list = dataclasses.field(default_factory=list)
    class_mistakes: list = dataclasses.field(default_factory=list)
    predicted_counts: list = dataclasses.field(default_factory=list)
    sum_y: float = 0.0
    sum_sq_dev_y: float = 0.0
    sum_abs_score: float = 0.0

    def __post_init__(self):
        check_task(self.task)

    def add(self, scores: np.ndarray, y: np.ndarray) -> "Prequential":
        """Account for a batch of online scores and true labels/targets; returns self.

        Raises
        ------
        ValueError
            ``scores`` not shaped ``(n,)`` (binary, regression) or ``(n, C)`` (multiclass) for
            the ``n`` entries of ``y``, or multiclass labels that are not class indices.
        """
        y, scores = np.asarray(y), np.asarray(scores)
        _check_batch(self.task, scores, y)
        if self.task == "regression":
            err = np.asarray(scores, dtype=np.float64) - y
            # A diverging learner's errors overflow here; the sums turn inf and the run is
            # reported as diverged (okl_core.divergence), so numpy's RuntimeWarning adds nothing.
            with np.errstate(over="ignore", invalid="ignore"):
                self.sum_squared_error += float(err @ err)
                self.sum_absolute_error += float(np.abs(err).sum())
                if len(y):
                    self._add_targets(np.asarray(y, dtype=np.float64))
            self.n += len(y)
            return self
        labels = labels_from_scores(self.task, scores)
        wrong = labels != y
        self.n += len(y)
        self.mistakes += int(wrong.sum())
        if not len(y):
            return self
        with np.errstate(over="ignore", invalid="ignore"):  # a diverged classifier's scores: reported, not warned about
            magnitude = np.abs(np.asarray(scores, dtype=np.float64))
            self.sum_abs_score += float((magnitude if magnitude.ndim == 1 else magnitude.max(axis=1)).sum())
        if self.task == "binary":  # index 0: label -1, index 1: label +1
            self.class_counts = _add_counts(self.class_counts, np.bincount((y > 0).astype(np.intp), minlength=2))
            self.predicted_counts = _add_counts(self.predicted_counts, np.bincount((labels > 0).astype(np.intp), minlength=2))
            return self
        size = max(len(self.class_counts), int(y.max()) + 1)
        counts = np.bincount(y.astype(np.intp), minlength=size)
        misses = np.bincount(y.astype(np.intp), weights=wrong, minlength=size).astype(np.int64)
        self.class_counts = _add_counts(self.class_counts, counts)
        self.class_mistakes = _add_counts(self.class_mistakes, misses)
        self.predicted_counts = _add_counts(self.predicted_counts, np.bincount(labels.astype(np.intp), minlength=np.shape(scores)[1]))
        return self

    def _add_targets(self, y: np.ndarray) -> None:
        """Fold a batch's targets into ``sum_y`` and ``sum_sq_dev_y`` (before ``n`` counts them)."""
        mean = y.mean()
        n_y, sum_y, sq_dev = len(y), float(y.sum()), float(((y - mean) ** 2).sum())
        self.sum_y, self.sum_sq_dev_y = _combine_targets(self.n, self.sum_y, self.sum_sq_dev_y, n_y, sum_y, sq_dev)

    def merge(self, other: "Prequential") -> "Prequential":
        """Return a new accumulator holding both (tasks must match)."""
        if other.task != self.task:
            raise ValueError(f"cannot merge {other.task} metrics into {self.task} metrics")
        with np.errstate(over="ignore", invalid="ignore"):
            sum_y, sum_sq_dev_y = _combine_targets(self.n, self.sum_y, self.sum_sq_dev_y, other.n, other.sum_y, other.sum_sq_dev_y)
        return Prequential(
            task=self.task,
            n=self.n + other.n,
            mistakes=self.mistakes + other.mistakes,
            sum_squared_error=self.sum_squared_error + other.sum_squared_error,
            sum_absolute_error=self.sum_absolute_error + other.sum_absolute_error,
            class_counts=_add_counts(self.class_counts, other.class_counts),
            class_mistakes=_add_counts(self.class_mistakes, other.class_mistakes),
            predicted_counts=_add_counts(self.predicted_counts, other.predicted_counts),
            sum_y=sum_y,
            sum_sq_dev_y=sum_sq_dev_y,
            sum_abs_score=self.sum_abs_score + other.sum_abs_score,
        )

    @property
    def mistake_rate(self) -> float:
        """Mistakes / n (NaN before any example)."""
        return self.mistakes / self.n if self.n else float("nan")

    @property
    def mse(self) -> float:
        """Mean squared error (NaN before any example)."""
        return self.sum_squared_error / self.n if self.n else float("nan")

    @property
    def mae(self) -> float:
        """Mean absolute error (NaN before any example)."""
        return self.sum_absolute_error / self.n if self.n else float("nan")

    @property
    def baseline(self) -> dict[str, float]:
        """The best constant answer's headline metric over the same rows.

        ``{"mistake_rate": 1 - majority share}`` (classification) or ``{"mse": variance of
        the targets}`` (regression: the mean predictor), equal to
        :func:`okl_core.evaluation.constant_baseline` of the rows accumulated (the median's
        ``mae`` needs every target, so it is not here). NaN before any row, and for an
        accumulator serialized before the baseline was kept (no label counts).
        """
        if self.task == "regression":
            return {"mse": self.sum_sq_dev_y / self.n if self.n else math.nan}
        known = self.n and sum(self.class_counts) == self.n
        return {"mistake_rate": 1.0 - max(self.class_counts) / self.n if known else math.nan}

    @property
    def beats_baseline(self) -> bool:
        """Whether the headline metric is clearly better than :attr:`baseline` (:func:`beats_baseline`)."""
        (name, value), = self.baseline.items()
        return beats_baseline(self.mse if name == "mse" else self.mistake_rate, value)

    @property
    def one_class(self) -> bool:
        """Whether the model answered one class for every row while the rows hold more than one."""
        return sum(c > 0 for c in self.predicted_counts) == 1 and sum(c > 0 for c in self.class_counts) > 1

    def summary(self) -> dict:
        """JSON-ready headline numbers for the task, with the constant baseline of the same rows.

        Regression: ``n``, ``mse``, ``mae``; classification: ``n``, ``mistakes``,
        ``mistake_rate``, ``class_counts``, ``predicted_counts`` (and ``class_mistakes``,
        multiclass), ``one_class``. Both: ``baseline`` (:attr:`baseline`) and
        ``beats_baseline`` (:attr:`beats_baseline`).
        """
        verdict = {"baseline": self.baseline, "beats_baseline": self.beats_baseline}
        if self.task == "regression":
            return {"n": self.n, "mse": self.mse, "mae": self.mae, **verdict}
        out: dict[str, Any] = {"n": self.n, "mistakes": self.mistakes, "mistake_rate": self.mistake_rate,
                               "class_counts": list(self.class_counts), "predicted_counts": list(self.predicted_counts)}
        if self.task == "multiclass":
            out["class_mistakes"] = list(self.class_mistakes)
        return {**out, **verdict, "one_class": self.one_class}

    def to_dict(self) -> dict:
        """All fields, JSON-ready (inverse: ``Prequential(**d)``)."""
        return dataclasses.asdict(self)


def _add_counts(a, b) -> list:
    """Element-wise sum of two count lists, the shorter padded with zeros."""
    size = max(len(a), len(b))
    return (np.pad(np.asarray(a, np.int64), (0, size - len(a))) + np.pad(np.asarray(b, np.int64), (0, size - len(b)))).tolist()


def _combine_targets(n_a: int, sum_a: float, dev_a: float, n_b: int, sum_b: float, dev_b: float) -> tuple[float, float]:
    """Sum and squared deviations from the mean of two groups of targets taken together.

    Chan, Golub & LeVeque's pairwise update: ``dev = dev_a + dev_b + (mean_b - mean_a)^2
    n_a n_b / n``; exact in exact arithmetic, and free of the cancellation of a sum of squares.
    """
    if not n_a or not n_b:
        return sum_a + sum_b, dev_a + dev_b
    delta = sum_b / n_b - sum_a / n_a
    return sum_a + sum_b, dev_a + dev_b + delta * delta * (n_a * n_b / (n_a + n_b))


def _check_batch(task: str, scores: np.ndarray, y: np.ndarray) -> None:
    """ValueError unless ``scores`` and ``y`` are one batch of ``task`` (see :meth:`Prequential.add`)."""
    ndim = 2 if task == "multiclass" else 1
    if y.ndim != 1 or scores.ndim != ndim or len(scores) != len(y):
        shape = "(n, C)" if ndim == 2 else "(n,)"
        raise ValueError(f"{task} metrics need scores of shape {shape} and labels of shape (n,) for the same n, "
                         f"got scores {scores.shape} and labels {y.shape}")
    if task == "multiclass" and len(y) and (y.dtype.kind not in "iu" and not np.all(y == np.floor(y)) or y.min() < 0):
        raise ValueError(f"multiclass metrics need labels that are class indices 0..C-1, got {y[(y < 0) | (y != np.floor(y))][:1]}")
