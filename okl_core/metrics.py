"""Prequential (online) metrics that merge across shards.

The papers' online metric: each example is scored by the model *before* it learns from
it. :class:`Prequential` accumulates sums (mistakes, squared and absolute errors,
per-class counts); two accumulators add, so per-shard metrics merge exactly (up to the
order of float additions, which callers fix by sorting shards).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from okl_core.labels import check_task
from okl_core.learners.base import labels_from_scores

__all__ = ["Prequential"]


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
        Per-class examples and mistakes (multiclass; index = label).
    """

    task: str
    n: int = 0
    mistakes: int = 0
    sum_squared_error: float = 0.0
    sum_absolute_error: float = 0.0
    class_counts: list = dataclasses.field(default_factory=list)
    class_mistakes: list = dataclasses.field(default_factory=list)

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
        self.n += len(y)
        if self.task == "regression":
            err = np.asarray(scores, dtype=np.float64) - y
            # A diverging learner's errors overflow here; the sums turn inf and the run is
            # reported as diverged (okl_core.divergence), so numpy's RuntimeWarning adds nothing.
            with np.errstate(over="ignore"):
                self.sum_squared_error += float(err @ err)
                self.sum_absolute_error += float(np.abs(err).sum())
            return self
        wrong = labels_from_scores(self.task, scores) != y
        self.mistakes += int(wrong.sum())
        if self.task == "multiclass" and len(y):
            size = max(len(self.class_counts), int(y.max()) + 1)
            counts = np.bincount(y.astype(np.intp), minlength=size)
            misses = np.bincount(y.astype(np.intp), weights=wrong, minlength=size).astype(np.int64)
            self.class_counts = (np.pad(self.class_counts, (0, size - len(self.class_counts))).astype(np.int64) + counts).tolist()
            self.class_mistakes = (np.pad(self.class_mistakes, (0, size - len(self.class_mistakes))).astype(np.int64) + misses).tolist()
        return self

    def merge(self, other: "Prequential") -> "Prequential":
        """Return a new accumulator holding both (tasks must match)."""
        if other.task != self.task:
            raise ValueError(f"cannot merge {other.task} metrics into {self.task} metrics")
        size = max(len(self.class_counts), len(other.class_counts))

        def add_lists(a, b):
            return (np.pad(np.asarray(a, np.int64), (0, size - len(a))) + np.pad(np.asarray(b, np.int64), (0, size - len(b)))).tolist()

        return Prequential(
            task=self.task,
            n=self.n + other.n,
            mistakes=self.mistakes + other.mistakes,
            sum_squared_error=self.sum_squared_error + other.sum_squared_error,
            sum_absolute_error=self.sum_absolute_error + other.sum_absolute_error,
            class_counts=add_lists(self.class_counts, other.class_counts),
            class_mistakes=add_lists(self.class_mistakes, other.class_mistakes),
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

    def summary(self) -> dict:
        """JSON-ready headline numbers for the task."""
        if self.task == "regression":
            return {"n": self.n, "mse": self.mse, "mae": self.mae}
        out: dict[str, Any] = {"n": self.n, "mistakes": self.mistakes, "mistake_rate": self.mistake_rate}
        if self.task == "multiclass":
            out["class_counts"] = list(self.class_counts)
            out["class_mistakes"] = list(self.class_mistakes)
        return out

    def to_dict(self) -> dict:
        """All fields, JSON-ready (inverse: ``Prequential(**d)``)."""
        return dataclasses.asdict(self)


def _check_batch(task: str, scores: np.ndarray, y: np.ndarray) -> None:
    """ValueError unless ``scores`` and ``y`` are one batch of ``task`` (see :meth:`Prequential.add`)."""
    ndim = 2 if task == "multiclass" else 1
    if y.ndim != 1 or scores.ndim != ndim or len(scores) != len(y):
        shape = "(n, C)" if ndim == 2 else "(n,)"
        raise ValueError(f"{task} metrics need scores of shape {shape} and labels of shape (n,) for the same n, "
                         f"got scores {scores.shape} and labels {y.shape}")
    if task == "multiclass" and len(y) and (y.dtype.kind not in "iu" and not np.all(y == np.floor(y)) or y.min() < 0):
        raise ValueError(f"multiclass metrics need labels that are class indices 0..C-1, got {y[(y < 0) | (y != np.floor(y))][:1]}")
