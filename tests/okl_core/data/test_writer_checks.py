"""The Python API of the data layout refuses bad arguments in one line, leaving nothing behind.

Each case once did something else: a bad ``**info`` left the target locked for the rest of
the process, labels were truncated or wrapped, 1e300 became inf, ``n_shards=0`` divided by
zero, a float ``row`` column was truncated, a negative shard index read the last shard.
"""

import os
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from okl_core.data.layout import DatasetWriter, open_dataset, write_dataset, write_shard_file
from okl_core.data.synthetic import dsg_regression, gaussian_blobs, iter_dsg_regression, write_synthetic


def _xy(n=10, d=3):
    X = np.arange(n * d, dtype=np.float32).reshape(n, d)
    return X, np.where(np.arange(n) % 2 == 0, 1, -1)


def _clean(tmp_path, name="a"):
    """Nothing of a failed write of ``tmp_path / name`` is left: no target, lock or staging directory."""
    return sorted(n for n in os.listdir(tmp_path) if name in n) == []


# 1. a bad **info argument


@pytest.mark.parametrize("info, message", [
    ({"foo": 1}, "unknown data set info fields ['foo'] (allowed: ['classes', 'extra', 'feature_scaling', 'generator_seed', 'name', 'source', 'target_range'])"),
    ({"name": 3}, "data set info field 'name' must be a string, got the number 3"),
    ({"classes": "ab"}, "data set info field 'classes' must be a list of labels or null, got the string \"ab\""),
    ({"generator_seed": True}, "data set info field 'generator_seed' must be an integer or null, got the boolean true"),
    ({"extra": {"a": object()}}, "data set info field 'extra' must hold JSON values only (Object of type object is not JSON serializable)"),
], ids=["unknown", "name-number", "classes-string", "seed-bool", "not-json"])
def test_bad_info_is_refused_before_anything_is_created(tmp_path, info, message):
    X, y = _xy()
    with pytest.raises(ValueError) as err:
        write_dataset(tmp_path / "a", X, y, "binary", **info)
    assert str(err.value) == message
    assert _clean(tmp_path)
    assert write_dataset(tmp_path / "a", X, y, "binary").n_rows == 10  # not locked by the failed call


def test_set_info_checks_types_too(tmp_path):
    with DatasetWriter(tmp_path / "a", 3, "binary") as writer:
        with pytest.raises(ValueError, match=r"^data set info field 'target_range' must be a list \[min, max\] or null, got the string \"0..1\"$"):
            writer.set_info(target_range="0..1")
    assert open_dataset(tmp_path / "a").info.target_range is None


def test_a_failing_close_releases_the_target(tmp_path):
    """close() that fails (here: a field set behind set_info's back) aborts: no lock, no staging left."""
    writer = DatasetWriter(tmp_path / "a", 3, "binary")
    writer.write(*_xy())
    writer.info_fields["extra"] = {"a": object()}
    with pytest.raises(TypeError):
        writer.close()
    assert _clean(tmp_path)
    assert write_dataset(tmp_path / "a", *_xy(), "binary").n_rows == 10


# 2. values the task cannot take


@pytest.mark.parametrize("task, y, info, message", [
    ("binary", [1, -1, 0, 1], {}, "y, row 2: bad label: 0 is not -1 or +1"),
    ("binary", [True, False, True, True], {}, "y, row 1: bad label: 0 is not -1 or +1"),
    ("multiclass", [0, 1, 0.5, 1], {}, "y, row 2: bad label: 0.5 is not a class in 0..2147483647"),
    ("multiclass", [0, 2**31, 1, 0], {}, "y, row 1: bad label: 2.14748e+09 is not a class in 0..2147483647"),
    ("multiclass", [0, 1, 1, -3], {}, "y, row 3: bad label: -3 is not a class in 0..2147483647"),
    ("multiclass", [0, 1, 2, 1], {"classes": ["a", "b"]}, "y, row 2: bad label: 2 is not a class in 0..1"),
    ("regression", [0.0, 1.0, 1e300, 2.0], {}, "y, row 2: bad label: target 1e+300 is beyond float32's range (|y| > 3.4e+38), in which okl stores targets"),
    ("regression", [0.0, np.nan, 1.0, 2.0], {}, "y, row 1: bad label: target nan is not finite"),
], ids=["binary-0", "binary-bool", "multiclass-fraction", "multiclass-2**31", "multiclass-negative", "beyond-classes",
        "regression-1e300", "regression-nan"])
def test_labels_the_task_cannot_take_are_refused(tmp_path, task, y, info, message):
    with pytest.raises(ValueError) as err:
        write_dataset(tmp_path / "a", np.zeros((4, 2)), np.array(y), task, **info)
    assert str(err.value) == message
    assert _clean(tmp_path)


@pytest.mark.parametrize("value", [1e300, np.nan, -np.inf, 3.5e38])
def test_features_not_finite_as_float32_are_refused(tmp_path, value):
    X = np.zeros((5, 3))
    X[3, 1] = value
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning on the way
        with pytest.raises(ValueError) as err:
            write_dataset(tmp_path / "a", X, np.ones(5), "regression")
    assert str(err.value) == f"X, row 3, feature 1: {float(value)!r} is not finite as float32 (okl stores features as float32)"
    assert _clean(tmp_path)


def test_the_largest_float32_values_are_kept(tmp_path):
    top = float(np.finfo(np.float32).max)
    write_dataset(tmp_path / "a", np.array([[top], [-top]]), np.array([top, -top]), "regression")
    back = open_dataset(tmp_path / "a").read_all()
    assert back.X[:, 0].tolist() == [top, -top] and back.y.tolist() == [top, -top]


def test_streaming_writes_name_the_row_in_the_stream_and_keep_earlier_writes(tmp_path):
    with DatasetWriter(tmp_path / "a", 2, "multiclass", rows_per_shard=3, classes=[0, 1, 2]) as writer:
        writer.write(np.zeros((5, 2)), [0, 1, 2, 0, 1])
        with pytest.raises(ValueError, match=r"^y, row 7: bad label: 3 is not a class in 0\.\.2$"):
            writer.write(np.zeros((4, 2)), [0, 1, 3, 0])
        assert writer.n_rows == 5  # nothing of the refused call was written
    assert open_dataset(tmp_path / "a").read_all().y.tolist() == [0, 1, 2, 0, 1]


def test_parallel_shard_writers_check_values_too(tmp_path):
    with pytest.raises(ValueError, match=r"^X, row 102, feature 0: nan is not finite as float32"):
        write_shard_file(tmp_path / "s.parquet", 1, "binary", [(np.full((3, 1), [[0], [0], [np.nan]]), [1, 1, 1])], first_row=100)
    assert os.listdir(tmp_path) == []


def test_check_values_false_writes_bad_rows_for_reader_tests(tmp_path):
    X = np.zeros((3, 1))
    X[1, 0] = np.nan
    write_dataset(tmp_path / "a", X, [1, 7, -1], "binary", check_values=False)
    back = open_dataset(tmp_path / "a").read_all()
    assert np.isnan(back.X[1, 0]) and back.y.tolist() == [1, 7, -1]


# 3. counts


@pytest.mark.parametrize("kwargs, message", [
    ({"n_shards": 0}, "n_shards must be an integer >= 1, got 0"),
    ({"n_shards": -2}, "n_shards must be an integer >= 1, got -2"),
    ({"n_shards": 2.0}, "n_shards must be an integer >= 1, got 2.0"),
    ({"row_group_rows": 2.5}, "row_group_rows must be an integer >= 1, got 2.5"),
])
def test_write_dataset_counts_are_integers_at_least_one(tmp_path, kwargs, message):
    with pytest.raises(ValueError) as err:
        write_dataset(tmp_path / "a", *_xy(), "binary", **kwargs)
    assert str(err.value) == message
    assert _clean(tmp_path)


@pytest.mark.parametrize("args, kwargs, message", [
    ((2.7, "binary"), {}, "n_features must be an integer >= 1, got 2.7"),
    ((0, "binary"), {}, "n_features must be an integer >= 1, got 0"),
    ((2, "binary"), {"rows_per_shard": 2.5}, "rows_per_shard must be an integer >= 1, got 2.5"),
    ((2, "binary"), {"row_group_rows": True}, "row_group_rows must be an integer >= 1, got True"),
])
def test_writer_counts_are_integers_at_least_one(tmp_path, args, kwargs, message):
    with pytest.raises(ValueError) as err:
        DatasetWriter(tmp_path / "a", *args, **kwargs)
    assert str(err.value) == message
    assert _clean(tmp_path)


@pytest.mark.parametrize("n_shards, sizes", [(6, [2, 2, 2, 2, 2]), (3, [4, 4, 2]), (20, [1] * 10)])
def test_n_shards_is_at_most_that_many_shards_of_ceil_rows(tmp_path, n_shards, sizes):
    info = write_dataset(tmp_path / "a", *_xy(), "binary", n_shards=n_shards)
    assert [s["n_rows"] for s in info.shards] == sizes


# 4. X of the wrong shape


@pytest.mark.parametrize("X, shape", [(np.zeros(10), "(10,)"), ([], "(0,)"), (np.zeros((2, 5, 1)), "(2, 5, 1)")])
def test_x_must_be_2d(tmp_path, X, shape):
    with pytest.raises(ValueError) as err:
        write_dataset(tmp_path / "a", X, np.ones(len(X)), "binary")
    assert str(err.value) == f"X must be 2-D (n, d), got shape {shape}"
    assert _clean(tmp_path)


def test_writer_x_must_be_2d(tmp_path):
    with DatasetWriter(tmp_path / "a", 3, "binary") as writer:
        with pytest.raises(ValueError, match=r"^X must be 2-D \(n, 3\), got shape \(3,\)$"):
            writer.write(np.zeros(3), [1, 1, 1])


# 5. synthetic generators


@pytest.mark.parametrize("call, message", [
    (lambda: dsg_regression(0), "n_rows must be an integer >= 1, got 0"),
    (lambda: iter_dsg_regression(-5), "n_rows must be an integer >= 1, got -5"),
    (lambda: dsg_regression(10, noise=-1.0), "noise must be a finite number >= 0, got -1.0"),
    (lambda: gaussian_blobs(0), "n_rows must be an integer >= 1, got 0"),
    (lambda: gaussian_blobs(10, n_classes=0), "n_classes must be an integer >= 2, got 0"),
    (lambda: gaussian_blobs(10, n_features=0), "n_features must be an integer >= 1, got 0"),
    (lambda: gaussian_blobs(10, seed=-1), "seed must be an integer >= 0, got -1"),
    (lambda: gaussian_blobs(2.5), "n_rows must be an integer >= 1, got 2.5"),
])
def test_generators_refuse_bad_sizes(call, message):
    with pytest.raises(ValueError) as err:
        call()
    assert str(err.value) == message


@pytest.mark.parametrize("n_rows", [0, -5])
def test_write_synthetic_refuses_no_rows_before_creating_anything(tmp_path, n_rows):
    with pytest.raises(ValueError) as err:
        write_synthetic(tmp_path / "s" / "a", n_rows)
    assert str(err.value) == f"n_rows must be an integer >= 1, got {n_rows}"
    assert os.listdir(tmp_path) == []


def test_write_synthetic_records_the_target_range(tmp_path):
    info = write_synthetic(tmp_path / "a", 100, seed=1)
    y = dsg_regression(100, seed=1)[1]
    assert info.target_range == [float(y.min()), float(y.max())]


# 6. row numbers of own Parquet files


def _own_file(path, row, statistics=True):
    x = pa.array([b"\0\0\0\0"] * len(row), pa.binary(4))
    pq.write_table(pa.table({"x": x, "y": pa.array([1] * len(row), pa.int32()), "row": row}), path, write_statistics=statistics)


def test_float_row_numbers_are_refused(tmp_path):
    _own_file(tmp_path / "f.parquet", pa.array([0.5, 1.7]))
    with pytest.raises(ValueError) as err:
        open_dataset(tmp_path / "f.parquet")
    assert str(err.value) == f"{tmp_path / 'f.parquet'}: not in the okl layout: column row is double, not integer row numbers"


@pytest.mark.parametrize("statistics", [True, False], ids=["footer", "no-statistics"])
def test_null_row_numbers_are_refused(tmp_path, statistics):
    _own_file(tmp_path / "f.parquet", pa.array([0, None, 2], pa.int64()), statistics)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError) as err:
            open_dataset(tmp_path / "f.parquet")
    assert str(err.value) == f"{tmp_path / 'f.parquet'}: column row has 1 null values; every row needs its row number"


def test_null_row_numbers_in_a_shard_of_a_data_set_are_refused(tmp_path):
    write_dataset(tmp_path / "a", np.zeros((3, 1)), [1, 1, 1], "binary")
    shard = tmp_path / "a" / "part-00000-of-00001.parquet"
    _own_file(shard, pa.array([0, 1, None], pa.int64()))
    with pytest.raises(ValueError) as err:
        open_dataset(tmp_path / "a")
    assert str(err.value) == f"{shard}: column row has 1 null values; every row needs its row number"


# 7. reading and closing


@pytest.fixture()
def two_shards(tmp_path):
    write_dataset(tmp_path / "a", np.zeros((4, 1)), [1, -1, 1, -1], "binary", n_shards=2)
    return open_dataset(tmp_path / "a")


@pytest.mark.parametrize("kwargs, message", [
    ({"shard": 2}, "shard must be one of the data set's shards 0..1, got 2"),
    ({"shard": -1}, "shard must be an integer >= 0, got -1"),
    ({"batch_rows": 0}, "batch_rows must be an integer >= 1, got 0"),
    ({"batch_rows": 1.5}, "batch_rows must be an integer >= 1, got 1.5"),
])
def test_iter_batches_refuses_bad_arguments_at_the_call(two_shards, kwargs, message):
    with pytest.raises(ValueError) as err:
        two_shards.iter_batches(**kwargs)
    assert str(err.value) == message


def test_iter_batches_of_one_shard(two_shards):
    assert [b.row.tolist() for b in two_shards.iter_batches(shard=1, batch_rows=1)] == [[2], [3]]


@pytest.mark.parametrize("task, dtype", [("binary", np.int32), ("multiclass", np.int32), ("regression", np.float32)])
def test_read_all_of_no_rows_has_the_stored_types(tmp_path, task, dtype):
    write_dataset(tmp_path / "a", np.zeros((0, 2)), [], task)
    got = open_dataset(tmp_path / "a").read_all()
    assert (got.X.dtype, got.X.shape, got.y.dtype, got.row.dtype) == (np.float32, (0, 2), dtype, np.int64)


def test_a_closed_writer_says_so(tmp_path):
    writer = DatasetWriter(tmp_path / "a", 3, "binary")
    writer.close()
    for call in (lambda: writer.write(*_xy()), writer.close):
        with pytest.raises(ValueError) as err:
            call()
        assert str(err.value) == f"{tmp_path / 'a'}: the data set writer is already closed"
    writer.abort()  # nothing to drop: the committed data set stays
    assert open_dataset(tmp_path / "a").info.n_rows == 0
