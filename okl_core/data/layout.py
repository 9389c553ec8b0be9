"""The okl data set layout: a directory of equal-sized Parquet shards plus ``dataset.json``.

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
training plan cuts its batches too (:mod:`okl_core.data.plan`). ``dataset.json`` records the name, task, row and
feature counts, classes or target range, feature scaling, source, generator seed and each
shard's rows.

:class:`DatasetWriter` writes streaming (bounded memory) into a temporary directory that
is renamed into place only when complete, so a reader never sees a half-written data set.
Parallel writers (the MNIST-8M generator's Beam workers) each write one shard with
:func:`write_shard_file` into a :class:`StagedDataset`, which the driver commits.
:func:`open_dataset` reads a data set directory, or any Parquet file/glob of this schema.
"""

from __future__ import annotations

import dataclasses
import glob as globlib
import json
import os
from typing import Callable, Collection, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from okl_core.labels import bad_labels, check_task, label_reason
from okl_core.learners.base import check_int
from okl_core.publish import StagedDirectory

__all__ = [
    "LAYOUT_VERSION",
    "check_same_classes",
    "DatasetInfo",
    "DatasetWriter",
    "StagedDataset",
    "write_shard_file",
    "Dataset",
    "ShardFile",
    "Batch",
    "write_dataset",
    "open_dataset",
    "files_name",
    "infer_task",
    "labels_fit",
    "read_row_group",
    "row_range",
    "row_group_sizes",
    "MAX_GLOB_CLASSES",
    "shard_file_name",
    "schema_for",
    "x_width",
    "x_matrix",
    "x_shape_problem",
    "as_array",
    "schema_problem",
    "check_shard",
    "check_listing",
    "check_classes",
    "recorded_id_columns",
    "X_ENCODING",
    "COMPRESSIONS",
    "DEFAULT_COMPRESSION",
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


def _check_compression(compression: str) -> str:
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


class StagedDataset:
    """A data set directory being built: a hidden sibling directory, renamed when complete.

    Writers (the streaming :class:`DatasetWriter`, or parallel workers each writing one
    shard with :func:`write_shard_file`) put files into :attr:`tmp`; :meth:`commit` writes
    ``dataset.json`` and renames the directory into place, :meth:`abort` deletes it. A
    reader therefore never sees a half-written data set. The target is locked while it
    is built (a second writer of the same path fails at once), the directory gets the
    umask's permissions, an existing data set is moved aside before the new one takes its
    name, and leftovers of killed writers are cleaned (:class:`okl_core.publish.StagedDirectory`).

    Parameters
    ----------
    path : str
        Final directory. Must not exist unless ``overwrite``.
    overwrite : bool
        Replace an existing data set (or empty directory) at ``path`` (after completion).
    """

    def __init__(self, path, overwrite=False):
        self._staged = StagedDirectory(path, replace=overwrite, may_replace=_not_a_dataset)
        self.path, self.tmp = self._staged.path, self._staged.tmp

    def commit(self, info: DatasetInfo) -> DatasetInfo:
        """Write ``dataset.json`` and move the directory into place."""
        with open(os.path.join(self.tmp, INFO_FILE), "w") as f:
            f.write(info.to_json())
        self._staged.commit()
        return info

    def abort(self) -> None:
        """Drop everything written so far."""
        self._staged.abort()


def _not_a_dataset(path: str) -> str | None:
    """Why ``path`` must not be replaced by a data set (None: it is one, or an empty directory)."""
    if os.path.isdir(path) and (not os.listdir(path) or os.path.exists(os.path.join(path, INFO_FILE))):
        return None
    return f"not an okl data set (no {INFO_FILE})"


class _ShardWriter:
    """One Parquet shard written streaming, in row groups that end at multiples of ``row_group_rows``.

    Multiples of the stream position (the file's rows start at ``first_row``), not of the
    file's own rows: the pipeline cuts its batches at those multiples (4096 by default for
    both), so each batch is then read from one row group rather than copied together from
    two (a 100k-row shard whose every batch straddled two groups cost 1.27x the bare fold's
    CPU, aligned 1.14x; FOGD, MNIST-shaped rows).
    """

    def __init__(self, path, schema, row_group_rows, first_row, compression=DEFAULT_COMPRESSION):
        self.schema, self.row_group_rows = schema, int(row_group_rows)
        self.first_row = int(first_row)
        self.n_rows = 0  # rows accepted (written or pending)
        # Dictionary encoding only for labels: float features and unique row numbers
        # overflow the dictionary anyway (trying costs ~3x the write time, files grow).
        # Page checksums (CRC32, verified by every okl reader): a page damaged on disk is
        # then an error naming its row group, never silently different numbers.
        self._writer = pq.ParquetWriter(path, schema, use_dictionary=["y"], compression=_check_compression(compression), write_page_checksum=True)
        self._pending: list[tuple[np.ndarray, np.ndarray, pa.Table | None]] = []
        self._pending_rows = 0

    def write(self, X, y, ids: pa.Table | None = None):
        self._pending.append((X, y, ids))
        self._pending_rows += len(y)
        self.n_rows += len(y)
        while self._pending_rows >= self._group_rows():
            self._flush(self._group_rows())

    def _group_rows(self) -> int:
        """Rows of the next row group: up to the next multiple of ``row_group_rows`` in the stream."""
        return self.row_group_rows - (self.first_row + self.n_rows - self._pending_rows) % self.row_group_rows

    def _flush(self, n_rows):
        X = np.concatenate([p[0] for p in self._pending])
        y = np.concatenate([p[1] for p in self._pending])
        ids = pa.concat_tables([p[2] for p in self._pending]) if self._pending[0][2] is not None else None
        first = self.first_row + self.n_rows - self._pending_rows
        head = None if ids is None else ids.slice(0, n_rows)
        self._writer.write_table(_table(self.schema, X[:n_rows], y[:n_rows], first, head), row_group_size=n_rows)
        self._pending = [(X[n_rows:], y[n_rows:], None if ids is None else ids.slice(n_rows))] if len(y) > n_rows else []
        self._pending_rows = len(y) - n_rows

    def close(self):
        if self._pending_rows:
            self._flush(self._pending_rows)
        self._writer.close()

    def abort(self):
        try:
            self._writer.close()
        except Exception:  # already failing; the file is deleted anyway
            pass


MAX_LABEL_CLASSES = 2**31
"""Classes a multiclass label can name when the writer does not know ``classes``: ``y`` is int32."""


def _check_xy(X, y, n_features, task, first_row=0, n_classes=None, check_values=True):
    """``X`` as float32 ``(n, n_features)`` and ``y`` as the task's stored type, or a one-line ValueError.

    Checked before the conversion, which would otherwise truncate (0.5 -> 0), wrap (2**31 ->
    -2**31) or overflow (1e300 -> inf) silently: every label must be one the task's learner
    takes (:func:`okl_core.labels.bad_labels`, ``float32=True``; multiclass below
    ``n_classes``, or int32's range when unknown) and every feature finite as float32. The
    converters drop such rows before; this is the safety net of the Python API, one
    vectorised pass per call. Errors name the first bad row by its number in the stream.
    ``check_values=False`` converts without those checks (tests writing bad rows on purpose).
    """
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n, {n_features}), got shape {X.shape}")
    try:
        y64 = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"y must be numbers ({err})") from None
    if X.shape[1] != n_features or y64.shape != (X.shape[0],):
        raise ValueError(f"expected X (n, {n_features}) and y (n,), got {X.shape} and {y64.shape}")
    if not check_values:
        return X.astype(np.float32, copy=False), np.asarray(y, dtype=np.float32 if task == "regression" else np.int32)
    bad = np.flatnonzero(bad_labels(y64, task, n_classes or MAX_LABEL_CLASSES, float32=True))
    if len(bad):
        raise ValueError(f"y, row {first_row + int(bad[0])}: {label_reason(y64[bad[0]], task, n_classes or MAX_LABEL_CLASSES)}")
    X32 = _finite_float32(X, first_row)
    return X32, y64.astype(np.float32 if task == "regression" else np.int32)


def _finite_float32(X: np.ndarray, first_row: int) -> np.ndarray:
    """``X`` as float32, refusing NaN and values beyond float32's range in one line naming the row.

    A value is finite as float32 exactly when its float32 rounding is
    (:func:`okl_core.data.sources.finite32` tests ``|x| < FLOAT32_LIMIT`` in float64 for the
    same reason), so the test runs on the converted array: no float64 copy of ``X``.
    """
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            X32 = X.astype(np.float32, copy=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"X must be numbers ({err})") from None
    finite = np.isfinite(X32)
    if not finite.all():
        i, j = (int(k[0]) for k in np.nonzero(~finite))
        raise ValueError(f"X, row {first_row + i}, feature {j}: {X[i, j].item()!r} is not finite as float32 (okl stores features as float32)")
    return X32


MAX_FEATURES = (2**31 - 1) // 4
"""The most features a row can hold: ``x`` is one Parquet binary value of 4 bytes each."""
ROW_GROUP_BYTES = 128 << 20
"""Row groups hold at most this many bytes of ``x`` (fewer rows than ``row_group_rows`` for
rows wider than 8192 features): the writer buffers a row group in memory."""


def _check_shape_args(n_features, task, rows, row_group_rows):
    """Refuse a bad task or count in one line naming it (a float count once became its floor)."""
    check_task(task)
    for name, value in (("n_features", n_features), ("rows_per_shard", rows), ("row_group_rows", row_group_rows)):
        check_int(name, value, 1)
    if int(n_features) > MAX_FEATURES:
        raise ValueError(f"n_features {int(n_features):,} is more than a row can hold ({MAX_FEATURES:,} float32 features)")


def _row_group_rows(row_group_rows: int, n_features: int) -> int:
    """``row_group_rows``, fewer for rows so wide that a group would pass :data:`ROW_GROUP_BYTES`."""
    return max(1, min(int(row_group_rows), ROW_GROUP_BYTES // (4 * int(n_features))))


def write_shard_file(path, n_features, task, batches, first_row, row_group_rows=4096, compression=DEFAULT_COMPRESSION) -> int:
    """Write one shard file from an iterable of ``(X, y)`` batches; return its row count.

    Used by parallel writers: each worker writes one shard of a :class:`StagedDataset`
    under its final name :func:`shard_file_name`, rows numbered from ``first_row``. The
    file is written under a temporary name and renamed when complete, so a retried or
    failed worker never leaves a partial shard, and finished shards can be counted.
    """
    _check_shape_args(n_features, task, 1, row_group_rows)
    path = os.fspath(path)
    tmp = f"{path}.inprogress-{os.getpid()}"
    writer = _ShardWriter(tmp, schema_for(int(n_features), task), row_group_rows, first_row, _check_compression(compression))
    try:
        for X, y in batches:
            writer.write(*_check_xy(X, y, int(n_features), task, int(first_row) + writer.n_rows))
        writer.close()
        os.replace(tmp, path)
    except BaseException:
        writer.abort()
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return writer.n_rows


class DatasetWriter:
    """Write a data set streaming: rows go to shard after shard, each of ``rows_per_shard``.

    Use as a context manager; the directory appears at ``path`` only on a clean exit (an
    exception leaves nothing behind). ``path`` must not exist unless ``overwrite``.
    Companion files (e.g. ``rejects.csv``) written into :attr:`staging_dir` appear together
    with the data set.

    Parameters
    ----------
    path : str
        Target directory.
    n_features : int
    task : {'binary', 'multiclass', 'regression'}
    rows_per_shard : int
        Rows per shard file (the last may be shorter).
    row_group_rows : int
        Parquet row group size; groups end at multiples of it in the stream, so a shard
        that starts elsewhere (``rows_per_shard`` not a multiple) begins with a shorter one.
    overwrite : bool
        Replace an existing directory at ``path`` (atomically, after completion).
    compression : {'lz4', 'snappy', 'zstd', 'none'}
        Parquet codec (:data:`DEFAULT_COMPRESSION`; any codec reads the same).
    check_values : bool
        Refuse rows whose label the task's learner cannot take or whose features are not
        finite as float32 (:meth:`write`). False writes them as given: only for tests of
        the readers' bad-row paths (dead letters), which need such rows on disk.
    id_fields : sequence of pyarrow.Field, optional
        Passthrough columns (``prepare --id_column``) written beside ``x``, ``y`` and ``row``:
        :meth:`write` then takes a table of them for every block of rows.
    labeled : bool
        False: the rows have no labels (raw records to be scored); ``y`` is written as the
        null type, which scoring reads as rows without a label.
    **info
        Fields of :class:`DatasetInfo` other than n_rows, n_features, task and shards
        (more can be set before closing with :meth:`set_info`).
    """

    def __init__(self, path, n_features, task, rows_per_shard=65536, row_group_rows=4096, overwrite=False, compression=DEFAULT_COMPRESSION,
                 *, check_values=True, id_fields=(), labeled=True, **info):
        _check_shape_args(n_features, task, rows_per_shard, row_group_rows)
        self.compression = _check_compression(compression)
        self.n_features, self.task = int(n_features), task
        self.rows_per_shard, self.row_group_rows = int(rows_per_shard), _row_group_rows(row_group_rows, self.n_features)
        self.schema = schema_for(self.n_features, task, id_fields, labeled)
        self.id_names, self.labeled = [f.name for f in id_fields], bool(labeled)
        self.check_values = bool(check_values)
        self.info_fields = {"name": os.path.basename(os.path.abspath(os.fspath(path)))}
        self.set_info(**info)  # before the target is locked: a bad field must leave nothing behind
        self._staged = StagedDataset(path, overwrite)
        self.path = self._staged.path
        self._shards: list[dict] = []
        self._shard: _ShardWriter | None = None
        self._n_rows = 0
        self._finished = False  # closed or aborted: the staging directory is gone
        self.info: DatasetInfo | None = None  # set by close()

    @property
    def staging_dir(self) -> str:
        """The temporary directory that becomes the data set (for companion files)."""
        return self._staged.tmp

    @property
    def n_rows(self) -> int:
        """Rows written so far."""
        return self._n_rows

    def set_info(self, **fields) -> None:
        """Set :class:`DatasetInfo` fields recorded when the writer closes.

        Names and JSON types are checked here, as :meth:`DatasetInfo.from_file` checks them
        (``name=3`` was once written, and the data set then could not be opened).
        """
        reserved = {"task", "n_rows", "n_features", "shards", "layout_version"}
        known = {f.name for f in dataclasses.fields(DatasetInfo)} - reserved
        unknown = set(fields) - known
        if unknown:
            raise ValueError(f"unknown data set info fields {sorted(unknown)} (allowed: {sorted(known)})")
        for key, value in fields.items():
            _check_info_value(key, value)
        classes = fields.get("classes")
        if self.task == "binary" and classes is not None and len(classes) != 2:  # as check_classes refuses it when read
            raise ValueError(f"classes of a binary data set must be 2 labels [negative, positive], got {len(classes)}: {classes}")
        self.info_fields.update(fields)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False

    def _check_open(self) -> None:
        if self._finished:
            raise ValueError(f"{self.path}: the data set writer is already closed")

    def _n_classes(self) -> int | None:
        """Classes a multiclass label must lie below: those of ``classes`` when given."""
        classes = self.info_fields.get("classes")
        return len(classes) if self.task == "multiclass" and classes else None

    def write(self, X, y, ids: pa.Table | None = None) -> None:
        """Append rows (``X`` ``(n, d)``, ``y`` ``(n,)``) at the end of the stream.

        ``ids``: the rows' passthrough columns (a table with a column per ``id_fields``),
        when the writer has some. ``y`` is ignored (None will do) for a writer of rows
        without labels (``labeled=False``).

        Raises
        ------
        ValueError
            One line naming the argument and the first bad row (:func:`_check_xy`); nothing
            of the call is written then.
        """
        self._check_open()
        if not self.labeled:  # a placeholder the writer slices with X; written as nulls
            y = np.zeros(len(np.asarray(X)), np.float32 if self.task == "regression" else np.int32)
            y = y if self.task != "binary" else y + 1
        X, y = _check_xy(X, y, self.n_features, self.task, self._n_rows, self._n_classes(), self.check_values)
        if (ids is None) != (not self.id_names) or (ids is not None and (ids.num_rows != len(y) or not set(self.id_names) <= set(ids.column_names))):
            raise ValueError(f"ids must be a table of the columns {self.id_names} with a row for each of the {len(y)} rows")
        start = 0
        while start < len(y):
            if self._shard is None:
                name = f"part-{len(self._shards):05d}.parquet"
                self._shards.append({"file": name, "n_rows": 0, "first_row": self._n_rows})
                self._shard = _ShardWriter(os.path.join(self.staging_dir, name), self.schema, self.row_group_rows, self._n_rows, self.compression)
            take = min(self.rows_per_shard - self._shard.n_rows, len(y) - start)
            self._shard.write(X[start : start + take], y[start : start + take], None if ids is None else ids.slice(start, take))
            self._n_rows += take
            self._shards[-1]["n_rows"] += take
            start += take
            if self._shard.n_rows == self.rows_per_shard:
                self._shard.close()
                self._shard = None

    def close(self) -> DatasetInfo:
        """Finish the last shard, write ``dataset.json`` and move the directory into place.

        On failure everything is dropped and the target released (:meth:`abort`).
        """
        self._check_open()
        try:
            return self._commit()
        except BaseException:
            self.abort()
            raise

    def _commit(self) -> DatasetInfo:
        if self._shard is not None:
            self._shard.close()
            self._shard = None
        count = len(self._shards)
        for i, shard in enumerate(self._shards):
            final = shard_file_name(i, count)
            os.replace(os.path.join(self.staging_dir, shard["file"]), os.path.join(self.staging_dir, final))
            shard["file"] = final
        info = DatasetInfo(task=self.task, n_rows=self._n_rows, n_features=self.n_features, shards=self._shards, **self.info_fields)
        self.info = self._staged.commit(info)
        self._finished = True
        return self.info

    def abort(self) -> None:
        """Drop everything written so far (nothing to do once closed or aborted)."""
        if self._finished:
            return
        self._finished = True
        if self._shard is not None:
            self._shard.abort()
            self._shard = None
        self._staged.abort()


def _check_info_value(key: str, value) -> None:
    """Refuse a :class:`DatasetInfo` field value that ``dataset.json`` could not hold or read back."""
    _, nullable, kind, least, expected = _INFO_FIELDS[key]
    if not ((_is_json_type(value, kind) and (least is None or value >= least)) or (value is None and nullable)):
        raise ValueError(f"data set info field {key!r} must be {expected}, got {_json_kind(value)}")
    try:
        json.dumps(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"data set info field {key!r} must hold JSON values only ({err})") from None


def _table(schema, X, y, first_row, ids: pa.Table | None = None) -> pa.Table:
    x_type, y_type = schema.field("x").type, schema.field("y").type
    data = np.ascontiguousarray(X, dtype="<f4")
    x = pa.FixedSizeBinaryArray.from_buffers(x_type, len(data), [None, pa.py_buffer(data)])
    rows = np.arange(first_row, first_row + len(y), dtype=np.int64)
    labels = pa.nulls(len(y)) if pa.types.is_null(y_type) else pa.array(y, type=y_type)
    passthrough = [] if ids is None else [ids.column(name).combine_chunks() for name in schema.names[3:]]
    return pa.Table.from_arrays([x, labels, pa.array(rows), *passthrough], schema=schema)


def write_dataset(path, X, y, task, n_shards=1, row_group_rows=4096, overwrite=False, *, check_values=True, **info) -> DatasetInfo:
    """Write in-memory arrays as a data set of at most ``n_shards`` shards (convenience).

    Shards hold ``ceil(n / n_shards)`` rows each, the last fewer (the layout's shards are
    equal but for the last): 10 rows in 6 shards are 5 shards of 2 rows, 10 rows in 20
    shards 10 shards of 1 row. ``X``, ``y`` and ``info`` are checked as
    :class:`DatasetWriter` checks them (``check_values`` as there); errors are one line and
    leave nothing behind.
    """
    check_int("n_shards", n_shards, 1)
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n, d), got shape {X.shape}")
    rows_per_shard = max(1, -(-len(X) // n_shards))
    with DatasetWriter(path, X.shape[1], task, rows_per_shard=rows_per_shard, row_group_rows=row_group_rows, overwrite=overwrite,
                       check_values=check_values, **info) as writer:
        writer.write(X, y)
    return DatasetInfo.from_file(os.path.join(os.fspath(path), INFO_FILE))


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
    y_type = _y_type(schema)
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


@dataclasses.dataclass(frozen=True)
class ShardFile:
    """One Parquet file of a data set: path, index in the data set, rows, first global row.

    ``group_rows``: the rows of each of its row groups, as the footer read when the data
    set was opened tells (None: not read), so that listing the row groups at launch
    (:class:`transforms.read.DatasetSource`) does not parse every footer again.
    """

    path: str
    index: int
    n_rows: int
    first_row: int
    group_rows: tuple | None = None


class Dataset:
    """A readable data set: its :class:`DatasetInfo` and shard files, read in row order.

    ``listed``: the info is a directory's ``dataset.json`` (False: inferred from Parquet
    files without one).
    """

    def __init__(self, info: DatasetInfo, shards: list[ShardFile], listed: bool = False):
        self.info = info
        self.shards = shards
        self.listed = listed

    @property
    def recorded_classes(self) -> list | None:
        """The ``classes`` its ``dataset.json`` records (None: files without one, whose classes
        are the inferred codes, or none recorded)."""
        return self.info.classes if self.listed else None

    @property
    def n_features(self) -> int:
        return self.info.n_features

    @property
    def task(self) -> str:
        return self.info.task

    def iter_batches(self, shard: int | None = None, batch_rows: int | None = None) -> Iterator[Batch]:
        """Batches in row order (of one shard, or of all shards in order).

        ``batch_rows=None`` yields one batch per Parquet row group.

        Raises
        ------
        ValueError
            (at the call) ``shard`` is not an index ``0..len(shards)-1`` (a negative one
            once read the last shards silently) or ``batch_rows`` is not an integer >= 1.
        """
        if shard is not None:
            check_int("shard", shard, 0)
            if shard >= len(self.shards):
                raise ValueError(f"shard must be one of the data set's shards 0..{len(self.shards) - 1}, got {shard}")
        if batch_rows is not None:
            check_int("batch_rows", batch_rows, 1)
        return self._batches(self.shards if shard is None else [self.shards[shard]], batch_rows)

    def _batches(self, files: list[ShardFile], batch_rows: int | None) -> Iterator[Batch]:
        for sf in files:
            yield from read_shard(sf.path, self.info.n_features, batch_rows)

    def read_all(self) -> Batch:
        """All rows as one batch (small data sets only); ``y`` of the stored type even without rows."""
        batches = list(self.iter_batches())
        if not batches:
            d, y_type = self.info.n_features, np.float32 if self.task == "regression" else np.int32
            return Batch(np.zeros((0, d), np.float32), np.zeros(0, y_type), np.zeros(0, np.int64))
        return Batch(*(np.concatenate([getattr(b, k) for b in batches]) for k in ("X", "y", "row")))


def _batch_from_table(table: pa.Table, n_features: int, source: str) -> Batch:
    try:
        width = x_width(table.schema.field("x").type)
    except ValueError as err:
        raise ValueError(f"{source}: {err}") from None
    if width not in (None, n_features):
        raise ValueError(f"{source}: column x must hold {n_features} features per row, got {table.schema.field('x').type}")
    rows = table.column("row")
    if rows.null_count or not pa.types.is_integer(rows.type):  # astype would truncate 0.5 or turn null into -2**63
        raise ValueError(f"{source}: {_row_column_problem(rows)}")
    row = rows.to_numpy().astype(np.int64, copy=False)
    problem = x_shape_problem(table.column("x"), n_features)
    if problem is not None:  # a pipeline dead-letters such rows; reading into memory cannot
        raise ValueError(f"{source}, row {row[problem[0]]}: {problem[1]}")
    return Batch(x_matrix(table.column("x"), n_features), table.column("y").to_numpy(), row)


def _row_column_problem(rows: pa.ChunkedArray) -> str:
    """Why a ``row`` column that is not integer or holds nulls cannot number rows."""
    if not pa.types.is_integer(rows.type):
        return f"column row is {rows.type}, not integer row numbers"
    return row_range_problem(None, rows.null_count) or ""


def _parquet_file(path, metadata: pq.FileMetaData | None = None) -> pq.ParquetFile:
    """Open a Parquet file (its footer, unless ``metadata`` is the footer already read); errors name the file, on one line."""
    try:
        return pq.ParquetFile(path, metadata=metadata, page_checksum_verification=True)
    except (OSError, pa.ArrowException) as err:
        raise ValueError(f"{path}: not a readable Parquet file ({one_line(err)})") from None


def one_line(err: BaseException) -> str:
    """An exception's message on one line (Arrow's can span several)."""
    return " ".join(str(err).split())


def _has_labels(schema: pa.Schema) -> bool:
    """Whether a file's ``y`` holds labels: files to be scored may leave it out or write it as the null type."""
    return "y" in schema.names and not pa.types.is_null(schema.field("y").type)


def _read_columns(schema: pa.Schema) -> list[str]:
    """The columns to read of a file with ``schema``: ``x``, ``y`` (when it holds labels), ``row``."""
    return ["x", "y", "row"] if _has_labels(schema) else ["x", "row"]


def _with_labels(table: pa.Table) -> pa.Table:
    """``table`` as read with :func:`_read_columns`: a missing ``y`` added as null float64 (rows without a label)."""
    if "y" in table.column_names:
        return table
    return table.add_column(1, "y", pa.nulls(table.num_rows, pa.float64()))


def read_row_group(pf: pq.ParquetFile, group: int, use_threads: bool = True) -> pa.Table:
    """Columns ``x``, ``y``, ``row`` of one row group.

    A ``y`` that is absent or of the null type (files to be scored need no labels) reads
    as null float64: rows without a label.
    """
    return _with_labels(pf.read_row_group(group, columns=_read_columns(pf.schema_arrow), use_threads=use_threads))


def read_shard(path: str, n_features: int, batch_rows: int | None = None) -> Iterator[Batch]:
    """Yield the rows of one shard file in order, by row group or by ``batch_rows``.

    Either way a ``y`` that is absent or of the null type reads as NaN (:func:`read_row_group`).
    """
    pf = _parquet_file(path)
    if batch_rows is None:
        for g in range(pf.num_row_groups):
            yield _batch_from_table(read_row_group(pf, g), n_features, path)
        return
    for record_batch in pf.iter_batches(batch_size=int(batch_rows), columns=_read_columns(pf.schema_arrow)):
        yield _batch_from_table(_with_labels(pa.Table.from_batches([record_batch])), n_features, path)


def open_dataset(path: str, task: str | None = None, classes: list | None = None, labels_optional: bool = False,
                 files_own_rows: bool = True, skip: Collection[str] = ()) -> Dataset:
    """Open a data set directory, a Parquet file, or a glob of Parquet files.

    A directory's task and classes are those of its ``dataset.json``. Files without one
    take them from the labels of every file (:func:`infer_task`; only ``y`` is read), or
    from ``task`` and ``classes`` when given: with ``labels_optional`` (scoring, where the
    model decides the task) always; otherwise (a test set read like its training set)
    when every label fits them. With ``labels_optional`` the files' ``y`` (a directory's
    too) may be absent or of the null type. Files are ordered by
    their ``row`` numbers, whose ranges must not overlap (a copied file would be trained
    twice) unless ``files_own_rows`` is False: a streaming job learns each file as it
    arrives, and independent producers number their files' rows from 0 each. Files of a
    glob whose absolute paths are in ``skip`` are left out (a streaming restart: the files
    an earlier job dead-lettered), unless every file is: those files are then all the data
    there is (a file with a few bad rows that the job stopped before learning whole), opened
    and checked as any other. Each file's footer is parsed once, and its ``y`` read at most once.

    Raises
    ------
    FileNotFoundError, ValueError
        One line naming the file (and the column, key or value).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        return _open_directory(path, labels_optional)
    # a literal name first: a file may be called "a[1].parquet"
    files = [path] if os.path.exists(path) else sorted(globlib.glob(path)) if any(c in path for c in "*?[") else []
    files = [f for f in files if os.path.abspath(f) not in skip] or files
    if not files:
        raise FileNotFoundError(f"no data set at {path!r} (expected a data set directory or Parquet files)")
    return _dataset_from_files(files, path, task, classes, labels_optional, files_own_rows)


def files_name(path: str) -> str:
    """The name of the data set of Parquet files without ``dataset.json`` at ``path`` (:func:`open_dataset`).

    A file's name without ``.parquet``; a glob's folder: the last folder of the path before
    the first part with a wildcard (``data/own/*.parquet`` and ``data/own/*/x.parquet``:
    ``own``; ``*.parquet``: the current folder's name). Not the glob itself: the name goes
    into ``runs/<name>-<learner>`` and run records, where ``*.parquet`` would be a folder
    name holding a wildcard. "" when there is no such folder (a glob at ``/``).
    """
    path = os.fspath(path)
    if os.path.exists(path) or not any(c in path for c in "*?["):  # a literal name first, as open_dataset
        name = os.path.basename(os.path.normpath(path))
        return name[: -len(".parquet")] if name.endswith(".parquet") and len(name) > len(".parquet") else name
    parts = os.path.abspath(path).split(os.sep)
    first_wild = next(i for i, part in enumerate(parts) if any(c in part for c in "*?["))
    return parts[first_wild - 1]


def row_group_sizes(metadata: pq.FileMetaData) -> tuple:
    """Rows of each row group of a file, from its footer."""
    return tuple(metadata.row_group(g).num_rows for g in range(metadata.num_row_groups))


def _open_directory(path: str, labels_optional: bool = False) -> Dataset:
    """A data set directory, its files checked against ``dataset.json`` (:func:`check_shard`)."""
    info_path = os.path.join(path, INFO_FILE)
    if not os.path.exists(info_path):
        raise FileNotFoundError(f"{path}: not an okl data set (no {INFO_FILE}); run `python -m pipelines.prepare` first")
    info = DatasetInfo.from_file(info_path)
    check_listing(info, info_path)
    shards = []
    for i, listed in enumerate(info.shards):
        file, n_rows, first_row = os.path.join(path, listed["file"]), listed["n_rows"], listed["first_row"]
        if not os.path.exists(file):
            raise FileNotFoundError(f"{file}: listed in {info_path} with {n_rows} rows, but the file is missing")
        pf = _parquet_file(file)
        check_shard(file, pf.metadata, pf.schema_arrow, info, n_rows, first_row, labels_optional)
        shards.append(ShardFile(file, i, n_rows, first_row, row_group_sizes(pf.metadata)))
    return Dataset(info, shards, listed=True)


@dataclasses.dataclass(frozen=True)
class _File:
    """A Parquet file of a glob: its rows' number range (None: no rows) and its footer.

    The footer is kept (not the open file: a glob of thousands of files would hold as many
    open files) so that the file's labels and widths are read without parsing it again.
    """

    rows: tuple[int, int] | None
    path: str
    metadata: pq.FileMetaData = dataclasses.field(compare=False)
    schema: pa.Schema = dataclasses.field(compare=False)

    @property
    def first_row(self) -> int:
        return self.rows[0] if self.rows else 0

    @property
    def n_rows(self) -> int:
        return self.metadata.num_rows


def _dataset_from_files(files: list[str], source: str, task: str | None, classes: list | None, labels_optional: bool,
                        files_own_rows: bool = True) -> Dataset:
    """Files without ``dataset.json``: checked, ordered by row number, task and classes inferred or given."""
    metas = sorted((_glob_file(f, labels_optional) for f in files), key=lambda m: (m.first_row, m.path))
    if files_own_rows:
        _check_disjoint(metas)
    d = _files_width(metas)
    paths = [m.path for m in metas]
    labels = _LabelReader({m.path: m.metadata for m in metas})  # labels_fit and infer_task share each file's one read
    if task is None or not (labels_optional or labels_fit(paths, task, classes, labels)):
        task, classes = infer_task(paths, [_y_type(m.schema) for m in metas], labels)
    shards = [ShardFile(m.path, i, m.n_rows, m.first_row, row_group_sizes(m.metadata)) for i, m in enumerate(metas)]
    info = DatasetInfo(
        name=files_name(source), task=task, n_rows=sum(s.n_rows for s in shards), n_features=d,
        classes=None if classes is None else list(classes), source=source,
        shards=[{"file": s.path, "n_rows": s.n_rows, "first_row": s.first_row} for s in shards],
    )
    return Dataset(info, shards)


def _glob_file(path: str, labels_optional: bool) -> _File:
    """One file of a glob, its schema checked and its row range read from the footer (or the ``row`` column)."""
    pf = _parquet_file(path)
    schema = pf.schema_arrow
    problem = schema_problem(schema, None, None, labels_optional)
    if problem:
        raise ValueError(f"{path}: not in the okl layout: {problem}")
    rows, nulls = row_range(pf.metadata), row_nulls(pf.metadata)
    if rows is None and pf.metadata.num_rows:  # a writer without statistics: read the row numbers
        column = pf.read(columns=["row"]).column(0)
        values, nulls = column.drop_null(), column.null_count
        rows = None if len(values) == 0 else (pc.min(values).as_py(), pc.max(values).as_py())
    problem = row_range_problem(rows, nulls)
    if problem:
        raise ValueError(f"{path}: {problem}")
    return _File(rows, path, pf.metadata, schema)


def _check_disjoint(metas: list[_File]) -> None:
    """Refuse files whose row ranges overlap (``metas`` in row order).

    Files are read one after another, so each must hold rows of its own: two files with
    the same rows (a file copied under another name) would be trained twice, and files
    whose rows interleave would not be read in row order.
    """
    ranged = [(m.path, m.rows) for m in metas if m.rows is not None]
    for (before, (low, high)), (path, (first, last)) in zip(ranged, ranged[1:]):
        if first <= high:
            raise ValueError(f"{path}: rows {first}..{last} overlap rows {low}..{high} of {before}; each file must hold a range of rows of its own")


MAX_GLOB_CLASSES = 10_000
"""The most classes inferred from the labels of Parquet files without ``dataset.json``
(labels ``0..9999``); more classes need a data set written by ``okl prepare``. A label
beyond it (``10**11``) is refused rather than allocating a class list of its size."""


def _y_type(schema: pa.Schema) -> pa.DataType:
    """The type of a file's ``y``; the null type when there is none (files to be scored need no labels)."""
    return schema.field("y").type if "y" in schema.names else pa.null()


def _file_labels(pf: pq.ParquetFile, path: str) -> Iterator[np.ndarray]:
    """The non-null values of a file's ``y``, one row group at a time (only ``y`` is read; nothing when it holds no labels)."""
    if not _has_labels(pf.schema_arrow):
        return
    for g in range(pf.num_row_groups):
        try:
            labels = pf.read_row_group(g, columns=["y"]).column(0).drop_null().to_numpy()
        except (OSError, pa.ArrowException) as err:  # a damaged page (checksums verified): one line naming the file
            raise ValueError(f"{path}: column y of row group {g} cannot be read to tell the task ({one_line(err)})") from None
        yield labels


class _LabelReader:
    """The labels of files for :func:`labels_fit` and :func:`infer_task`, each file's ``y`` read once.

    A test set whose labels do not fit its training set's classes is read by both; integer
    labels are therefore kept, as the distinct values of each row group (all either needs,
    a few per group), for as long as the reader lives: one :func:`open_dataset` call, no
    cache outlives it (a file rewritten in between is read afresh). Float targets are not kept:
    :func:`infer_task` never reads them (a float ``y`` is regression), so only
    :func:`labels_fit` does, once. ``footers``: the footers already read, by path.
    """

    def __init__(self, footers: dict[str, pq.FileMetaData] | None = None):
        self._footers = footers or {}
        self._kept: dict[str, list[np.ndarray]] = {}

    def __call__(self, path: str) -> Iterable[np.ndarray]:
        if path in self._kept:
            return self._kept[path]
        pf = _parquet_file(path, self._footers.get(path))
        if pa.types.is_floating(_y_type(pf.schema_arrow)):
            return _file_labels(pf, path)
        self._kept[path] = [np.unique(values) for values in _file_labels(pf, path)]
        return self._kept[path]


def labels_fit(files: list[str], task: str, classes: list | None, labels: Callable[[str], Iterable[np.ndarray]] | None = None) -> bool:
    """Whether every non-null label of ``files`` is one a learner of ``task`` with ``classes`` takes.

    ``labels(path)`` gives a file's labels (default: read from the file).
    """
    n_classes = len(classes) if task == "multiclass" and classes else None
    if task == "multiclass" and n_classes is None:
        return False
    labels = labels or _LabelReader()
    return not any(bad_labels(values.astype(np.float64), task, n_classes).any() for f in files for values in labels(f))


def infer_task(files: list[str], y_types: list[pa.DataType], labels: Callable[[str], Iterable[np.ndarray]] | None = None) -> tuple[str, list | None]:
    """Task and classes of files without ``dataset.json``, from the labels of every file.

    Floating-point ``y``: regression. Integer labels: binary when every label is -1 or +1,
    multiclass ``0..max`` (at least two classes) when every label is a class index below
    :data:`MAX_GLOB_CLASSES`. Null labels are left to the dead-letter path. A directory
    and a glob of the same files therefore get the same task and classes. ``labels(path)``
    gives a file's labels (default: read from the file; :func:`labels_fit`'s, when both run).

    Raises
    ------
    ValueError
        One line naming the file and the label: a float ``y`` beside integer ones, a
        label that is neither -1/+1 nor a class index, -1 beside class indices.
    """
    kinds = {pa.types.is_floating(t) for t in y_types if not pa.types.is_null(t)}
    if kinds == {True, False}:
        at = [pa.types.is_floating(t) for t in y_types]
        raise ValueError(f"{files[at.index(True)]}: column y is {y_types[at.index(True)]}, {files[at.index(False)]}'s is {y_types[at.index(False)]}: "
                         "targets (floats) and labels (integers) do not mix")
    if kinds == {True}:
        return "regression", None
    labels = labels or _LabelReader()
    seen: dict[int, str] = {}  # each distinct label and the first file holding it
    for f in files:
        for values in labels(f):
            for label in np.unique(values).tolist():
                if label not in seen:
                    seen[label] = f
                    _check_label(label, seen)
    if set(seen) <= {-1, 1}:
        return "binary", [-1, 1]
    return "multiclass", list(range(max(max(seen) + 1, 2)))


def _check_label(label: int, seen: dict[int, str]) -> None:
    """Refuse a label that makes neither binary nor multiclass data (``seen``: label -> file, ``label`` included)."""
    where = seen[label]
    if label < -1 or label >= MAX_GLOB_CLASSES:
        raise ValueError(f"{where}: label {label} is neither -1/+1 nor a class index 0..{MAX_GLOB_CLASSES - 1} "
                         f"(okl infers at most {MAX_GLOB_CLASSES:,} classes from files without {INFO_FILE})")
    other = next((v for v in seen if v not in (-1, 1)), None)
    if -1 in seen and other is not None:
        raise ValueError(f"{seen[-1]}: label -1 beside label {other} (in {seen[other]}): labels must all be -1/+1 (binary) "
                         "or all class indices 0..C-1 (multiclass)")


def _files_width(files: list[_File]) -> int:
    """Features per row of Parquet files without ``dataset.json``, the same in every file.

    A fixed width (binary or fixed-size list) is the type's; variable-length lists take
    the length of the first non-null ``x`` in row order (rows of another length are then
    bad rows: dead letters in a pipeline, an error naming the row in :meth:`Dataset.read_all`).
    """
    widths = [(f.path, x_width(f.schema.field("x").type)) for f in files]
    fixed = [(f, w) for f, w in widths if w is not None]
    if fixed:
        d = fixed[0][1]
        for f, w in fixed[1:]:
            if w != d:
                raise ValueError(f"{f}: column x holds {w} features per row, {fixed[0][0]} holds {d}")
        return d
    for file in files:
        try:
            for batch in _parquet_file(file.path, file.metadata).iter_batches(batch_size=4096, columns=["x"]):
                lengths = pc.list_value_length(batch.column(0)).drop_null()
                if len(lengths):
                    return int(lengths[0].as_py())
        except (OSError, pa.ArrowException) as err:  # a damaged page (checksums verified): one line naming the file
            raise ValueError(f"{file.path}: column x cannot be read to tell the number of features ({one_line(err)})") from None
    raise ValueError(f"{files[0].path}: column x is null or empty in every row; cannot tell the number of features")
