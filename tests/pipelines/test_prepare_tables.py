"""``prepare csv`` / ``prepare parquet`` on tables with one column per feature, end to end:
feature specs, header-less CSV, missing values (drop / mean), categorical columns, --like
on a test set; then ``pipelines.train`` on the result equals the fold on the expected matrix.
Bad input: exact one-line messages, or the reject record."""

import csv
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import okl_core
from okl_core.data.layout import open_dataset
from okl_core.data.plan import StreamPlan
from pipelines import prepare, train
from tests.pipelines.reference import binary_data, reference_model

COLORS = np.array(["red", "green", "blue"])  # sorted categories: blue, green, red


def _table(n=400, seed=0):
    """Five numbers (binary_data), a colour, and a binary target named -1/+1 by "no"/"yes"."""
    X, y = binary_data(n, seed=seed)
    X = np.round(X.astype(np.float64), 2)  # two decimals: CSV text round-trips exactly
    color = COLORS[np.random.default_rng(seed).integers(0, 3, n)]
    return X, color, y


def _one_hot(color, categories=("blue", "green", "red")):
    return np.stack([(color == c).astype(np.float64) for c in categories], axis=1)


def _write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        if header is not None:
            w.writerow(header)
        w.writerows(rows)
    return str(path)


def _train_and_compare(tmp_path, dataset, X_expected, y_expected):
    """Train FOGD on the data set; the model must be the fold on the expected matrix."""
    d = X_expected.shape[1]
    result = train.run(["--input", str(dataset), "--learner", "fogd", "--param", "n_components=16", "--sigma", "1.5",
                        "--eta", "0.05", "--batch_rows", "100", "--output", str(tmp_path / "run")])
    learner = okl_core.make_learner("fogd", n_inputs=d, n_components=16, sigma=1.5, eta=0.05)
    n = len(y_expected)
    with open(result.model_path, "rb") as f:
        assert f.read() == reference_model(learner, X_expected.astype(np.float32), y_expected.astype(np.int32), StreamPlan(n, 1, 1, 100),
                                           classes=open_dataset(str(dataset)).recorded_classes)
    assert result.metrics["rows"]["trained"] == n


def test_parquet_columns_with_a_category_train_like_the_fold(tmp_path):
    X, color, y = _table()
    columns = {f"f{i}": X[:, i] for i in range(5)}
    columns["f4"] = (X[:, 4] * 100).astype(np.int32)  # an integer column
    table = pa.table({**columns, "color": color, "id": np.arange(400), "label": np.where(y > 0, "yes", "no")})
    pq.write_table(table.slice(0, 250), tmp_path / "a.parquet")
    pq.write_table(table.slice(250), tmp_path / "b.parquet")
    summary = prepare.run(["parquet", str(tmp_path / "*.parquet"), str(tmp_path / "ds"), "--target", "label", "--features", "f*,color",
                           "--categorical", "color", "--quiet"])
    info = open_dataset(tmp_path / "ds").info
    assert (info.task, info.classes, info.n_rows) == ("binary", ["no", "yes"], 400) and summary.n_rejected == 0
    assert info.extra["feature_names"] == ["f0", "f1", "f2", "f3", "f4", "color=blue", "color=green", "color=red"]
    assert info.extra["encoding"]["categories"] == {"color": ["blue", "green", "red"]}
    expected = np.hstack([X[:, :4], (X[:, 4:5] * 100).astype(np.int32), _one_hot(color)])
    np.testing.assert_array_equal(open_dataset(tmp_path / "ds").read_all().X, expected.astype(np.float32))
    _train_and_compare(tmp_path, tmp_path / "ds", expected, y)


def test_csv_mean_imputation_categories_and_like(tmp_path):
    X, color, y = _table(500)
    rows = [[f"{v:.2f}" for v in X[i]] + [color[i], "yes" if y[i] > 0 else "no", "note"] for i in range(500)]
    header = ["a1", "a2", "a3", "b", "c", "color", "label", "comment"]
    for i, j in [(3, 0), (40, 3), (41, 3), (77, 4)]:
        rows[i][j] = "NA"
    rows[90][5] = "?"
    train_rows, test_rows = rows[:400], rows[400:]
    test_rows[5][5] = "purple"  # a category the training set never had
    test_rows[6][1] = "?"
    _write_csv(tmp_path / "train.csv", header, train_rows)
    _write_csv(tmp_path / "test.csv", header, test_rows)
    prepare.run(["csv", str(tmp_path / "train.csv"), str(tmp_path / "train"), "--target", "label", "--features", "a1:a3,b,c,color",
                 "--categorical", "color", "--missing", "NA", "--missing", "?", "--missing_policy", "mean", "--quiet"])
    info = open_dataset(tmp_path / "train").info
    Xtr, ctr = X[:400].copy(), color[:400].copy()
    missing = np.zeros((400, 5), bool)
    missing[[3, 40, 41, 77], [0, 3, 3, 4]] = True
    means = [Xtr[~missing[:, j], j].mean() for j in range(5)]
    present = np.arange(400) != 90
    freq = _one_hot(ctr[present]).mean(axis=0)
    recorded = info.extra["encoding"]["missing"]
    assert recorded["policy"] == "mean" and recorded["markers"] == ["NA", "?"]
    assert [recorded["means"][c][0] for c in ["a1", "a2", "a3", "b", "c"]] == means and recorded["means"]["color"] == freq.tolist()
    Xtr[missing] = np.array(means)[np.nonzero(missing)[1]]
    onehot = _one_hot(ctr)
    onehot[90] = freq
    expected = np.hstack([Xtr, onehot])
    np.testing.assert_array_equal(open_dataset(tmp_path / "train").read_all().X, expected.astype(np.float32))
    _train_and_compare(tmp_path, tmp_path / "train", expected, y[:400])

    # The test set: the training means and categories; the unseen category is all-zero and counted.
    summary = prepare.run(["csv", str(tmp_path / "test.csv"), str(tmp_path / "test"), "--target", "label", "--like", str(tmp_path / "train"), "--quiet"])
    test = open_dataset(tmp_path / "test")
    Xte, onehot = X[400:].copy(), _one_hot(color[400:])
    Xte[6, 1] = means[1]
    onehot[5] = 0.0
    np.testing.assert_array_equal(test.read_all().X, np.hstack([Xte, onehot]).astype(np.float32))
    assert test.info.extra["unseen_categories"] == {"color": 1} and test.info.extra["encoding"] == info.extra["encoding"]
    assert "1 unseen category encoded as all-zero (color: 1)" in summary.line()


def test_headerless_csv_with_drop_policy_rejects_rows(tmp_path):
    X, _, y = _table(300)
    rows = [[str(y[i])] + [f"{v:.2f}" for v in X[i]] for i in range(300)]
    rows[10][2] = ""
    rows[200][0] = ""  # the target is missing: rejected under every policy
    _write_csv(tmp_path / "h.csv", None, rows)
    summary = prepare.run(["csv", str(tmp_path / "h.csv"), str(tmp_path / "h"), "--no-header", "--target", "0", "--features", "1:5",
                           "--missing", "", "--quiet"])
    assert summary.n_rejected == 2 and "2 rejected (rejects.csv)" in summary.line()
    rejects = list(csv.reader(open(tmp_path / "h" / "rejects.csv")))
    assert rejects[:2] == [["line", "reason", "text"], ["11", "column '2': missing value", ",".join(rows[10])]]
    assert rejects[2][:2] == ["201", "target '0': missing value"]
    keep = np.setdiff1d(np.arange(300), [10, 200])
    ds = open_dataset(tmp_path / "h")
    assert ds.info.extra["columns"] == ["1", "2", "3", "4", "5"] and ds.info.classes == [-1, 1]
    _train_and_compare(tmp_path, tmp_path / "h", X[keep], y[keep])


def _bad_csv(tmp_path):
    return _write_csv(tmp_path / "bad.csv", ["a", "Sex", "y"], [["1", "M", "x"], ["2", "F", "z"], ["3", "M", "x"]])


BAD_INPUT = {
    "text column without --categorical": (
        lambda p: ["csv", _bad_csv(p), "--target", "y"], "{p}/bad.csv, line 2: column 'Sex': 'M' is not a number (a category? pass --categorical Sex)"),
    "text column without --categorical (table path)": (
        lambda p: ["csv", _bad_csv(p), "--target", "y", "--missing", "NA"], "{p}/bad.csv, line 2: column 'Sex': 'M' is not a number (a category? pass --categorical Sex)"),
    "parquet text column without --categorical": (
        lambda p: ["parquet", _parquet(p, {"a": [1.0], "Sex": ["M"], "y": [1]}), "--target", "y"],
        "{p}/t.parquet: column 'Sex' holds text (string); pass --categorical Sex to one-hot encode it"),
    "--features names an absent column": (
        lambda p: ["csv", _bad_csv(p), "--target", "y", "--features", "a,Age*"], "{p}/bad.csv: --features 'Age*' matches no column; the columns are ['a', 'Sex', 'y']"),
    "--features names an absent column (parquet)": (
        lambda p: ["parquet", _parquet(p, {"a": [1.0], "y": [1]}), "--target", "y", "--features", "b"],
        "{p}/t.parquet: --features names no column 'b'; the columns are ['a', 'y']"),
    "parquet list column": (
        lambda p: ["parquet", _parquet(p, {"x": pa.array([[1.0]], pa.list_(pa.float64())), "y": [1], "row": [0]}), "--target", "y", "--drop", "row"],
        "{p}/t.parquet: column 'x' has type list<element: double>; feature columns must hold numbers or (with --categorical) text"
        " (files with a list column x, y and row need no prepare: train reads them as they are)"),
    "header-less CSV with a wrong column count": (
        lambda p: ["csv", _write_csv(p / "h.csv", None, [["1", "2", "0"], ["3", "1"], ["5", "6", "1"]]), "--no_header", "--target", "2"],
        "{p}/h.csv, line 2: expected 3 fields, found 2"),
    "parquet NaN feature (not a missing marker)": (
        lambda p: ["parquet", _parquet(p, {"a": [1.0, float("nan")], "y": [1, 0]}), "--target", "y"], "{p}/t.parquet, row 1: column 'a': nan is not finite"),
    "--categorical names a column that is not a feature": (
        lambda p: ["csv", _bad_csv(p), "--target", "y", "--features", "a", "--categorical", "Sex"],
        "{p}/bad.csv: --categorical names column(s) ['Sex'] that are not feature columns ['a']"),
    # a target column twice: which one is the target cannot be told (the fast CSV path alone refused it)
    "target twice in a CSV header": (lambda p: ["csv", _dup_csv(p), "--target", "y"], "{p}/dup.csv: target column 'y' appears 2 times"),
    "target twice in a CSV header (table path)": (
        lambda p: ["csv", _dup_csv(p), "--target", "y", "--missing", "NA"], "{p}/dup.csv: target column 'y' appears 2 times"),
    "target twice in a CSV header (range of features)": (
        lambda p: ["csv", _dup_csv(p), "--target", "y", "--features", "a:b"], "{p}/dup.csv: target column 'y' appears 2 times"),
    "target twice in a Parquet file": (
        lambda p: ["parquet", _parquet_files(p, ["a", "b", "y", "y"]), "--target", "y", "--features", "y,a"],
        "{p}/tp/a.parquet: target column 'y' appears 2 times"),
    "target twice in the second Parquet file": (
        lambda p: ["parquet", _parquet_files(p, ["a", "b", "y"], ["a", "y", "b", "y"]), "--target", "y"],
        "{p}/tp/b.parquet: target column 'y' appears 2 times"),
    "feature twice in the second Parquet file": (
        lambda p: ["parquet", _parquet_files(p, ["a", "b", "y"], ["a", "b", "y", "a"]), "--target", "y"],
        "{p}/tp/b.parquet: column 'a' appears 2 times"),
    "--like with another policy": (
        lambda p: ["csv", _bad_csv(p), "--target", "y", "--categorical", "Sex", "--missing_policy", "mean", "--like", _reference(p)],
        "--missing_policy mean differs from the reference data set's drop (--like applies its policy and means)"),
}


def _dup_csv(tmp_path):
    return _write_csv(tmp_path / "dup.csv", ["a", "b", "y", "y"], [["1", "2", "1", "0"], ["3", "4", "0", "1"]])


def _parquet_files(tmp_path, *headers):
    """A directory of Parquet files ``a.parquet``, ``b.parquet``, ... with the columns ``headers`` (names may repeat)."""
    (tmp_path / "tp").mkdir()
    for name, header in zip("abc", headers):
        table = pa.Table.from_arrays([pa.array([1, 0]) for _ in header], names=header)
        pq.write_table(table, tmp_path / "tp" / f"{name}.parquet")
    return str(tmp_path / "tp")


def _parquet(tmp_path, columns):
    pq.write_table(pa.table(columns), tmp_path / "t.parquet")
    return str(tmp_path / "t.parquet")


def _reference(tmp_path):
    path = _write_csv(tmp_path / "ref.csv", ["a", "Sex", "y"], [["1", "M", "x"], ["2", "F", "z"]])
    prepare.run(["csv", path, str(tmp_path / "ref"), "--target", "y", "--categorical", "Sex", "--quiet"])
    return str(tmp_path / "ref")


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_one_line_naming_file_row_column(tmp_path, case):
    argv, message = BAD_INPUT[case]
    argv = argv(tmp_path)
    with pytest.raises(ValueError) as err:
        prepare.run([*argv, str(tmp_path / "out"), "--quiet"])
    assert str(err.value) == message.format(p=tmp_path)
    assert not (tmp_path / "out").exists()


def test_missing_target_marker_and_parquet_nulls_are_reject_records(tmp_path):
    path = _write_csv(tmp_path / "t.csv", ["a", "y"], [["1", "x"], ["2", "NA"], ["3", "z"]])
    summary = prepare.run(["csv", path, str(tmp_path / "c"), "--target", "y", "--missing", "NA", "--quiet"])
    assert summary.info.n_rows == 2 and (tmp_path / "c" / "rejects.csv").read_text().splitlines()[1] == "3,target 'y': missing value,\"2,NA\""
    path = _parquet(tmp_path, {"a": [1.0, None, 3.0, -999.0, 5.0], "y": [1, 0, None, 0, 0]})
    summary = prepare.run(["parquet", path, str(tmp_path / "p"), "--target", "y", "--missing", "-999", "--quiet"])
    lines = (tmp_path / "p" / "rejects.csv").read_text().splitlines()
    assert lines == ["file,row,reason", f"{path},1,column 'a': missing value", f"{path},2,target 'y': missing value", f"{path},3,column 'a': missing value"]
    assert summary.info.n_rows == 2 and json.loads((tmp_path / "p" / "dataset.json").read_text())["extra"]["rejects"]["count"] == 3


def test_unseen_category_in_a_parquet_test_set(tmp_path):
    pq.write_table(pa.table({"c": ["u", "v", "u", "v"], "y": [0.5, 1.5, 2.5, 3.5]}), tmp_path / "train.parquet")
    pq.write_table(pa.table({"c": ["v", "w", "w"], "y": [1.0, 2.0, 3.0]}), tmp_path / "test.parquet")
    prepare.run(["parquet", str(tmp_path / "train.parquet"), str(tmp_path / "train"), "--target", "y", "--categorical", "c", "--quiet"])
    summary = prepare.run(["parquet", str(tmp_path / "test.parquet"), str(tmp_path / "test"), "--target", "y", "--like", str(tmp_path / "train"), "--quiet"])
    test = open_dataset(tmp_path / "test")
    assert test.read_all().X.tolist() == [[0.0, 1.0], [0.0, 0.0], [0.0, 0.0]] and test.info.extra["unseen_categories"] == {"c": 2}
    assert summary.notes == ["2 unseen categories encoded as all-zero (c: 2)"] and test.task == "regression"


def test_skip_bad_rows_on_the_table_path_records_each_reason(tmp_path):
    rows = [["1", "u", "x"], ["abc", "u", "z"], [" NA ", "v", "x"], ["inf", "v", "z"], ["4", "NA", "x"], ["5", "u", "z"], ["6", "v"]]
    path = _write_csv(tmp_path / "t.csv", ["a", "c", "y"], rows)
    summary = prepare.run(["csv", path, str(tmp_path / "o"), "--target", "y", "--categorical", "c", "--missing", "NA", "--skip-bad-rows", "--quiet"])
    rejects = list(csv.reader(open(tmp_path / "o" / "rejects.csv")))[1:]
    assert rejects == [
        ["3", "column 'a': 'abc' is not a number (a category? pass --categorical a)", "abc,u,z"],
        ["4", "column 'a': missing value", " NA ,v,x"],
        ["5", "column 'a': 'inf' is not finite", "inf,v,z"],
        ["6", "column 'c': missing value", "4,NA,x"],
        ["8", "expected 3 fields, found 2", "6,v"],
    ]
    assert summary.n_rejected == 5 and open_dataset(tmp_path / "o").read_all().X.tolist() == [[1.0, 1.0], [5.0, 1.0]]
