"""CSV conversion: task inference, exact scaling statistics, reuse on test sets, bad rows."""

import gzip
import os

import numpy as np
import pytest

from okl_core.data import DataFormatError, open_dataset
from okl_core.data.csv_table import convert_csv
from okl_core.data.scaling import ColumnStats, Scaling
from tests.conftest import shared_data


def _write_csv(path, header, rows, opener=open):
    with opener(path, "wt") as f:
        f.write(",".join(header) + "\n")
        for row in rows:
            f.write(",".join(v if isinstance(v, str) else repr(float(v)) if not isinstance(v, int) else str(v) for v in row) + "\n")
    return path


def _table(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(3, 2, n), rng.uniform(-5, 7, n), rng.exponential(1, n), np.full(n, 4.0)])
    t = X[:, 0] - 2 * X[:, 1] + rng.normal(size=n)
    return X, t


@pytest.mark.parametrize("method", ["minmax01", "minmax11", "standard"])
def test_scaling_statistics_are_exact(tmp_path, method):
    X, t = _table()
    path = _write_csv(tmp_path / "t.csv", ["a", "b", "c", "const", "y"], [list(r) + [v] for r, v in zip(X, t)])
    summary = convert_csv(path, tmp_path / "ds", target="y", feature_scaling=method, target_scaling="standard", batch_rows=97)
    ds = open_dataset(summary.path)
    assert ds.task == "regression" and ds.info.extra["columns"] == ["a", "b", "c", "const"]
    recorded = ds.info.feature_scaling["features"]
    stats = recorded["stats"]
    # min/max exact; mean/std to float64 rounding (streamed over batches of 97 rows).
    assert stats["min"] == X.min(0).tolist() and stats["max"] == X.max(0).tolist() and stats["n"] == 1000
    np.testing.assert_allclose(stats["mean"], X.mean(0), rtol=1e-13)
    np.testing.assert_allclose(stats["std"], X.std(0), rtol=1e-12, atol=1e-15)
    lo, hi, mean, std = X.min(0), X.max(0), X.mean(0), X.std(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    if method == "minmax01":
        offset, scale = lo, 1 / span
    elif method == "minmax11":
        offset, scale = lo + (hi - lo) / 2, 1 / np.where(hi > lo, (hi - lo) / 2, 1.0)
    else:
        offset, scale = mean, 1 / np.where(std > 0, std, 1.0)
    np.testing.assert_allclose(recorded["offset"], offset, rtol=1e-13)
    np.testing.assert_allclose(recorded["scale"], scale, rtol=1e-12)
    got = ds.read_all()
    np.testing.assert_array_equal(got.X, ((X - np.array(recorded["offset"])) * np.array(recorded["scale"])).astype(np.float32))
    assert (got.X[:, 3] == 0).all()  # a constant column maps to 0
    if method == "minmax01":
        assert got.X[:, :3].min() == 0 and got.X[:, :3].max() == 1
    if method == "minmax11":
        assert got.X[:, :3].min() == -1 and got.X[:, :3].max() == 1
    target = ds.info.feature_scaling["target"]
    np.testing.assert_allclose(target["stats"]["mean"], [t.mean()], rtol=1e-13)
    np.testing.assert_allclose(got.y, (t - t.mean()) / t.std(), rtol=1e-6, atol=1e-6)
    assert ds.info.target_range == [float(got.y.min()), float(got.y.max())]


def test_column_stats_merge_equals_numpy():
    rng = np.random.default_rng(3)
    X = rng.normal(1e6, 1.0, size=(5000, 3))  # large offset: naive sums of squares would fail
    stats = ColumnStats(3)
    for start in range(0, 5000, 333):
        stats.add(X[start : start + 333])
    np.testing.assert_allclose(stats.mean, X.mean(0), rtol=1e-14)
    np.testing.assert_allclose(stats.std, X.std(0), rtol=1e-9)
    assert Scaling.fit("none", None).to_json() == {"method": "none"}


def test_test_set_reuses_training_statistics(tmp_path):
    X, t = _table()
    header = ["a", "b", "c", "const", "y"]
    train = convert_csv(_write_csv(tmp_path / "train.csv", header, [list(r) + [v] for r, v in zip(X[:800], t[:800])]), tmp_path / "train", target="y", feature_scaling="standard", target_scaling="minmax01")
    # Columns in another order in the test file: matched by name.
    test_rows = [[v, r[3], r[2], r[1], r[0]] for r, v in zip(X[800:], t[800:])]
    test = convert_csv(_write_csv(tmp_path / "test.csv", ["y", "const", "c", "b", "a"], test_rows), tmp_path / "test", target="y", like=open_dataset(train.path))
    assert test.info.feature_scaling == train.info.feature_scaling
    rec = train.info.feature_scaling
    expected = (X[800:] - np.array(rec["features"]["offset"])) * np.array(rec["features"]["scale"])
    np.testing.assert_array_equal(open_dataset(test.path).read_all().X, expected.astype(np.float32))
    expected_t = (t[800:] - rec["target"]["offset"][0]) * rec["target"]["scale"][0]
    np.testing.assert_allclose(open_dataset(test.path).read_all().y, expected_t, rtol=1e-6)


def test_task_inference_and_string_labels(tmp_path):
    rows = [[float(i), ["cat", "dog", "eel"][i % 3]] for i in range(30)]
    ds = open_dataset(convert_csv(_write_csv(tmp_path / "s.csv", ["x", "animal"], rows), tmp_path / "s", target="animal").path)
    assert ds.task == "multiclass" and ds.info.classes == ["cat", "dog", "eel"]
    np.testing.assert_array_equal(ds.read_all().y, np.arange(30) % 3)
    rows = [[float(i), [0, 1][i % 2]] for i in range(10)]
    path = _write_csv(tmp_path / "b.csv", ["x", "label"], rows)
    ds = open_dataset(convert_csv(path, tmp_path / "b", target="label").path)
    assert ds.task == "binary" and ds.info.classes == [0, 1]
    np.testing.assert_array_equal(ds.read_all().y, np.where(np.arange(10) % 2 == 1, 1, -1))
    ds = open_dataset(convert_csv(path, tmp_path / "m", target="label", task="multiclass").path)
    assert ds.task == "multiclass" and ds.read_all().y.tolist() == [0, 1] * 5
    ds = open_dataset(convert_csv(path, tmp_path / "r", target="label", task="regression").path)
    assert ds.task == "regression"
    with pytest.raises(ValueError, match="target scaling applies to regression"):
        convert_csv(path, tmp_path / "x", target="label", target_scaling="standard")


def test_features_drop_and_gzip(tmp_path):
    X, t = _table(50)
    path = _write_csv(tmp_path / "g.csv.gz", ["a", "b", "c", "const", "y"], [list(r) + [v] for r, v in zip(X, t)], opener=gzip.open)
    ds = open_dataset(convert_csv(path, tmp_path / "g", target="y", features=["c", "a"]).path)
    np.testing.assert_array_equal(ds.read_all().X, X[:, [2, 0]].astype(np.float32))
    ds = open_dataset(convert_csv(path, tmp_path / "d", target="y", drop=["const"], n_shards=3).path)
    assert ds.info.extra["columns"] == ["a", "b", "c"] and [s.n_rows for s in ds.shards] == [17, 17, 16]


def test_missing_target_column(tmp_path):
    path = _write_csv(tmp_path / "t.csv", ["a", "b"], [[1.0, 2.0]])
    with pytest.raises(DataFormatError, match=r"t.csv: no target column 'y'; the columns are \['a', 'b'\]"):
        convert_csv(path, tmp_path / "o", target="y")
    with pytest.raises(ValueError, match=r"t.csv: --features names no column 'zz'; the columns are \['a', 'b'\]$"):
        convert_csv(path, tmp_path / "o", target="a", features=["zz"])
    assert sorted(os.listdir(tmp_path)) == ["t.csv"]


BAD_ROWS = [
    (["1.0", "abc", "1"], "column 'b': 'abc' is not a number (a category? pass --categorical b)"),
    (["1.0", "nan", "1"], "column 'b': 'nan' is not finite"),
    (["inf", "2", "1"], "column 'a': 'inf' is not finite"),
    (["1.0", "", "1"], "column 'b': missing value"),
    (["1.0", "2"], "expected 3 fields, found 2"),
    (["1.0", "2", ""], "target 'y': missing value"),
    (["1.0", "2", "nan"], "target 'y': 'nan' is not finite"),
]


@pytest.mark.parametrize("bad, message", BAD_ROWS)
def test_bad_row_names_file_line_and_column(tmp_path, bad, message):
    path = tmp_path / "bad.csv"
    path.write_text("a,b,y\n1,2,0\n3,4,1\n" + ",".join(bad) + "\n5,6,1\n")
    with pytest.raises(DataFormatError) as err:
        convert_csv(path, tmp_path / "o", target="y")
    assert str(err.value) == f"{path}, line 4: {message}"
    assert sorted(os.listdir(tmp_path)) == ["bad.csv"]
    summary = convert_csv(path, tmp_path / "o", target="y", skip_bad_rows=True)
    assert summary.n_rejected == 1 and summary.info.n_rows == 3
    rejects = (tmp_path / "o" / "rejects.csv").read_text().splitlines()
    assert rejects[0] == "line,reason,text" and rejects[1].startswith("4,")


def test_cep_csv_regression():
    path = shared_data("cep", "cep-processed.csv")
    with pytest.raises(DataFormatError, match=r"line 2: column 'smiles': '.*' is not a number"):
        convert_csv(path, "/nonexistent-okl-test/o", target="PCE")
