"""The okl data set layout: the Parquet schema, ``dataset.json`` and the checks of files against them.

Columns (DESIGN.md, "Data layout"; layout version 2):

* ``x``   ``fixed_size_binary[4 d]``: the ``d`` features of a row as little-endian float32
  bytes (field metadata ``okl.encoding = float32-le``, ``okl.n_features = d``); read it
  with :func:`x_matrix` or ``np.frombuffer(column.buffers()[1], "<f4").reshape(-1, d)``
* ``y``   ``int32`` label (binary -1/+1, multiclass 0..C-1) or ``float32`` target
* ``row`` ``int64`` global row number (the stream's order)

Shard ``k`` of ``n`` is ``part-{k:05d}-of-{n:05d}.parquet`` and holds the consecutive rows
``[k R, (k + 1) R)`` with ``R = rows_per_shard`` (the last shard may be shorter), in row
groups of ``row_group_rows`` rows that end at multiples of ``row_group_rows`` in the stream
(a shard that starts between two multiples begins with a shorter group), where the
training plan cuts its batches too (:mod:`okl_core.data.plan`). ``dataset.json``
(:class:`DatasetInfo`) records the name, task, row and feature counts, classes or target
range, feature scaling, source, generator seed and each shard's rows.

Writing is :mod:`okl_core.data.writing`, reading :mod:`okl_core.data.reading`, and what files
without ``dataset.json`` hold (task, classes, width) :mod:`okl_core.data.inference`;
:mod:`okl_core.data.layout` gathers the four.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from okl_core.labels import check_task

__all__ = [
    "check_info_value",
    "LAYOUT_VERSION",
    "row_range_problem",
    "X_ENCODING",
    "check_compression",
    "INFO_FILE",
    "MAX_ROW",
    "check_same_classes",
    "READABLE_LAYOUT_VERSIONS",
    "COMPRESSIONS",
    "check_listing",
    "Batch",
    "as_array",
    "schema_problem",
    "label_type",
    "row_range",
    "DEFAULT_COMPRESSION",
    "parquet_file",
    "schema_for",
    "recorded_id_columns",
    "check_classes",
    "DatasetInfo",
    "x_matrix",
    "x_width",
    "row_nulls",
    "x_shape_problem",
    "shard_file_name",
    "check_shard",
    "has_labels",
    "one_line",
]

LAYOUT_VERSION = 2
"""Version 2 stores ``x`` as fixed-size binary; version 1 (``fixed_size_list<float32>``)
data sets and other writers' list columns read the same."""


READABLE_LAYOUT_VERSIONS = (1, 2)


INFO_FILE = "dataset.json"


def shard_file_name(index: int, count: int) -> str:
    """File name of shard ``index`` of ``count``."""
    return f"part-{index:05d}-of-{count:05d}.parquet"


COMPRESSIONS = ("lz4", "snappy", "zstd", "none")
"""Parquet codecs a data set can be written with (:class:`DatasetWriter` ``compression``)."""


DEFAULT_COMPRESSION = "lz4"
"""LZ4: of the codecs above, the fastest to read and no larger than Snappy (MNIST test
digits, binary ``x``, one thread, page checksums verified as okl reads: LZ4 0.83 us/row,
447 B/row; Zstandard 1.4 us, 331 B; Snappy 2.3 us, 500 B; none 1.0 us, 3153 B: its pages
decode fastest, 0.37 us, but checksumming 7x the bytes costs more than LZ4 saves, and
MNIST-8M's 8.1M rows would take 25.5 GB instead of 3.6 GB; ``bench/bench_read.py``).
Reading ``x`` is the largest cost of the training pipeline after the learner itself, so
decode speed wins over size by default."""


X_ENCODING = "float32-le"
"""Value of the ``okl.encoding`` metadata of a binary ``x`` field."""


def schema_for(n_features: int, task: str, id_fields: Iterable[pa.Field] = (), labeled: bool = True) -> pa.Schema:
    """Arrow schema of a data set with ``n_features`` columns for ``task``.

    ``id_fields``: the passthrough columns (``prepare --id_column``) after ``x``, ``y`` and
    ``row``, never read as features (readers select ``x``, ``y``, ``row`` by name).
    ``labeled=False``: ``y`` is of the null type (rows to be scored, without labels).

    ``x`` is one fixed-size binary value per row (the features as little-endian float32)
    rather than a ``fixed_size_list<float32>``: Parquet stores a list with a repetition
    level per feature, and decoding those levels was the largest cost of reading
    (MNIST-shaped rows, LZ4: 2.1 us/row as a list, 0.7 us/row as binary; the bytes on
    disk are the same). Readers (:func:`x_matrix`) take both forms, so list columns of
    other writers and of layout-1 data sets read the same.
    """
    y_type = (pa.float32() if task == "regression" else pa.int32()) if labeled else pa.null()
    metadata = {"okl.encoding": X_ENCODING, "okl.n_features": str(int(n_features))}
    x_field = pa.field("x", pa.binary(4 * int(n_features)), nullable=False, metadata=metadata)
    return pa.schema([x_field, ("y", y_type), ("row", pa.int64()), *id_fields])


def x_width(x_type: pa.DataType) -> int | None:
    """Features per row of an ``x`` column of type ``x_type``; None for variable-length lists.

    Raises
    ------
    ValueError
        ``x_type`` is neither a list of numbers nor float32 bytes (a fixed-size binary
        whose width is a multiple of 4).
    """
    is_list = pa.types.is_list(x_type) or pa.types.is_large_list(x_type)
    if (is_list or pa.types.is_fixed_size_list(x_type)) and _is_number_type(x_type.value_type):
        return None if is_list else x_type.list_size
    if pa.types.is_fixed_size_binary(x_type) and x_type.byte_width % 4 == 0:
        return x_type.byte_width // 4
    raise ValueError(f"column x must be float32 bytes (fixed_size_binary[4 d]) or a list of floats, got {x_type}")


def _is_number_type(value_type: pa.DataType) -> bool:
    return pa.types.is_floating(value_type) or pa.types.is_integer(value_type)


def x_shape_problem(x: pa.Array, n_features: int) -> tuple[int, str] | None:
    """``(index, problem)`` of the first row of ``x`` that is not ``n_features`` numbers, or None.

    A problem reads ``"column x is null"``, ``"column x holds 3 values, expected 4"`` or
    ``"column x has a null value at feature 2"``; readers put the file and row in front.
    """
    x = as_array(x)
    if x.null_count:
        return int(np.flatnonzero(x.is_null().to_numpy(zero_copy_only=False))[0]), "column x is null"
    if x_width(x.type) is None:
        lengths = pc.list_value_length(x).to_numpy(zero_copy_only=False)
        ragged = np.flatnonzero(lengths != n_features)
        if len(ragged):
            return int(ragged[0]), f"column x holds {int(lengths[ragged[0]])} values, expected {n_features}"
    if pa.types.is_fixed_size_binary(x.type):
        return None
    values = pc.list_flatten(x)
    if values.null_count:
        first = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        return first // n_features, f"column x has a null value at feature {first % n_features}"
    return None


def as_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One array for a column; no copy when it has one chunk (a row group read alone)."""
    if isinstance(column, pa.ChunkedArray):
        return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return column


def x_matrix(x: pa.Array, n_features: int) -> np.ndarray:
    """The ``(n, n_features)`` float32 matrix of an ``x`` array whose rows all have that width.

    A binary column is viewed in place (no copy; the result is read-only); a list column
    is flattened (missing items become NaN). Rows that are null give whatever their slot
    holds: callers drop them first (:func:`okl_core.data.validate.check_rows`) or know
    there are none.
    """
    x = as_array(x)
    if pa.types.is_fixed_size_binary(x.type):
        width = x.type.byte_width
        if width != 4 * n_features:
            raise ValueError(f"column x holds {width // 4} features per row, expected {n_features}")
        data = x.buffers()[1]
        if data is None:  # an empty array
            return np.zeros((len(x), n_features), np.float32)
        values = np.frombuffer(data, dtype="<f4", count=len(x) * n_features, offset=x.offset * width)
        return values.reshape(len(x), n_features).astype(np.float32, copy=False)  # a copy only on big-endian machines
    values = pc.list_flatten(x).to_numpy(zero_copy_only=False)  # nulls become NaN
    with np.errstate(over="ignore"):  # float64 beyond float32's range becomes inf: a bad row for the caller, not a warning
        return values.astype(np.float32, copy=False).reshape(-1, n_features)


def check_compression(compression: str) -> str:
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
    return compression


@dataclasses.dataclass
class DatasetInfo:
    """Contents of ``dataset.json``.

    Attributes
    ----------
    name : str
    task : {'binary', 'multiclass', 'regression'}
    n_rows, n_features : int
    classes : list or None
        Original label of each class index (multiclass), or the original labels mapped to
        -1/+1 (binary, ``[negative, positive]``); None for regression.
    target_range : list of float or None
        ``[min, max]`` of the (scaled) regression target.
    feature_scaling : dict or None
        How features (and target) were scaled, with the statistics needed to scale test
        sets the same way.
    source : str
        Where the rows came from (file, generator).
    generator_seed : int or None
        Seed of a generated data set.
    shards : list of dict
        ``{"file", "n_rows", "first_row"}`` per shard, in order.
    extra : dict
        Anything else a converter wants to record.
    """

    name: str
    task: str
    n_rows: int
    n_features: int
    classes: list | None = None
    target_range: list | None = None
    feature_scaling: dict | None = None
    source: str = ""
    generator_seed: int | None = None
    shards: list = dataclasses.field(default_factory=list)
    extra: dict = dataclasses.field(default_factory=dict)
    layout_version: int = LAYOUT_VERSION

    @property
    def n_classes(self) -> int | None:
        """Number of classes for multiclass data, else None."""
        return len(self.classes) if self.task == "multiclass" and self.classes else None

    def to_json(self) -> str:
        """Serialise, keys sorted (deterministic bytes)."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_file(cls, path: str) -> "DatasetInfo":
        """Read ``dataset.json``; errors name the file."""
        try:
            with open(path, encoding="utf-8") as f:
                raw = json.load(f)
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}: cannot read data set description (not UTF-8 text: byte {err.object[err.start]:#04x} at offset {err.start})") from None
        except (OSError, json.JSONDecodeError) as err:
            raise ValueError(f"{path}: cannot read data set description ({err})") from None
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: a data set description is a JSON object of fields, got {_json_kind(raw)}")
        if raw.get("layout_version") not in READABLE_LAYOUT_VERSIONS:
            raise ValueError(f"{path}: layout version {raw.get('layout_version')} is not supported (this okl reads {list(READABLE_LAYOUT_VERSIONS)})")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(raw) - fields
        if unknown:
            raise ValueError(f"{path}: unknown keys {sorted(unknown)}")
        _check_info_fields(raw, str(path))
        check_task(raw["task"], where=str(path))
        return cls(**raw)


_INFO_FIELDS = {
    # key: (required, accepts null, JSON type, least value of an integer, what it must be)
    "name": (True, False, str, None, "a string"),
    "task": (True, False, str, None, "a string: binary, multiclass or regression"),
    "n_rows": (True, False, int, 0, "an integer >= 0"),
    "n_features": (True, False, int, 1, "an integer >= 1"),
    "classes": (False, True, list, None, "a list of labels or null"),
    "target_range": (False, True, list, None, "a list [min, max] or null"),
    "feature_scaling": (False, True, dict, None, "an object or null"),
    "source": (False, False, str, None, "a string"),
    "generator_seed": (False, True, int, None, "an integer or null"),
    "shards": (False, False, list, None, "a list of shards"),
    "extra": (False, False, dict, None, "an object"),
    "layout_version": (False, False, int, None, "an integer"),
}


_SHARD_FIELDS = {"file": (str, "a string"), "n_rows": (int, "an integer >= 0"), "first_row": (int, "an integer >= 0")}


def _json_kind(value) -> str:
    """How JSON calls ``value``'s type, with the value when short: ``the string "3"``, ``null``, ``a list``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}"
    if isinstance(value, str):
        return f"the string {json.dumps(value)[:40]}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    return "a list" if isinstance(value, list) else "an object"


def _is_json_type(value, kind: type) -> bool:
    """``isinstance`` for JSON values, where a boolean is not an integer."""
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


def _check_info_fields(raw: dict, path: str) -> None:
    """Refuse a ``dataset.json`` whose keys have the wrong JSON types, in one line naming the key.

    Checked before anything uses them: a count written as a string compared unequal to the
    files' counts (``n_rows is 300 but the shards record 300``) and a missing key was a
    traceback.
    """
    for key, (required, nullable, kind, least, expected) in _INFO_FIELDS.items():
        if key not in raw:
            if required:
                raise ValueError(f"{path}: key {key!r} is missing (expected {expected})")
            continue
        value = raw[key]
        fits = _is_json_type(value, kind) and (least is None or value >= least)
        if not (fits or (value is None and nullable)):
            raise ValueError(f"{path}: key {key!r} must be {expected}, got {_json_kind(value)}")
    for i, shard in enumerate(raw.get("shards", [])):
        if not isinstance(shard, dict):
            raise ValueError(f"{path}: shards[{i}] must be an object with keys {', '.join(_SHARD_FIELDS)}, got {_json_kind(shard)}")
        for key, (kind, expected) in _SHARD_FIELDS.items():
            value = shard.get(key)
            if not (_is_json_type(value, kind) and (not isinstance(value, int) or value >= 0)):
                got = "nothing" if key not in shard else _json_kind(value)
                raise ValueError(f"{path}: key {key!r} of shards[{i}] must be {expected}, got {got}")


@dataclasses.dataclass(frozen=True)
class Batch:
    """Consecutive rows of one shard: ``X`` float32 ``(n, d)``, ``y``, global ``row`` numbers."""

    X: np.ndarray
    y: np.ndarray
    row: np.ndarray

    def __len__(self) -> int:
        return len(self.row)


def check_info_value(key: str, value) -> None:
    """Refuse a :class:`DatasetInfo` field value that ``dataset.json`` could not hold or read back."""
    _, nullable, kind, least, expected = _INFO_FIELDS[key]
    if not ((_is_json_type(value, kind) and (least is None or value >= least)) or (value is None and nullable)):
        raise ValueError(f"data set info field {key!r} must be {expected}, got {_json_kind(value)}")
    try:
        json.dumps(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"data set info field {key!r} must hold JSON values only ({err})") from None


def schema_problem(schema: pa.Schema, n_features: int | None, task: str | None, labels_optional: bool = False) -> str | None:
    """What makes ``schema`` unreadable as okl rows of ``n_features`` features for ``task`` (None: nothing).

    Checked at launch, from the Parquet footer alone: the columns exist, once each; ``x``
    is float32 bytes whose width is a whole number of features (4 bytes each), or a list
    of numbers (a fixed-size list must have ``n_features`` items; a variable-length list
    is checked row by row, :mod:`okl_core.data.validate`); ``y`` and ``row`` are numbers.
    With ``labels_optional`` (scoring) ``y`` may be absent or of the null type.
    """
    for name in ("x", "y", "row"):
        count = len(schema.get_all_field_indices(name))
        if count > 1:
            return f"column {name} appears {count} times; an okl data set has one column each of x, y and row"
    needed = ("x", "row") if labels_optional else ("x", "y", "row")
    missing = [c for c in needed if c not in schema.names]
    if missing:
        return f"no column {', '.join(missing)} (an okl data set has columns x, y and row){_near_misses(schema, missing)}"
    field = schema.field("x")
    x_type = field.type
    if pa.types.is_fixed_size_binary(x_type):
        encoding = (field.metadata or {}).get(b"okl.encoding", X_ENCODING.encode()).decode(errors="replace")
        if encoding != X_ENCODING:
            return f"column x is encoded as {encoding!r}; okl reads {X_ENCODING!r} bytes"
        if x_type.byte_width % 4:
            return f"column x is {x_type}: {x_type.byte_width} bytes is not a whole number of float32 features (4 bytes each)"
    elif pa.types.is_fixed_size_list(x_type) or pa.types.is_list(x_type) or pa.types.is_large_list(x_type):
        if not _is_number_type(x_type.value_type):
            return f"column x is {x_type}, not a list of numbers"
    else:
        return f"column x is {x_type}, not float32 bytes (fixed_size_binary[4 d]) or a list of numbers"
    width = x_width(x_type)
    if n_features is not None and width is not None and width != n_features:
        return f"column x holds {width} features per row ({x_type}), the data set {n_features}"
    y_type = label_type(schema)
    if not _is_number_type(y_type) and not (labels_optional and pa.types.is_null(y_type)):
        needs = "numeric targets" if task == "regression" else "integer labels"
        return f"column y is {y_type}; {'a ' + task if task else 'an okl'} data set needs {needs}"
    row_type = schema.field("row").type
    if not pa.types.is_integer(row_type):  # a float row number would be truncated (0.5 -> 0)
        return f"column row is {row_type}, not integer row numbers"
    return None


def _near_misses(schema: pa.Schema, missing: list[str]) -> str:
    """``; found X, Y (names are case-sensitive)`` for columns that differ from a missing one only in case."""
    near = [name for name in schema.names if name.lower() in missing and name not in missing]
    return f"; found {', '.join(near)} (names are case-sensitive)" if near else ""


MAX_ROW = 2**63 - 1
"""The largest row number: ``row`` is read as int64."""


def row_range(metadata: pq.FileMetaData) -> tuple[int, int] | None:
    """``(least, greatest)`` value of a file's ``row`` column from its footer statistics (no data read).

    None when the file has no rows or a row group has no statistics (other writers may
    leave them out). Values are Python numbers, so a uint64 column's large values stay
    as they are (no wrap to negative numbers).
    """
    columns = [i for i in range(metadata.num_columns) if metadata.schema.column(i).path == "row"]
    lows, highs = [], []
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        if group.num_rows == 0:
            continue
        stats = group.column(columns[0]).statistics if len(columns) == 1 else None
        if stats is None or not stats.has_min_max:
            return None
        lows.append(stats.min)
        highs.append(stats.max)
    return (min(lows), max(highs)) if lows else None


def row_nulls(metadata: pq.FileMetaData) -> int:
    """Null ``row`` values a file's footer statistics count (0 where they do not tell)."""
    columns = [i for i in range(metadata.num_columns) if metadata.schema.column(i).path == "row"]
    if len(columns) != 1:
        return 0
    stats = (metadata.row_group(g).column(columns[0]).statistics for g in range(metadata.num_row_groups))
    return sum(s.null_count for s in stats if s is not None and s.has_null_count)


def row_range_problem(rows: tuple[int, int] | None, nulls: int = 0) -> str | None:
    """Why a file whose ``row`` column spans ``rows`` (``nulls`` of them null) cannot be read, or None.

    Row numbers past int64 cannot be read; a null one would read as -2**63.
    """
    if nulls:
        return f"column row has {nulls} null values; every row needs its row number"
    if rows is not None and (rows[0] < -MAX_ROW - 1 or rows[1] > MAX_ROW):
        value = rows[1] if rows[1] > MAX_ROW else rows[0]
        return f"column row holds the row number {value}, beyond int64 (row numbers must lie in -2**63..2**63-1)"
    return None


def check_shard(path: str, metadata: pq.FileMetaData, schema: pa.Schema, info: DatasetInfo, recorded_rows: int | None,
                first_row: int | None = None, labels_optional: bool = False) -> None:
    """Check one Parquet file of a data set at launch: its schema, and its rows against ``dataset.json``.

    With ``first_row`` the file's row numbers must be ``first_row .. first_row + rows - 1``,
    as the footer statistics of ``row`` tell (no data read; not checked without
    statistics): a shard copied over another of the same size is refused, not trained twice.
    ``labels_optional`` as :func:`schema_problem` (files to be scored).

    Raises
    ------
    ValueError
        One line naming ``path`` and what is wrong (both row counts when they differ).
    """
    problem = schema_problem(schema, info.n_features, info.task, labels_optional)
    if problem is None and recorded_rows is not None and metadata.num_rows != recorded_rows:
        problem = f"{INFO_FILE} records {recorded_rows} rows, the file holds {metadata.num_rows}"
    if problem is None and first_row is not None and metadata.num_rows:
        rows, expected = row_range(metadata), (first_row, first_row + metadata.num_rows - 1)
        problem = row_range_problem(rows, row_nulls(metadata))
        if problem is None and rows is not None and tuple(rows) != expected:
            problem = f"its rows are numbered {rows[0]}..{rows[1]}, {INFO_FILE} places it at rows {expected[0]}..{expected[1]} (a shard copied over another?)"
    if problem:
        raise ValueError(f"{path}: {problem}")


def recorded_id_columns(info: DatasetInfo) -> list:
    """The id columns (``prepare --id_column``) a data set's ``dataset.json`` records (``extra.id_columns``; none: ``[]``).

    Passthrough columns of its shards beside ``x``, ``y`` and ``row``: never features, read
    only to be written next to each prediction.
    """
    return list((info.extra or {}).get("id_columns", []))


def check_classes(info: DatasetInfo, info_path: str) -> None:
    """Refuse a multiclass data set without at least two ``classes`` (a learner needs their count),
    and a binary one whose ``classes`` are not ``[negative, positive]`` (model files record them).

    Not part of :meth:`DatasetInfo.from_file`: such a set is still readable into memory
    (:class:`DatasetWriter` writes ``classes`` only when given); a pipeline cannot train on it.
    """
    if info.task == "multiclass" and not (isinstance(info.classes, list) and len(info.classes) >= 2):
        raise ValueError(f"{info_path}: key 'classes' must be a list of at least 2 labels for a multiclass data set, got {_json_kind(info.classes)}")
    if info.task == "binary" and info.classes is not None and len(info.classes) != 2:
        raise ValueError(f"{info_path}: key 'classes' must be null or 2 labels [negative, positive] for a binary data set, "
                         f"got {len(info.classes)}: {info.classes}")


def check_same_classes(data: str, data_classes, train_classes, train: str = "the training data") -> None:
    """Refuse data whose recorded ``classes`` differ from those of the training data (None: not recorded).

    Stored labels are codes into these lists: other lists, other meanings (a test set
    prepared without ``--like`` renumbers the classes it happens to hold). ``data`` names
    the data (``--test T``, ``--input D/dataset.json``), ``train`` what the training classes
    are from (the training data; a model file: ``the model M was trained on``).
    """
    if data_classes is not None and train_classes is not None and list(data_classes) != list(train_classes):
        raise ValueError(f"{data} has the classes {list(data_classes)}, {train} {list(train_classes)}: "
                         "its labels would be scored as other classes; prepare it with --like the training data set")


def check_listing(info: DatasetInfo, info_path: str) -> None:
    """Check the shard list of ``dataset.json``: no file twice, rows numbered consecutively, the total.

    Raises
    ------
    ValueError
        One line naming the file (or ``info_path``) and both counts.
    """
    seen: dict[str, int] = {}
    first = 0
    for i, shard in enumerate(info.shards):
        name = os.path.normpath(str(shard["file"]))
        if name in seen:
            raise ValueError(f"{info_path}: {shard['file']} is listed twice (shards {seen[name]} and {i})")
        seen[name] = i
        if int(shard["first_row"]) != first:
            raise ValueError(f"{info_path}: {shard['file']} starts at row {shard['first_row']}, the shards before it hold {first} rows")
        first += int(shard["n_rows"])
    if first != info.n_rows:
        raise ValueError(f"{info_path}: n_rows is {info.n_rows} but the shards record {first}")


def parquet_file(path, metadata: pq.FileMetaData | None = None) -> pq.ParquetFile:
    """Open a Parquet file (its footer, unless ``metadata`` is the footer already read); errors name the file, on one line."""
    try:
        return pq.ParquetFile(path, metadata=metadata, page_checksum_verification=True)
    except (OSError, pa.ArrowException) as err:
        raise ValueError(f"{path}: not a readable Parquet file ({one_line(err)})") from None


def one_line(err: BaseException) -> str:
    """An exception's message on one line (Arrow's can span several)."""
    return " ".join(str(err).split())


def has_labels(schema: pa.Schema) -> bool:
    """Whether a file's ``y`` holds labels: files to be scored may leave it out or write it as the null type."""
    return "y" in schema.names and not pa.types.is_null(schema.field("y").type)


def label_type(schema: pa.Schema) -> pa.DataType:
    """The type of a file's ``y``; the null type when there is none (files to be scored need no labels)."""
    return schema.field("y").type if "y" in schema.names else pa.null()
