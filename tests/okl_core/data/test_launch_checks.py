"""Damaged data sets are refused when opened, in one line naming the file (and both counts).

Each case writes a real three-shard data set (100 rows each) and damages it the way a user
or a broken copy would: a shard emptied, grown, missing or listed twice, row counts that do
not add up, and ``x``/``y``/``row`` columns of the wrong type or width.
"""

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from okl_core.data import open_dataset, write_dataset
from transforms.read import DatasetSource

SHARD = "part-{:05d}-of-00003.parquet"


def _write(tmp_path, task="binary"):
    rng = np.random.default_rng(0)
    X = rng.random((300, 4)).astype(np.float32)
    y = rng.random(300).astype(np.float32) if task == "regression" else np.where(rng.random(300) < 0.5, -1, 1)
    write_dataset(tmp_path / "ds", X, y, task, n_shards=3, **({} if task == "regression" else {"classes": [-1, 1]}))
    return tmp_path / "ds"


def _table(x, n=100, y=None, row=None):
    y = pa.array(np.ones(n, np.int32)) if y is None else y
    row = pa.array(np.arange(100, 100 + n, dtype=np.int64)) if row is None else row
    return pa.table({"x": x, "y": y, "row": row})


def _binary(width, n=100):
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, pa.py_buffer(np.zeros(n * width, np.uint8))])


def _replace_shard(ds, table):
    pq.write_table(table, ds / SHARD.format(1))


def _edit_info(ds, edit):
    info = json.loads((ds / "dataset.json").read_text())
    edit(info)
    (ds / "dataset.json").write_text(json.dumps(info))


def _floats(n, d):
    return pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(n * d, np.float32)), d)


CASES = {
    "shard emptied": (lambda ds: _replace_shard(ds, _table(_binary(16, 0), 0)), "{f1}: dataset.json records 100 rows, the file holds 0"),
    "shard grown": (lambda ds: _replace_shard(ds, _table(_binary(16, 150), 150)), "{f1}: dataset.json records 100 rows, the file holds 150"),
    "shard missing": (lambda ds: os.remove(ds / SHARD.format(1)), "{f1}: listed in {info} with 100 rows, but the file is missing"),
    "listed twice": (
        lambda ds: _edit_info(ds, lambda i: (i["shards"].append({**i["shards"][0], "first_row": 300}), i.update(n_rows=400))),
        "{info}: part-00000-of-00003.parquet is listed twice (shards 0 and 3)",
    ),
    "total differs": (lambda ds: _edit_info(ds, lambda i: i.update(n_rows=290)), "{info}: n_rows is 290 but the shards record 300"),
    "rows not consecutive": (
        lambda ds: _edit_info(ds, lambda i: i["shards"][2].update(first_row=210)),
        "{info}: part-00002-of-00003.parquet starts at row 210, the shards before it hold 200 rows",
    ),
    "x width not a multiple of 4": (
        lambda ds: _replace_shard(ds, _table(_binary(10))),
        "{f1}: column x is fixed_size_binary[10]: 10 bytes is not a whole number of float32 features (4 bytes each)",
    ),
    "x of another width": (
        lambda ds: _replace_shard(ds, _table(_binary(12))), "{f1}: column x holds 3 features per row (fixed_size_binary[12]), the data set 4"
    ),
    "x float64 bytes": (
        lambda ds: _replace_shard(ds, _table(_binary(32)).replace_schema_metadata().cast(pa.schema([
            pa.field("x", pa.binary(32), metadata={"okl.encoding": "float64-le"}), ("y", pa.int32()), ("row", pa.int64())]))),
        "{f1}: column x is encoded as 'float64-le'; okl reads 'float32-le' bytes",
    ),
    "fixed-size list of another width": (
        lambda ds: _replace_shard(ds, _table(_floats(100, 3))), "{f1}: column x holds 3 features per row (fixed_size_list<element: float>[3]), the data set 4"
    ),
    "list of text": (
        lambda ds: _replace_shard(ds, _table(pa.array([["a"]] * 100))), "{f1}: column x is list<element: string>, not a list of numbers"
    ),
    "x a number": (
        lambda ds: _replace_shard(ds, _table(pa.array(np.zeros(100)))),
        "{f1}: column x is double, not float32 bytes (fixed_size_binary[4 d]) or a list of numbers",
    ),
    "y text": (
        lambda ds: _replace_shard(ds, _table(_binary(16), y=pa.array(["1"] * 100))), "{f1}: column y is string; a binary data set needs integer labels"
    ),
    "row text": (
        lambda ds: _replace_shard(ds, _table(_binary(16), row=pa.array(["1"] * 100))), "{f1}: column row is string, not integer row numbers"
    ),
    "no y": (
        lambda ds: _replace_shard(ds, pa.table({"x": _binary(16), "row": pa.array(np.arange(100))})),
        "{f1}: no column y (an okl data set has columns x, y and row)",
    ),
}


@pytest.mark.parametrize("damage, message", CASES.values(), ids=list(CASES))
def test_damaged_data_set_is_refused_in_one_line(tmp_path, damage, message):
    ds = _write(tmp_path)
    damage(ds)
    expected = message.format(f1=ds / SHARD.format(1), info=ds / "dataset.json")
    for opener in (open_dataset, DatasetSource.open):
        with pytest.raises((ValueError, FileNotFoundError)) as err:
            opener(str(ds))
        assert str(err.value) == expected


def test_text_targets_of_a_regression_data_set(tmp_path):
    ds = _write(tmp_path, "regression")
    _replace_shard(ds, _table(_binary(16), y=pa.array(["0.5"] * 100)))
    with pytest.raises(ValueError) as err:
        open_dataset(ds)
    assert str(err.value) == f"{ds / SHARD.format(1)}: column y is string; a regression data set needs numeric targets"


def test_variable_length_lists_are_checked_row_by_row(tmp_path):
    """A list ``x`` may hold rows of other widths: those are dead letters, not a refusal (tests/pipelines/test_dead_letter.py)."""
    ds = _write(tmp_path)
    _replace_shard(ds, _table(pa.array([[0.0] * 4] * 99 + [[0.0] * 3], pa.list_(pa.float32()))))
    assert DatasetSource.open(str(ds)).n_rows == 300


def test_remote_data_sets_get_the_same_checks(tmp_path):
    from tests.pipelines.test_remote_paths import PREFIX

    ds = _write(tmp_path)
    _replace_shard(ds, _table(_binary(16, 0), 0))
    _edit_info(ds, lambda i: i)
    with pytest.raises(ValueError) as err:
        DatasetSource.open(PREFIX + str(ds))
    assert str(err.value) == f"{PREFIX}{ds}/{SHARD.format(1)}: dataset.json records 100 rows, the file holds 0"
    _write(tmp_path / "again")
    _edit_info(tmp_path / "again" / "ds", lambda i: i.update(n_rows=290))
    with pytest.raises(ValueError) as err:
        DatasetSource.open(PREFIX + str(tmp_path / "again" / "ds"))
    assert str(err.value) == f"{PREFIX}{tmp_path / 'again' / 'ds'}/dataset.json: n_rows is 290 but the shards record 300"
