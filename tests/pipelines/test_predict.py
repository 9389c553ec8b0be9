"""A model trained by the pipeline serves in RunInference and pipelines.predict, like okl_core."""

import glob
import json

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
import pytest
from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that

import okl_core
from okl_core.data.layout import open_dataset, write_dataset
from okl_core.data.synthetic import gaussian_blobs
from pipelines import predict, train
from tests.pipelines.reference import binary_data
from transforms.inference import OklModelHandler


@pytest.fixture(scope="module")
def multiclass_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("predict")
    X, y = gaussian_blobs(2000, seed=2, n_classes=4, n_features=6)
    write_dataset(root / "train", X, y, "multiclass", n_shards=2, row_group_rows=300, classes=[0, 1, 2, 3])
    Xt, yt = gaussian_blobs(700, seed=3, n_classes=4, n_features=6)
    Xt[10, 2] = np.nan  # one bad test row
    write_dataset(root / "test", Xt, yt, "multiclass", row_group_rows=256, classes=[0, 1, 2, 3])
    result = train.run(["--input", str(root / "train"), "--learner", "mfogd", "--param", "n_components=32", "--sigma", "3.0",
                        "--num_shards", "2", "--output", str(root / "out")])
    return root, result.model_path, Xt, yt


def test_run_inference_rows_and_blocks_match_okl_core(multiclass_model):
    _, model_path, Xt, _ = multiclass_model
    learner, state = okl_core.load_model(model_path)
    good = np.delete(Xt, 10, axis=0)
    expected = learner.predict(state, good)
    with BeamTestPipeline(runner="apache_beam.runners.portability.fn_api_runner.FnApiRunner") as p:
        rows = p | "Rows" >> beam.Create([(i, good[i]) for i in range(len(good))])
        blocks = p | "Blocks" >> beam.Create([(i, good[i : i + 100]) for i in range(0, len(good), 100)])
        handler = KeyedModelHandler(OklModelHandler(model_path, max_batch_size=64))
        scored_rows = rows | "ScoreRows" >> RunInference(handler) | "RowsOut" >> beam.Map(lambda kv: (kv[0], kv[1].inference))
        scored_blocks = blocks | "ScoreBlocks" >> RunInference(handler) | "BlocksOut" >> beam.Map(lambda kv: (kv[0], kv[1].inference))

        # RunInference batches rows as its timing dictates; the float32 projection X @ Omega
        # rounds differently for other matrix sizes (sgemv for one row, sgemm blockings for
        # others), up to ~2e-6 relative in a score seen under load: a float32 tolerance.
        def check_rows(results):
            got = np.stack([s for _, s in sorted(results, key=lambda kv: kv[0])])
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())
            np.testing.assert_array_equal(learner.to_labels(got), learner.to_labels(expected))

        def check_blocks(results):
            got = np.concatenate([s for _, s in sorted(results, key=lambda kv: kv[0])])
            # Equal up to the float32 rounding of the projection on other matrix sizes (above).
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())
            np.testing.assert_array_equal(learner.to_labels(got), learner.to_labels(expected))

        assert_that(scored_rows, check_rows, label="RowsMatch")
        assert_that(scored_blocks, check_blocks, label="BlocksMatch")


def test_predict_cli_writes_okl_core_predictions(multiclass_model, tmp_path):
    root, model_path, Xt, yt = multiclass_model
    predict.run(["--model", model_path, "--input", str(root / "test"), "--output", str(tmp_path / "pred"), "--runner=DirectRunner"])
    table = pq.read_table(glob.glob(str(tmp_path / "pred" / "predictions-*-of-*.parquet"))).sort_by("row")
    learner, state = okl_core.load_model(model_path)
    good = np.delete(np.arange(700), 10)
    expected = learner.predict(state, Xt[good])
    np.testing.assert_array_equal(table.column("row").to_numpy(), good)
    np.testing.assert_allclose(np.stack(table.column("scores").to_numpy(zero_copy_only=False)), expected, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(table.column("label").to_numpy(), learner.to_labels(expected))
    dead = [json.loads(line) for line in open(tmp_path / "pred" / "dead_letter.jsonl")]
    assert [(d["row"], d["reason"]) for d in dead] == [(10, "non-finite feature")]


def test_predict_cli_binary_labels_and_errors(tmp_path, capsys):
    X, y = binary_data(600)
    write_dataset(tmp_path / "b", X, y, "binary", row_group_rows=200)
    result = train.run(["--input", str(tmp_path / "b"), "--learner", "fogd", "--param", "n_components=8", "--output", str(tmp_path / "m")])
    capsys.readouterr()
    predict.run(["--model", result.model_path, "--input", str(tmp_path / "b"), "--output", str(tmp_path / "p"), "--batch_rows", "64"])
    table = pq.read_table(glob.glob(str(tmp_path / "p" / "predictions-*-of-*.parquet"))).sort_by("row")
    learner, state = okl_core.load_model(result.model_path)
    data = open_dataset(tmp_path / "b").read_all()
    scores = learner.predict(state, data.X)
    # The labels give the mistake rate: printed with the row count, and in metrics.json (a fraction).
    mistakes = int(np.sum(learner.to_labels(scores) != data.y))
    written = json.loads((tmp_path / "p" / "metrics.json").read_text())
    assert written["rows_scored"] == 600 and written["metrics"]["mistakes"] == mistakes
    assert written["metrics"]["mistake_rate"] == pytest.approx(mistakes / 600, abs=1e-12)
    assert f"600 rows scored, 0 rejected; mistake_rate {mistakes / 600:.5g}" in capsys.readouterr().out
    np.testing.assert_allclose(table.column("score").to_numpy(), scores, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(table.column("label").to_numpy(), learner.to_labels(scores))
    with pytest.raises(SystemExit):
        predict.run(["--model", str(tmp_path / "nope.npz"), "--input", str(tmp_path / "b"), "--output", str(tmp_path / "q")])
    assert "nope.npz" in capsys.readouterr().err
    # Data the model cannot score is refused before the pipeline, in one line.
    write_dataset(tmp_path / "r", data.X, data.X[:, 0].astype(np.float32), "regression")
    write_dataset(tmp_path / "w", np.hstack([data.X, data.X]), data.y, "binary")
    for name, message in (("r", "predicts binary labels but"), ("w", f"the model takes {data.X.shape[1]} features")):
        with pytest.raises(SystemExit):
            predict.run(["--model", result.model_path, "--input", str(tmp_path / name), "--output", str(tmp_path / "q")])
        [line] = capsys.readouterr().err.strip().splitlines()
        assert line.startswith(f"python -m pipelines.predict: error: --input {tmp_path / name}: ") and message in line
