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
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from okl_core.labels import check_task
from okl_core.publish import StagedDirectory

__all__ = [
    "LAYOUT_VERSION",
    "DatasetInfo",
    "DatasetWriter",
    "StagedDataset",
    "write_shard_file",
    "Dataset",
    "ShardFile",
    "Batch",
    "write_dataset",
    "open_dataset",
    "shard_file_name",
    "schema_for",
    "x_width",
    "x_matrix",
    "x_shape_problem",
    "as_array",
    "schema_problem",
    "check_shard",
    "check_listing",
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


def schema_for(n_features: int, task: str) -> pa.Schema:
    """Arrow schema of a data set with ``n_features`` columns for ``task``.

    ``x`` is one fixed-size binary value per row (the features as little-endian float32)
    rather than a ``fixed_size_list<float32>``: Parquet stores a list with a repetition
    level per feature, and decoding those levels was the largest cost of reading
    (MNIST-shaped rows, LZ4: 2.1 us/row as a list, 0.7 us/row as binary; the bytes on
    disk are the same). Readers (:func:`x_matrix`) take both forms, so list columns of
    other writers and of layout-1 data sets read the same.
    """
    y_type = pa.float32() if task == "regression" else pa.int32()
    metadata = {"okl.encoding": X_ENCODING, "okl.n_features": str(int(n_features))}
    x_field = pa.field("x", pa.binary(4 * int(n_features)), nullable=False, metadata=metadata)
    return pa.schema([x_field, ("y", y_type), ("row", pa.int64())])


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
            with open(path) as f:
                raw = json.load(f)
        except (OSError, json.JSONDecodeError) as err:
            raise ValueError(f"{path}: cannot read data set description ({err})") from None
        if raw.get("layout_version") not in READABLE_LAYOUT_VERSIONS:
            raise ValueError(f"{path}: layout version {raw.get('layout_version')} is not supported (this okl reads {list(READABLE_LAYOUT_VERSIONS)})")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(raw) - fields
        if unknown:
            raise ValueError(f"{path}: unknown keys {sorted(unknown)}")
        info = cls(**raw)
        check_task(info.task, where=str(path))
        return info


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
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_rows = 0

    def write(self, X, y):
        self._pending.append((X, y))
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
        first = self.first_row + self.n_rows - self._pending_rows
        self._writer.write_table(_table(self.schema, X[:n_rows], y[:n_rows], first), row_group_size=n_rows)
        self._pending = [(X[n_rows:], y[n_rows:])] if len(y) > n_rows else []
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


def _check_xy(X, y, n_features, task):
    X = np.asarray(X, dtype=np.float32)
    y = np.asarray(y, dtype=np.float32 if task == "regression" else np.int32)
    if X.ndim != 2 or X.shape[1] != n_features or y.shape != (X.shape[0],):
        raise ValueError(f"expected X (n, {n_features}) and y (n,), got {X.shape} and {y.shape}")
    return X, y


MAX_FEATURES = (2**31 - 1) // 4
"""The most features a row can hold: ``x`` is one Parquet binary value of 4 bytes each."""
ROW_GROUP_BYTES = 128 << 20
"""Row groups hold at most this many bytes of ``x`` (fewer rows than ``row_group_rows`` for
rows wider than 8192 features): the writer buffers a row group in memory."""


def _check_shape_args(n_features, task, rows, row_group_rows):
    check_task(task)
    if int(n_features) < 1 or int(rows) < 1 or int(row_group_rows) < 1:
        raise ValueError("n_features, rows_per_shard and row_group_rows must be >= 1")
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
            writer.write(*_check_xy(X, y, int(n_features), task))
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
    **info
        Fields of :class:`DatasetInfo` other than n_rows, n_features, task and shards
        (more can be set before closing with :meth:`set_info`).
    """

    def __init__(self, path, n_features, task, rows_per_shard=65536, row_group_rows=4096, overwrite=False, compression=DEFAULT_COMPRESSION, **info):
        _check_shape_args(n_features, task, rows_per_shard, row_group_rows)
        self.compression = _check_compression(compression)
        self.n_features, self.task = int(n_features), task
        self.rows_per_shard, self.row_group_rows = int(rows_per_shard), _row_group_rows(row_group_rows, self.n_features)
        self.schema = schema_for(self.n_features, task)
        self._staged = StagedDataset(path, overwrite)
        self.path = self._staged.path
        self.info_fields = {"name": os.path.basename(self.path)}
        self.set_info(**info)
        self._shards: list[dict] = []
        self._shard: _ShardWriter | None = None
        self._n_rows = 0
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
        """Set :class:`DatasetInfo` fields recorded when the writer closes."""
        reserved = {"task", "n_rows", "n_features", "shards", "layout_version"}
        known = {f.name for f in dataclasses.fields(DatasetInfo)} - reserved
        unknown = set(fields) - known
        if unknown:
            raise ValueError(f"unknown data set info fields {sorted(unknown)} (allowed: {sorted(known)})")
        self.info_fields.update(fields)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False

    def write(self, X, y) -> None:
        """Append rows (``X`` ``(n, d)``, ``y`` ``(n,)``) at the end of the stream."""
        X, y = _check_xy(X, y, self.n_features, self.task)
        start = 0
        while start < len(y):
            if self._shard is None:
                name = f"part-{len(self._shards):05d}.parquet"
                self._shards.append({"file": name, "n_rows": 0, "first_row": self._n_rows})
                self._shard = _ShardWriter(os.path.join(self.staging_dir, name), self.schema, self.row_group_rows, self._n_rows, self.compression)
            take = min(self.rows_per_shard - self._shard.n_rows, len(y) - start)
            self._shard.write(X[start : start + take], y[start : start + take])
            self._n_rows += take
            self._shards[-1]["n_rows"] += take
            start += take
            if self._shard.n_rows == self.rows_per_shard:
                self._shard.close()
                self._shard = None

    def close(self) -> DatasetInfo:
        """Finish the last shard, write ``dataset.json`` and move the directory into place."""
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
        return self.info

    def abort(self) -> None:
        """Drop everything written so far."""
        if self._shard is not None:
            self._shard.abort()
            self._shard = None
        self._staged.abort()


def _table(schema, X, y, first_row) -> pa.Table:
    x_type = schema.field("x").type
    data = np.ascontiguousarray(X, dtype="<f4")
    x = pa.FixedSizeBinaryArray.from_buffers(x_type, len(data), [None, pa.py_buffer(data)])
    rows = np.arange(first_row, first_row + len(y), dtype=np.int64)
    return pa.Table.from_arrays([x, pa.array(y, type=schema.field("y").type), pa.array(rows)], schema=schema)


def write_dataset(path, X, y, task, n_shards=1, row_group_rows=4096, overwrite=False, **info) -> DatasetInfo:
    """Write in-memory arrays as a data set of ``n_shards`` equal shards (convenience)."""
    X = np.asarray(X)
    rows_per_shard = max(1, -(-len(X) // int(n_shards)))
    with DatasetWriter(path, X.shape[1], task, rows_per_shard=rows_per_shard, row_group_rows=row_group_rows, overwrite=overwrite, **info) as writer:
        writer.write(X, y)
    return DatasetInfo.from_file(os.path.join(os.fspath(path), INFO_FILE))


def schema_problem(schema: pa.Schema, n_features: int | None, task: str | None) -> str | None:
    """What makes ``schema`` unreadable as okl rows of ``n_features`` features for ``task`` (None: nothing).

    Checked at launch, from the Parquet footer alone: the columns exist; ``x`` is float32
    bytes whose width is a whole number of features (4 bytes each), or a list of numbers
    (a fixed-size list must have ``n_features`` items; a variable-length list is checked
    row by row, :mod:`okl_core.data.validate`); ``y`` and ``row`` are numbers.
    """
    missing = [c for c in ("x", "y", "row") if c not in schema.names]
    if missing:
        return f"no column {', '.join(missing)} (an okl data set has columns x, y and row)"
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
    y_type = schema.field("y").type
    if not _is_number_type(y_type):
        needs = "numeric targets" if task == "regression" else "integer labels"
        return f"column y is {y_type}; {'a ' + task if task else 'an okl'} data set needs {needs}"
    row_type = schema.field("row").type
    if not _is_number_type(row_type):
        return f"column row is {row_type}, not row numbers"
    return None


def check_shard(path: str, metadata: pq.FileMetaData, schema: pa.Schema, info: DatasetInfo, recorded_rows: int | None) -> None:
    """Check one Parquet file of a data set at launch: its schema, and its rows against ``dataset.json``.

    Raises
    ------
    ValueError
        One line naming ``path`` and what is wrong (both row counts when they differ).
    """
    problem = schema_problem(schema, info.n_features, info.task)
    if problem is None and recorded_rows is not None and metadata.num_rows != recorded_rows:
        problem = f"{INFO_FILE} records {recorded_rows} rows, the file holds {metadata.num_rows}"
    if problem:
        raise ValueError(f"{path}: {problem}")


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
    """One Parquet file of a data set: path, index in the data set, rows, first global row."""

    path: str
    index: int
    n_rows: int
    first_row: int


class Dataset:
    """A readable data set: its :class:`DatasetInfo` and shard files, read in row order."""

    def __init__(self, info: DatasetInfo, shards: list[ShardFile]):
        self.info = info
        self.shards = shards

    @property
    def n_features(self) -> int:
        return self.info.n_features

    @property
    def task(self) -> str:
        return self.info.task

    def iter_batches(self, shard: int | None = None, batch_rows: int | None = None) -> Iterator[Batch]:
        """Batches in row order (of one shard, or of all shards in order).

        ``batch_rows=None`` yields one batch per Parquet row group.
        """
        files = self.shards if shard is None else [self.shards[shard]]
        for sf in files:
            yield from read_shard(sf.path, self.info.n_features, batch_rows)

    def read_all(self) -> Batch:
        """All rows as one batch (small data sets only)."""
        batches = list(self.iter_batches())
        if not batches:
            d = self.info.n_features
            return Batch(np.zeros((0, d), np.float32), np.zeros(0), np.zeros(0, np.int64))
        return Batch(*(np.concatenate([getattr(b, k) for b in batches]) for k in ("X", "y", "row")))


def _batch_from_table(table: pa.Table, n_features: int, source: str) -> Batch:
    try:
        width = x_width(table.schema.field("x").type)
    except ValueError as err:
        raise ValueError(f"{source}: {err}") from None
    if width not in (None, n_features):
        raise ValueError(f"{source}: column x must hold {n_features} features per row, got {table.schema.field('x').type}")
    row = table.column("row").to_numpy().astype(np.int64, copy=False)
    problem = x_shape_problem(table.column("x"), n_features)
    if problem is not None:  # a pipeline dead-letters such rows; reading into memory cannot
        raise ValueError(f"{source}, row {row[problem[0]]}: {problem[1]}")
    return Batch(x_matrix(table.column("x"), n_features), table.column("y").to_numpy(), row)


def _parquet_file(path) -> pq.ParquetFile:
    """Open a Parquet file (its footer); errors name the file, on one line."""
    try:
        return pq.ParquetFile(path, page_checksum_verification=True)
    except (OSError, pa.ArrowException) as err:
        raise ValueError(f"{path}: not a readable Parquet file ({one_line(err)})") from None


def one_line(err: BaseException) -> str:
    """An exception's message on one line (Arrow's can span several)."""
    return " ".join(str(err).split())


def read_shard(path: str, n_features: int, batch_rows: int | None = None) -> Iterator[Batch]:
    """Yield the rows of one shard file in order, by row group or by ``batch_rows``."""
    pf = _parquet_file(path)
    if batch_rows is None:
        for g in range(pf.num_row_groups):
            yield _batch_from_table(pf.read_row_group(g, columns=["x", "y", "row"]), n_features, path)
        return
    for record_batch in pf.iter_batches(batch_size=int(batch_rows), columns=["x", "y", "row"]):
        yield _batch_from_table(pa.Table.from_batches([record_batch]), n_features, path)


def open_dataset(path: str) -> Dataset:
    """Open a data set directory, a Parquet file, or a glob of Parquet files.

    For files without ``dataset.json`` the task is inferred from the ``y`` type (float:
    regression; integers: binary when the first file's labels are only -1/+1, else
    multiclass) and shards are ordered by their first ``row``.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        info_path = os.path.join(path, INFO_FILE)
        if not os.path.exists(info_path):
            raise FileNotFoundError(f"{path}: not an okl data set (no {INFO_FILE}); run `python -m pipelines.prepare` first")
        info = DatasetInfo.from_file(info_path)
        check_listing(info, info_path)
        shards = [ShardFile(os.path.join(path, s["file"]), i, s["n_rows"], s["first_row"]) for i, s in enumerate(info.shards)]
        for sf in shards:
            if not os.path.exists(sf.path):
                raise FileNotFoundError(f"{sf.path}: listed in {info_path} with {sf.n_rows} rows, but the file is missing")
            pf = _parquet_file(sf.path)
            check_shard(sf.path, pf.metadata, pf.schema_arrow, info, sf.n_rows)
        return Dataset(info, shards)
    files = sorted(globlib.glob(path)) if any(c in path for c in "*?[") else ([path] if os.path.exists(path) else [])
    if not files:
        raise FileNotFoundError(f"no data set at {path!r} (expected a data set directory or Parquet files)")
    return _dataset_from_files(files, source=path)


def _dataset_from_files(files: list[str], source: str) -> Dataset:
    metas: list[tuple[int, str, int, pa.Schema]] = []
    for f in files:
        pf = _parquet_file(f)
        schema = pf.schema_arrow
        problem = schema_problem(schema, None, None)
        if problem:
            raise ValueError(f"{f}: not in the okl layout: {problem}")
        first = pq.read_table(f, columns=["row"]).column("row")
        metas.append((int(first[0].as_py()) if len(first) else 0, f, pf.metadata.num_rows, schema))
    metas.sort()
    d = _files_width([(f, schema) for _, f, _, schema in metas])
    y_type = metas[0][3].field("y").type
    if pa.types.is_floating(y_type):
        task, classes = "regression", None
    else:
        labels = np.unique(pq.read_table(metas[0][1], columns=["y"]).column("y").to_numpy())
        task = "binary" if set(labels.tolist()) <= {-1, 1} else "multiclass"
        classes = [-1, 1] if task == "binary" else list(range(int(labels.max()) + 1))
    shards = [ShardFile(f, i, n, first) for i, (first, f, n, _) in enumerate(metas)]
    info = DatasetInfo(
        name=os.path.basename(source.rstrip("/")), task=task, n_rows=sum(s.n_rows for s in shards), n_features=d,
        classes=classes, source=source,
        shards=[{"file": s.path, "n_rows": s.n_rows, "first_row": s.first_row} for s in shards],
    )
    return Dataset(info, shards)


def _files_width(files: list[tuple[str, pa.Schema]]) -> int:
    """Features per row of Parquet files without ``dataset.json``, the same in every file.

    A fixed width (binary or fixed-size list) is the type's; variable-length lists take
    the length of the first non-null ``x`` in row order (rows of another length are then
    bad rows: dead letters in a pipeline, an error naming the row in :meth:`Dataset.read_all`).
    """
    widths = [(f, x_width(schema.field("x").type)) for f, schema in files]
    fixed = [(f, w) for f, w in widths if w is not None]
    if fixed:
        d = fixed[0][1]
        for f, w in fixed[1:]:
            if w != d:
                raise ValueError(f"{f}: column x holds {w} features per row, {fixed[0][0]} holds {d}")
        return d
    for f, _ in widths:
        for batch in _parquet_file(f).iter_batches(batch_size=4096, columns=["x"]):
            lengths = pc.list_value_length(batch.column(0)).drop_null()
            if len(lengths):
                return int(lengths[0].as_py())
    raise ValueError(f"{files[0][0]}: column x is null or empty in every row; cannot tell the number of features")
