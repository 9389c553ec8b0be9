"""Writing okl data sets: streaming into a hidden directory renamed into place when complete.

:class:`DatasetWriter` writes streaming (bounded memory) into a temporary directory that
is renamed into place only when complete, so a reader never sees a half-written data set.
Parallel writers (the MNIST-8M generator's Beam workers) each write one shard with
:func:`write_shard_file` into a :class:`StagedDataset`, which the driver commits. The layout
written is :mod:`okl_core.data.schema`'s.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from okl_core.data.schema import (
    DEFAULT_COMPRESSION,
    INFO_FILE,
    DatasetInfo,
    check_compression,
    check_info_value,
    schema_for,
    shard_file_name,
)
from okl_core.labels import bad_labels, check_task, label_reason
from okl_core.publish import StagedDirectory
from okl_core.validation import check_int

__all__ = [
    "ROW_GROUP_BYTES",
    "write_shard_file",
    "MAX_LABEL_CLASSES",
    "MAX_FEATURES",
    "StagedDataset",
    "DatasetWriter",
    "write_dataset",
]

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
        self._writer = pq.ParquetWriter(path, schema, use_dictionary=["y"], compression=check_compression(compression), write_page_checksum=True)
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
    writer = _ShardWriter(tmp, schema_for(int(n_features), task), row_group_rows, first_row, check_compression(compression))
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
        self.compression = check_compression(compression)
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
            check_info_value(key, value)
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
