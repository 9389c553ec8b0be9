"""Reading okl data sets: a data set directory, a Parquet file or a glob of them.

:func:`open_dataset` opens a directory (its files checked against ``dataset.json``) or
Parquet files of the layout (:mod:`okl_core.data.schema`) without one, whose task, classes
and width :mod:`okl_core.data.inference` tells; :class:`Dataset` reads the rows in order.
"""

from __future__ import annotations

import dataclasses
import glob as globlib
import os
from typing import Collection, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from okl_core.data.inference import describe_files
from okl_core.data.schema import (
    INFO_FILE,
    Batch,
    DatasetInfo,
    check_listing,
    check_shard,
    has_labels,
    parquet_file,
    row_range_problem,
    x_matrix,
    x_shape_problem,
    x_width,
)
from okl_core.validation import check_int

__all__ = [
    "ShardFile",
    "files_name",
    "read_shard",
    "Dataset",
    "read_row_group",
    "open_dataset",
    "row_group_sizes",
]

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


def _read_columns(schema: pa.Schema) -> list[str]:
    """The columns to read of a file with ``schema``: ``x``, ``y`` (when it holds labels), ``row``."""
    return ["x", "y", "row"] if has_labels(schema) else ["x", "row"]


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
    pf = parquet_file(path)
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
        pf = parquet_file(file)
        check_shard(file, pf.metadata, pf.schema_arrow, info, n_rows, first_row, labels_optional)
        shards.append(ShardFile(file, i, n_rows, first_row, row_group_sizes(pf.metadata)))
    return Dataset(info, shards, listed=True)


def _dataset_from_files(files: list[str], source: str, task: str | None, classes: list | None, labels_optional: bool,
                        files_own_rows: bool = True) -> Dataset:
    """Files without ``dataset.json``: checked, ordered by row number, task and classes inferred or given (:func:`describe_files`)."""
    metas, d, task, classes = describe_files(files, task, classes, labels_optional, files_own_rows)
    shards = [ShardFile(m.path, i, m.n_rows, m.first_row, row_group_sizes(m.metadata)) for i, m in enumerate(metas)]
    info = DatasetInfo(
        name=files_name(source), task=task, n_rows=sum(s.n_rows for s in shards), n_features=d,
        classes=None if classes is None else list(classes), source=source,
        shards=[{"file": s.path, "n_rows": s.n_rows, "first_row": s.first_row} for s in shards],
    )
    return Dataset(info, shards)
