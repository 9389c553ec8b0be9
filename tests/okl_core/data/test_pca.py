"""PCA of data sets: the fit against numpy's SVD, the recorded model, --like."""

import json
import os

import numpy as np
import pytest

from okl_core.data import open_dataset
from okl_core.data.layout import write_dataset
from okl_core.data.pca import PCA_FILE, Pca, project_dataset


def _data(n=400, d=12, seed=0):
    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(d, d)) * np.linspace(3.0, 0.1, d)[:, None]
    X = (rng.normal(size=(n, d)) @ mixing + 5.0).astype(np.float32)
    return X, np.where(X[:, 0] > 5.0, 1, -1)


def test_fit_matches_the_svd_of_the_centred_data():
    X, _ = _data()
    pca = Pca.fit(X, 4)
    centred = X.astype(np.float64) - X.astype(np.float64).mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    np.testing.assert_allclose(pca.explained_variance, s[:4] ** 2 / len(X), rtol=1e-9)
    # Same directions up to sign; the sign rule makes the largest entry positive.
    for k in range(4):
        assert abs(abs(pca.components[k] @ vt[k]) - 1.0) < 1e-9
        assert pca.components[k][np.abs(pca.components[k]).argmax()] > 0
    np.testing.assert_allclose(pca.apply(X), (centred @ pca.components.T).astype(np.float32), rtol=1e-6, atol=1e-5)


def test_bad_arguments_are_refused():
    X, _ = _data()
    with pytest.raises(ValueError, match="n_components"):
        Pca.fit(X, 13)
    with pytest.raises(ValueError, match="expects rows of 12"):
        Pca.fit(X, 2).apply(X[:, :5])


def test_prepared_train_and_test_share_the_recorded_model(tmp_path):
    X, y = _data(500)
    write_dataset(tmp_path / "train", X[:400], y[:400], "binary", n_shards=3, classes=[-1, 1])
    write_dataset(tmp_path / "test", X[400:], y[400:], "binary", classes=[-1, 1])
    project_dataset(str(tmp_path / "train"), str(tmp_path / "train3"), 3, sample_rows=150, seed=4, rows_per_shard=100)
    project_dataset(str(tmp_path / "test"), str(tmp_path / "test3"), like=str(tmp_path / "train3"))
    info = json.loads((tmp_path / "train3" / "dataset.json").read_text())
    record = info["extra"]["pca"]
    assert (record["n_components"], record["n_inputs"], record["sample_rows"], record["n_samples"]) == (3, 12, 150, 150)
    assert info["classes"] == [-1, 1] and info["n_features"] == 3 and len(info["shards"]) == 4
    # The model is plain arrays (no pickle) fitted on the seeded sample.
    with np.load(tmp_path / "train3" / PCA_FILE, allow_pickle=False) as arrays:
        chosen = np.sort(np.random.default_rng(4).choice(400, size=150, replace=False))
        np.testing.assert_array_equal(arrays["components"], Pca.fit(X[chosen], 3).components)
    model = Pca.load(str(tmp_path / "train3"))
    for name, rows in (("train3", X[:400]), ("test3", X[400:])):
        got = open_dataset(tmp_path / name).read_all()
        np.testing.assert_array_equal(got.X, model.apply(rows))
    np.testing.assert_array_equal(open_dataset(tmp_path / "test3").read_all().y, y[400:])
    test_record = json.loads((tmp_path / "test3" / "dataset.json").read_text())["extra"]["pca"]
    assert test_record["like"] == os.path.abspath(tmp_path / "train3") and test_record["sha256"] == record["sha256"]


def test_like_checks_shapes_and_integrity(tmp_path):
    X, y = _data(200)
    write_dataset(tmp_path / "train", X, y, "binary", classes=[-1, 1])
    write_dataset(tmp_path / "narrow", X[:, :5], y, "binary", classes=[-1, 1])
    project_dataset(str(tmp_path / "train"), str(tmp_path / "p"), 2)
    with pytest.raises(ValueError, match="has 5 features, the PCA of .* expects 12"):
        project_dataset(str(tmp_path / "narrow"), str(tmp_path / "q"), like=str(tmp_path / "p"))
    with pytest.raises(ValueError, match="not a PCA-projected data set"):
        project_dataset(str(tmp_path / "train"), str(tmp_path / "q"), like=str(tmp_path / "train"))
    with open(tmp_path / "p" / PCA_FILE, "ab") as f:
        f.write(b"x")
    with pytest.raises(ValueError, match="sha256 differs"):
        project_dataset(str(tmp_path / "train"), str(tmp_path / "q"), like=str(tmp_path / "p"))
    assert not (tmp_path / "q").exists()


def test_fit_or_like_not_both(tmp_path):
    X, y = _data(50)
    write_dataset(tmp_path / "train", X, y, "binary", classes=[-1, 1])
    project_dataset(str(tmp_path / "train"), str(tmp_path / "p"), 2)
    with pytest.raises(ValueError, match="either --components"):
        project_dataset(str(tmp_path / "train"), str(tmp_path / "q"), 2, like=str(tmp_path / "p"))
    with pytest.raises(ValueError, match="give --components K"):
        project_dataset(str(tmp_path / "train"), str(tmp_path / "q"))
