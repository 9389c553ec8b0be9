"""Split rows read from a Parquet data set into rows a learner can take and bad rows.

A bad row never reaches a learner and never stops a job: the training pipeline sends it
to a dead-letter output with the reason found here. A row is bad when

* ``x`` is missing, or has another number of features than the data set
  (``wrong width``; possible when ``x`` is stored as a variable-length list or a file
  does not match ``dataset.json``); ``x`` may be okl's float32 bytes or a list of floats;
* a feature is NaN, inf or missing (``non-finite feature``);
* ``y`` is missing, a regression target is NaN or inf, a binary label is not -1/+1, or a
  multiclass label is not an integer in ``0..n_classes-1`` (``bad label``).

Features and labels are judged separately: scoring a data set needs valid features only,
so ``pipelines.predict`` reads with ``judge_labels=False`` and scores a row whose label is
missing or not one the model predicts, leaving it out of the metrics only (:func:`labeled`).

The good rows keep their order. Reasons are short fixed strings followed by the
offending value, so that dead letters can be counted by reason.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from okl_core.data.layout import as_array, x_matrix, x_width
from okl_core.labels import bad_labels, label_reason
from okl_core.numerics import single_threaded_blas

__all__ = ["CheckedRows", "check_rows", "labeled", "finite_rows", "unreadable_rows", "REASONS", "UNREADABLE"]

REASONS = ("missing x", "wrong width", "non-finite feature", "missing y", "bad label")
"""Reason prefixes, in the order they are tested (a row gets the first that applies)."""
UNREADABLE = "unreadable row group"
"""Reason prefix of every row of a row group that could not be read or decoded (:func:`unreadable_rows`)."""


@dataclasses.dataclass(frozen=True)
class CheckedRows:
    """Rows of one table after checking.

    Attributes
    ----------
    X : (n_good, d) float32
    y : (n_good,) int32 labels or float32 targets
    row : (n_good,) int64 ``row`` column of the good rows
    good : (n,) bool, which input rows are good
    bad_row : (n_bad,) int64 ``row`` column of the bad rows (-1 where missing)
    reasons : list of str, one per bad row
    """

    X: np.ndarray
    y: np.ndarray
    row: np.ndarray
    good: np.ndarray
    bad_row: np.ndarray
    reasons: list


def _x_lengths(x: pa.Array) -> np.ndarray:
    """Features per row (null rows included, their length is meaningless)."""
    width = x_width(x.type)
    if width is not None:
        return np.full(len(x), width)
    return pc.list_value_length(x).to_numpy(zero_copy_only=False)


def finite_rows(X: np.ndarray) -> np.ndarray:
    """Which rows of the 2-D float array ``X`` hold only finite values (exact).

    A NaN or an infinity makes a row's sum NaN or infinite, so rows with a finite sum are
    finite; a sum can also overflow on finite values, so the rows whose sum is not finite
    are checked element by element. The sums are one matrix-vector product: 0.03 instead
    of 0.09-0.13 us per MNIST row for ``np.isfinite(X).all(axis=1)`` (a boolean temporary
    of the table's size), on the pipeline's reading thread. The product runs on one BLAS
    thread: BLAS's own threads would spin on cores the workers already use.
    """
    with single_threaded_blas(), np.errstate(invalid="ignore", over="ignore"):  # inf - inf, overflow: expected here
        finite = np.isfinite(X @ np.ones(X.shape[1], X.dtype))
    if not finite.all():
        suspect = np.flatnonzero(~finite)
        finite[suspect] = np.isfinite(X[suspect]).all(axis=1)
    return finite


def check_rows(table: pa.Table, n_features: int, task: str, n_classes: int | None = None, judge_labels: bool = True) -> CheckedRows:
    """Check the ``x``, ``y``, ``row`` columns of ``table`` (see the module docstring).

    Parameters
    ----------
    table : pyarrow.Table
        Columns ``x`` (float32 bytes as written by okl, or a list or fixed-size list of
        floats), ``y`` and ``row``.
    n_features : int
        Expected width of ``x``.
    task : {'binary', 'multiclass', 'regression'}
    n_classes : int, optional
        Number of classes (multiclass).
    judge_labels : bool
        True (training): a row whose label a learner cannot take is bad. False (scoring,
        where labels only serve the metrics): rows are judged by their features alone and
        ``y`` is returned unjudged as float32, NaN where missing; :func:`labeled` tells
        which of them the metrics may use.

    Returns
    -------
    CheckedRows
    """
    X, reasons, feature_ok = _check_features(as_array(table.column("x")), n_features)
    y_column = as_array(table.column("y"))
    y_null = y_column.is_null().to_numpy(zero_copy_only=False)
    y = y_column.to_numpy(zero_copy_only=False)
    good = feature_ok.copy()
    if judge_labels:
        label_reason = _label_reasons(y, y_null, task, n_classes)
        take = feature_ok & (label_reason != "")
        reasons[take] = label_reason[take]
        good &= ~take
        y_dtype = np.float32 if task == "regression" else np.int32
    else:
        y = np.where(y_null, np.nan, np.asarray(y, dtype=np.float64))  # a null int label reads as 0 or NaN: NaN, always
        y_dtype = np.float32
    rows = as_array(table.column("row")).to_numpy(zero_copy_only=False)
    rows = np.where(np.isnan(rows), -1, rows).astype(np.int64) if rows.dtype.kind == "f" else rows.astype(np.int64)
    X_good = X[good[feature_ok]] if not good.all() else X
    return CheckedRows(
        X=np.ascontiguousarray(X_good),
        y=y[good].astype(y_dtype),
        row=rows[good],
        good=good,
        bad_row=rows[~good],
        reasons=[str(r) for r in reasons[~good]],
    )


def _check_features(x: pa.Array, n_features: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The feature checks of :func:`check_rows`: ``(X of the rows with good features, reasons, good mask)``."""
    n = len(x)
    lengths = _x_lengths(x)  # raises a clear error for a column that is not features at all
    reasons = np.full(n, "", dtype=object)
    x_null = x.is_null().to_numpy(zero_copy_only=False)
    reasons[x_null] = "missing x"
    wrong = ~x_null & (lengths != n_features)
    for i in np.flatnonzero(wrong):
        reasons[i] = f"wrong width: {int(lengths[i])} features, expected {n_features}"
    width_ok = ~x_null & ~wrong
    if width_ok.all():
        X = x_matrix(x, n_features)
    else:  # x.filter copies: only for tables with bad rows
        X = x_matrix(x.filter(pa.array(width_ok)), n_features) if width_ok.any() else np.zeros((0, n_features), np.float32)
    finite = finite_rows(X)
    ok_index = np.flatnonzero(width_ok)
    reasons[ok_index[~finite]] = "non-finite feature"
    if not finite.all():
        _name_overflow(x, ok_index[~finite], n_features, reasons)
    good = width_ok.copy()
    good[ok_index[~finite]] = False
    return (X if finite.all() else X[finite]), reasons, good


def _name_overflow(x: pa.Array, rows: np.ndarray, n_features: int, reasons: np.ndarray) -> None:
    """Say "beyond float32's range" for the non-finite ``rows`` whose given values were finite
    (float64 lists: features are stored and learned in float32, where such a value is inf)."""
    value_type = getattr(x.type, "value_type", None)  # list types; okl's own binary x is float32 already
    if value_type is None or not pa.types.is_floating(value_type) or value_type.bit_width <= 32:
        return
    given = pc.list_flatten(x.take(pa.array(rows))).to_numpy(zero_copy_only=False).reshape(-1, n_features)
    for i, finite in zip(rows, np.isfinite(given).all(axis=1)):
        if finite:
            reasons[i] = "feature beyond float32's range (|x| > 3.4e+38), in which okl stores and learns features"


def labeled(y: np.ndarray, task: str, n_classes: int | None = None) -> np.ndarray:
    """Which unjudged labels (``check_rows(..., judge_labels=False)``) a model of ``task`` can be scored against."""
    return ~bad_labels(np.asarray(y, dtype=np.float64), task, n_classes)


def unreadable_rows(n: int, n_features: int, task: str, reason: str) -> CheckedRows:
    """``n`` rows that could not be read: all bad, with ``reason`` (prefixed :data:`UNREADABLE`), row numbers unknown (-1)."""
    if not reason.startswith(UNREADABLE):
        raise ValueError(f"reason must start with {UNREADABLE!r}, got {reason!r}")
    return CheckedRows(
        X=np.zeros((0, n_features), np.float32), y=np.zeros(0, np.float32 if task == "regression" else np.int32), row=np.zeros(0, np.int64),
        good=np.zeros(n, dtype=bool), bad_row=np.full(n, -1, np.int64), reasons=[reason] * n,
    )


def _label_reasons(y: np.ndarray, y_null: np.ndarray, task: str, n_classes: int | None) -> np.ndarray:
    """A reason per row ("" when the label/target is fine), by :func:`okl_core.labels.bad_labels`."""
    out = np.full(len(y), "", dtype=object)
    out[y_null] = "missing y"
    values = np.asarray(y, dtype=np.float64)
    bad = ~y_null & bad_labels(values, task, n_classes, float32=True)  # targets are handed on as float32
    for i in np.flatnonzero(bad):
        out[i] = label_reason(values[i], task, n_classes)
    return out
