"""Prepare raw records exactly as a model's training data set was prepared.

``okl train`` on a data set prepared by ``okl prepare csv`` or ``okl prepare parquet``
writes, next to the model, ``preparation.json``: the training set's ``dataset.json``
without its shard list (:func:`preparation_record`). It holds everything ``prepare --like``
applies to a test set: the feature columns, the categories, the missing-value markers,
policy and means, the scalings, the task and classes, the target and the id columns.

``okl predict --input new.csv`` (or a raw Parquet table) then prepares the records with
that very machinery (:func:`prepare_like`: :func:`okl_core.data.csv_table.convert_csv`,
:func:`okl_core.data.table.convert_parquet` with ``like``), so the rows the model scores
are the bytes ``okl prepare csv new.csv --like TRAIN`` would have written: the same one-line
errors, the same ``rejects.csv``. Records without the target column are prepared without
labels (pure scoring).
"""

from __future__ import annotations

import dataclasses
import os

import pyarrow as pa
import pyarrow.parquet as pq

from okl_core.data.csv_table import convert_csv, csv_header
from okl_core.data.layout import INFO_FILE, DatasetInfo
from okl_core.data.sources import ConversionSummary
from okl_core.data.table import _footer, _parquet_files, convert_parquet

__all__ = ["PREPARATION_FILE", "CSV_SUFFIXES", "preparation_record", "read_preparation", "raw_table_kind", "table_columns", "prepare_like"]

PREPARATION_FILE = "preparation.json"
"""The preparation record's name, next to the model file (a run folder, a streaming output)."""

CSV_SUFFIXES = (".csv", ".tsv", ".txt")
"""Names of raw CSV records (also compressed: ``.gz``, ``.bz2``, ``.xz``)."""


def preparation_record(info: DatasetInfo) -> bytes | None:
    """The preparation of the training data set ``info`` as ``preparation.json`` bytes.

    None for a data set raw records cannot be prepared like: one that records no table
    columns (IDX, LIBSVM, generated, molecular sets) or a PCA projection of one.
    """
    extra = info.extra or {}
    if not extra.get("columns") or isinstance(extra.get("pca"), dict):
        return None
    return (dataclasses.replace(info, shards=[]).to_json() + "\n").encode()


def read_preparation(path: str) -> DatasetInfo:
    """Read a ``preparation.json`` (:meth:`DatasetInfo.from_file`: errors name the file)."""
    return DatasetInfo.from_file(path)


def _compression_free(path: str) -> str:
    base = os.path.basename(path).lower()
    for suffix in (".gz", ".bz2", ".xz"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def raw_table_kind(path: str) -> str | None:
    """``'csv'`` or ``'parquet'`` when ``path`` holds raw records (one column per feature); None for okl rows.

    CSV: a file named ``*.csv``, ``*.tsv`` or ``*.txt`` (plain or compressed). Parquet: a file,
    folder or glob of Parquet files without ``dataset.json`` whose first file has no ``x``
    column (okl's rows have ``x``, ``y`` and ``row``). Anything else is left to the okl
    data set reader (and its errors).
    """
    path = os.fspath(path)
    if "://" in path:
        return None
    if os.path.isdir(path) and os.path.exists(os.path.join(path, INFO_FILE)):
        return None
    if _compression_free(path).endswith(CSV_SUFFIXES) and not os.path.isdir(path):
        return "csv"
    try:
        first = _parquet_files(path)[0]
        names = pq.read_schema(first).names
    except (OSError, ValueError, pa.ArrowException):
        return None  # not Parquet we can read: the data set reader says what is wrong
    return None if "x" in names else "parquet"


def table_columns(path: str, kind: str, delimiter: str = ",") -> list:
    """The column names of a raw table: a CSV file's header, the first Parquet file's schema."""
    if kind == "parquet":
        return list(_footer(_parquet_files(path)[0])[0].names)
    return csv_header(path, delimiter)


def prepare_like(path: str, out: str, info: DatasetInfo, kind: str, *, delimiter: str = ",", skip_bad_rows: bool = False,
                 progress=None, overwrite: bool = False) -> ConversionSummary:
    """Prepare the raw records at ``path`` into a data set at ``out`` exactly as ``info``'s data set was prepared.

    ``kind``: ``'csv'`` or ``'parquet'`` (:func:`raw_table_kind`). The feature columns,
    categories, missing-value markers, policy and means, scalings, classes and id columns
    are ``info``'s (``prepare --like``); records without ``info``'s target column are
    prepared without labels. Rows dropped (a missing value under the ``drop`` policy;
    bad rows with ``skip_bad_rows``) are listed in ``out/rejects.csv`` with their ids.

    Raises
    ------
    ValueError
        One line naming the file (and the line or row, and the column): the conversion's errors.
    """
    extra = info.extra or {}
    target = extra.get("target")
    present = table_columns(path, kind, delimiter)
    target = target if target in present else None
    options = {"target": target, "like": info, "skip_bad_rows": skip_bad_rows, "progress": progress, "overwrite": overwrite}
    if kind == "csv":
        return convert_csv(path, out, delimiter=delimiter, **options)
    return convert_parquet(path, out, **options)
