"""Tasks and label checks, written once for the error path and the dead-letter path.

okl's learners take binary labels in {-1, +1}, multiclass labels in ``0..C-1`` and finite
regression targets. Data sets store targets as float32, so the dead-letter path also
refuses a target that is finite but beyond float32's range (:data:`FLOAT32_LIMIT`; it
would reach the learner as inf): ``bad_labels(..., float32=True)``. The same test decides both what a learner refuses
(:func:`okl_core.learners.base.validate_xy` raises a ValueError) and which rows a pipeline
sends to its dead letters (:func:`okl_core.data.validate.check_rows`, reason
``bad label: ...``), so a row is never accepted by one and refused by the other.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TASKS", "FLOAT32_LIMIT", "check_task", "bad_labels", "label_reason", "label_rule"]

FLOAT32_LIMIT = 2.0**128 - 2.0**103
"""Magnitudes from this one up round to inf as float32 (halfway past float32's largest value,
which rounds to even: up). Data sets store float32, so such a value is not finite."""

TASKS = ("binary", "multiclass", "regression")
"""The learning tasks, in this order everywhere (configs, data sets, metrics)."""


def check_task(task: object, where: str = "") -> None:
    """Raise ValueError unless ``task`` is one of :data:`TASKS` (``where``: a prefix such as a path)."""
    if task not in TASKS:
        prefix = f"{where}: " if where else ""
        raise ValueError(f"{prefix}task must be one of {TASKS}, got {task!r}")


def _need_classes(n_classes: int | None) -> int:
    if not n_classes:
        raise ValueError("multiclass rows need n_classes to be checked")
    return int(n_classes)


def bad_labels(values: np.ndarray, task: str, n_classes: int | None = None, float32: bool = False) -> np.ndarray:
    """Which labels a learner of ``task`` cannot take: a bool mask of float64 ``values``.

    Binary: not -1 or +1; multiclass: not an integer in ``0..n_classes-1``; regression: not
    finite (with ``float32``: not finite once stored as float32, :data:`FLOAT32_LIMIT`).
    NaN is always bad.
    """
    check_task(task)
    if task == "regression":
        if not float32:
            return ~np.isfinite(values)
        with np.errstate(invalid="ignore"):
            return ~(np.abs(values) < FLOAT32_LIMIT)
    if task == "binary":
        return ~((values == 1.0) | (values == -1.0))
    n_classes = _need_classes(n_classes)
    with np.errstate(invalid="ignore"):
        return ~((values == np.floor(values)) & (values >= 0) & (values < n_classes))


def label_reason(value: float, task: str, n_classes: int | None = None) -> str:
    """The dead-letter reason of a bad label ``value`` (starts with ``'bad label'``)."""
    if task == "regression":  # float(): numpy 2 scalars repr as np.float64(...)
        if np.isfinite(value):
            return f"bad label: target {float(value)!r} is beyond float32's range (|y| > 3.4e+38), in which okl stores targets"
        return f"bad label: target {float(value)!r} is not finite"
    if task == "binary":
        return f"bad label: {value:g} is not -1 or +1"
    return f"bad label: {value:g} is not a class in 0..{_need_classes(n_classes) - 1}"


def label_rule(task: str, n_classes: int | None = None) -> str:
    """What the labels of ``task`` must be, for error messages."""
    if task == "regression":
        return "regression targets must be finite"
    if task == "binary":
        return "binary labels must be -1 or +1"
    return f"multiclass labels must be integers in 0..{_need_classes(n_classes) - 1}"
