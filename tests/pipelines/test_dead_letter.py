"""Bad rows (NaN, inf, wrong width, labels out of range) go to the dead letters, never to a learner."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import okl_core
from okl_core.data.layout import DatasetInfo
from okl_core.data.plan import StreamPlan
from pipelines import train
from tests.pipelines.reference import binary_data, reference_model


def _write(path, X, y, first_row, row_group_rows=256, fixed=True):
    d = X.shape[1]
    rows = np.arange(first_row, first_row + len(y), dtype=np.int64)
    values = pa.array(X.reshape(-1), type=pa.float32())
    x = pa.FixedSizeListArray.from_arrays(values, d) if fixed else pa.ListArray.from_arrays(pa.array(np.arange(0, X.size + 1, d, dtype=np.int32)), values)
    pq.write_table(pa.table({"x": x, "y": pa.array(y, type=pa.int32()), "row": pa.array(rows)}), path, row_group_size=row_group_rows)


@pytest.mark.parametrize("mode", [[], ["--shuffle_rows"]], ids=["read-in-training", "shuffle-rows"])
def test_planted_bad_rows_are_reported_and_skipped(tmp_path, mode):
    X, y = binary_data(2003)
    planted = {5: "non-finite feature", 17: "non-finite feature", 300: "bad label", 999: "bad label", 1500: "non-finite feature", 2002: "bad label"}
    X[5, 1], X[17, 4], X[1500, 0] = np.nan, np.inf, -np.inf
    y[300], y[999], y[2002] = 0, 3, -2
    (tmp_path / "data").mkdir()
    _write(tmp_path / "data" / "a.parquet", X[:1000], y[:1000], 0)
    # Rows 1000..1002 have 6 features instead of 5, in a variable-length list column (a
    # fixed-size list of 6 is refused at launch: tests/okl_core/data/test_launch_checks.py).
    _write(tmp_path / "data" / "b.parquet", np.ones((3, 6), np.float32), np.ones(3, np.int32), 1000, fixed=False)
    _write(tmp_path / "data" / "c.parquet", X[1003:], y[1003:], 1003)
    planted.update({1000: "wrong width", 1001: "wrong width", 1002: "wrong width"})
    shards = [{"file": f, "n_rows": n, "first_row": r} for f, n, r in (("a.parquet", 1000, 0), ("b.parquet", 3, 1000), ("c.parquet", 1000, 1003))]
    info = DatasetInfo(name="planted", task="binary", n_rows=2003, n_features=5, classes=[-1, 1], shards=shards)
    (tmp_path / "data" / "dataset.json").write_text(info.to_json())

    args = ["--learner", "fogd", "--param", "n_components=16", "--sigma", "1.5", "--num_shards", "2", "--rounds", "2", "--batch_rows", "128"]
    result = train.run(["--input", str(tmp_path / "data"), *args, *mode, "--output", str(tmp_path / "out")])

    good = np.ones(2003, dtype=bool)
    good[list(planted)] = False
    learner = okl_core.make_learner("fogd", n_inputs=5, n_components=16, sigma=1.5)
    with open(result.model_path, "rb") as f:
        assert f.read() == reference_model(learner, X, y, StreamPlan(2003, 2, 2, 128), good=good, classes=[-1, 1])

    with open(result.files["dead_letter"]) as f:
        dead = [json.loads(line) for line in f]
    assert [d["position"] for d in dead] == sorted(planted)
    assert [d["row"] for d in dead] == sorted(planted)
    assert [d["reason"].split(":")[0] for d in dead] == [planted[p] for p in sorted(planted)]
    assert dead[3]["reason"] == "bad label: 3 is not -1 or +1" and dead[4]["file"].endswith("b.parquet")
    assert {d["shard"] for d in dead} == {0, 1} and {d["round"] for d in dead} == {0, 1}
    rows = result.metrics["rows"]
    assert (rows["read"], rows["trained"], rows["rejected"]) == (2003, 2003 - 9, 9)
    assert rows["rejected_by_reason"] == {"bad label": 3, "non-finite feature": 3, "wrong width": 3}
    counters = result.counters
    assert (counters["train_rows_read"], counters["train_rows_rejected"], counters["rows_trained"]) == (2003, 9, 2003 - 9)
    assert counters["batches_trained"] == sum(len(StreamPlan(2003, 2, 2, 128).batches(s, r)) for s in range(2) for r in range(2))


def test_test_set_rejects_are_counted_apart_from_the_training_rows(tmp_path):
    """rows.rejected_by_reason once held the test set's rejects too, so it did not add up to rows.rejected."""
    X, y = binary_data(400)
    for name in ("train", "test"):
        (tmp_path / name).mkdir()
    Xt, yt = X[:100].copy(), y[:100].copy()
    Xt[3, 0], Xt[7, 1] = np.nan, np.inf
    _write(tmp_path / "train" / "a.parquet", X, y, 0)
    _write(tmp_path / "test" / "a.parquet", Xt, yt, 0)
    result = train.run(["--input", str(tmp_path / "train" / "*.parquet"), "--test", str(tmp_path / "test" / "*.parquet"), "--learner", "fogd",
                        "--param", "n_components=16", "--sigma", "1.5", "--output", str(tmp_path / "out")])
    rows = result.metrics["rows"]
    assert (rows["rejected"], rows["rejected_by_reason"]) == (0, {})
    assert (rows["test_rejected"], rows["test_rejected_by_reason"]) == (2, {"non-finite feature": 2})


def test_values_beyond_float32_are_dead_letters_named_as_such(tmp_path):
    """A float64 target of 1e300 once ended the job in a traceback (finite as float64, inf
    once stored as float32); a feature of 1e300 read as a "non-finite feature"."""
    n = 300
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    y = X[:, 0].copy()
    X[10, 1], y[20] = 1e300, -1e300
    x = pa.ListArray.from_arrays(pa.array(np.arange(0, X.size + 1, 3, dtype=np.int32)), pa.array(X.reshape(-1)))
    (tmp_path / "data").mkdir()
    pq.write_table(pa.table({"x": x, "y": pa.array(y), "row": pa.array(np.arange(n))}), tmp_path / "data" / "a.parquet")
    result = train.run(["--input", str(tmp_path / "data" / "*.parquet"), "--learner", "fogd_r", "--param", "n_components=16",
                        "--sigma", "1.5", "--output", str(tmp_path / "out")])
    with open(result.files["dead_letter"]) as f:
        dead = {d["row"]: d["reason"] for d in map(json.loads, f)}
    assert dead == {
        10: "feature beyond float32's range (|x| > 3.4e+38), in which okl stores and learns features",
        20: "bad label: target -1e+300 is beyond float32's range (|y| > 3.4e+38), in which okl stores targets",
    }
    assert result.metrics["rows"]["trained"] == n - 2
