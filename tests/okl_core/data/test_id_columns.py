"""Id columns (``prepare --id_column``): never features, carried through the data set and rejects.csv as they are."""

import csv

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from okl_core.data.csv_table import convert_csv
from okl_core.data.layout import DatasetWriter, open_dataset
from okl_core.data.preparation import prepare_like, preparation_record, raw_table_kind, read_preparation
from okl_core.data.table import convert_parquet, select_columns

NAMES = ["id", "f1", "f2", "key", "g1", "target"]


@pytest.mark.parametrize("features, expected", [
    (None, ["f1", "f2", "g1"]),          # default: every column but the target and the ids
    (["f*", "g*"], ["f1", "f2", "g1"]),
    (["id:g1"], ["f1", "f2", "g1"]),      # a range skips the ids, as it skips the target
    (["*"], ["f1", "f2", "g1"]),
])
def test_id_columns_are_never_chosen_as_features(features, expected):
    assert select_columns(NAMES, "target", features, ids=["id", "key"], where="t.csv") == expected


@pytest.mark.parametrize("ids, features, message", [
    (["id"], ["id", "f1"], "t.csv: the id column(s) ['id'] cannot also be features"),
    (["nope"], None, "t.csv: no id column 'nope'; the columns are"),
    (["target"], None, "t.csv: --id_column 'target' is the target column"),
    (["row"], None, "t.csv: --id_column 'row': an id column cannot be named x, y, row, label, score, scores or proba_*"),
    (["id", "id"], None, "t.csv: --id_column ['id'] given more than once"),
])
def test_bad_id_columns_are_one_line_naming_the_file(ids, features, message):
    names = NAMES + ["row"]
    with pytest.raises(ValueError) as err:
        select_columns(names, "target", features, ids=ids, where="t.csv")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_ids_stay_beside_their_rows_across_shards_and_row_groups(tmp_path):
    """7-row shards in 3-row groups written in blocks of 5: each row keeps its id; x, y, row read as without ids."""
    X = np.arange(40, dtype=np.float32).reshape(20, 2)
    y = np.where(np.arange(20) % 3 == 0, 1, -1)
    fields = [pa.field("customer", pa.string()), pa.field("n", pa.int64())]
    for name, id_fields in (("with", fields), ("without", [])):
        with DatasetWriter(tmp_path / name, 2, "binary", rows_per_shard=7, row_group_rows=3, id_fields=id_fields) as writer:
            for i in range(0, 20, 5):
                ids = pa.table({"customer": [f"c{j}" for j in range(i, i + 5)], "n": list(range(100 + i, 105 + i))}) if id_fields else None
                writer.write(X[i : i + 5], y[i : i + 5], ids)
    table = pq.read_table(sorted((tmp_path / "with").glob("part-*.parquet")))
    assert table.column_names == ["x", "y", "row", "customer", "n"]
    assert table.column("customer").to_pylist() == [f"c{r}" for r in table.column("row").to_pylist()]
    assert table.column("n").to_pylist() == [100 + r for r in range(20)]
    with_ids, without = open_dataset(tmp_path / "with").read_all(), open_dataset(tmp_path / "without").read_all()
    for key in ("X", "y", "row"):
        np.testing.assert_array_equal(getattr(with_ids, key), getattr(without, key))
    with pytest.raises(ValueError, match="ids must be a table of the columns"):
        with DatasetWriter(tmp_path / "bad", 2, "binary", id_fields=fields) as writer:
            writer.write(X[:2], y[:2])  # no ids for a writer that has id columns
    assert not (tmp_path / "bad").exists()


def test_rows_without_labels_are_written_with_a_null_y(tmp_path):
    X = np.ones((4, 2), np.float32)
    with DatasetWriter(tmp_path / "u", 2, "multiclass", labeled=False, classes=["a", "b", "c"]) as writer:
        writer.write(X, None)
    assert pa.types.is_null(pq.read_schema(next((tmp_path / "u").glob("part-*.parquet"))).field("y").type)
    batch = open_dataset(tmp_path / "u", labels_optional=True).read_all()
    assert np.isnan(batch.y.astype(float)).all() and batch.X.shape == (4, 2)


def _parquet_table(path, ids, seed):
    rng = np.random.default_rng(seed)
    n = len(ids)
    a = rng.normal(size=n)
    b = [None if i % 7 == 3 else float(v) for i, v in enumerate(rng.normal(size=n))]
    color = [["red", "green", "blue"][i % 3] for i in range(n)]
    label = ["up" if v > 0 else "down" for v in a]
    pq.write_table(pa.table({"account": pa.array(ids, pa.int64()), "a": a, "b": pa.array(b, pa.float64()), "color": color, "label": label}), path)
    return b


def test_parquet_ids_keep_their_type_and_name_the_rejected_rows(tmp_path):
    ids = list(range(5000, 5040))
    b = _parquet_table(tmp_path / "train.parquet", ids, 0)
    convert_parquet(tmp_path / "train.parquet", tmp_path / "train", target="label", categorical=["color"], id_columns=["account"],
                    feature_scaling="standard")
    data = open_dataset(tmp_path / "train")
    assert data.info.extra["id_columns"] == ["account"] and data.n_features == 5  # a, b, color=blue/green/red
    table = pq.read_table(data.shards[0].path)
    assert table.schema.field("account").type == pa.int64()
    kept = [i for i, v in zip(ids, b) if v is not None]
    assert table.column("account").to_pylist() == kept
    with open(tmp_path / "train" / "rejects.csv", newline="") as f:
        rejects = list(csv.DictReader(f))
    assert [(r["row"], r["account"], r["reason"]) for r in rejects] == [
        (str(i), str(ids[i]), "column 'b': missing value") for i, v in enumerate(b) if v is None]
    # A test table --like the training set: its ids by default, the same features and scaling.
    _parquet_table(tmp_path / "test.parquet", list(range(9000, 9020)), 1)
    convert_parquet(tmp_path / "test.parquet", tmp_path / "test", target="label", like=data)
    assert pq.read_table(open_dataset(tmp_path / "test").shards[0].path).column_names == ["x", "y", "row", "account"]


def test_raw_records_prepare_like_the_training_set_with_or_without_the_target(tmp_path):
    """prepare_like (okl predict's raw records) writes the bytes prepare --like writes; without the target, a null y."""
    _parquet_table(tmp_path / "train.parquet", list(range(30)), 0)
    convert_parquet(tmp_path / "train.parquet", tmp_path / "train", target="label", categorical=["color"], id_columns=["account"],
                    missing_policy="mean", feature_scaling="minmax11")
    _parquet_table(tmp_path / "new.parquet", list(range(100, 120)), 3)
    pq.write_table(pq.read_table(tmp_path / "new.parquet").drop_columns(["label"]), tmp_path / "unlabeled.parquet")
    record = preparation_record(open_dataset(tmp_path / "train").info)
    (tmp_path / "preparation.json").write_bytes(record)
    info = read_preparation(str(tmp_path / "preparation.json"))
    assert info.shards == [] and info.extra == open_dataset(tmp_path / "train").info.extra
    convert_parquet(tmp_path / "new.parquet", tmp_path / "like", target="label", like=open_dataset(tmp_path / "train"))
    prepare_like(str(tmp_path / "new.parquet"), str(tmp_path / "raw"), info, "parquet")
    prepare_like(str(tmp_path / "unlabeled.parquet"), str(tmp_path / "raw_unlabeled"), info, "parquet")
    like = pq.read_table(open_dataset(tmp_path / "like").shards[0].path)
    assert pq.read_table(open_dataset(tmp_path / "raw").shards[0].path).equals(like)
    unlabeled = pq.read_table(open_dataset(tmp_path / "raw_unlabeled", labels_optional=True).shards[0].path)
    assert unlabeled.drop_columns(["y"]).equals(like.drop_columns(["y"])) and unlabeled.column("y").null_count == 20


def test_a_target_less_table_needs_a_reference(tmp_path):
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="can only be prepared like a training set"):
        convert_csv(tmp_path / "t.csv", tmp_path / "out", target=None)
    assert not (tmp_path / "out").exists()


def test_raw_table_kind(tmp_path):
    (tmp_path / "a.csv").write_text("x\n1\n")
    _parquet_table(tmp_path / "raw.parquet", [1, 2], 0)
    convert_parquet(tmp_path / "raw.parquet", tmp_path / "set", target="label", categorical=["color"], missing_policy="mean")
    assert raw_table_kind(str(tmp_path / "a.csv")) == "csv"
    assert raw_table_kind(str(tmp_path / "raw.parquet")) == "parquet"
    assert raw_table_kind(str(tmp_path / "set")) is None  # an okl data set
    assert raw_table_kind(str(next((tmp_path / "set").glob("part-*.parquet")))) is None  # okl rows: x, y, row
    assert raw_table_kind(str(tmp_path / "nothing")) is None  # left to the data set reader's error


def test_an_id_column_on_a_numeric_csv_writes_the_rows_the_plain_path_writes(tmp_path):
    """An id column takes a numeric CSV through the general table reader: x, y and row are those of the
    fast numeric path with the id dropped (so the model trained on them is the same)."""
    rng = np.random.default_rng(0)
    with open(tmp_path / "n.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "a", "b", "y"])
        for i in range(300):
            writer.writerow([f"k{i}", *[f"{v:.7g}" for v in rng.normal(size=2) * [1, 100]], rng.choice(["0", "1"])])
    convert_csv(tmp_path / "n.csv", tmp_path / "plain", target="y", drop=["id"], feature_scaling="standard")
    convert_csv(tmp_path / "n.csv", tmp_path / "ids", target="y", id_columns=["id"], feature_scaling="standard")
    plain, ids = (pq.read_table(open_dataset(tmp_path / name).shards[0].path) for name in ("plain", "ids"))
    assert ids.select(["x", "y", "row"]).equals(plain) and ids.column("id").to_pylist() == [f"k{i}" for i in range(300)]
    assert open_dataset(tmp_path / "ids").info.feature_scaling == open_dataset(tmp_path / "plain").info.feature_scaling
