"""Train and predict on user-written Parquet files whose labels a first-file guess got wrong.

The task and classes of a glob come from the labels of every file, null labels are dead
letters as in a data set directory, a directory and a glob of the same files train the same
model (only the directory's records its ``dataset.json`` classes), and ``predict`` takes the task from the model: labels are optional there.
"""

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import okl_core
from okl_core.data.layout import write_dataset
from pipelines import predict, train
from tests.pipelines.reference import binary_data

FOGD = ["--learner", "fogd", "--param", "n_components=16", "--sigma", "1.5", "--eta", "0.05", "--batch_rows", "100"]
MFOGD = ["--learner", "mfogd", "--param", "n_components=16", "--sigma", "1.5", "--eta", "0.05", "--batch_rows", "100"]


def _model(result) -> bytes:
    with open(result.model_path, "rb") as f:
        return f.read()


def _without_classes(data: bytes) -> bytes:
    """The same model written without the classes its header records (a glob's model records none)."""
    return okl_core.model_bytes(*okl_core.model_from_bytes(data))


def _multiclass_set(path):
    """300 rows in 3 shards, class 3 only in the last shard."""
    X, _ = binary_data(300)
    y = np.arange(300) % 3
    y[250:] = 3
    write_dataset(path, X, y, "multiclass", n_shards=3, classes=[0, 1, 2, 3])
    return X, y


def _dead(result):
    return [(d["row"], d["reason"]) for d in map(json.loads, open(result.files["dead_letter"]))]


def _metrics(out):
    return json.loads((out / "metrics.json").read_text())


def test_a_glob_trains_the_same_model_as_its_directory_with_a_class_only_in_the_last_file(tmp_path):
    _multiclass_set(tmp_path / "ds")
    directory = train.run(["--input", str(tmp_path / "ds"), *MFOGD, "--output", str(tmp_path / "d")])
    files = train.run(["--input", str(tmp_path / "ds" / "part-*.parquet"), *MFOGD, "--output", str(tmp_path / "g")])
    assert _model(files) == _without_classes(_model(directory))  # the glob's classes are the codes: not recorded
    assert okl_core.model_classes(_model(directory)) == [0, 1, 2, 3] and okl_core.model_classes(_model(files)) is None
    assert files.metrics["rows"]["trained"] == 300 and _dead(files) == []


def test_null_labels_in_a_glob_are_dead_letters_as_in_a_directory(tmp_path):
    X, y = binary_data(300)
    write_dataset(tmp_path / "ds", X, y, "binary", n_shards=3, classes=[-1, 1])
    shard = tmp_path / "ds" / "part-00000-of-00003.parquet"  # the first file: the one the task was once guessed from
    table = pq.read_table(shard)
    labels = table.column("y").to_pylist()
    labels[5] = labels[40] = None
    pq.write_table(table.set_column(1, table.schema.field("y"), pa.array(labels, pa.int32())), shard)
    directory = train.run(["--input", str(tmp_path / "ds"), *FOGD, "--output", str(tmp_path / "d")])
    files = train.run(["--input", str(tmp_path / "ds" / "part-*.parquet"), *FOGD, "--output", str(tmp_path / "g")])
    assert _dead(files) == _dead(directory) == [(5, "missing y"), (40, "missing y")]
    assert _model(files) == _without_classes(_model(directory))
    predict.run(["--model", files.model_path, "--input", str(tmp_path / "ds" / "part-*.parquet"), "--output", str(tmp_path / "p")])
    assert (_metrics(tmp_path / "p")["rows_scored"], _metrics(tmp_path / "p")["rows_without_label"]) == (300, 2)


def _write_file(path, X, y, y_type=None):
    columns = {"x": pa.array([list(map(float, r)) for r in X], pa.list_(pa.float64())), "row": pa.array(np.arange(len(X)))}
    if y_type is not None:
        columns["y"] = pa.array(y, y_type)
    pq.write_table(pa.table(columns), path)


@pytest.mark.parametrize("labels, y_type, without_label", [
    (None, None, 50),  # no y column
    ([None] * 50, pa.null(), 50),
    ([1] * 50, pa.int32(), 0),  # alone it would pass for binary data
    ([1, 2, 7, 1, 0] * 10, pa.int64(), 10),  # 7: not a class of the model
], ids=["no-y", "null-y", "all-ones", "class-7"])
def test_predict_takes_the_task_from_a_multiclass_model(tmp_path, labels, y_type, without_label):
    _multiclass_set(tmp_path / "ds")
    model = train.run(["--input", str(tmp_path / "ds"), *MFOGD, "--output", str(tmp_path / "run")]).model_path
    X, _ = binary_data(50, seed=3)
    _write_file(tmp_path / "f.parquet", X, labels, y_type)
    predict.run(["--model", model, "--input", str(tmp_path / "f.parquet"), "--output", str(tmp_path / "p")])
    metrics = _metrics(tmp_path / "p")
    assert (metrics["task"], metrics["rows_scored"], metrics["rows_without_label"]) == ("multiclass", 50, without_label)
    assert pq.read_table(sorted((tmp_path / "p").glob("predictions-*.parquet"))).column("row").to_pylist() == list(range(50))


def test_predict_scores_a_data_set_directory_whose_shards_have_no_labels(tmp_path):
    """Labels are optional to predict in a data set directory too (its shards were once refused: no column y)."""
    X, y = _multiclass_set(tmp_path / "ds")
    model = train.run(["--input", str(tmp_path / "ds"), *MFOGD, "--output", str(tmp_path / "run")]).model_path
    predict.run(["--model", model, "--input", str(tmp_path / "ds"), "--output", str(tmp_path / "labelled")])
    for shard in sorted((tmp_path / "ds").glob("part-*.parquet")):
        pq.write_table(pq.read_table(shard).drop_columns(["y"]), shard)
    predict.run(["--model", model, "--input", str(tmp_path / "ds"), "--output", str(tmp_path / "p")])
    metrics = _metrics(tmp_path / "p")
    assert (metrics["task"], metrics["rows_scored"], metrics["rows_without_label"], metrics["metrics"]["n"]) == ("multiclass", 300, 300, 0)
    scores = [pq.read_table(sorted((tmp_path / d).glob("predictions-*.parquet"))).sort_by("row") for d in ("labelled", "p")]
    assert scores[0].equals(scores[1])


def test_predict_scores_float_plus_minus_one_labels_with_a_binary_model(tmp_path):
    X, y = binary_data(200)
    write_dataset(tmp_path / "ds", X, y, "binary", classes=[-1, 1])
    model = train.run(["--input", str(tmp_path / "ds"), *FOGD, "--output", str(tmp_path / "run")]).model_path
    _write_file(tmp_path / "f.parquet", X, y.astype(np.float64), pa.float64())
    predict.run(["--model", model, "--input", str(tmp_path / "f.parquet"), "--output", str(tmp_path / "p")])
    predict.run(["--model", model, "--input", str(tmp_path / "ds"), "--output", str(tmp_path / "q")])
    assert _metrics(tmp_path / "p") == _metrics(tmp_path / "q")
    assert (_metrics(tmp_path / "p")["rows_scored"], _metrics(tmp_path / "p")["rows_without_label"]) == (200, 0)


def test_a_test_glob_takes_the_training_classes_when_its_labels_fit(tmp_path):
    _multiclass_set(tmp_path / "ds")
    X, _ = binary_data(50, seed=4)
    _write_file(tmp_path / "t.parquet", X, [1] * 50, pa.int32())
    result = train.run(["--input", str(tmp_path / "ds"), "--test", str(tmp_path / "t.parquet"), *MFOGD, "--output", str(tmp_path / "run")])
    assert result.metrics["test"]["n"] == 50


def test_train_still_needs_labels(tmp_path, capsys):
    X, _ = binary_data(20)
    _write_file(tmp_path / "f.parquet", X, None)
    with pytest.raises(SystemExit):
        train.run(["--input", str(tmp_path / "f.parquet"), *FOGD, "--output", str(tmp_path / "run")])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == (f"python -m pipelines.train: error: --input {tmp_path / 'f.parquet'}: {tmp_path / 'f.parquet'}: not in the okl layout: "
                    "no column y (an okl data set has columns x, y and row)")


def test_train_refuses_a_shard_copied_over_another(tmp_path, capsys):
    X, y = binary_data(300)
    write_dataset(tmp_path / "ds", X, y, "binary", n_shards=3, classes=[-1, 1])
    shutil.copy(tmp_path / "ds" / "part-00000-of-00003.parquet", tmp_path / "ds" / "part-00001-of-00003.parquet")
    with pytest.raises(SystemExit):
        train.run(["--input", str(tmp_path / "ds"), *FOGD, "--output", str(tmp_path / "run")])
    [line] = capsys.readouterr().err.strip().splitlines()
    shard = tmp_path / "ds" / "part-00001-of-00003.parquet"
    assert line == (f"python -m pipelines.train: error: --input {tmp_path / 'ds'}: {shard}: its rows are numbered 0..99, "
                    "dataset.json places it at rows 100..199 (a shard copied over another?)")
