"""LIBSVM text: agreement with scikit-learn, streaming, label mapping, bad lines."""

import bz2
import gzip
import json
import os

import numpy as np
import pytest

from okl_core.data import DataFormatError, open_dataset, read_libsvm
from okl_core.data.libsvm import convert_libsvm, iter_libsvm
from tests.conftest import shared_data
from tests.data_files import libsvm_text


def _sparse(n=300, d=17, seed=0, labels=(-1, 1)):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.3)
    y = np.asarray(labels)[rng.integers(0, len(labels), n)]
    return X, y


def test_matches_sklearn_on_a9a():
    sklearn = pytest.importorskip("sklearn.datasets")
    for name, d in (("a9a", 123), ("a9a.t", None)):
        path = str(shared_data("a9a", name))
        X, y = read_libsvm(path, n_features=d)
        Xs, ys = sklearn.load_svmlight_file(path, n_features=d, dtype=np.float64)
        assert X.dtype == np.float32 and X.shape == Xs.shape
        np.testing.assert_array_equal(X, Xs.toarray().astype(np.float32))
        np.testing.assert_array_equal(y, ys)
    assert X.shape == (16281, 123) and (X[:, 122] == 0).any()  # width = the largest index in the file


def test_a9a_dataset_equals_reader(tmp_path):
    path = str(shared_data("a9a", "a9a"))
    summary = convert_libsvm(path, tmp_path / "a9a", rows_per_shard=10000, block_bytes=1 << 18)
    ds = open_dataset(tmp_path / "a9a")
    X, y = read_libsvm(path)
    got = ds.read_all()
    np.testing.assert_array_equal(got.X, X)
    np.testing.assert_array_equal(got.y, y.astype(np.int32))
    assert ds.task == "binary" and ds.info.classes == [-1, 1] and ds.info.n_features == 123
    assert [s.n_rows for s in ds.shards] == [10000, 10000, 10000, 2561]
    assert summary.bytes_read == os.path.getsize(path)


@pytest.mark.parametrize("opener", [open, gzip.open, bz2.open])
def test_compressed_inputs_and_small_blocks(tmp_path, opener):
    X, y = _sparse()
    path = tmp_path / "data"
    with opener(path, "wt") as f:
        f.write(libsvm_text(X, y))
    got_X, got_y = read_libsvm(path, n_features=17)
    np.testing.assert_array_equal(got_X, X.astype(np.float32))
    np.testing.assert_array_equal(got_y, y)
    blocks = list(iter_libsvm(path, n_features=17, block_bytes=2048))
    assert len(blocks) > 5  # streamed in many blocks
    np.testing.assert_array_equal(np.concatenate([b.lines for b, _ in blocks]), np.arange(1, 301))


def test_label_mapping_recorded(tmp_path):
    X, y = _sparse(labels=(3, 7))
    (tmp_path / "bin.txt").write_text(libsvm_text(X, y))
    ds = open_dataset(convert_libsvm(tmp_path / "bin.txt", tmp_path / "bin").path)
    assert ds.task == "binary" and ds.info.classes == [3, 7]
    np.testing.assert_array_equal(ds.read_all().y, np.where(y == 7, 1, -1))

    X, y = _sparse(labels=(10, 2, 5))
    (tmp_path / "multi.txt").write_text(libsvm_text(X, y))
    ds = open_dataset(convert_libsvm(tmp_path / "multi.txt", tmp_path / "multi").path)
    assert ds.task == "multiclass" and ds.info.classes == [2, 5, 10]
    np.testing.assert_array_equal(ds.read_all().y, np.searchsorted([2, 5, 10], y))

    ds = open_dataset(convert_libsvm(tmp_path / "multi.txt", tmp_path / "reg", task="regression").path)
    assert ds.task == "regression" and ds.info.classes is None and ds.info.target_range == [2.0, 10.0]
    np.testing.assert_array_equal(ds.read_all().y, y.astype(np.float32))

    # Explicit classes (single pass with n_features) and their order win.
    ds = open_dataset(convert_libsvm(tmp_path / "bin.txt", tmp_path / "given", n_features=17, classes=(7, 3)).path)
    assert ds.info.classes == [7, 3]


def test_float_targets_infer_regression_and_scaling(tmp_path):
    X, _ = _sparse()
    t = np.round(np.random.default_rng(1).normal(size=len(X)), 4) + 0.5
    (tmp_path / "r.txt").write_text(libsvm_text(X, t))
    summary = convert_libsvm(tmp_path / "r.txt", tmp_path / "r", feature_scaling="standard", target_scaling="minmax01")
    ds = open_dataset(summary.path)
    assert ds.task == "regression"
    got = ds.read_all()
    np.testing.assert_allclose(got.X.mean(0), 0, atol=1e-6)
    np.testing.assert_allclose(got.X.std(0), 1, rtol=1e-5)
    assert got.y.min() == 0.0 and abs(got.y.max() - 1.0) < 1e-7
    recorded = ds.info.feature_scaling["features"]["stats"]
    np.testing.assert_allclose(recorded["mean"], X.mean(0), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(recorded["std"], X.std(0), rtol=1e-12)


def test_statistics_back_fill_late_columns(tmp_path):
    # Column 5 appears only in the last block: its statistics include the earlier zeros.
    lines = ["1 1:2"] * 200 + ["-1 1:1 5:4"]
    (tmp_path / "late.txt").write_text("\n".join(lines) + "\n")
    summary = convert_libsvm(tmp_path / "late.txt", tmp_path / "late", feature_scaling="minmax01", block_bytes=512)
    stats = summary.info.feature_scaling["features"]["stats"]
    assert stats["min"] == [1.0, 0.0, 0.0, 0.0, 0.0] and stats["max"] == [2.0, 0.0, 0.0, 0.0, 4.0]
    np.testing.assert_allclose(stats["mean"][4], 4 / 201, rtol=1e-14)


def test_like_reuses_training_labels_and_scaling(tmp_path):
    X, y = _sparse(labels=(0, 1))
    (tmp_path / "train.txt").write_text(libsvm_text(X, y))
    (tmp_path / "test.txt").write_text(libsvm_text(X[:50] * 2, y[:50]))
    train = open_dataset(convert_libsvm(tmp_path / "train.txt", tmp_path / "train", feature_scaling="minmax11").path)
    test = open_dataset(convert_libsvm(tmp_path / "test.txt", tmp_path / "test", like=train).path)
    assert test.info.classes == [0, 1] and test.info.feature_scaling == train.info.feature_scaling
    scaling = train.info.feature_scaling["features"]
    expected = ((X[:50] * 2 - np.array(scaling["offset"])) * np.array(scaling["scale"])).astype(np.float32)
    np.testing.assert_array_equal(test.read_all().X, expected)


BAD_LINES = [
    ("1 3:1 2", "malformed feature '2' (expected index:value)"),
    ("1 0:1", "feature index 0 (indices are 1-based)"),
    ("1 a:1", "feature index 'a' is not a positive integer"),
    ("1 2.5:1", "feature index '2.5' is not a positive integer"),
    ("1 3:x", "value of feature 3: 'x' is not a number"),
    ("1 3:nan", "value of feature 3: 'nan' is not finite"),
    ("1 3:inf", "value of feature 3: 'inf' is not finite"),
    ("abc 3:1", "label: 'abc' is not a number"),
    ("nan 3:1", "label: 'nan' is not finite"),
    ("3:1 4:1", "missing label (line starts with the feature '3:1')"),
    ("1 3:1 3:2", "duplicate feature index 3"),
    ("1 3::1", "malformed feature '3::1' (expected index:value)"),
    ("1 99:1", "feature index 99 exceeds n_features = 10"),
]


@pytest.mark.parametrize("bad, message", BAD_LINES)
def test_malformed_line_names_file_and_line(tmp_path, bad, message):
    path = tmp_path / "bad.txt"
    path.write_text("1 1:1\n-1 2:1\n\n# comment\n" + bad + "\n1 4:1\n")
    with pytest.raises(DataFormatError) as err:
        read_libsvm(path, n_features=10)
    assert str(err.value) == f"{path}, line 5: {message}"
    with pytest.raises(DataFormatError, match="line 5"):
        convert_libsvm(path, tmp_path / "out", n_features=10)
    assert sorted(os.listdir(tmp_path)) == ["bad.txt"]  # nothing half-written


def test_skip_bad_rows_records_rejects(tmp_path):
    good = ["1 1:1", "-1 2:1 qid:3", "1 4:0.5 # trailing comment", "-1 3:2"]
    text = [good[0], "1 0:1", good[1], "x 1:1", good[2], "1 2:1 2:1", good[3]]
    (tmp_path / "mixed.txt").write_text("\n".join(text) + "\n")
    summary = convert_libsvm(tmp_path / "mixed.txt", tmp_path / "ok", skip_bad_rows=True)
    assert summary.n_rejected == 3 and "3 rejected (rejects.csv)" in summary.line()
    ds = open_dataset(summary.path)
    got = ds.read_all()
    np.testing.assert_array_equal(got.y, [1, -1, 1, -1])
    np.testing.assert_array_equal(got.X, [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0.5], [0, 0, 2, 0]])
    rejects = (tmp_path / "ok" / "rejects.csv").read_text().splitlines()
    assert rejects[0] == "line,reason,text"
    assert [r.split(",")[0] for r in rejects[1:]] == ["2", "4", "6"]
    assert "duplicate feature index 2" in rejects[3]
    assert json.loads((tmp_path / "ok" / "dataset.json").read_text())["extra"]["rejects"] == {"file": "rejects.csv", "count": 3}


def test_unknown_label_with_given_classes(tmp_path):
    (tmp_path / "t.txt").write_text("1 1:1\n2 1:1\n3 1:1\n")
    with pytest.raises(DataFormatError, match=r"t.txt, line 3: label 3 is not one of the classes \[1, 2\]"):
        convert_libsvm(tmp_path / "t.txt", tmp_path / "o", n_features=1, classes=(1, 2))
    with pytest.raises(ValueError, match="binary task needs exactly 2 distinct labels, found 3"):
        convert_libsvm(tmp_path / "t.txt", tmp_path / "o", task="binary")
    (tmp_path / "one.txt").write_text("1 1:1\n1 1:2\n")
    with pytest.raises(ValueError, match="only one distinct label"):
        convert_libsvm(tmp_path / "one.txt", tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_truncated_compressed_libsvm_leaves_nothing(tmp_path):
    X, y = _sparse(3000)
    data = bz2.compress(libsvm_text(X, y).encode())
    (tmp_path / "cut.bz2").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataFormatError, match="cut.bz2: corrupt or truncated bzip2 data"):
        convert_libsvm(tmp_path / "cut.bz2", tmp_path / "o", n_features=17, classes=(-1, 1))
    assert sorted(os.listdir(tmp_path)) == ["cut.bz2"]
