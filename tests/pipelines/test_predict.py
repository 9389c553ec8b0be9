"""A model trained by the pipeline serves in RunInference and pipelines.predict, like okl_core."""

import glob
import json

import apache_beam as beam
import numpy as np
import pyarrow as pa
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
    write_dataset(root / "test", Xt, yt, "multiclass", row_group_rows=256, classes=[0, 1, 2, 3], check_values=False)
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


def _one_line_error(capsys) -> str:
    [line] = capsys.readouterr().err.strip().splitlines()
    return line


def _files(directory) -> dict:
    """name -> bytes of every file in ``directory``."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture(scope="module")
def binary_run(tmp_path_factory):
    """A small binary data set and a model trained on it."""
    root = tmp_path_factory.mktemp("binary")
    X, y = binary_data(600)
    write_dataset(root / "b", X, y, "binary", row_group_rows=200)
    result = train.run(["--input", str(root / "b"), "--learner", "fogd", "--param", "n_components=8", "--output", str(root / "m")])
    return root, result.model_path


def test_predict_refuses_a_used_output_and_a_training_run(binary_run, tmp_path, capsys):
    """A used --output needs --overwrite, and even then a training run or a foreign folder is never replaced."""
    root, model_path = binary_run
    capsys.readouterr()
    run_before = _files(root / "m")
    argv = ["--model", model_path, "--input", str(root / "b")]
    with pytest.raises(SystemExit):
        predict.run([*argv, "--output", str(root / "m")])
    assert _one_line_error(capsys) == f"python -m pipelines.predict: error: --output {root / 'm'} already exists (pass --overwrite to replace it)"
    with pytest.raises(SystemExit):
        predict.run([*argv, "--output", str(root / "m"), "--overwrite"])
    assert _one_line_error(capsys) == (f"python -m pipelines.predict: error: --output {root / 'm'}: a training run (run.json or model.npz), "
                                       "not predictions; not replacing it even with --overwrite")
    assert _files(root / "m") == run_before  # metrics.json, dead_letter.jsonl and run.json untouched
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine\n")
    with pytest.raises(SystemExit):
        predict.run([*argv, "--output", str(tmp_path / "notes"), "--overwrite"])
    assert _one_line_error(capsys) == (f"python -m pipelines.predict: error: --output {tmp_path / 'notes'}: not a folder of okl predictions "
                                       "(no predictions-*.parquet or metrics.json); not replacing it even with --overwrite")
    assert _files(tmp_path / "notes") == {"todo.txt": b"mine\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes"]  # no staging folder or lock left behind


def test_predict_overwrite_replaces_the_earlier_predictions_whole(binary_run, tmp_path, capsys):
    """A second predict into the same folder: refused without --overwrite; with it, the folder holds
    this run's files only (an earlier run's shards, here -of-00009, used to stay and be read by the glob)."""
    root, model_path = binary_run
    out = tmp_path / "p"
    argv = ["--model", model_path, "--input", str(root / "b"), "--output", str(out)]
    predict.run(argv)
    first = _files(out)
    stale = out / "predictions-00003-of-00009.parquet"
    stale.write_bytes(first[next(name for name in first if name.startswith("predictions-"))])  # an earlier run's shard count
    capsys.readouterr()
    with pytest.raises(SystemExit):
        predict.run(argv)
    assert _one_line_error(capsys) == f"python -m pipelines.predict: error: --output {out} already exists (pass --overwrite to replace it)"
    assert stale.exists()
    predict.run([*argv, "--overwrite"])
    assert not stale.exists() and _files(out) == first
    rows = pq.read_table(glob.glob(str(out / "predictions-*-of-*.parquet"))).column("row").to_numpy()
    np.testing.assert_array_equal(np.sort(rows), np.arange(600))  # one data set, each row once
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]  # the staging and set-aside folders are gone


def _relabel(source, target, labels):
    """Copy the one-shard data set ``source`` to ``target`` with its ``y`` column replaced by ``labels`` (None: null)."""
    import shutil

    shutil.copytree(source, target)
    [shard] = glob.glob(str(target / "part-*.parquet"))
    table = pq.read_table(shard)
    y = pa.array(labels, type=table.schema.field("y").type)
    pq.write_table(table.set_column(table.schema.get_field_index("y"), table.schema.field("y"), y), shard, row_group_size=256)


def test_predict_scores_rows_without_a_usable_label(multiclass_model, tmp_path, capsys):
    """A missing label or one that is not a class of the model: the row is scored and left out of
    the metrics only (counted); a row with bad features is still a dead letter."""
    root, model_path, Xt, yt = multiclass_model
    labels = [int(v) for v in yt]
    for i in range(0, 700, 7):
        labels[i] = None
    for i in range(3, 700, 11):
        labels[i] = 4  # the model has classes 0..3
    _relabel(root / "test", tmp_path / "relabeled", labels)
    capsys.readouterr()
    predict.run(["--model", model_path, "--input", str(tmp_path / "relabeled"), "--output", str(tmp_path / "pred")])
    out = capsys.readouterr().out
    learner, state = okl_core.load_model(model_path)
    scored = np.delete(np.arange(700), 10)
    table = pq.read_table(glob.glob(str(tmp_path / "pred" / "predictions-*-of-*.parquet"))).sort_by("row")
    np.testing.assert_array_equal(table.column("row").to_numpy(), scored)
    np.testing.assert_array_equal(table.column("label").to_numpy(), learner.to_labels(learner.predict(state, Xt[scored])))
    dead = [json.loads(line) for line in open(tmp_path / "pred" / "dead_letter.jsonl")]
    assert [(d["row"], d["reason"]) for d in dead] == [(10, "non-finite feature")]
    with_label = np.array([i for i in scored if labels[i] is not None and labels[i] < 4])
    without = 699 - len(with_label)
    mistakes = int(np.sum(learner.to_labels(learner.predict(state, Xt[with_label])) != yt[with_label]))
    written = json.loads((tmp_path / "pred" / "metrics.json").read_text())
    assert (written["rows_scored"], written["rows_without_label"], written["metrics"]["n"], written["metrics"]["mistakes"]) == (
        699, without, len(with_label), mistakes)
    assert f"699 rows scored, 1 rejected, {without} without a label (not in the metrics); mistake_rate {mistakes / len(with_label):.5g}" in out


def test_predict_metrics_json_is_strict_when_no_row_is_scored(binary_run, tmp_path, capsys):
    """No scorable row: metrics.json still says so, with NaN written as the string "NaN" (as train writes it)."""
    root, model_path = binary_run
    X, y = binary_data(50)
    X[:] = np.nan
    write_dataset(tmp_path / "nan", X, y, "binary", check_values=False)
    capsys.readouterr()
    predict.run(["--model", model_path, "--input", str(tmp_path / "nan"), "--output", str(tmp_path / "pred")])
    assert "0 rows scored, 50 rejected; mistake_rate nan" in capsys.readouterr().out

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    written = json.loads((tmp_path / "pred" / "metrics.json").read_text(), parse_constant=refuse)
    assert (written["rows_scored"], written["rows_without_label"], written["metrics"]["n"], written["metrics"]["mistake_rate"]) == (
        0, 0, 0, "NaN")


@pytest.mark.parametrize("output, message", [
    ("{tmp}/file", "--output {tmp}/file already exists (pass --overwrite to replace it)"),
    ("/proc/okl-x", "--output /proc/okl-x: cannot write there (No such file or directory: /proc/.okl-x.lock)"),
    ("", "--output is empty: give a directory"),
], ids=["regular-file", "proc", "empty"])
def test_predict_unwritable_output_is_one_line_naming_output(binary_run, tmp_path, capsys, output, message):
    root, model_path = binary_run
    (tmp_path / "file").write_text("keep\n")
    capsys.readouterr()
    with pytest.raises(SystemExit):
        predict.run(["--model", model_path, "--input", str(root / "b"), "--output", output.format(tmp=tmp_path)])
    assert _one_line_error(capsys) == "python -m pipelines.predict: error: " + message.format(tmp=tmp_path)
    assert (tmp_path / "file").read_text() == "keep\n"


def test_predict_batch_rows_zero_names_batch_rows(binary_run, tmp_path, capsys):
    root, model_path = binary_run
    capsys.readouterr()
    with pytest.raises(SystemExit):
        predict.run(["--model", model_path, "--input", str(root / "b"), "--output", str(tmp_path / "p"), "--batch_rows", "0"])
    assert _one_line_error(capsys) == "python -m pipelines.predict: error: --batch_rows must be a positive number of rows, got 0"
    assert not (tmp_path / "p").exists()


def test_predict_prints_no_beam_import_warning_and_keeps_real_ones():
    """Beam's "apitools not found" warning on import is dropped (as in train); a real warning still shows."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "pipelines.predict", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == ""
    proc = subprocess.run([sys.executable, "-c", "import logging, pipelines.predict; logging.warning('a real warning')"],
                          capture_output=True, text=True)
    assert proc.stderr == "WARNING:root:a real warning\n"


@pytest.fixture(scope="module")
def classes_01_run(tmp_path_factory):
    """A binary data set whose dataset.json records the classes [0, 1], and a model trained on it."""
    root = tmp_path_factory.mktemp("classes")
    X, y = binary_data(600)
    write_dataset(root / "b01", X, y, "binary", row_group_rows=200, classes=[0, 1])
    result = train.run(["--input", str(root / "b01"), "--learner", "fogd", "--param", "n_components=32", "--sigma", "median",
                        "--output", str(root / "m")])
    return root, X, y, result.model_path


@pytest.mark.parametrize("classes, flip", [([1, 0], True), ([0, 2], False)], ids=["other_order", "other_values"])
def test_predict_refuses_data_of_other_classes_than_the_model_records(classes_01_run, tmp_path, capsys, classes, flip):
    """Issue: the model file did not record its classes, so a test set prepared without --like
    (its classes [1, 0]: every label the other code) was scored silently: mistake rate 1 - r."""
    root, X, y, model_path = classes_01_run
    assert okl_core.model_classes(open(model_path, "rb").read()) == [0, 1]
    write_dataset(tmp_path / "other", X, -y if flip else y, "binary", row_group_rows=200, classes=classes)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        predict.run(["--model", model_path, "--input", str(tmp_path / "other"), "--output", str(tmp_path / "p")])
    assert exit_info.value.code == 2
    assert _one_line_error(capsys) == (
        f"python -m pipelines.predict: error: --input {tmp_path / 'other' / 'dataset.json'} has the classes {classes}, "
        f"the model {model_path} was trained on [0, 1]: its labels would be scored as other classes; prepare it with --like the training data set")
    assert not (tmp_path / "p").exists()


def test_predict_with_the_models_classes_writes_what_a_model_without_classes_writes(classes_01_run, tmp_path):
    """The same classes pass, and the recorded classes change no score: the same model written
    without them (as okl wrote models before) gives the same scores and byte-identical metrics;
    only ``label`` differs: the class name the model records (0/1) instead of the code (-1/+1)."""
    root, X, y, model_path = classes_01_run
    learner, state = okl_core.load_model(model_path)
    okl_core.save_model(tmp_path / "plain.npz", learner, state)  # no classes: as okl wrote model files before
    assert okl_core.model_classes((tmp_path / "plain.npz").read_bytes()) is None
    write_dataset(tmp_path / "same", X[:300], y[:300], "binary", classes=[0, 1])  # prepared --like: the same classes
    for name, model in (("with", model_path), ("without", str(tmp_path / "plain.npz"))):
        predict.run(["--model", model, "--input", str(tmp_path / "same"), "--output", str(tmp_path / name)])
    for name in ("metrics.json", "dead_letter.jsonl"):
        assert (tmp_path / "with" / name).read_bytes() == (tmp_path / "without" / name).read_bytes()
    named, coded = (pq.read_table(glob.glob(str(tmp_path / name / "predictions-*-of-*.parquet"))).sort_by("row") for name in ("with", "without"))
    assert named.drop_columns(["label"]).equals(coded.drop_columns(["label"]))
    codes = learner.to_labels(learner.predict(state, X[:300]))
    np.testing.assert_array_equal(coded.column("label").to_numpy(), codes)
    np.testing.assert_array_equal(named.column("label").to_numpy(), (codes + 1) // 2)  # classes [0, 1]: code -1 is 0, +1 is 1
    assert named.schema.field("label").type == pa.int64() and coded.schema.field("label").type == pa.int32()
