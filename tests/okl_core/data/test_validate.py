"""check_rows: every kind of bad row is caught with its reason; good rows keep order and values."""

import numpy as np
import pyarrow as pa
import pytest

from okl_core.data.validate import check_rows, finite_rows, labeled


def _table(x, y, rows=None, fixed=None, y_type=pa.int32()):
    x_type = pa.list_(pa.float32(), fixed) if fixed else pa.list_(pa.float32())
    rows = list(range(len(y))) if rows is None else rows
    return pa.table({"x": pa.array(x, type=x_type), "y": pa.array(y, type=y_type), "row": pa.array(rows, type=pa.int64())})


def test_classification_reasons_and_good_rows():
    x = [[1, 2], [np.nan, 0], [np.inf, 1], None, [3, 4], [5, 6], [7, 8], [1, None]]
    y = [1, -1, 1, 1, 0, None, -1, 1]
    out = check_rows(_table(x, y, rows=[10, 11, 12, 13, 14, 15, 16, 17], fixed=2), 2, "binary")
    np.testing.assert_array_equal(out.row, [10, 16])
    np.testing.assert_array_equal(out.X, np.array([[1, 2], [7, 8]], np.float32))
    np.testing.assert_array_equal(out.y, [1, -1])
    assert out.y.dtype == np.int32 and out.X.dtype == np.float32
    np.testing.assert_array_equal(out.bad_row, [11, 12, 13, 14, 15, 17])
    assert out.reasons == [
        "non-finite feature", "non-finite feature", "missing x", "bad label: 0 is not -1 or +1", "missing y", "non-finite feature",
    ]


def test_features_and_labels_judged_separately_for_scoring():
    """judge_labels=False (predict): only features make a row bad; labels come back unjudged, NaN where missing."""
    x = [[1, 2], [np.nan, 0], [3, 4], [5, 6], [7, 8], None]
    y = [1, 1, 3, None, 0, 2]
    out = check_rows(_table(x, y, rows=[10, 11, 12, 13, 14, 15], fixed=2), 2, "multiclass", n_classes=3, judge_labels=False)
    np.testing.assert_array_equal(out.row, [10, 12, 13, 14])
    np.testing.assert_array_equal(out.X, np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.float32))
    np.testing.assert_array_equal(out.y, np.array([1, 3, np.nan, 0], np.float32))
    assert out.y.dtype == np.float32
    np.testing.assert_array_equal(out.bad_row, [11, 15])
    assert out.reasons == ["non-finite feature", "missing x"]
    np.testing.assert_array_equal(labeled(out.y, "multiclass", 3), [True, False, False, True])
    # The training checks are unchanged: the same rows with their labels judged.
    judged = check_rows(_table(x, y, rows=[10, 11, 12, 13, 14, 15], fixed=2), 2, "multiclass", n_classes=3)
    np.testing.assert_array_equal(judged.row, [10, 14])
    assert judged.reasons == ["non-finite feature", "bad label: 3 is not a class in 0..2", "missing y", "missing x"]


def test_wrong_width_in_variable_length_lists():
    out = check_rows(_table([[1, 2, 3], [1, 2], [1, 2, 3, 4], []], [0, 1, 2, 1]), 3, "multiclass", n_classes=3)
    np.testing.assert_array_equal(out.row, [0])
    assert out.reasons == ["wrong width: 2 features, expected 3", "wrong width: 4 features, expected 3", "wrong width: 0 features, expected 3"]


def test_multiclass_and_regression_labels():
    out = check_rows(_table([[0.0]] * 5, [0, 2, 3, -1, 1]), 1, "multiclass", n_classes=3)
    np.testing.assert_array_equal(out.row, [0, 1, 4])
    assert out.reasons == ["bad label: 3 is not a class in 0..2", "bad label: -1 is not a class in 0..2"]
    out = check_rows(_table([[0.0]] * 4, [0.5, np.nan, -np.inf, 2.0], y_type=pa.float32()), 1, "regression")
    np.testing.assert_array_equal(out.y, np.array([0.5, 2.0], np.float32))
    assert [r.split(":")[0] for r in out.reasons] == ["bad label", "bad label"]
    with pytest.raises(ValueError, match="n_classes"):
        check_rows(_table([[0.0]], [0]), 1, "multiclass")


def test_all_good_is_zero_copy_shape():
    X = np.random.default_rng(0).normal(size=(100, 7)).astype(np.float32)
    table = pa.table({"x": pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), 7), "y": pa.array(np.ones(100, np.int32)), "row": pa.array(np.arange(100))})
    out = check_rows(table, 7, "binary")
    np.testing.assert_array_equal(out.X, X)
    assert out.good.all() and out.reasons == []


def _binary_table(X, y, null_rows=(), width=None):
    """x as okl writes it (float32 bytes), with some rows null."""
    n, d = X.shape
    width = 4 * d if width is None else width
    validity = np.ones(n, bool)
    validity[list(null_rows)] = False
    x = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(width), n, [pa.array(validity).buffers()[1] if len(null_rows) else None, pa.py_buffer(X.astype("<f4").tobytes())],
        null_count=len(null_rows),
    )
    return pa.table({"x": x, "y": pa.array(y, type=pa.int32()), "row": pa.array(np.arange(n) + 100, type=pa.int64())})


def test_binary_features_are_checked_like_lists():
    X = np.random.default_rng(1).normal(size=(6, 3)).astype(np.float32)
    X[1, 2], X[4, 0] = np.nan, -np.inf
    y = [1, -1, 1, 5, -1, 1]
    out = check_rows(_binary_table(X, y, null_rows=[2]), 3, "binary")
    listed = check_rows(_table([None if i == 2 else X[i].tolist() for i in range(6)], y, rows=list(range(100, 106)), fixed=3), 3, "binary")
    np.testing.assert_array_equal(out.X, X[[0, 5]])
    np.testing.assert_array_equal(out.row, [100, 105])
    assert out.reasons == ["non-finite feature", "missing x", "bad label: 5 is not -1 or +1", "non-finite feature"]
    for field in ("X", "y", "row", "good", "bad_row"):
        np.testing.assert_array_equal(getattr(out, field), getattr(listed, field))
    assert out.reasons == listed.reasons


def test_binary_features_of_another_width_are_wrong_width_rows():
    X = np.zeros((3, 4), np.float32)
    out = check_rows(_binary_table(X, [1, 1, 1]), 3, "binary")
    assert len(out.X) == 0 and out.reasons == ["wrong width: 4 features, expected 3"] * 3
    with pytest.raises(ValueError, match="column x must be float32 bytes"):
        check_rows(pa.table({"x": pa.array([b"abcde"], pa.binary(5)), "y": pa.array([1], pa.int32()), "row": pa.array([0], pa.int64())}), 1, "binary")


def test_finite_rows_matches_the_element_by_element_check():
    # Rows whose sum overflows on finite values (3e38 + 3e38) are finite; +inf and -inf in
    # one row sum to NaN; a single NaN, inf or -inf anywhere makes a row non-finite.
    rng = np.random.default_rng(3)
    X = rng.standard_normal((64, 9)).astype(np.float32)
    X[1, 0] = np.nan
    X[5, 8] = np.inf
    X[7, 3] = -np.inf
    X[9, [2, 6]] = [np.inf, -np.inf]
    X[11, :] = 3e38
    X[13, :] = -3e38
    X[15, [0, 1]] = [3e38, np.nan]
    got = finite_rows(X)
    assert got.tolist() == np.isfinite(X).all(axis=1).tolist()
    assert got[11] and got[13] and not got[[1, 5, 7, 9, 15]].any()
    assert finite_rows(np.zeros((0, 9), np.float32)).shape == (0,)
