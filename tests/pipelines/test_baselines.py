"""The constant baseline beside every result of ``okl train`` and ``okl predict``.

``metrics.json`` carries, for the online and the test metrics, the best constant answer's
metric over the same rows (checked against :func:`okl_core.evaluation.constant_baseline` of
the rows written) and whether the model beats it; the summary line shows it beside the
metric and one warning line flags a model that does not beat it or answers one class.
"""

import json
import subprocess
import sys

import numpy as np
import pytest

from okl_core.data.layout import write_dataset
from okl_core.evaluation import constant_baseline
from pipelines import predict, train
from tests.pipelines.runner_cases import ROOT


def _rows(n, seed):
    """About 30% of the rows +1: a majority class worth beating."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)).astype(np.float32)
    return X, np.where(X[:, 0] > 0.5, 1, -1)


@pytest.fixture(scope="module")
def imbalanced(tmp_path_factory):
    root = tmp_path_factory.mktemp("imbalanced")
    (X, y), (Xt, yt) = _rows(2000, 0), _rows(600, 1)
    write_dataset(root / "train", X, y, "binary", n_shards=2, row_group_rows=500)
    write_dataset(root / "test", Xt, yt, "binary", n_shards=1, row_group_rows=300)
    return root, y, yt


def _train(tmp_path, root, sigma, *extra):
    return train.run(["--input", str(root / "train"), "--test", str(root / "test"), "--learner", "fogd", "--param", "n_components=32",
                      "--sigma", str(sigma), "--eta", "0.05", "--num_shards", "2", "--batch_rows", "250", *extra,
                      "--output", str(tmp_path / f"run-{sigma}"), "--runner=DirectRunner"])


def test_a_model_that_learns_nothing_is_flagged_beside_its_baseline(tmp_path, imbalanced, capsys):
    """A bandwidth so wide that the kernel is constant: the model answers one class for every test row."""
    root, y, yt = imbalanced
    m = _train(tmp_path, root, 1e6).metrics
    majority, test_majority = constant_baseline("binary", y)["mistake_rate"], constant_baseline("binary", yt)["mistake_rate"]
    online, test = m["online"]["merged"], m["test"]
    assert online["baseline"] == {"mistake_rate": majority} and test["baseline"] == {"mistake_rate": test_majority}
    assert online["class_counts"] == [int((y == -1).sum()), int((y == 1).sum())]
    assert test["predicted_counts"] == [600, 0] and test["one_class"] is True and test["beats_baseline"] is False
    assert test["mistake_rate"] == pytest.approx(test_majority)
    lines = capsys.readouterr().out.splitlines()
    summary = next(line for line in lines if line.startswith("fogd: 2000 rows trained"))
    assert (f"online mistake_rate {online['mistake_rate']:.5g} (majority class {majority:.5g}), "
            f"test mistake_rate {test['mistake_rate']:.5g} (majority class {test_majority:.5g})") in summary
    warnings = [line for line in lines if line.startswith("WARNING")]
    assert warnings == [f"WARNING: the model is no better than the majority class (test mistake_rate {test['mistake_rate']:.5g}, "
                        f"majority class {test_majority:.5g}); it predicts -1 for every test row: "
                        "try scaled features (okl prepare --feature_scaling standard), another bandwidth (--sigma 0.5*median), or okl sweep to choose its parameters"]


def test_the_at_scale_table_reads_the_baseline_and_flags_of_a_runs_metrics(tmp_path, imbalanced):
    """okl reproduce's at-scale settings run okl train: their table reads its metrics.json."""
    from okl_experiments.at_scale import SCALE_SETTINGS, ScaleOutcome, _run_summary, scale_table

    root, _, yt = imbalanced
    flat, learned = _train(tmp_path, root, 1e6), _train(tmp_path, root, 1.0)
    majority = constant_baseline("binary", yt)["mistake_rate"]
    outcome = ScaleOutcome(SCALE_SETTINGS[0], 2000, runs={"flat": _run_summary(flat.output, "test_mistake_rate"),
                                                          "learned": _run_summary(learned.output, "test_mistake_rate")})
    lines = {line.split(" | ")[1]: line for line in scale_table([outcome]).splitlines()[2:]}
    assert (f"| {flat.metrics['test']['mistake_rate']:.2%} (majority class {majority:.2%}) "
            "**no better than the majority class; one class for every row** |") in lines["flat"]
    assert f"| {learned.metrics['test']['mistake_rate']:.2%} (majority class {majority:.2%}) |" in lines["learned"]


def test_a_model_that_learns_is_not_flagged(tmp_path, imbalanced, capsys):
    root, y, yt = imbalanced
    m = _train(tmp_path, root, 1.0).metrics
    assert m["online"]["merged"]["beats_baseline"] is True and m["test"]["beats_baseline"] is True
    assert m["test"]["mistake_rate"] < 0.1 < constant_baseline("binary", yt)["mistake_rate"]
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("WARNING")]
    # Per shard too: each shard's baseline is its own rows' (shard 0 holds rows 0..999).
    assert m["online"]["per_shard"][0]["baseline"] == constant_baseline("binary", y[:1000])


def test_predict_metrics_carry_the_baseline_of_the_rows_scored(tmp_path, imbalanced, capsys):
    root, _, yt = imbalanced
    model = _train(tmp_path, root, 1e6).model_path
    capsys.readouterr()
    predict.run(["--model", model, "--input", str(root / "test"), "--output", str(tmp_path / "pred")])
    with open(tmp_path / "pred" / "metrics.json") as f:
        metrics = json.load(f)["metrics"]
    majority = constant_baseline("binary", yt)["mistake_rate"]
    assert metrics["baseline"] == {"mistake_rate": majority} and metrics["beats_baseline"] is False and metrics["one_class"] is True
    assert f"600 rows scored, 0 rejected; mistake_rate {metrics['mistake_rate']:.5g} (majority class {majority:.5g})" in capsys.readouterr().out


def test_regression_metrics_carry_the_mean_predictor_baseline_merged_over_shards(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1500, 3)).astype(np.float32)
    y = 50.0 + np.sin(X[:, 0]) + 0.3 * X[:, 1]  # far from 0, little spread: no cancellation allowed
    write_dataset(tmp_path / "data", X, y, "regression", n_shards=3, row_group_rows=250)
    result = train.run(["--input", str(tmp_path / "data"), "--learner", "fogd_r", "--param", "n_components=16", "--sigma", "1.0",
                        "--eta", "0.01", "--num_shards", "3", "--output", str(tmp_path / "out"), "--runner=DirectRunner"])
    merged = result.metrics["online"]["merged"]
    stored = y.astype(np.float32).astype(np.float64)  # the data set keeps float32 targets
    assert merged["baseline"]["mse"] == pytest.approx(constant_baseline("regression", stored)["mse"], rel=1e-9)
    assert merged["beats_baseline"] is (merged["mse"] <= 0.99 * merged["baseline"]["mse"])
    assert set(merged) == {"n", "mse", "mae", "baseline", "beats_baseline"}


def test_the_command_prints_one_warning_line_under_its_summary(tmp_path, imbalanced):
    """``python -m pipelines.train`` as a user runs it: the summary line, then one WARNING line."""
    root, _, yt = imbalanced
    done = subprocess.run([sys.executable, "-m", "pipelines.train", "--input", str(root / "train"), "--test", str(root / "test"),
                           "--learner", "fogd", "--param", "n_components=32", "--sigma", "1e6", "--eta", "0.05",
                           "--output", str(tmp_path / "cli"), "--runner=DirectRunner"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    warnings = [i for i, line in enumerate(lines) if "WARNING" in line]
    assert len(warnings) == 1 and warnings[0] == len(lines) - 1  # one line, the last
    assert lines[-1].startswith("WARNING: the model is no better than the majority class (test mistake_rate ")
    assert lines[-1].endswith(f", majority class {constant_baseline('binary', yt)['mistake_rate']:.5g}); it predicts -1 for every test row: "
                              "try scaled features (okl prepare --feature_scaling standard), another bandwidth (--sigma 0.5*median), or okl sweep to choose its parameters")


def test_okl_sweep_warns_when_even_its_best_point_is_no_better_than_the_majority_class(tmp_path, imbalanced, capsys):
    from pipelines import sweep

    root, y, _ = imbalanced
    sweep.run(["--input", str(root / "train"), "--learner", "fogd", "--grid", "sigma=1e6,1e7", "eta=0.05", "n_components=16",
               "--scheduler", "serial", "--output", str(tmp_path / "sweep")])
    out = capsys.readouterr().out
    majority = constant_baseline("binary", y)["mistake_rate"]
    assert "| majority class (baseline) |" in out.splitlines()[0] and f"| {majority:.4f} |" in out
    assert out.count("ok: no better than the majority class") == 2
    assert [line for line in out.splitlines() if line.startswith("WARNING")] == [
        "WARNING: the best point (0) is flagged: no better than the majority class (see the baseline column)"]
