"""Own Parquet files read as the README promises: ``x`` a list, large list or fixed-size list of
float32/float64 values, or okl's float32 bytes, in train, predict and sweep; ragged or null
``x`` dead-lettered in pipelines and refused with file and row when read into memory."""

import glob
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import okl_core
from okl_core.data.layout import open_dataset
from okl_core.data.plan import StreamPlan
from okl_experiments.data import load_okl_dataset
from pipelines import predict, train
from tests.pipelines.reference import binary_data, reference_model

FOGD = ["--learner", "fogd", "--param", "n_components=16", "--sigma", "1.5", "--eta", "0.05", "--batch_rows", "100"]

X_TYPES = {
    "list<float32>": pa.list_(pa.float32()),
    "list<float64>": pa.list_(pa.float64()),
    "large_list<float64>": pa.large_list(pa.float64()),
    "fixed_size_list<float64>[5]": pa.list_(pa.float64(), 5),
    "fixed_size_list<float32>[5]": pa.list_(pa.float32(), 5),
    "binary": pa.binary(20),
}


def _x_array(rows, x_type):
    if pa.types.is_fixed_size_binary(x_type):
        return pa.array([None if r is None else np.asarray(r, "<f4").tobytes() for r in rows], type=x_type)
    return pa.array([None if r is None else list(r) for r in rows], type=x_type)


def _write(path, rows, y, x_type, first_row=0, row_group_rows=128):
    table = pa.table({"x": _x_array(rows, x_type), "y": pa.array(y, pa.int64()), "row": pa.array(np.arange(first_row, first_row + len(y)))})
    pq.write_table(table, path, row_group_size=row_group_rows)


@pytest.mark.parametrize("name", list(X_TYPES))
def test_own_parquet_trains_like_the_fold(tmp_path, name):
    X, y = binary_data(600)
    X64 = X.astype(np.float64) + 1e-9  # float64 values: okl rounds them to float32 once
    (tmp_path / "own").mkdir()
    _write(tmp_path / "own" / "a.parquet", X64[:350], y[:350], X_TYPES[name])
    _write(tmp_path / "own" / "b.parquet", X64[350:], y[350:], X_TYPES[name], first_row=350)
    ds = open_dataset(str(tmp_path / "own" / "*.parquet"))
    assert (ds.info.n_features, ds.task, ds.info.n_rows) == (5, "binary", 600)
    result = train.run(["--input", str(tmp_path / "own" / "*.parquet"), *FOGD, "--output", str(tmp_path / "out")])
    learner = okl_core.make_learner("fogd", n_inputs=5, n_components=16, sigma=1.5, eta=0.05)
    expected_X = X64.astype(np.float32)
    with open(result.model_path, "rb") as f:
        assert f.read() == reference_model(learner, expected_X, y.astype(np.int32), StreamPlan(600, 1, 1, 100))
    assert result.metrics["rows"]["trained"] == 600
    np.testing.assert_array_equal(load_okl_dataset(str(tmp_path / "own" / "*.parquet")).X, expected_X)  # the sweep's loader


def test_ragged_and_null_x_are_dead_letters_in_train_and_predict(tmp_path):
    X, y = binary_data(400)
    rows = [list(r) for r in X.astype(np.float64)]
    rows[7] = rows[7][:4]  # ragged
    rows[90] = None  # null row
    rows[250] = rows[250][:2] + [None] + rows[250][3:]  # a null value inside the list
    (tmp_path / "own").mkdir()
    path = tmp_path / "own" / "a.parquet"
    _write(path, rows, y, pa.list_(pa.float64()))
    result = train.run(["--input", str(path), *FOGD, "--output", str(tmp_path / "out")])
    good = np.ones(400, bool)
    good[[7, 90, 250]] = False
    learner = okl_core.make_learner("fogd", n_inputs=5, n_components=16, sigma=1.5, eta=0.05)
    with open(result.model_path, "rb") as f:
        assert f.read() == reference_model(learner, X, y.astype(np.int32), StreamPlan(400, 1, 1, 100), good=good)
    dead = [json.loads(line) for line in open(result.files["dead_letter"])]
    assert [(d["row"], d["reason"]) for d in dead] == [
        (7, "wrong width: 4 features, expected 5"), (90, "missing x"), (250, "non-finite feature"),
    ]
    assert all(d["file"] == str(path) for d in dead) and result.metrics["rows"]["trained"] == 397

    predict.run(["--model", result.model_path, "--input", str(path), "--output", str(tmp_path / "pred")])
    files = glob.glob(str(tmp_path / "pred") + "*.parquet") + glob.glob(str(tmp_path / "pred" / "*.parquet"))
    table = pq.read_table(files).sort_by("row")
    np.testing.assert_array_equal(table.column("row").to_numpy(), np.flatnonzero(good))
    model_learner, state = okl_core.load_model(result.model_path)
    np.testing.assert_allclose(table.column("score").to_numpy(), model_learner.predict(state, X[good]), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("rows, message", [
    ([[1.0, 2.0], [1.0, 2.0, 3.0]], "{path}, row 11: column x holds 3 values, expected 2"),
    ([[1.0, 2.0], None], "{path}, row 11: column x is null"),
    ([[1.0, None], [1.0, 2.0]], "{path}, row 10: column x has a null value at feature 1"),
], ids=["ragged", "null-row", "null-value"])
def test_bad_x_read_into_memory_is_refused_naming_file_and_row(tmp_path, rows, message):
    path = tmp_path / "a.parquet"
    _write(path, rows, [1, -1], pa.list_(pa.float64()), first_row=10)
    with pytest.raises(ValueError) as err:
        load_okl_dataset(str(path))
    assert str(err.value) == message.format(path=path)


def test_x_that_is_not_numbers_is_refused(tmp_path):
    table = pa.table({"x": pa.array([["a"], ["b"]], pa.list_(pa.string())), "y": pa.array([1, -1]), "row": pa.array([0, 1])})
    pq.write_table(table, tmp_path / "s.parquet")
    with pytest.raises(ValueError) as err:
        open_dataset(tmp_path / "s.parquet")
    assert str(err.value) == f"{tmp_path / 's.parquet'}: not in the okl layout: column x is list<element: string>, not a list of numbers"
    fixed = {"x": pa.array([[1.0, 2.0]], pa.list_(pa.float64(), 2)), "y": pa.array([1]), "row": pa.array([0])}
    pq.write_table(pa.table(fixed), tmp_path / "f2.parquet")
    fixed.update(x=pa.array([[1.0, 2.0, 3.0]], pa.list_(pa.float64(), 3)), row=pa.array([1]))
    pq.write_table(pa.table(fixed), tmp_path / "f3.parquet")
    with pytest.raises(ValueError) as err:
        open_dataset(str(tmp_path / "f*.parquet"))
    assert str(err.value) == f"{tmp_path / 'f3.parquet'}: column x holds 3 features per row, {tmp_path / 'f2.parquet'} holds 2"


def test_sweep_on_own_parquet_equals_the_okl_data_set(tmp_path):
    from okl_core.data.layout import write_dataset
    from pipelines import sweep

    X, y = binary_data(500)
    write_dataset(tmp_path / "okl", X, y, "binary")
    (tmp_path / "own").mkdir()
    _write(tmp_path / "own" / "a.parquet", [list(r) for r in X.astype(np.float64)], y, pa.list_(pa.float64()))
    rows = {}
    for name, path in (("okl", str(tmp_path / "okl")), ("own", str(tmp_path / "own" / "*.parquet"))):
        result = sweep.run(["--input", path, "--learner", "fogd", "--grid", "sigma=1,2", "n_components=16", "--scheduler", "serial",
                            "--out", str(tmp_path / f"sweep-{name}")])
        rows[name] = [[r[k] for k in ("params", "status", "online_mistake_rate_runs", "curve_n", "curve_value")] for r in result.rows]
    assert rows["own"] == rows["okl"] and len(rows["own"]) == 2 and rows["own"][0][1] == "ok"
