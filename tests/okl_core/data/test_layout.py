"""The Parquet data set layout: round trips, sharding, atomic writes, globs."""

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from okl_core.data.layout import DatasetWriter, open_dataset, write_dataset, write_shard_file, x_matrix


def _data(n=5000, d=6, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)).astype(np.float32), rng.integers(0, 4, n)


def test_round_trip_in_row_order_across_shards(tmp_path):
    X, y = _data()
    info = write_dataset(tmp_path / "ds", X, y, "multiclass", n_shards=3, row_group_rows=700, classes=[0, 1, 2, 3])
    assert [s["n_rows"] for s in info.shards] == [1667, 1667, 1666]
    ds = open_dataset(tmp_path / "ds")
    everything = ds.read_all()
    np.testing.assert_array_equal(everything.X, X)
    np.testing.assert_array_equal(everything.y, y)
    np.testing.assert_array_equal(everything.row, np.arange(len(y)))
    schema = pq.ParquetFile(ds.shards[0].path).schema_arrow
    assert str(schema.field("x").type) == "fixed_size_binary[24]"
    assert schema.field("x").metadata == {b"okl.encoding": b"float32-le", b"okl.n_features": b"6"}
    assert ds.info.layout_version == 2
    assert pq.ParquetFile(ds.shards[0].path).metadata.row_group(0).column(0).compression == "LZ4"
    assert [len(b) for b in ds.iter_batches(shard=0)] == [700, 700, 267]
    assert ds.info.n_classes == 4


def test_streaming_writer_splits_shards_and_regression_targets(tmp_path):
    X, _ = _data(1000, 3)
    t = X.sum(1)
    with DatasetWriter(tmp_path / "r", 3, "regression", rows_per_shard=300, row_group_rows=128) as w:
        for i in range(0, 1000, 77):
            w.write(X[i : i + 77], t[i : i + 77])
    ds = open_dataset(tmp_path / "r")
    assert [s.n_rows for s in ds.shards] == [300, 300, 300, 100]
    assert [s.first_row for s in ds.shards] == [0, 300, 600, 900]
    np.testing.assert_array_equal(ds.read_all().y, t.astype(np.float32))


def _group_rows(path):
    metadata = pq.ParquetFile(path).metadata
    return [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]


def test_row_groups_end_at_multiples_of_row_group_rows_in_the_stream(tmp_path):
    # The plan cuts batches at multiples of batch_rows in the stream: a shard starting at
    # row 250 begins with a group of 50 rows, so that its later groups line up with them.
    X, y = _data(600)
    with DatasetWriter(tmp_path / "ds", 6, "multiclass", rows_per_shard=250, row_group_rows=100) as w:
        for i in range(0, 600, 77):
            w.write(X[i : i + 77], y[i : i + 77])
    ds = open_dataset(tmp_path / "ds")
    assert [_group_rows(s.path) for s in ds.shards] == [[100, 100, 50], [50, 100, 100], [100]]
    everything = ds.read_all()
    np.testing.assert_array_equal(everything.X, X)
    np.testing.assert_array_equal(everything.row, np.arange(600))
    # The parallel writers' shards (MNIST-8M) likewise.
    path = tmp_path / "part.parquet"
    assert write_shard_file(path, 6, "multiclass", [(X[:130], y[:130]), (X[130:300], y[130:300])], first_row=250, row_group_rows=100) == 300
    assert _group_rows(path) == [50, 100, 100, 50]
    np.testing.assert_array_equal(pq.read_table(path).column("row").to_numpy(), np.arange(250, 550))


def test_failed_write_leaves_nothing(tmp_path):
    X, y = _data(100)
    with pytest.raises(RuntimeError):
        with DatasetWriter(tmp_path / "bad", 6, "multiclass", rows_per_shard=10) as w:
            w.write(X, y)
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_glob_without_dataset_json_infers_task_and_order(tmp_path):
    X, _ = _data(400)
    y = np.where(X[:, 0] > 0, 1, -1)
    write_dataset(tmp_path / "b", X, y, "binary", n_shards=4)
    os.remove(tmp_path / "b" / "dataset.json")
    ds = open_dataset(str(tmp_path / "b" / "part-*.parquet"))
    assert ds.task == "binary" and ds.info.n_rows == 400
    np.testing.assert_array_equal(ds.read_all().row, np.arange(400))


def test_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no data set"):
        open_dataset(str(tmp_path / "missing*.parquet"))
    (tmp_path / "d").mkdir()
    with pytest.raises(FileNotFoundError, match="dataset.json"):
        open_dataset(tmp_path / "d")
    X, y = _data(10)
    write_dataset(tmp_path / "e", X, y, "multiclass")
    with pytest.raises(FileExistsError):
        write_dataset(tmp_path / "e", X, y, "multiclass")
    info = json.loads((tmp_path / "e" / "dataset.json").read_text())
    info["layout_version"] = 99
    (tmp_path / "e" / "dataset.json").write_text(json.dumps(info))
    with pytest.raises(ValueError, match="layout version"):
        open_dataset(tmp_path / "e")
    with pytest.raises(ValueError, match="expected X"):
        with DatasetWriter(tmp_path / "f", 5, "binary") as w:
            w.write(X, y)


@pytest.mark.parametrize("compression, codec", [("lz4", "LZ4"), ("snappy", "SNAPPY"), ("zstd", "ZSTD"), ("none", "UNCOMPRESSED")])
def test_every_compression_round_trips(tmp_path, compression, codec):
    X, y = _data(500, 5)
    write_dataset(tmp_path / "ds", X, y, "multiclass", row_group_rows=128, classes=[0, 1, 2, 3], compression=compression)
    ds = open_dataset(tmp_path / "ds")
    assert pq.ParquetFile(ds.shards[0].path).metadata.row_group(0).column(0).compression == codec
    np.testing.assert_array_equal(ds.read_all().X, X)


def test_unknown_compression_is_refused(tmp_path):
    with pytest.raises(ValueError, match="compression must be one of"):
        DatasetWriter(tmp_path / "ds", 3, "binary", compression="gzip9")
    assert not (tmp_path / "ds").exists()


def test_files_with_nullable_features_read_the_same(tmp_path):
    """Files written before features were declared non-null (or by other writers) still read."""
    X, y = _data(300, 4)
    x = pa.FixedSizeListArray.from_arrays(pa.array(X.reshape(-1)), 4)  # nullable items
    table = pa.table({"x": x, "y": pa.array(y.astype(np.int32)), "row": pa.array(np.arange(300, dtype=np.int64))})
    pq.write_table(table, tmp_path / "old.parquet", compression="snappy", row_group_size=100)
    ds = open_dataset(tmp_path / "old.parquet")
    np.testing.assert_array_equal(ds.read_all().X, X)


def test_x_bytes_are_little_endian_float32_rows(tmp_path):
    """The binary x column is readable without okl: np.frombuffer of the bytes."""
    X, y = _data(50, 3)
    write_dataset(tmp_path / "ds", X, y, "multiclass", classes=[0, 1, 2, 3])
    table = pq.read_table(tmp_path / "ds" / "part-00000-of-00001.parquet")
    raw = np.frombuffer(table.column("x").chunk(0).buffers()[1], "<f4").reshape(-1, 3)
    np.testing.assert_array_equal(raw, X)
    assert table.column("x")[4].as_py() == X[4].astype("<f4").tobytes()


def test_x_matrix_reads_binary_slices_and_lists_alike():
    X = np.arange(24, dtype=np.float32).reshape(8, 3)
    binary = pa.FixedSizeBinaryArray.from_buffers(pa.binary(12), 8, [None, pa.py_buffer(X.tobytes())])
    fixed = pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), 3)
    variable = pa.array(X.tolist(), type=pa.list_(pa.float32()))
    for column in (binary, fixed, variable, pa.chunked_array([binary])):
        np.testing.assert_array_equal(x_matrix(column, 3), X)
        np.testing.assert_array_equal(x_matrix(column.slice(2, 4) if not isinstance(column, pa.ChunkedArray) else column.chunk(0).slice(2, 4), 3), X[2:6])
    assert x_matrix(binary.slice(0, 0), 3).shape == (0, 3)
    with pytest.raises(ValueError, match="4 features per row, expected 3"):
        x_matrix(pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), 1, [None, pa.py_buffer(bytes(16))]), 3)


def test_layout_1_data_sets_with_list_features_still_read(tmp_path):
    """Data sets written by okl before layout 2 (x as fixed_size_list) read the same."""
    X, y = _data(300, 4)
    write_dataset(tmp_path / "ds", X, y, "multiclass", classes=[0, 1, 2, 3])
    path = tmp_path / "ds" / "part-00000-of-00001.parquet"
    x = pa.FixedSizeListArray.from_arrays(pa.array(X.reshape(-1)), type=pa.list_(pa.field("element", pa.float32(), nullable=False), 4))
    pq.write_table(pa.table({"x": x, "y": pa.array(y.astype(np.int32)), "row": pa.array(np.arange(300, dtype=np.int64))}), path, row_group_size=100)
    info = json.loads((tmp_path / "ds" / "dataset.json").read_text())
    info["layout_version"] = 1
    (tmp_path / "ds" / "dataset.json").write_text(json.dumps(info))
    ds = open_dataset(tmp_path / "ds")
    np.testing.assert_array_equal(ds.read_all().X, X)
    assert [len(b) for b in ds.iter_batches(batch_rows=128)] == [128, 128, 44]


def test_files_whose_x_is_not_features_are_refused(tmp_path):
    table = pa.table({"x": pa.array([b"abc", b"def"], type=pa.binary(3)), "y": pa.array([1, 2], pa.int32()), "row": pa.array([0, 1], pa.int64())})
    pq.write_table(table, tmp_path / "odd.parquet")
    with pytest.raises(ValueError, match="odd.parquet: not in the okl layout"):
        open_dataset(tmp_path / "odd.parquet")
