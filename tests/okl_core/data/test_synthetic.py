"""Synthetic data sets: seeded, prefix-stable, the DSG paper's regression formula."""

import numpy as np

from okl_core.data.layout import open_dataset
from okl_core.data.synthetic import CHUNK_ROWS, dsg_regression, gaussian_blobs, write_synthetic


def test_dsg_regression_follows_the_formula_and_is_prefix_stable():
    X, y = dsg_regression(CHUNK_ROWS + 100, seed=3)
    assert X.shape == (CHUNK_ROWS + 100, 2) and X.dtype == np.float32 and y.dtype == np.float32
    assert X.min() >= -5 and X.max() <= 5
    r = np.linalg.norm(X.astype(np.float64), axis=1)
    noise = y - np.cos(0.5 * np.pi * r) * np.exp(-0.1 * np.pi * r)
    assert abs(noise.std() - 0.1) < 0.003 and abs(noise.mean()) < 0.003
    X2, y2 = dsg_regression(10, seed=3)
    np.testing.assert_array_equal(X2, X[:10])
    np.testing.assert_array_equal(y2, y[:10])
    assert not np.array_equal(dsg_regression(10, seed=4)[0], X2)


def test_blobs_sorted_by_label_and_written_data_set(tmp_path):
    X, y = gaussian_blobs(2000, seed=1, n_classes=4, n_features=3, sort_by_label=True)
    assert (np.diff(y) >= 0).all() and set(np.unique(y)) == {0, 1, 2, 3}
    info = write_synthetic(tmp_path / "s", 5000, seed=2, rows_per_shard=2000)
    assert info.task == "regression" and info.n_rows == 5000 and len(info.shards) == 3 and info.generator_seed == 2
    np.testing.assert_array_equal(open_dataset(tmp_path / "s").read_all().y, dsg_regression(5000, seed=2)[1])
