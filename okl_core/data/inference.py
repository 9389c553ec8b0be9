"""What Parquet files without ``dataset.json`` hold: their row order, width, task and classes.

A glob of files of the layout (:mod:`okl_core.data.schema`) is opened as a data set
(:func:`okl_core.data.reading.open_dataset`): :func:`describe_files` checks each file's
schema and row range, orders the files by row number, reads the number of features and
infers the task and classes from the labels (:func:`infer_task`), reading each file's ``y``
at most once.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from okl_core.data.schema import (
    INFO_FILE,
    has_labels,
    label_type,
    one_line,
    parquet_file,
    row_nulls,
    row_range,
    row_range_problem,
    schema_problem,
    x_width,
)
from okl_core.labels import bad_labels

__all__ = [
    "GlobFile",
    "labels_fit",
    "infer_task",
    "MAX_GLOB_CLASSES",
    "describe_files",
]

@dataclasses.dataclass(frozen=True)
class GlobFile:
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


def _glob_file(path: str, labels_optional: bool) -> GlobFile:
    """One file of a glob, its schema checked and its row range read from the footer (or the ``row`` column)."""
    pf = parquet_file(path)
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
    return GlobFile(rows, path, pf.metadata, schema)


def _check_disjoint(metas: list[GlobFile]) -> None:
    """Refuse files whose row ranges overlap (``metas`` in row order).

    Files are read one after another, so each must hold rows of its own: two files with
    the same rows (a file copied under another name) would be trained twice, and files
    whose rows interleave would not be read in row order.
    """
    ranged = [(m.path, m.rows) for m in metas if m.rows is not None]
    for (before, (low, high)), (path, (first, last)) in zip(ranged, ranged[1:]):
        if first <= high:
            raise ValueError(f"{path}: rows {first}..{last} overlap rows {low}..{high} of {before}; each file must hold a range of rows of its own")


def describe_files(files: list[str], task: str | None, classes: list | None, labels_optional: bool,
                   files_own_rows: bool = True) -> tuple[list[GlobFile], int, str, list | None]:
    """Parquet files without ``dataset.json``: ``(files in row order, features per row, task, classes)``.

    Each file's schema and row range are checked (:func:`_glob_file`), the ranges must not
    overlap unless ``files_own_rows`` is False, and the width must agree (:func:`_files_width`).
    ``task`` and ``classes`` are kept when ``labels_optional`` or when every label fits them
    (:func:`labels_fit`), else inferred from the labels (:func:`infer_task`); each file's ``y``
    is read at most once for both.
    """
    metas = sorted((_glob_file(f, labels_optional) for f in files), key=lambda m: (m.first_row, m.path))
    if files_own_rows:
        _check_disjoint(metas)
    d = _files_width(metas)
    paths = [m.path for m in metas]
    labels = _LabelReader({m.path: m.metadata for m in metas})  # labels_fit and infer_task share each file's one read
    if task is None or not (labels_optional or labels_fit(paths, task, classes, labels)):
        task, classes = infer_task(paths, [label_type(m.schema) for m in metas], labels)
    return metas, d, task, classes


MAX_GLOB_CLASSES = 10_000
"""The most classes inferred from the labels of Parquet files without ``dataset.json``
(labels ``0..9999``); more classes need a data set written by ``okl prepare``. A label
beyond it (``10**11``) is refused rather than allocating a class list of its size."""


def _file_labels(pf: pq.ParquetFile, path: str) -> Iterator[np.ndarray]:
    """The non-null values of a file's ``y``, one row group at a time (only ``y`` is read; nothing when it holds no labels)."""
    if not has_labels(pf.schema_arrow):
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
        pf = parquet_file(path, self._footers.get(path))
        if pa.types.is_floating(label_type(pf.schema_arrow)):
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


def _files_width(files: list[GlobFile]) -> int:
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
            for batch in parquet_file(file.path, file.metadata).iter_batches(batch_size=4096, columns=["x"]):
                lengths = pc.list_value_length(batch.column(0)).drop_null()
                if len(lengths):
                    return int(lengths[0].as_py())
        except (OSError, pa.ArrowException) as err:  # a damaged page (checksums verified): one line naming the file
            raise ValueError(f"{file.path}: column x cannot be read to tell the number of features ({one_line(err)})") from None
    raise ValueError(f"{files[0].path}: column x is null or empty in every row; cannot tell the number of features")
