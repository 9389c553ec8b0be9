"""CSV tables with a header row: validation, task inference, scaling, and conversion.

One column is the target (``target``); the features are the other columns, or the ones
named. Every feature must be a finite number; the target is a number (regression or
numeric class labels) or any non-empty string (class labels). A first pass collects the
distinct targets (task inference, :mod:`okl_core.data.targets`) and the column statistics
(:mod:`okl_core.data.scaling`); the second pass writes the data set, scaled, and records in
``dataset.json`` the feature columns, the classes and the scalings, so that a test set can
be converted ``like`` its training set (same columns, classes and statistics).

A bad row (wrong field count, a missing or non-numeric or non-finite value) is an error
naming the file, line and column, or with ``skip_bad_rows`` a line of ``rejects.csv``.
Files may be plain, gzip, bzip2 or xz.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import time
from typing import Iterator

import numpy as np

from okl_core.data.layout import DEFAULT_COMPRESSION, DatasetWriter, recorded_id_columns
from okl_core.data.scaling import ColumnStats, ScaledRows
from okl_core.data.sources import FLOAT32_LIMIT, ConversionSummary, DataFormatError, NullProgress, RejectLog, finite32, no_rows, not_utf8, open_text, parse_finite
from okl_core.data.table import select_columns
from okl_core.data.targets import LabelCollector, decide_labels_and_scaling

__all__ = ["CsvBatch", "iter_csv", "convert_csv", "csv_header", "parse_delimiter"]


@dataclasses.dataclass
class CsvBatch:
    """Valid consecutive rows: ``X`` float64 ``(n, d)``, raw ``targets`` (str), ``lines``."""

    X: np.ndarray
    targets: list
    lines: np.ndarray


@dataclasses.dataclass
class _Columns:
    header: list
    target: int
    features: list  # positions in the header

    @property
    def names(self) -> list:
        return [self.header[i] for i in self.features]


def _columns(path, header, target, features, drop) -> _Columns:
    """The target and feature positions, resolved as every table path does (:func:`okl_core.data.table.select_columns`)."""
    header = [h.strip() for h in header]
    names = select_columns(header, target, features, drop, where=path)  # refuses a missing or repeated target too
    return _Columns(header, header.index(target), [header.index(n) for n in names])


def _row_problem(fields: list, cols: _Columns) -> str | None:
    """Why a record is bad (None if it is fine)."""
    if len(fields) != len(cols.header):
        return f"expected {len(cols.header)} fields, found {len(fields)}"
    for i in cols.features:
        _, problem = parse_finite(fields[i].strip(), f"column {cols.header[i]!r}")
        if problem:
            return problem + (f" (a category? pass --categorical {cols.header[i]})" if problem.endswith("is not a number") else "")
    target = fields[cols.target].strip()
    if not target or _is_number(target):  # a non-numeric target is a class name
        _, problem = parse_finite(target, f"target {cols.header[cols.target]!r}")
        if problem:
            return problem
    return None


def parse_delimiter(text: str) -> str:
    """``--delimiter``: one character, or the two characters ``\\t`` for a tab (hard to type in a shell)."""
    if text == "\\t":
        return "\t"
    if len(text) != 1 or text in "\r\n\"":
        raise ValueError(f"--delimiter must be one character other than a quote or a line break (\\t for a tab), got {text!r}")
    return text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _header(reader, path: str) -> list:
    """The first record of ``reader`` (the header row), or a one-line error naming ``path``."""
    try:
        return next(reader)
    except StopIteration:
        raise DataFormatError(f"{path}: empty file (expected a header row)") from None
    except UnicodeDecodeError as err:
        raise not_utf8(path, err) from None
    except csv.Error as err:
        raise DataFormatError(f"{path}, line 1: unreadable header ({err})") from None


def csv_header(path, delimiter: str = ",") -> list:
    """The column names of a CSV file's header row (stripped), read alone."""
    with open_text(os.fspath(path)) as f:
        return [name.strip() for name in _header(csv.reader(f, delimiter=delimiter), os.fspath(path))]


def iter_csv(path, target, *, features=None, drop=None, delimiter=",", rejects=None, batch_rows=8192, position=None) -> Iterator[tuple[_Columns, CsvBatch, int]]:
    """Yield ``(columns, batch, n_bad)`` for consecutive batches of valid rows.

    ``rejects`` as in :func:`okl_core.data.libsvm.iter_libsvm`: None raises on the first
    bad row (file and line in the message), a :class:`RejectLog` records and skips.
    """
    path = os.fspath(path)
    position = position if position is not None else [0]
    with open_text(path) as f:
        reader = csv.reader(f, delimiter=delimiter)
        cols = _columns(path, _header(reader, path), target, features, drop)
        while True:
            records, lines = [], []
            try:
                for fields in reader:
                    if not fields or (len(fields) == 1 and not fields[0].strip()):
                        continue  # blank line
                    records.append(fields)
                    lines.append(reader.line_num)
                    if len(records) == batch_rows:
                        break
            except UnicodeDecodeError as err:
                raise not_utf8(path, err) from None
            except csv.Error as err:
                raise DataFormatError(f"{path}, line {reader.line_num + 1}: unreadable CSV ({err})") from None
            if not records:
                return
            position[0] = f.buffer.raw.compressed_position()
            yield (cols, *_parse_records(records, lines, cols, path, rejects))


def _parse_records(records, lines, cols, path, rejects) -> tuple[CsvBatch, int]:
    X = _fast_features(records, cols)
    if X is not None and all(r[cols.target].strip() for r in records) and _targets_finite(records, cols):
        return CsvBatch(X, [r[cols.target].strip() for r in records], np.asarray(lines, dtype=np.int64)), 0
    keep, n_bad = [], 0
    for j, fields in enumerate(records):
        problem = _row_problem(fields, cols)
        if problem is None:
            keep.append(j)
            continue
        if rejects is None:
            raise DataFormatError(f"{path}, line {lines[j]}: {problem}")
        n_bad += 1
        rejects.add(line=lines[j], reason=problem, text=",".join(fields))
    good = [records[j] for j in keep]
    X = np.array([[float(r[i]) for i in cols.features] for r in good], dtype=np.float64).reshape(len(good), len(cols.features))
    return CsvBatch(X, [r[cols.target].strip() for r in good], np.asarray([lines[j] for j in keep], dtype=np.int64)), n_bad


def _fast_features(records, cols) -> np.ndarray | None:
    width = len(cols.header)
    if any(len(r) != width for r in records):
        return None
    try:
        X = np.array([[r[i] for i in cols.features] for r in records], dtype=np.float64)
    except ValueError:
        return None
    return X if finite32(X).all() else None


def _targets_finite(records, cols) -> bool:
    return all(abs(float(r[cols.target])) < FLOAT32_LIMIT for r in records if _is_number(r[cols.target]))


def _numeric(targets: list) -> np.ndarray | None:
    try:
        return np.array(targets, dtype=np.float64)
    except ValueError:
        return None


@dataclasses.dataclass
class _CsvScan:
    columns: _Columns
    n_rows: int
    numeric: LabelCollector  # targets as numbers (valid only if every target parsed)
    strings: LabelCollector  # targets as strings
    all_numeric: bool
    feature_stats: ColumnStats
    target_stats: ColumnStats
    n_bad: int


def _scan(path, target, features, drop, delimiter, skip_bad_rows, progress, batch_rows) -> _CsvScan:
    numeric, strings = LabelCollector(), LabelCollector()
    fstats: ColumnStats | None = None
    tstats = ColumnStats(1)
    all_numeric, n_rows, n_bad, cols = True, 0, 0, None
    position = [0]
    counted = RejectLog(None, ("line", "reason")) if skip_bad_rows else None  # counts, keeps the first for errors
    progress.start(os.path.getsize(path), "B", "scan")
    for cols, batch, bad in iter_csv(path, target, features=features, drop=drop, delimiter=delimiter, rejects=counted, batch_rows=batch_rows, position=position):
        fstats = fstats or ColumnStats(len(cols.features))
        fstats.add(batch.X)
        n_rows, n_bad = n_rows + len(batch.targets), n_bad + bad
        strings.add(np.array(batch.targets, dtype=object).astype(str))
        values = _numeric(batch.targets) if all_numeric else None
        if values is None:
            all_numeric = False
        else:
            numeric.add(values)
            tstats.add(values[:, None])
        progress.update(position[0])
    progress.finish()
    if not n_rows:  # the header alone (its columns checked by iter_csv), or every row bad
        raise no_rows(path, n_bad, counted.first if counted else None)
    assert cols is not None and fstats is not None  # made with the first batch
    return _CsvScan(cols, n_rows, numeric, strings, all_numeric, fstats, tstats, n_bad)


def convert_csv(
    path, out, *, target, features=None, drop=None, task=None, classes=None, like=None, feature_scaling="none",
    target_scaling="none", delimiter=",", skip_bad_rows=False, rows_per_shard=65536, n_shards=None,
    row_group_rows=4096, overwrite=False, name=None, progress=None, batch_rows=8192, compression=DEFAULT_COMPRESSION,
    no_header=False, missing=None, missing_policy=None, categorical=None, id_columns=None,
) -> ConversionSummary:
    """Convert a CSV file into a data set at ``out`` (see the module docstring).

    Parameters
    ----------
    target : str
        Target column name.
    features, drop : list of str, optional
        Feature columns (default: all but the target), or columns to leave out.
    task, classes : optional
        Force the task; give the classes in order (binary: negative, positive).
    like : Dataset or DatasetInfo, optional
        Reuse a training set's feature columns (by name), task, classes and scalings.
    feature_scaling, target_scaling : str
        One of :data:`okl_core.data.scaling.SCALING_METHODS`.
    skip_bad_rows : bool
        Record bad rows in ``rejects.csv`` instead of stopping at the first.
    rows_per_shard, n_shards : int
        Shard size, or the number of equal shards.
    no_header, missing, missing_policy, categorical : optional
        Header-less file (columns ``0..k-1``), missing-value markers, ``drop`` or ``mean``,
        one-hot columns: :mod:`okl_core.data.table` converts such files (and ``features``
        or ``drop`` given as ranges or globs, and test sets ``like`` one of them).
    id_columns : list of str, optional
        Columns carried through into the data set as they are (text), never features, and
        written into ``rejects.csv`` beside a rejected row (None: ``like``'s, else none).
    target : str or None
        None: the file has no target column; its rows are prepared without labels, to be
        scored (only ``like`` a training set).
    """
    started = time.perf_counter()
    path = os.fspath(path)
    progress = progress or NullProgress()
    like_info = getattr(like, "info", like)
    if like_info is not None and id_columns is None:
        id_columns = recorded_id_columns(like_info)
    if id_columns or target is None or _needs_table_path(features, drop, no_header, missing, missing_policy, categorical, like_info):
        from okl_core.data.table import CsvColumns, convert_table

        if like_info is not None and features is None:
            features = (like_info.extra or {}).get("columns")
        table = CsvColumns(path, target, features=features, drop=drop, categorical=categorical, markers=missing, delimiter=delimiter, no_header=no_header,
                           batch_rows=batch_rows, ids=id_columns or ())
        return convert_table(
            table, out, task=task, classes=classes, like=like_info, feature_scaling=feature_scaling, target_scaling=target_scaling,
            missing_policy=missing_policy, categorical=categorical, markers=missing, skip_bad_rows=skip_bad_rows, rows_per_shard=rows_per_shard,
            n_shards=n_shards, row_group_rows=row_group_rows, overwrite=overwrite, name=name, progress=progress, compression=compression, kind="csv",
        )
    if like_info is not None:
        recorded_columns = (like_info.extra or {}).get("columns")
        if not recorded_columns:
            raise ValueError(f"reference data set {like_info.name!r} records no CSV feature columns")
        features = features if features is not None else recorded_columns
        if list(features) != list(recorded_columns):
            raise ValueError(f"features {list(features)} differ from the reference data set's {recorded_columns}")
    scan = _scan(path, target, features, drop, delimiter, skip_bad_rows, progress, batch_rows)
    label_map, fscale, tscale = _decide(path, scan, task, classes, like_info, feature_scaling, target_scaling)
    if n_shards is not None:
        if int(n_shards) < 1:
            raise ValueError(f"n_shards must be >= 1, got {n_shards}")
        rows_per_shard = max(1, -(-scan.n_rows // int(n_shards)))
    cols = scan.columns
    info = {
        "classes": label_map.classes_json(),
        "source": f"csv:{os.path.abspath(path)}",
        "feature_scaling": {"features": fscale.to_json(), "target": tscale.to_json()},
        "extra": {"columns": cols.names, "target": target},
    }
    if name:
        info["name"] = name
    string_labels = any(isinstance(c, str) for c in label_map.classes)
    scaled = ScaledRows(label_map.task, fscale, tscale, path)
    position = [0]
    progress.start(os.path.getsize(path), "B", "convert")
    with DatasetWriter(out, len(cols.features), label_map.task, rows_per_shard=rows_per_shard, row_group_rows=row_group_rows, overwrite=overwrite, compression=compression, **info) as writer:
        rejects = RejectLog(writer.staging_dir, ("line", "reason", "text")) if skip_bad_rows else None
        for _, batch, _ in iter_csv(path, target, features=cols.names, delimiter=delimiter, rejects=rejects, batch_rows=batch_rows, position=position):
            raw = batch.targets if string_labels else _numeric(batch.targets)
            if raw is None:
                bad = next(j for j, t in enumerate(batch.targets) if _numeric([t]) is None)
                raise DataFormatError(f"{path}, line {batch.lines[bad]}: target {batch.targets[bad]!r} is not a number (the task is {label_map.task})")
            y, ok = label_map.encode(np.array(raw, dtype=object) if string_labels else raw)
            X = batch.X
            if not ok.all():
                X, y = _drop_unknown(batch, y, ok, label_map, path, rejects)
            writer.write(*scaled(X, y))
            progress.update(position[0])
        rejected = rejects.close() if rejects is not None else None
        if not writer.n_rows:  # every row had a label the reference does not know
            raise no_rows(path, rejects.count if rejects else 0, rejects.first if rejects else None)
        extra = dict(info["extra"], **({"rejects": rejected} if rejected else {}))
        writer.set_info(extra=extra, target_range=scaled.target_range)
    progress.finish()
    return ConversionSummary(writer.info, writer.path, n_rejected=rejected["count"] if rejected else 0, seconds=time.perf_counter() - started, bytes_read=os.path.getsize(path))


def _needs_table_path(features, drop, no_header, missing, missing_policy, categorical, like_info) -> bool:
    """Whether a conversion needs :mod:`okl_core.data.table` (this module's path reads plain numeric CSVs fastest)."""
    patterns = any(":" in item or any(c in item for c in "*?[") for item in [*(features or ()), *(drop or ())])
    recorded = like_info is not None and "encoding" in (like_info.extra or {})
    return bool(no_header or missing is not None or missing_policy or categorical or patterns or recorded)


def _decide(path, scan, task, classes, like_info, feature_scaling, target_scaling):
    return decide_labels_and_scaling(
        path, len(scan.columns.features), scan.numeric if scan.all_numeric else scan.strings, scan.all_numeric, scan.feature_stats,
        scan.target_stats, task, classes, like_info, feature_scaling, target_scaling,
    )


def _drop_unknown(batch, y, ok, label_map, path, rejects):
    for j in np.flatnonzero(~ok):
        reason = f"label {batch.targets[j]!r} is not one of the classes {label_map.classes_json()}"
        if rejects is None:
            raise DataFormatError(f"{path}, line {batch.lines[j]}: {reason}")
        rejects.add(line=int(batch.lines[j]), reason=reason, text="")
    return batch.X[ok], y[ok]
