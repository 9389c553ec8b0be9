"""Slices of the at-scale reproductions (issue 19): MNIST-8M 8 vs 6 with PCA, 10-class DSG, molecules."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from okl_core.data import open_dataset, read_idx
from okl_core.data.mnist8m import DeformationConfig, Mnist8mGenerator
from pipelines import prepare
from tests.conftest import shared_data

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _mnist_files():
    return str(shared_data("mnist", "t10k-images-idx3-ubyte.gz")), str(shared_data("mnist", "t10k-labels-idx1-ubyte.gz"))


def _generate(tmp_path, name, *extra):
    images, labels = _mnist_files()
    return prepare.run(["mnist8m", "--images", images, "--labels", labels, "--quiet", "--output", str(tmp_path / name), *extra])


def test_mnist8m_class_filter_keeps_those_digits_and_maps_them(tmp_path):
    summary = _generate(tmp_path, "b", "--base_rows", "0:8000", "--classes", "6,8", "--rows", "300", "--seed", "3")
    info = json.loads(open(os.path.join(summary.path, "dataset.json")).read())
    X, y = read_idx(*_mnist_files())
    keep = np.flatnonzero(np.isin(y[:8000], [6, 8]))
    assert info["task"] == "binary" and info["classes"] == [6, 8] and info["extra"]["base_digits"] == len(keep)
    rows = open_dataset(summary.path).read_all()
    expected_y = np.where(y[keep] == 8, 1, -1)
    np.testing.assert_array_equal(rows.y, expected_y[np.arange(300) % len(keep)])
    # Row i is base digit i mod n_base of the filtered base: the generator's bytes on that base.
    generator = Mnist8mGenerator(X[keep].reshape(-1, 28, 28), expected_y, 3, DeformationConfig())
    np.testing.assert_array_equal(rows.X, generator.rows(0, 300)[0])
    three = _generate(tmp_path, "m", "--base_rows", "0:2000", "--classes", "3,5,7", "--rows", "50")
    assert open_dataset(three.path).info.task == "multiclass" and open_dataset(three.path).info.classes == [3, 5, 7]
    assert set(open_dataset(three.path).read_all().y.tolist()) == {0, 1, 2}
    with pytest.raises(ValueError, match="digit labels"):
        _generate(tmp_path, "x", "--classes", "six,8", "--rows", "5")


def test_held_out_originals_are_the_unused_digits(tmp_path):
    summary = _generate(tmp_path, "t", "--base_rows", "8000:10000", "--classes", "6,8", "--originals", "--rows", "389")
    X, y = read_idx(*_mnist_files())
    keep = 8000 + np.flatnonzero(np.isin(y[8000:], [6, 8]))
    assert len(keep) == 389
    rows = open_dataset(summary.path).read_all()
    np.testing.assert_array_equal(rows.X, X[keep])
    np.testing.assert_array_equal(rows.y, np.where(y[keep] == 8, 1, -1))


def _train(*argv):
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-m", "pipelines.train", *argv, "--num_shards", "2", "--direct_num_workers=2",
                           "--direct_running_mode=multi_processing"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_dsg_8_vs_6_slice_through_the_pipeline(tmp_path):
    """4,096 deformed 6s and 8s -> PCA 50 -> DSG hinge (batch 2^10, block 2^8) on 2 worker processes."""
    _generate(tmp_path, "train", "--base_rows", "0:8000", "--classes", "6,8", "--rows", "4096", "--num_workers", "2")
    _generate(tmp_path, "test", "--base_rows", "8000:10000", "--classes", "6,8", "--originals", "--rows", "389")
    prepare.run(["pca", str(tmp_path / "train"), "--components", "50", "--output", str(tmp_path / "train50"), "--quiet"])
    prepare.run(["pca", str(tmp_path / "test"), "--like", str(tmp_path / "train50"), "--output", str(tmp_path / "test50"), "--quiet"])
    _train("--input", str(tmp_path / "train50"), "--test", str(tmp_path / "test50"), "--learner", "dsg", "--param", 'loss="hinge"',
           "--sigma", "median", "--param", 'nu="1/n"', "--param", "batch_size=1024", "--param", "block_size=256",
           "--param", "theta=10", "--output", str(tmp_path / "run"))
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["rows"]["trained"] == 4096 and metrics["plan"]["num_shards"] == 2 and metrics["test"]["n"] == 389
    test_error = metrics["test"]["mistake_rate"]
    # A majority vote errs on 45% of the held-out digits; a few thousand rows already separate them.
    assert 0.0 <= test_error < 0.06, metrics


@pytest.mark.slow
def test_reproduce_runs_the_molecular_setting_through_the_pipeline(tmp_path, capsys):
    """`reproduce --only dsg-molecular --scale_rows 256`: featurize, DSG ridge, FOGD regression and the baselines."""
    pytest.importorskip("rdkit")
    shared_data("cep", "cep-processed.csv")
    from pipelines import reproduce

    reproduce.run(["--data_root", str(shared_data()), "--only", "dsg-molecular", "--scale_rows", "256", "--work", str(tmp_path / "w"),
                   "--output", str(tmp_path / "out")])
    [outcome] = json.loads((tmp_path / "out" / "reproduce-at-scale.json").read_text())
    assert outcome["rows"] == 256 and outcome["skipped"] is None
    assert set(outcome["runs"]) == {"dsg", "fogd_r"} and outcome["runs"]["dsg"]["rows"] == 256
    assert open_dataset(tmp_path / "w" / "dsg-molecular" / "test").info.n_rows == 500
    for run in outcome["runs"].values():
        assert 0 < run["test_mae"] <= run["test_rmse"] < 20  # PCE is in [0, 13]
    assert outcome["ours"] == outcome["runs"]["dsg"]["test_mae"]
    assert {"mean", "linear_ridge"} <= set(outcome["baselines"]) and outcome["baselines"]["n_train"] == 256
    table = capsys.readouterr().out
    assert "| dsg-molecular | dsg | 256 |" in table and "linear_ridge" in table
