"""A user's CSV with an id column and text labels, end to end through the command lines.

``prepare csv`` (train, and test ``--like`` train) -> ``train`` -> ``predict`` on the prepared
test set and on the raw CSV (with and without the target column), each a real subprocess:
every prediction carries its id and class name, the probabilities are the closed form of
the scores, the rows ``prepare`` drops are in ``rejects.csv`` with their ids, the raw
records' predictions equal the prepared set's row for row, and an id column changes no
byte of the model.
"""

import csv
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import okl_core
from okl_core.data.layout import open_dataset
from pipelines import predict, prepare, train

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLANS = ("basic", "plus", "pro")


def okl(command: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``python -m pipelines.<command> ARGS`` from the repository root, as runner_cases.prepare runs it."""
    proc = subprocess.run([sys.executable, "-m", f"pipelines.{command}", *args], cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT},
                          capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def churn_csv(path, n: int, seed: int, labels=("no", "yes")) -> list[list[str]]:
    """A churn-like CSV: customer_id c<seed>-1..n, tenure, charges (5% missing), plan (text), churn (text labels)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        tenure, charges, plan = rng.uniform(0, 72), rng.uniform(20, 120), PLANS[rng.integers(3)]
        score = -0.06 * tenure + 0.04 * charges + (1.0 if plan == "basic" else 0.0) - 1.0 + rng.normal(0, 0.3)
        label = labels[int(score > 0)] if len(labels) == 2 else labels[int(np.clip(score + 1, 0, 2))]
        rows.append([f"c{seed}-{i + 1}", f"{tenure:.1f}", "" if rng.random() < 0.05 else f"{charges:.2f}", plan, label])
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["customer_id", "tenure", "charges", "plan", "churn"])
        writer.writerows(rows)
    return rows


def predictions(folder):
    return pq.read_table(glob.glob(os.path.join(folder, "predictions-*-of-*.parquet"))).sort_by("row")


@pytest.fixture(scope="module")
def churn(tmp_path_factory):
    root = tmp_path_factory.mktemp("churn")
    train_rows = churn_csv(root / "churn_train.csv", 600, seed=1)
    test_rows = churn_csv(root / "churn_test.csv", 200, seed=2)
    table = ["--target", "churn", "--categorical", "plan", "--missing", "", "--feature_scaling", "standard", "--quiet"]
    okl("prepare", "csv", str(root / "churn_train.csv"), "--id_column", "customer_id", *table, "--output", str(root / "train"))
    okl("prepare", "csv", str(root / "churn_train.csv"), "--drop", "customer_id", *table, "--output", str(root / "train_no_ids"))
    okl("prepare", "csv", str(root / "churn_test.csv"), "--target", "churn", "--like", str(root / "train"), "--missing", "", "--quiet",
        "--output", str(root / "test"))
    learner = ["--learner", "dsg", "--param", "loss=logistic", "--sigma", "median", "--param", "block_size=64", "--param", "batch_size=64",
               "--param", "theta=1", "--param", "step_offset=10"]
    for data in ("train", "train_no_ids"):
        okl("train", "--input", str(root / data), *learner, "--output", str(root / f"run_{data}"))
    okl("predict", "--model", str(root / "run_train"), "--input", str(root / "test"), "--output", str(root / "pred_prepared"))
    raw = okl("predict", "--model", str(root / "run_train"), "--input", str(root / "churn_test.csv"), "--output", str(root / "pred_raw"))
    with open(root / "churn_test.csv") as f, open(root / "unlabeled.csv", "w", newline="") as out:  # the same records, no target column
        csv.writer(out).writerows(row[:4] for row in csv.reader(f))
    okl("predict", "--model", str(root / "run_train" / "model.npz"), "--input", str(root / "unlabeled.csv"), "--output", str(root / "pred_unlabeled"))
    return root, train_rows, test_rows, raw.stdout


def test_an_id_column_changes_no_byte_of_the_model(churn):
    root, *_ = churn
    with_ids, without = open_dataset(root / "train"), open_dataset(root / "train_no_ids")
    assert with_ids.info.extra["id_columns"] == ["customer_id"] and "id_columns" not in without.info.extra
    assert with_ids.n_features == without.n_features == 5  # tenure, charges, plan=basic/plus/pro: the id is no feature
    np.testing.assert_array_equal(with_ids.read_all().X, without.read_all().X)
    assert (root / "run_train" / "model.npz").read_bytes() == (root / "run_train_no_ids" / "model.npz").read_bytes()


def test_prepared_predictions_carry_ids_class_names_and_probabilities(churn):
    root, _, test_rows, _ = churn
    table = predictions(root / "pred_prepared")
    assert table.column_names == ["customer_id", "row", "label", "score", "proba_no", "proba_yes"]
    kept = [row for row in test_rows if "" not in row]  # --missing '' drops a row with a missing charge (the default policy)
    assert len(kept) < len(test_rows)
    assert table.column("customer_id").to_pylist() == [row[0] for row in kept]
    # Each id's row holds that customer's features: the scores are okl_core's on the prepared rows, in order.
    learner, state = okl_core.load_model(root / "run_train" / "model.npz")
    test = open_dataset(root / "test").read_all()
    scores = learner.predict(state, test.X)
    np.testing.assert_array_equal(table.column("row").to_numpy(), test.row)
    np.testing.assert_allclose(table.column("score").to_numpy(), scores, rtol=1e-6, atol=1e-9)
    assert table.column("label").to_pylist() == ["yes" if s >= 0 else "no" for s in table.column("score").to_numpy()]
    assert set(table.column("label").to_pylist()) == {"no", "yes"}  # the model learned something: both classes predicted
    score = table.column("score").to_numpy()
    yes, no = table.column("proba_yes").to_numpy(), table.column("proba_no").to_numpy()
    np.testing.assert_allclose(yes, 1.0 / (1.0 + np.exp(-score)), rtol=1e-12)
    np.testing.assert_allclose(no, 1.0 / (1.0 + np.exp(score)), rtol=1e-12)
    np.testing.assert_allclose(yes + no, 1.0, rtol=0, atol=1e-15)
    mistakes = sum(label != row[4] for label, row in zip(table.column("label").to_pylist(), kept))
    metrics = json.loads((root / "pred_prepared" / "metrics.json").read_text())
    assert metrics["metrics"]["mistakes"] == mistakes and mistakes < 0.25 * len(kept)


def test_rejected_rows_are_listed_with_their_ids(churn):
    root, _, test_rows, stdout = churn
    dropped = [(row[0], ",".join(row)) for row in test_rows if "" in row]
    for folder in ("test", "pred_raw", "pred_unlabeled"):
        with open(root / folder / "rejects.csv", newline="") as f:
            rejects = list(csv.DictReader(f))
        assert [r["customer_id"] for r in rejects] == [d[0] for d in dropped]
        assert all(r["reason"] == "column 'charges': missing value" for r in rejects)
        assert [r["line"] for r in rejects] == [str(2 + test_rows.index(next(t for t in test_rows if t[0] == d[0]))) for d in dropped]
    assert f"{len(test_rows) - len(dropped)} rows like the training data" in stdout and f"{len(dropped)} rejected" in stdout


def test_raw_csv_predictions_equal_the_prepared_sets_row_for_row(churn):
    root, *_ = churn
    prepared, raw = predictions(root / "pred_prepared"), predictions(root / "pred_raw")
    assert raw.equals(prepared)
    assert (root / "pred_raw" / "metrics.json").read_bytes() == (root / "pred_prepared" / "metrics.json").read_bytes()
    # Without the target column: the same predictions, scored without metrics.
    assert predictions(root / "pred_unlabeled").equals(prepared)
    unlabeled = json.loads((root / "pred_unlabeled" / "metrics.json").read_text())
    assert unlabeled["rows_without_label"] == unlabeled["rows_scored"] == prepared.num_rows and unlabeled["metrics"]["n"] == 0


def test_raw_records_with_a_bad_row_are_one_line_naming_the_line_or_skipped(churn, tmp_path):
    root, *_ = churn
    with open(root / "churn_test.csv") as f:
        lines = f.read().splitlines()
    lines[3] = lines[3].replace(lines[3].split(",")[1], "soon", 1)  # tenure 'soon': not a number
    (tmp_path / "bad.csv").write_text("\n".join(lines) + "\n")
    argv = ["--model", str(root / "run_train"), "--input", str(tmp_path / "bad.csv")]
    failed = okl("predict", *argv, "--output", str(tmp_path / "p"), check=False)
    assert failed.returncode == 2 and not (tmp_path / "p").exists()
    assert failed.stderr.strip().splitlines() == [
        f"python -m pipelines.predict: error: {tmp_path / 'bad.csv'}, line 4: column 'tenure': 'soon' is not a number (a category? pass --categorical tenure)"]
    okl("predict", *argv, "--skip_bad_rows", "--output", str(tmp_path / "q"))
    with open(tmp_path / "q" / "rejects.csv", newline="") as f:
        rejects = {r["customer_id"]: r["reason"] for r in csv.DictReader(f)}
    bad_id = lines[3].split(",")[0]
    assert rejects[bad_id].startswith("column 'tenure': 'soon' is not a number")
    assert bad_id not in predictions(tmp_path / "q").column("customer_id").to_pylist()


def _three_class_table(path, n, seed):
    """A Parquet table: an int64 account id, two numbers, text labels low/mid/high."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=n), rng.normal(size=n)
    label = np.array(["low", "mid", "high"])[np.digitize(a + 0.3 * b, [-0.5, 0.5])]
    pq.write_table(pa.table({"account": pa.array(range(1000 * seed, 1000 * seed + n), pa.int64()), "a": a, "b": b, "level": label.tolist()}), path)


@pytest.fixture(scope="module")
def softmax_run(tmp_path_factory):
    """A multiclass model with the softmax loss, trained in-process on a Parquet table prepared with an id column."""
    root = tmp_path_factory.mktemp("softmax")
    _three_class_table(root / "train.parquet", 900, 1)
    _three_class_table(root / "new.parquet", 120, 2)
    prepare.run(["parquet", str(root / "train.parquet"), "--target", "level", "--id_column", "account", "--quiet", "--output", str(root / "train")])
    prepare.run(["parquet", str(root / "new.parquet"), "--target", "level", "--like", str(root / "train"), "--quiet", "--output", str(root / "new")])
    train.run(["--input", str(root / "train"), "--learner", "dsg", "--param", "loss=softmax", "--sigma", "median", "--param", "block_size=64",
               "--param", "batch_size=64", "--param", "theta=1", "--param", "step_offset=10", "--output", str(root / "run")])
    return root


def test_raw_parquet_softmax_predictions_have_class_names_and_softmax_probabilities(softmax_run, tmp_path):
    root = softmax_run
    predict.run(["--model", str(root / "run"), "--input", str(root / "new"), "--output", str(tmp_path / "prepared")])
    predict.run(["--model", str(root / "run"), "--input", str(root / "new.parquet"), "--output", str(tmp_path / "raw")])
    table = predictions(tmp_path / "raw")
    assert table.equals(predictions(tmp_path / "prepared"))
    classes = open_dataset(root / "train").info.classes
    assert table.column_names == ["account", "row", "label", "scores", *[f"proba_{c}" for c in classes]]
    assert table.schema.field("account").type == pa.int64() and table.column("account").to_pylist() == list(range(2000, 2120))
    scores = np.stack(table.column("scores").to_numpy(zero_copy_only=False))
    assert table.column("label").to_pylist() == [classes[i] for i in scores.argmax(axis=1)]
    proba = np.stack([table.column(f"proba_{c}").to_numpy() for c in classes], axis=1)
    expected = np.exp(scores - scores.max(axis=1, keepdims=True))
    np.testing.assert_allclose(proba, expected / expected.sum(axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-14)
    levels = pq.read_table(root / "new.parquet").column("level").to_pylist()
    right = sum(p == t for p, t in zip(table.column("label").to_pylist(), levels))
    majority = max(levels.count(c) for c in classes)
    assert right > majority + 0.1 * len(levels)  # names in the right order: well above always answering the commonest class


def test_model_folder_of_a_streaming_run_scores_with_its_newest_version(softmax_run, tmp_path):
    """--model DIR of model-vNNNNNN.npz versions (a streaming output) takes the newest; the first version scores otherwise."""
    root = softmax_run
    learner, state = okl_core.load_model(root / "run" / "model.npz")
    classes = okl_core.model_classes((root / "run" / "model.npz").read_bytes())
    stream = tmp_path / "stream"
    stream.mkdir()
    okl_core.save_model(stream / "model-v000001.npz", learner, learner.init(), classes)  # an untrained first version
    okl_core.save_model(stream / "model-v000002.npz", learner, state, classes)
    (stream / "preparation.json").write_bytes((root / "run" / "preparation.json").read_bytes())
    predict.run(["--model", str(stream), "--input", str(root / "new.parquet"), "--output", str(tmp_path / "p")])
    predict.run(["--model", str(root / "run" / "model.npz"), "--input", str(root / "new.parquet"), "--output", str(tmp_path / "q")])
    assert predictions(tmp_path / "p").equals(predictions(tmp_path / "q"))


def test_hinge_learners_write_no_probabilities(softmax_run, tmp_path):
    root = softmax_run
    train.run(["--input", str(root / "train"), "--learner", "mfogd", "--param", "n_components=16", "--output", str(tmp_path / "run")])
    predict.run(["--model", str(tmp_path / "run"), "--input", str(root / "new"), "--output", str(tmp_path / "p")])
    assert predictions(tmp_path / "p").column_names == ["account", "row", "label", "scores"]


def test_raw_records_without_a_preparation_or_other_classes_are_refused_in_one_line(softmax_run, tmp_path, capsys):
    root = softmax_run
    learner, state = okl_core.load_model(root / "run" / "model.npz")
    okl_core.save_model(tmp_path / "alone.npz", learner, state)
    capsys.readouterr()
    refusals = [
        (["--model", str(tmp_path / "alone.npz"), "--input", str(root / "new.parquet")],
         f"scoring raw records needs preparation.json next to the model {tmp_path / 'alone.npz'}"),
        (["--model", str(root / "run"), "--input", str(root / "new"), "--skip_bad_rows"],
         f"--skip_bad_rows and --delimiter are for raw records (a CSV file or Parquet table); --input {root / 'new'} is okl rows"),
        (["--model", str(tmp_path), "--input", str(root / "new")],
         f"--model {tmp_path}: a folder with neither model.npz (a training run) nor model-vNNNNNN.npz versions (a streaming run)"),
    ]
    for argv, message in refusals:
        with pytest.raises(SystemExit) as exit_info:
            predict.run([*argv, "--output", str(tmp_path / "out")])
        [line] = capsys.readouterr().err.strip().splitlines()
        assert exit_info.value.code == 2 and line.startswith(f"python -m pipelines.predict: error: {message}"), line
        assert not (tmp_path / "out").exists()


def test_ids_stay_with_their_rows_around_dead_letters_and_row_groups(tmp_path):
    """A non-finite row is dead-lettered, not scored: the ids of the rows around it, in several row groups
    and shards read in blocks of 64, are still each row's own."""
    from okl_core.data.layout import DatasetWriter
    from tests.pipelines.reference import binary_data

    X, y = binary_data(500)
    X[[7, 130, 131]] = np.nan
    fields = [pa.field("ticket", pa.string())]
    with DatasetWriter(tmp_path / "data", X.shape[1], "binary", rows_per_shard=200, row_group_rows=50, check_values=False, id_fields=fields,
                       classes=["lost", "won"], extra={"id_columns": ["ticket"]}) as writer:
        writer.write(X, y, pa.table({"ticket": [f"t{i:04d}" for i in range(500)]}))
    good = np.setdiff1d(np.arange(500), [7, 130, 131])
    train.run(["--input", str(tmp_path / "data"), "--learner", "fogd", "--param", "n_components=8", "--output", str(tmp_path / "run")])
    predict.run(["--model", str(tmp_path / "run"), "--input", str(tmp_path / "data"), "--output", str(tmp_path / "p"), "--batch_rows", "64"])
    table = predictions(tmp_path / "p")
    assert table.column("ticket").to_pylist() == [f"t{i:04d}" for i in good]
    np.testing.assert_array_equal(table.column("row").to_numpy(), good)
    learner, state = okl_core.load_model(tmp_path / "run" / "model.npz")
    codes = learner.to_labels(learner.predict(state, X[good]))
    assert table.column("label").to_pylist() == [["lost", "won"][(c + 1) // 2] for c in codes]


def test_a_streaming_job_and_a_run_write_the_preparation_only_for_prepared_tables(churn, tmp_path):
    """write_preparation: beside the versions of a streaming output (no staging folder), nothing for data
    without table columns (the built-in demo data)."""
    from types import SimpleNamespace

    from okl_core.data.synthetic import write_synthetic
    from pipelines.job import write_preparation
    from transforms.read import DatasetSource

    root, *_ = churn
    (tmp_path / "live").mkdir()
    write_preparation(SimpleNamespace(source=DatasetSource.open(str(root / "train")), staging=None, output=str(tmp_path / "live")))
    recorded = json.loads((tmp_path / "live" / "preparation.json").read_text())
    assert recorded == {**json.loads((root / "train" / "dataset.json").read_text()), "shards": []}
    assert (tmp_path / "live" / "preparation.json").read_bytes() == (root / "run_train" / "preparation.json").read_bytes()
    write_synthetic(str(tmp_path / "demo"), 50, seed=0)
    (tmp_path / "demo_run").mkdir()
    write_preparation(SimpleNamespace(source=DatasetSource.open(str(tmp_path / "demo")), staging=None, output=str(tmp_path / "demo_run")))
    assert os.listdir(tmp_path / "demo_run") == []
