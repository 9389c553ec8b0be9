"""Tasks and label checks, written once for the error path and the dead-letter path.

okl's learners take binary labels in {-1, +1}, multiclass labels in ``0..C-1`` and finite
regression targets. The same test decides both what a learner refuses
(:func:`okl_core.learners.base.validate_xy` raises a ValueError) and which rows a pipeline
sends to its dead letters (:func:`okl_core.data.validate.check_rows`, reason
``bad label: ...``), so a row is never accepted by one and refused by the other.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TASKS", "check_task", "bad_labels", "label_reason", "label_rule"]

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


def bad_labels(values: np.ndarray, task: str, n_classes: int | None = None) -> np.ndarray:
    """Which labels a learner of ``task`` cannot take: a bool mask of float64 ``values``.

    Binary: not -1 or +1; multiclass: not an integer in ``0..n_classes-1``; regression: not
    finite. NaN is always bad.
    """
    check_task(task)
    if task == "regression":
        return ~np.isfinite(values)
    if task == "binary":
        return ~((values == 1.0) | (values == -1.0))
    n_classes = _need_classes(n_classes)
    with np.errstate(invalid="ignore"):
        return ~((values == np.floor(values)) & (values >= 0) & (values < n_classes))


def label_reason(value: float, task: str, n_classes: int | None = None) -> str:
    """The dead-letter reason of a bad label ``value`` (starts with ``'bad label'``)."""
    if task == "regression":
        return f"bad label: target {float(value)!r} is not finite"  # float: numpy 2 scalars repr as np.float64(...)
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
