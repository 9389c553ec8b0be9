"""User-written Parquet files (no ``dataset.json``) and edited data sets, as the audit found them.

Task and classes of a glob come from the labels of every file (null labels left to the
dead letters); row numbers are checked from the footer statistics; ``dataset.json`` is
checked key by key; every refusal is one line naming the file.
"""

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from okl_core.data.layout import MAX_GLOB_CLASSES, open_dataset, write_dataset
from transforms.read import DatasetSource

SHARD = "part-{:05d}-of-00003.parquet"


def _write(path, y, first_row=0, y_type=pa.int32(), row=None, **extra):
    """A file of ``len(y)`` rows of 2 features, labels ``y``, rows numbered from ``first_row``."""
    n = len(y)
    columns = {"x": pa.array([[float(i), 1.0] for i in range(n)], pa.list_(pa.float64())), "y": pa.array(y, y_type),
               "row": pa.array(np.arange(first_row, first_row + n)) if row is None else row, **extra}
    pq.write_table(pa.table(columns), path)
    return path


def _message(err) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


# -- 1: labels that are not a small set of class indices ---------------------------------


def test_a_huge_label_is_refused_before_any_class_list_is_built(tmp_path):
    _write(tmp_path / "a.parquet", [0, 1, 2])
    _write(tmp_path / "b.parquet", [1, 10**11], first_row=3, y_type=pa.int64())
    with pytest.raises(ValueError) as err:
        open_dataset(str(tmp_path / "*.parquet"))
    assert _message(err) == (f"{tmp_path / 'b.parquet'}: label 100000000000 is neither -1/+1 nor a class index 0..9999 "
                             "(okl infers at most 10,000 classes from files without dataset.json)")


def test_the_class_limit_is_inclusive_of_the_last_index(tmp_path):
    _write(tmp_path / "a.parquet", [0, MAX_GLOB_CLASSES - 1])
    assert len(open_dataset(tmp_path / "a.parquet").info.classes) == MAX_GLOB_CLASSES
    _write(tmp_path / "b.parquet", [0, MAX_GLOB_CLASSES])
    with pytest.raises(ValueError, match=r"b.parquet: label 10000 is neither"):
        open_dataset(tmp_path / "b.parquet")


# -- 2 and 4: task and classes from the non-null labels of every file ----------------------


def test_null_labels_are_left_to_the_dead_letters(tmp_path):
    _write(tmp_path / "a.parquet", [1, None, -1, None])
    info = open_dataset(str(tmp_path / "*.parquet")).info
    assert (info.task, info.classes) == ("binary", [-1, 1])
    _write(tmp_path / "m.parquet", [None, 2, 0], first_row=10)
    info = open_dataset(tmp_path / "m.parquet").info
    assert (info.task, info.classes) == ("multiclass", [0, 1, 2])


def test_classes_come_from_every_file_not_the_first(tmp_path):
    _write(tmp_path / "a.parquet", [0, 1, 2, 1])
    _write(tmp_path / "b.parquet", [2, 3, 0], first_row=4)
    source = DatasetSource.open(str(tmp_path / "*.parquet"))
    assert (source.task, source.n_classes) == ("multiclass", 4)
    assert source.classes is None  # codes inferred from the files: no recorded names (train's --test check skips them)
    assert open_dataset(str(tmp_path / "*.parquet")).info.classes == [0, 1, 2, 3]


def test_the_same_files_as_a_directory_and_as_a_glob_get_the_same_task_and_classes(tmp_path):
    X = np.arange(60, dtype=np.float32).reshape(30, 2)
    y = np.array([0, 1, 2] * 9 + [3, 3, 3])  # class 3 only in the last shard
    write_dataset(tmp_path / "ds", X, y, "multiclass", n_shards=3, classes=[0, 1, 2, 3])
    directory, files = DatasetSource.open(str(tmp_path / "ds")), DatasetSource.open(str(tmp_path / "ds" / "part-*.parquet"))
    assert (files.task, files.n_classes) == (directory.task, directory.n_classes) == ("multiclass", 4)
    assert (directory.classes, files.classes) == ((0, 1, 2, 3), None)  # only dataset.json records what the codes stand for


def test_a_glob_is_opened_parsing_each_footer_once_and_reading_each_y_once(tmp_path, monkeypatch):
    """Issue: a glob launch parsed each file's footer three times (listing, labels, row groups), and
    a test glob whose labels did not fit the training classes had its ``y`` read twice (the fit
    check, then the inference), each read parsing the footer again."""
    for k in range(3):  # label 3 only in the last file: classes 0..2 do not fit
        _write(tmp_path / f"f{k}.parquet", [0, 1, 2, 3 if k == 2 else 1], first_row=4 * k)
    footers, y_reads = [], []
    parquet_file, read_row_group = pq.ParquetFile.__init__, pq.ParquetFile.read_row_group

    def counting_init(self, source, *args, metadata=None, **kwargs):
        footers.extend([source] if metadata is None else [])  # a footer given is not parsed again
        parquet_file(self, source, *args, metadata=metadata, **kwargs)

    def counting_read(self, i, columns=None, **kwargs):
        y_reads.extend([i] if columns == ["y"] else [])
        return read_row_group(self, i, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "__init__", counting_init)
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counting_read)
    source = DatasetSource.open(str(tmp_path / "*.parquet"), "multiclass", [0, 1, 2])  # a test set like its training set
    assert (source.task, source.n_classes, source.n_rows) == ("multiclass", 4, 12)
    assert [g[:3] for g in source.row_groups] == [(str(tmp_path / f"f{k}.parquet"), 0, 4 * k) for k in range(3)]
    assert (sorted(map(str, footers)), len(y_reads)) == ([str(tmp_path / f"f{k}.parquet") for k in range(3)], 3)


@pytest.mark.parametrize("a, b, message", [
    ([1, -1, 1], [0, 1, 2], "{a}: label -1 beside label 0 (in {b}): labels must all be -1/+1 (binary) or all class indices 0..C-1 (multiclass)"),
    ([1, 1, 1], [-2, 1, 1], "{b}: label -2 is neither -1/+1 nor a class index 0..9999 (okl infers at most 10,000 classes from files without dataset.json)"),
], ids=["binary-beside-multiclass", "minus-two"])
def test_labels_of_no_task_are_refused_naming_the_file_and_value(tmp_path, a, b, message):
    _write(tmp_path / "a.parquet", a)
    _write(tmp_path / "b.parquet", b, first_row=3)
    with pytest.raises(ValueError) as err:
        open_dataset(str(tmp_path / "*.parquet"))
    assert _message(err) == message.format(a=tmp_path / "a.parquet", b=tmp_path / "b.parquet")


def test_float_targets_beside_integer_labels_are_refused(tmp_path):
    _write(tmp_path / "a.parquet", [1, -1])
    _write(tmp_path / "b.parquet", [0.5, 1.5], first_row=2, y_type=pa.float32())
    with pytest.raises(ValueError) as err:
        open_dataset(str(tmp_path / "*.parquet"))
    assert _message(err) == f"{tmp_path / 'b.parquet'}: column y is float, {tmp_path / 'a.parquet'}'s is int32: targets (floats) and labels (integers) do not mix"


def test_a_task_given_is_kept_when_every_label_fits_it(tmp_path):
    _write(tmp_path / "t.parquet", [1, 1, 1])  # alone: binary
    assert open_dataset(tmp_path / "t.parquet").info.task == "binary"
    info = open_dataset(tmp_path / "t.parquet", "multiclass", [0, 1, 2, 3]).info
    assert (info.task, info.classes) == ("multiclass", [0, 1, 2, 3])
    info = open_dataset(tmp_path / "t.parquet", "multiclass", [0]).info  # label 1 does not fit: inferred
    assert (info.task, info.classes) == ("binary", [-1, 1])


def test_scoring_takes_the_task_given_and_needs_no_labels(tmp_path):
    _write(tmp_path / "f.parquet", [1.0, -1.0], y_type=pa.float64())
    assert open_dataset(tmp_path / "f.parquet").info.task == "regression"
    assert open_dataset(tmp_path / "f.parquet", "binary", [-1, 1], labels_optional=True).info.task == "binary"
    pq.write_table(pa.table({"x": pa.array([[1.0, 2.0]]), "row": pa.array([0])}), tmp_path / "n.parquet")
    ds = open_dataset(tmp_path / "n.parquet", "multiclass", [0, 1, 2], labels_optional=True)
    assert ds.info.classes == [0, 1, 2] and np.isnan(ds.read_all().y).all()
    with pytest.raises(ValueError) as err:
        open_dataset(tmp_path / "n.parquet")
    assert _message(err) == f"{tmp_path / 'n.parquet'}: not in the okl layout: no column y (an okl data set has columns x, y and row)"


@pytest.mark.parametrize("y", [None, pa.nulls(5)], ids=["no-y", "null-y"])
def test_files_without_labels_read_the_same_through_every_reader(tmp_path, y):
    """Issue: ``iter_batches(batch_rows=N)`` raised a bare KeyError on a file without ``y`` (and gave
    ``None`` objects for a null ``y``) where the default batching read NaN labels; so did the
    median's ``DatasetSource.read_rows`` and ``open_dataset(labels_optional=True)`` without a task."""
    X = np.arange(10, dtype=np.float32).reshape(5, 2)
    columns = {"x": pa.array(X.tolist(), pa.list_(pa.float32())), "row": pa.array(np.arange(5)), **({} if y is None else {"y": y})}
    pq.write_table(pa.table(columns), tmp_path / "n.parquet", row_group_size=2)
    ds = open_dataset(tmp_path / "n.parquet", "binary", [-1, 1], labels_optional=True)
    for batch_rows in (None, 2, 3):
        batches = list(ds.iter_batches(batch_rows=batch_rows))
        assert [len(b) for b in batches] == {None: [2, 2, 1], 2: [2, 2, 1], 3: [3, 2]}[batch_rows]
        labels = np.concatenate([b.y for b in batches])
        assert labels.dtype == np.float64 and np.isnan(labels).all()
        assert np.array_equal(np.concatenate([b.X for b in batches]), X) and np.concatenate([b.row for b in batches]).tolist() == [0, 1, 2, 3, 4]
    source = DatasetSource.open(str(tmp_path / "n.parquet"), "binary", [-1, 1], labels_optional=True)
    assert np.array_equal(source.read_rows(4), X[:4])
    assert open_dataset(tmp_path / "n.parquet", labels_optional=True).info.task == "binary"  # no label says otherwise (as a null y)


def test_a_data_set_directory_without_labels_is_read_for_scoring_only(tmp_path):
    """Labels are optional to score (``labels_optional``) in a directory's shards too, not only in
    files without ``dataset.json``; training still needs them."""
    X = np.arange(12, dtype=np.float32).reshape(6, 2)
    write_dataset(tmp_path / "ds", X, [1, -1] * 3, "binary", n_shards=2)
    for shard in sorted((tmp_path / "ds").glob("part-*.parquet")):
        pq.write_table(pq.read_table(shard).drop_columns(["y"]), shard)
    ds = open_dataset(tmp_path / "ds", labels_optional=True)
    assert ds.info.task == "binary" and np.isnan(ds.read_all().y).all() and np.array_equal(ds.read_all().X, X)
    assert DatasetSource.open(str(tmp_path / "ds"), labels_optional=True).n_rows == 6
    with pytest.raises(ValueError) as err:
        DatasetSource.open(str(tmp_path / "ds"))
    assert _message(err) == f"{tmp_path / 'ds' / 'part-00000-of-00002.parquet'}: no column y (an okl data set has columns x, y and row)"


# -- 5: row numbers from the footer statistics ---------------------------------------------


def _three_shards(tmp_path):
    X = np.arange(600, dtype=np.float32).reshape(300, 2)
    write_dataset(tmp_path / "ds", X, np.where(np.arange(300) % 2, 1, -1), "binary", n_shards=3, classes=[-1, 1])
    return tmp_path / "ds"


def test_a_shard_copied_over_another_is_refused(tmp_path):
    ds = _three_shards(tmp_path)
    shutil.copy(ds / SHARD.format(0), ds / SHARD.format(1))
    with pytest.raises(ValueError) as err:
        open_dataset(ds)
    assert _message(err) == f"{ds / SHARD.format(1)}: its rows are numbered 0..99, dataset.json places it at rows 100..199 (a shard copied over another?)"


def test_files_of_a_glob_whose_rows_overlap_are_refused(tmp_path):
    _write(tmp_path / "a.parquet", [1, -1, 1])
    _write(tmp_path / "b.parquet", [1, -1, 1], first_row=2)
    with pytest.raises(ValueError) as err:
        open_dataset(str(tmp_path / "*.parquet"))
    assert _message(err) == f"{tmp_path / 'b.parquet'}: rows 2..4 overlap rows 0..2 of {tmp_path / 'a.parquet'}; each file must hold a range of rows of its own"


def test_a_copy_of_a_file_in_a_glob_is_refused(tmp_path):
    _write(tmp_path / "a.parquet", [1, -1, 1])
    shutil.copy(tmp_path / "a.parquet", tmp_path / "b.parquet")
    with pytest.raises(ValueError, match=r"b.parquet: rows 0..2 overlap rows 0..2 of .*a.parquet"):
        open_dataset(str(tmp_path / "*.parquet"))


def test_files_are_ordered_by_their_rows(tmp_path):
    _write(tmp_path / "a.parquet", [1, 1], first_row=5)
    _write(tmp_path / "b.parquet", [-1, -1, -1])
    ds = open_dataset(str(tmp_path / "*.parquet"))
    assert [(s.path, s.first_row) for s in ds.shards] == [(str(tmp_path / "b.parquet"), 0), (str(tmp_path / "a.parquet"), 5)]
    assert ds.read_all().row.tolist() == [0, 1, 2, 5, 6]


def test_row_numbers_beyond_int64_are_refused(tmp_path):
    _write(tmp_path / "u.parquet", [1, -1], row=pa.array([0, 2**63], pa.uint64()))
    with pytest.raises(ValueError) as err:
        open_dataset(tmp_path / "u.parquet")
    assert _message(err) == f"{tmp_path / 'u.parquet'}: column row holds the row number 9223372036854775808, beyond int64 (row numbers must lie in -2**63..2**63-1)"


# -- 6: dataset.json checked key by key -------------------------------------------------------


def _edit_info(ds, edit):
    info = json.loads((ds / "dataset.json").read_text())
    (ds / "dataset.json").write_text(json.dumps(edit(info)))


@pytest.mark.parametrize("edit, message", [
    (lambda i: [i], "a data set description is a JSON object of fields, got a list"),
    (lambda i: {k: v for k, v in i.items() if k != "task"}, "key 'task' is missing (expected a string: binary, multiclass or regression)"),
    (lambda i: {k: v for k, v in i.items() if k != "n_rows"}, "key 'n_rows' is missing (expected an integer >= 0)"),
    (lambda i: {**i, "n_features": "2"}, 'key \'n_features\' must be an integer >= 1, got the string "2"'),
    (lambda i: {**i, "n_rows": "300"}, 'key \'n_rows\' must be an integer >= 0, got the string "300"'),
    (lambda i: {**i, "n_rows": True}, "key 'n_rows' must be an integer >= 0, got the boolean true"),
    (lambda i: {**i, "classes": "ab"}, 'key \'classes\' must be a list of labels or null, got the string "ab"'),
    (lambda i: {**i, "shards": {}}, "key 'shards' must be a list of shards, got an object"),
    (lambda i: {**i, "shards": [i["shards"][0], 3]}, "shards[1] must be an object with keys file, n_rows, first_row, got the number 3"),
    (lambda i: {**i, "shards": [{k: v for k, v in s.items() if k != "first_row"} for s in i["shards"]]},
     "key 'first_row' of shards[0] must be an integer >= 0, got nothing"),
    (lambda i: {**i, "shards": [{**s, "n_rows": "100"} for s in i["shards"]]}, 'key \'n_rows\' of shards[0] must be an integer >= 0, got the string "100"'),
], ids=["list", "no-task", "no-n_rows", "n_features-string", "n_rows-string", "n_rows-bool", "classes-string", "shards-object",
        "shard-number", "no-first_row", "shard-n_rows-string"])
def test_dataset_json_of_the_wrong_types_is_refused_naming_the_key(tmp_path, edit, message):
    ds = _three_shards(tmp_path)
    _edit_info(ds, edit)
    with pytest.raises(ValueError) as err:
        open_dataset(ds)
    assert _message(err) == f"{ds / 'dataset.json'}: {message}"


def test_a_multiclass_data_set_without_classes_is_refused_by_the_pipelines(tmp_path):
    X = np.zeros((30, 2), np.float32)
    write_dataset(tmp_path / "ds", X, np.arange(30) % 3, "multiclass", classes=[0, 1, 2])
    _edit_info(tmp_path / "ds", lambda i: {**i, "classes": None})
    with pytest.raises(ValueError) as err:
        DatasetSource.open(str(tmp_path / "ds"))
    assert _message(err) == f"{tmp_path / 'ds' / 'dataset.json'}: key 'classes' must be a list of at least 2 labels for a multiclass data set, got null"


def test_a_binary_data_set_whose_classes_are_not_two_labels_is_refused_by_the_pipelines(tmp_path):
    """Its classes name the codes -1 and +1, and model files record them (a count of 2)."""
    X = np.zeros((30, 2), np.float32)
    write_dataset(tmp_path / "ds", X, np.where(np.arange(30) % 2, 1, -1), "binary", classes=["no", "yes"])
    assert DatasetSource.open(str(tmp_path / "ds")).classes == ("no", "yes")
    _edit_info(tmp_path / "ds", lambda i: {**i, "classes": ["no", "yes", "maybe"]})
    with pytest.raises(ValueError) as err:
        DatasetSource.open(str(tmp_path / "ds"))
    assert _message(err) == (f"{tmp_path / 'ds' / 'dataset.json'}: key 'classes' must be null or 2 labels [negative, positive] "
                             "for a binary data set, got 3: ['no', 'yes', 'maybe']")
    with pytest.raises(ValueError) as err:  # nor is such a set written
        write_dataset(tmp_path / "three", X, np.where(np.arange(30) % 2, 1, -1), "binary", classes=[1, 2, 3])
    assert _message(err) == "classes of a binary data set must be 2 labels [negative, positive], got 3: [1, 2, 3]"
    assert not (tmp_path / "three").exists()


def test_dataset_json_that_is_not_utf8_is_refused_naming_the_file(tmp_path):
    ds = _three_shards(tmp_path)
    (ds / "dataset.json").write_bytes(b'{"name": "caf\xe9"}')
    with pytest.raises(ValueError) as err:
        open_dataset(ds)
    assert _message(err) == f"{ds / 'dataset.json'}: cannot read data set description (not UTF-8 text: byte 0xe9 at offset 13)"


# -- 7 and 8: columns ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["y", "row"])
def test_a_column_twice_is_refused_naming_it(tmp_path, name):
    table = pa.table({"x": pa.array([[1.0]]), "y": pa.array([1]), "row": pa.array([0])})
    pq.write_table(table.append_column(name, table.column(name)), tmp_path / "d.parquet")
    with pytest.raises(ValueError) as err:
        open_dataset(tmp_path / "d.parquet")
    assert _message(err) == f"{tmp_path / 'd.parquet'}: not in the okl layout: column {name} appears 2 times; an okl data set has one column each of x, y and row"


def test_upper_case_columns_are_named_as_near_misses(tmp_path):
    pq.write_table(pa.table({"X": pa.array([[1.0]]), "Y": pa.array([1]), "row": pa.array([0])}), tmp_path / "u.parquet")
    with pytest.raises(ValueError) as err:
        open_dataset(tmp_path / "u.parquet")
    assert _message(err) == (f"{tmp_path / 'u.parquet'}: not in the okl layout: no column x, y (an okl data set has columns x, y and row); "
                             "found X, Y (names are case-sensitive)")


def test_a_file_name_with_glob_characters_is_read_as_is(tmp_path):
    path = _write(tmp_path / "a[1].parquet", [1, -1])
    ds = open_dataset(str(path))
    assert [s.path for s in ds.shards] == [str(path)] and ds.info.n_rows == 2
