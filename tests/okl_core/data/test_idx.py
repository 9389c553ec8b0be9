"""IDX files: round trip into the Parquet layout, and every malformed-file case."""

import gzip
import os

import numpy as np
import pytest

from okl_core.data import DataFormatError, open_dataset, read_idx
from okl_core.data.idx import convert_mnist, read_idx_array
from tests.conftest import shared_data
from tests.data_files import digits, idx_bytes, write_idx, write_idx_pair


@pytest.mark.parametrize("gz", [True, False])
def test_idx_to_parquet_round_trip_equals_source(tmp_path, gz):
    images_path, labels_path, images, labels = write_idx_pair(tmp_path, n=37, gz=gz)
    summary = convert_mnist(images_path, labels_path, tmp_path / "ds", rows_per_shard=10, row_group_rows=4)
    ds = open_dataset(tmp_path / "ds")
    everything = ds.read_all()
    assert ds.task == "multiclass" and ds.info.classes == list(range(10)) and len(ds.shards) == 4
    # Pixels are x / 255 in float32 and recover the source bytes exactly.
    np.testing.assert_array_equal(everything.X, images.reshape(37, -1).astype(np.float32) / np.float32(255))
    np.testing.assert_array_equal(np.rint(everything.X * 255).astype(np.uint8), images.reshape(37, -1))
    np.testing.assert_array_equal(everything.y, labels)
    np.testing.assert_array_equal(everything.row, np.arange(37))
    assert summary.info.n_rows == 37 and "37 rows x 784 features" in summary.line()


def test_read_idx_matches_real_mnist():
    images = shared_data("mnist", "t10k-images-idx3-ubyte.gz")
    labels = shared_data("mnist", "t10k-labels-idx1-ubyte.gz")
    X, y = read_idx(images, labels)
    assert X.shape == (10000, 784) and X.dtype == np.float32 and y.shape == (10000,)
    assert X.min() == 0.0 and X.max() == 1.0
    with gzip.open(images) as f:
        raw = np.frombuffer(f.read(), np.uint8, offset=16).reshape(10000, 784)
    np.testing.assert_array_equal(np.rint(X * 255).astype(np.uint8), raw)
    assert np.bincount(y).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def test_other_idx_element_types(tmp_path):
    values = np.arange(24, dtype=">i4").reshape(2, 3, 4) - 5
    path = write_idx(tmp_path / "a.idx", values)
    out = read_idx_array(path)
    assert out.dtype == np.int32 and out.dtype.isnative
    np.testing.assert_array_equal(out, values)


def test_wrong_magic(tmp_path):
    path = tmp_path / "bad-idx"
    path.write_bytes(b"\x08\x03\x00\x00" + b"\x00" * 40)
    with pytest.raises(DataFormatError, match=f"{path}: not an IDX file"):
        read_idx_array(path)
    path.write_bytes(b"\x00\x00\x77\x03" + b"\x00" * 40)  # unknown type code
    with pytest.raises(DataFormatError, match="not an IDX file"):
        read_idx_array(path)


def test_wrong_dimensions(tmp_path):
    images, labels = digits(5)
    images_path = write_idx(tmp_path / "images", images)
    labels_path = write_idx(tmp_path / "labels", labels)
    with pytest.raises(DataFormatError, match=r"labels.*1 dimensions, expected 3"):
        read_idx(labels_path, labels_path)
    with pytest.raises(DataFormatError, match=r"images.*3 dimensions, expected 1"):
        read_idx(images_path, images_path)


def test_truncated_and_oversized_body(tmp_path):
    images, _ = digits(5)
    data = idx_bytes(images)
    short = tmp_path / "short"
    short.write_bytes(data[:-10])
    with pytest.raises(DataFormatError, match=r"short: IDX body truncated"):
        read_idx_array(short)
    long = tmp_path / "long"
    long.write_bytes(data + b"\x00")
    with pytest.raises(DataFormatError, match=r"long: IDX file has data beyond"):
        read_idx_array(long)
    header_only = tmp_path / "header"
    header_only.write_bytes(data[:6])
    with pytest.raises(DataFormatError, match="header truncated"):
        read_idx_array(header_only)


def test_truncated_gzip(tmp_path):
    images, _ = digits(20)
    compressed = gzip.compress(idx_bytes(images))
    path = tmp_path / "images.gz"
    path.write_bytes(compressed[: len(compressed) // 2])
    with pytest.raises(DataFormatError, match=r"images.gz: corrupt or truncated gzip data"):
        read_idx_array(path)


def test_image_label_count_mismatch_leaves_nothing(tmp_path):
    images, labels = digits(10)
    images_path = write_idx(tmp_path / "images", images)
    labels_path = write_idx(tmp_path / "labels", labels[:9])
    with pytest.raises(DataFormatError, match="count mismatch: .*images has 10 images, .*labels has 9 labels"):
        convert_mnist(images_path, labels_path, tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["images", "labels"]


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        read_idx_array(tmp_path / "nope")
