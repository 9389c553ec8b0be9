"""Tables with one column per feature (CSV or Parquet) -> an okl data set.

The general path of ``prepare csv`` and the whole of ``prepare parquet``:

* **Feature columns** (:func:`select_columns`): ``--features`` and ``--drop`` take comma
  separated items, each a column name, a range ``first:last`` (every column from ``first``
  to ``last`` inclusive, in file order) or a glob (``pixel*``, ``f[0-9]``). A name that
  exists as written is always that one column. Ranges and globs skip the target;
  ``--drop`` applies to every item (a named feature too); a column chosen twice is an error,
  and so is a target that appears twice in the header (:func:`column_index`).
* **Header-less CSV** (``no_header``): columns are named by number, ``0`` .. ``k-1``
  (``--target 0 --features 1:784``); a row with another field count is a bad row.
* **Missing values**: a CSV field equal to a ``missing`` marker (``""``, ``NA``, ``?``), a
  Parquet null, or a Parquet number equal to a numeric marker (``-999``, ``NaN``). A row
  whose target is missing goes to ``rejects.csv``. A missing feature follows the policy:
  ``drop`` sends the row to ``rejects.csv`` with the column named (counted in the summary,
  never silently lost), ``mean`` imputes the training mean of the column (of each one-hot
  column, for a categorical one: the category frequencies). Means are recorded in
  ``dataset.json`` so that ``like`` applies the training means to a test set.
* **Categorical columns** (``categorical``): one-hot, one feature ``column=category`` per
  category of the training set, in sorted order, recorded in ``dataset.json``; ``like``
  reuses them. A category the training set never had becomes an all-zero one-hot and is
  counted (``unseen_categories`` in ``dataset.json``, a note in the summary). A text value
  in a column not declared categorical is a bad row (CSV) or refused for the whole column
  (Parquet string columns), with a message suggesting ``--categorical``.

Passes: one to learn the labels, categories and means, one for the scaling statistics of
the encoded features (only when scaling them), one to write. What ``dataset.json`` gains
(under ``extra``): ``columns`` (input feature columns), ``feature_names`` (the encoded
features), ``encoding`` (``categories``, ``missing``: markers, policy, means) and
``unseen_categories`` when a test set had some.
"""

from __future__ import annotations

import csv
import dataclasses
import fnmatch
import glob as globlib
import logging
import os
import time
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from okl_core.data.layout import DEFAULT_COMPRESSION, DatasetWriter, recorded_id_columns
from okl_core.data.scaling import ColumnStats, ScaledRows
from okl_core.data.sources import ConversionSummary, DataFormatError, NullProgress, RejectLog, finite32, no_rows, not_utf8, open_text, parse_finite
from okl_core.data.targets import LabelCollector, decide_labels_and_scaling

__all__ = ["MISSING_POLICIES", "RESERVED_ID_NAMES", "check_id_columns", "column_index", "select_columns", "TableEncoding", "CsvColumns", "ParquetColumns", "convert_table", "convert_parquet"]

MISSING_POLICIES = ("drop", "mean")
"""What a missing feature value does to its row: go to ``rejects.csv``, or take the training mean."""

_log = logging.getLogger(__name__)


def _shown(names: list) -> str:
    return str(names if len(names) <= 12 else names[:12] + ["..."])


def _resolve(item: str, names: list, left_out: set, flag: str, where: str) -> list:
    """The columns one ``--features``/``--drop`` item names: itself, or a range or glob (those leave out the target and id columns)."""
    if item in names:
        return [item]
    first, sep, last = item.partition(":")
    if sep and first in names and last in names:
        i, j = names.index(first), names.index(last)
        if i > j:
            raise ValueError(f"{where}: {flag} range {item!r} runs backwards ({last!r} comes before {first!r})")
        return [n for n in names[i : j + 1] if n not in left_out]
    if any(c in item for c in "*?["):
        matched = [n for n in names if fnmatch.fnmatchcase(n, item) and n not in left_out]
        if matched:
            return matched
        raise ValueError(f"{where}: {flag} {item!r} matches no column; the columns are {_shown(names)}")
    raise ValueError(f"{where}: {flag} names no column {item!r}; the columns are {_shown(names)}")


def column_index(names: list, column: str, where: str, role: str = "column") -> int:
    """The position of ``column`` in a table's columns ``names``.

    Refused in one line naming ``where`` (the file) and the column when the table has no
    such column, or has it more than once: which of the two holds the target (or the
    SMILES) cannot be told, and taking the first silently was a guess.
    """
    count = names.count(column)
    if not count:
        raise DataFormatError(f"{where}: no {role} {column!r}; the columns are {_shown(names)}")
    if count > 1:
        raise DataFormatError(f"{where}: {role} {column!r} appears {count} times")
    return names.index(column)


RESERVED_ID_NAMES = ("x", "y", "row", "label", "score", "scores")
"""Names an id column cannot have: the data set's own columns and those of the prediction files
(and any ``proba_...``, the probability columns)."""


def check_id_columns(ids, target, where: str = "") -> list:
    """``ids`` (``--id_column`` names) as a list, refused in one line when one is reserved, repeated or the target."""
    ids = list(ids or ())
    for name in ids:
        if name in RESERVED_ID_NAMES or name.startswith("proba_"):
            raise ValueError(f"{where}: --id_column {name!r}: an id column cannot be named {', '.join(RESERVED_ID_NAMES)} or proba_* "
                             "(the data set's and the predictions' own columns); rename the column")
        if name == target:
            raise ValueError(f"{where}: --id_column {name!r} is the target column; an id column is carried beside the target, not instead of it")
    twice = sorted({n for n in ids if ids.count(n) > 1})
    if twice:
        raise ValueError(f"{where}: --id_column {twice} given more than once")
    return ids


def select_columns(names: list, target: str | None, features=None, drop=None, where: str = "", ids=()) -> list:
    """The feature columns of a table with columns ``names`` (see the module docstring).

    ``features`` and ``drop`` are lists of items (name, ``first:last``, glob); default
    features: every column but the target and the id columns ``ids`` (which ranges and
    globs leave out too). ``drop`` always applies, to named features too. A column chosen
    twice is an error, and so is a target or id column that is missing or not unique
    (:func:`column_index`). ``target`` None: the table has no target (rows to be scored).
    Errors name ``where``. Both CSV paths and Parquet resolve columns here, so they agree.
    """
    if target is not None:
        column_index(names, target, where, "target column")
    for name in check_id_columns(ids, target, where):
        column_index(names, name, where, "id column")
    left_out = {target, *ids}
    duplicated = sorted({n for n in names if names.count(n) > 1})
    dropped = {n for item in drop or () for n in _resolve(item, names, left_out, "--drop", where)}
    if features is None:
        chosen = [n for n in names if n not in left_out and n not in dropped]
    else:
        chosen = [n for item in features for n in _resolve(item, names, left_out, "--features", where) if n not in dropped]
    if target in chosen:
        raise ValueError(f"{where}: the target {target!r} cannot also be a feature")
    also_ids = [n for n in ids if n in chosen]
    if also_ids:
        raise ValueError(f"{where}: the id column(s) {also_ids} cannot also be features")
    twice = sorted({n for n in chosen if chosen.count(n) > 1} | (set(chosen) & set(duplicated)))
    if twice:
        raise DataFormatError(f"{where}: column(s) {twice} chosen more than once or not unique in the header")
    if not chosen:
        raise DataFormatError(f"{where}: no feature columns besides the target {target!r}" + (f" and the id columns {list(ids)}" if ids else ""))
    return chosen


@dataclasses.dataclass
class TableEncoding:
    """How table columns become features: one-hot categories, missing markers, policy, means.

    Attributes
    ----------
    columns : list of str
        Input feature columns, in feature order.
    categories : dict
        Categorical column -> its categories (sorted), one feature each.
    markers : list of str
        Values that mean "missing" (CSV text, Parquet text; numeric ones also match numbers).
    policy : {'drop', 'mean'}
    means : dict
        Column -> training mean of each of its features (``mean`` policy; empty before fitting).
    """

    columns: list
    categories: dict = dataclasses.field(default_factory=dict)
    markers: list = dataclasses.field(default_factory=list)
    policy: str = "drop"
    means: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.policy not in MISSING_POLICIES:
            raise ValueError(f"missing policy must be one of {MISSING_POLICIES}, got {self.policy!r}")
        unknown = sorted(set(self.categories) - set(self.columns))
        if unknown:
            raise ValueError(f"categorical column(s) {unknown} are not feature columns {_shown(self.columns)}")

    @property
    def feature_names(self) -> list:
        """``column`` for a number, ``column=category`` per category of a categorical column."""
        return [f"{c}={v}" if c in self.categories else c for c in self.columns for v in self.categories.get(c, [None])]

    def to_json(self) -> dict:
        """The ``encoding`` entry of ``dataset.json``."""
        return {"categories": self.categories, "missing": {"markers": self.markers, "policy": self.policy, "means": self.means}}

    @classmethod
    def from_json(cls, columns: list, raw: dict) -> "TableEncoding":
        """Rebuild a recorded ``encoding`` (``{}``: numbers only, nothing missing) for ``columns``."""
        missing = raw.get("missing", {})
        return cls(list(columns), dict(raw.get("categories", {})), list(missing.get("markers", [])), missing.get("policy", "drop"), dict(missing.get("means", {})))

    def encode(self, batch: "RawBatch", keep: np.ndarray, unseen: dict) -> np.ndarray:
        """The float64 features of the rows ``keep`` of ``batch`` (missing values imputed)."""
        parts = []
        for c in self.columns:
            values, missing = batch.values[c][keep], batch.missing[c][keep]
            if c in self.categories:
                index = {v: i for i, v in enumerate(self.categories[c])}
                block = np.zeros((len(values), len(index)))
                codes = np.array([index.get(v, -1) if not m else -2 for v, m in zip(values, missing)], dtype=np.int64)
                hit = codes >= 0
                block[np.flatnonzero(hit), codes[hit]] = 1.0
                if (codes == -1).any():
                    unseen[c] = unseen.get(c, 0) + int((codes == -1).sum())
            else:
                block = np.asarray(values, dtype=np.float64)[:, None].copy()
            if missing.any():
                block[missing] = self.means[c]
            parts.append(block)
        return np.hstack(parts) if parts else np.zeros((int(keep.sum()), 0))


@dataclasses.dataclass
class RawBatch:
    """Consecutive rows of a table before encoding.

    ``values[c]``: float64 (number columns) or str objects (categorical columns);
    ``missing[c]``: bool; ``targets``: float64 (NaN where not a number); ``target_texts``:
    str objects (None for a number column); ``target_missing``: bool;
    ``problems``: "" or why the row is bad; ``ids``: line or row numbers; ``records``:
    the CSV fields of each row, for ``rejects.csv`` (empty for Parquet); ``passthrough``:
    the id columns (``--id_column``) of every row, None when there are none.
    """

    values: dict
    missing: dict
    targets: np.ndarray
    target_texts: np.ndarray | None
    target_missing: np.ndarray
    problems: np.ndarray
    ids: np.ndarray
    records: list
    file: str
    passthrough: pa.Table | None = None

    def id_values(self, j: int) -> dict:
        """The id columns of row ``j``, by name (for ``rejects.csv``)."""
        return {} if self.passthrough is None else {c: self.passthrough.column(c)[j].as_py() for c in self.passthrough.column_names}


def _first_problem(problems: np.ndarray, reason: np.ndarray) -> None:
    """Record ``reason`` for rows without an earlier problem (column order decides)."""
    fresh = (problems == "") & (reason != "")
    problems[fresh] = reason[fresh]


class _TableSource:
    """What both readers share: columns, markers and the per-column parsing of text."""

    unit = "rows"
    where_word = "row"

    def __init__(self, target, categorical, markers, ids=()):
        self.target, self.categorical, self.markers = target, set(categorical or ()), list(markers or ())
        self.ids: list = list(ids or ())
        self.id_fields: list = []  # their Arrow fields, as the data set stores them
        numbers = []
        for m in self.markers:
            _, problem = parse_finite(m, "")
            if problem is None or m.strip().lower() in ("nan", "-nan", "+nan"):
                numbers.append(float(m))
        self._number_markers = np.array(numbers, dtype=np.float64)
        self.features: list = []
        self.path = ""
        self.total = 0  # progress units in all (bytes or rows)
        self.position = 0  # progress units read so far

    def batches(self) -> Iterator["RawBatch"]:
        """Consecutive :class:`RawBatch` es of the whole table, in order."""
        raise NotImplementedError

    def _text_column(self, name, texts, problems, as_target=False):
        """Parse one column of text (None for a Parquet null): values and missing flags.

        A categorical column keeps its (stripped) text; others become float64, each bad
        value a problem of its row. A target that is not a number is NaN (a class name).
        """
        texts = np.array(texts, dtype=object)
        markers = set(self.markers)
        missing = np.fromiter((t is None or t in markers for t in texts), bool, len(texts))
        if name in self.categorical and not as_target:
            texts = np.array([t.strip() if isinstance(t, str) else t for t in texts], dtype=object)
            return texts, missing | np.fromiter((t in markers for t in texts), bool, len(texts))
        values = np.zeros(len(texts))
        present = np.flatnonzero(~missing)
        try:  # all numbers and finite: one conversion (the common case; float() allows spaces)
            values[present] = np.array(texts[present], dtype=np.float64)
            if finite32(values[present]).all():
                return values, missing
        except ValueError:
            pass
        reasons = np.full(len(texts), "", dtype=object)
        what = f"target {name!r}" if as_target else f"column {name!r}"
        for i in present:
            text = texts[i].strip()
            if text in markers:
                missing[i] = True
                continue
            value, problem = parse_finite(text, what)
            if problem is None:
                values[i] = value
            elif as_target and "is not a number" in problem:
                values[i] = np.nan  # a class name: the text is kept
            else:
                reasons[i] = problem + (f" (a category? pass --categorical {name})" if "is not a number" in problem else "")
        _first_problem(problems, reasons)
        return values, missing

    def _number_column(self, name, values, null, problems):
        missing = null | np.isin(values, self._number_markers) | (np.isnan(values) & np.isnan(self._number_markers).any())
        bad = ~missing & ~finite32(values)  # inf once stored as float32 too
        reasons = np.full(len(values), "", dtype=object)
        for i in np.flatnonzero(bad):
            reasons[i] = f"column {name!r}: {values[i]} is not finite"
        _first_problem(problems, reasons)
        return values, missing

    @property
    def reject_columns(self) -> tuple:
        """The columns of ``rejects.csv``: where, the id columns, why."""
        return ("file", "row", *self.ids, "reason")

    def where(self, batch: RawBatch, j: int) -> str:
        return f"{batch.file}, {self.where_word} {batch.ids[j]}"

    def reject(self, log: RejectLog, batch: RawBatch, j: int, reason: str) -> None:
        log.add(file=batch.file, row=int(batch.ids[j]), reason=reason, **batch.id_values(j))


class CsvColumns(_TableSource):
    """A CSV file (plain/.gz/.bz2/.xz) read as text columns; ``no_header``: columns ``0..k-1``."""

    unit = "B"
    where_word = "line"

    def __init__(self, path, target, *, features=None, drop=None, categorical=None, markers=None, delimiter=",", no_header=False, batch_rows=8192,
                 ids=()):
        super().__init__(target, categorical, markers, ids)
        self.path, self.delimiter, self.no_header, self.batch_rows = os.fspath(path), delimiter, no_header, int(batch_rows)
        self._open = open_text
        self.names = self._names()
        self.features = select_columns(self.names, target, features, drop, where=self.path, ids=self.ids)
        self.id_fields = [pa.field(name, pa.string()) for name in self.ids]  # CSV ids are kept as the text they are
        self.total = os.path.getsize(self.path)
        self.position = 0

    def _names(self) -> list:
        with self._open(self.path) as f:
            try:
                first = next(csv.reader(f, delimiter=self.delimiter))
            except StopIteration:
                raise DataFormatError(f"{self.path}: empty file") from None
            except UnicodeDecodeError as err:
                raise not_utf8(self.path, err) from None
            except csv.Error as err:
                raise DataFormatError(f"{self.path}, line 1: unreadable ({err})") from None
        return [str(i) for i in range(len(first))] if self.no_header else [h.strip() for h in first]

    @property
    def reject_columns(self) -> tuple:
        return ("line", *self.ids, "reason", "text")

    def reject(self, log, batch, j, reason):
        log.add(line=int(batch.ids[j]), reason=reason, text=self.delimiter.join(batch.records[j]), **batch.id_values(j))

    def batches(self) -> Iterator[RawBatch]:
        with self._open(self.path) as f:
            reader = csv.reader(f, delimiter=self.delimiter)
            if not self.no_header:
                next(reader)
            while True:
                records, lines = [], []
                try:
                    for fields in reader:
                        if not fields or (len(fields) == 1 and not fields[0].strip() and len(self.names) > 1):
                            continue  # blank line
                        records.append(fields)
                        lines.append(reader.line_num)
                        if len(records) == self.batch_rows:
                            break
                except UnicodeDecodeError as err:
                    raise not_utf8(self.path, err) from None
                except csv.Error as err:
                    raise DataFormatError(f"{self.path}, line {reader.line_num + 1}: unreadable CSV ({err})") from None
                if not records:
                    return
                self.position = f.buffer.raw.compressed_position()
                yield self._parse(records, lines)

    def _parse(self, records, lines) -> RawBatch:
        k = len(self.names)
        problems = np.array([f"expected {k} fields, found {len(r)}" if len(r) != k else "" for r in records], dtype=object)
        columns = list(zip(*(r if len(r) == k else [""] * k for r in records)))  # one tuple per column
        values, missing = {}, {}
        for c in self.features:
            values[c], missing[c] = self._text_column(c, columns[self.names.index(c)], problems)
        if self.target is None:  # rows to be scored: no labels
            texts, numbers, target_missing = np.full(len(records), "", dtype=object), np.full(len(records), np.nan), np.zeros(len(records), bool)
        else:
            texts = np.array([t.strip() for t in columns[self.names.index(self.target)]], dtype=object)
            numbers, target_missing = self._text_column(self.target, texts, problems, as_target=True)
        passthrough = pa.table({c: pa.array([t.strip() for t in columns[self.names.index(c)]], pa.string()) for c in self.ids}) if self.ids else None
        return RawBatch(values, missing, numbers, texts, target_missing, problems, np.asarray(lines, np.int64), records, self.path, passthrough)


def _parquet_files(path) -> list:
    path = os.fspath(path)
    if os.path.isdir(path):
        files = sorted(globlib.glob(os.path.join(path, "*.parquet")))
    elif any(c in path for c in "*?["):
        files = sorted(globlib.glob(path))
    else:
        files = [path] if os.path.exists(path) else []
    if not files:
        raise FileNotFoundError(f"no Parquet files at {path!r}")
    return files


def _footer(path: str) -> tuple[pa.Schema, int]:
    """The schema and row count of a Parquet file, from one read of its footer."""
    try:
        with pq.ParquetFile(path) as pf:
            return pf.schema_arrow, pf.metadata.num_rows
    except pa.ArrowException as err:  # not Parquet, truncated: pyarrow's message names no file
        raise DataFormatError(f"{path}: not a readable Parquet file ({err})") from None


def _is_text(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_text(t.value_type)
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t)


class ParquetColumns(_TableSource):
    """Parquet files (a file, a directory of ``*.parquet`` or a glob) with one column per feature.

    Number columns (integers, floats, booleans, decimals) are features; text columns are
    features only when categorical. Nulls are missing values.
    """

    def __init__(self, path, target, *, features=None, drop=None, categorical=None, markers=None, batch_rows=8192, ids=()):
        super().__init__(target, categorical, markers, ids)
        self.files = _parquet_files(path)
        self.path, self.batch_rows = os.fspath(path), int(batch_rows)
        schema, n_rows = _footer(self.files[0])  # each footer read once: schema and row count
        self.names = list(schema.names)
        self.features = select_columns(self.names, target, features, drop, where=self.files[0], ids=self.ids)
        for f in self.files[1:]:
            file_schema, rows = _footer(f)
            n_rows += rows
            missing = sorted((set(self._read) - set(file_schema.names)))
            if missing:
                raise DataFormatError(f"{f}: no column(s) {missing} (the first file {self.files[0]} has them)")
            for c in self._read:  # each file's columns are read by name: a second one would be ambiguous
                column_index(file_schema.names, c, f, "target column" if c == target else "column")
        # ids pass through with their own type (a dictionary as its values: readers need not know dictionaries)
        self.id_fields = [pa.field(c, _plain_type(schema.field(c).type)) for c in self.ids]
        for c in self.features:
            t = schema.field(c).type
            if _is_text(t) and c not in self.categorical:
                raise DataFormatError(f"{self.files[0]}: column {c!r} holds text ({t}); pass --categorical {c} to one-hot encode it")
            if not _is_text(t) and not _is_number(t):
                hint = " (files with a list column x, y and row need no prepare: train reads them as they are)" if pa.types.is_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_large_list(t) else ""
                raise DataFormatError(f"{self.files[0]}: column {c!r} has type {t}; feature columns must hold numbers or (with --categorical) text{hint}")
        t = schema.field(target).type if target is not None else pa.int32()
        if not (_is_text(t) or _is_number(t)):
            raise DataFormatError(f"{self.files[0]}: target column {target!r} has type {t}; it must hold numbers or text")
        self.total = n_rows
        self.position = 0

    @property
    def _read(self) -> list:
        """The columns read: features, the target (when there is one), ids."""
        return [*self.features, *([self.target] if self.target is not None else []), *self.ids]

    def batches(self) -> Iterator[RawBatch]:
        self.position = 0
        for f in self.files:
            first = 0
            for record_batch in self._record_batches(f):
                n = record_batch.num_rows
                problems = np.full(n, "", dtype=object)
                values, missing = {}, {}
                target_texts = None
                for c in [*self.features, *([self.target] if self.target is not None else [])]:
                    column = record_batch.column(c)
                    if _is_text(column.type) or c in self.categorical:
                        texts = column.cast(pa.string()).to_pylist()
                        values[c], missing[c] = self._text_column(c, texts, problems, as_target=c == self.target)
                        if c == self.target:
                            target_texts = np.array([t.strip() if t is not None else "" for t in texts], dtype=object)
                    else:
                        null = column.is_null().to_numpy(zero_copy_only=False)
                        values[c], missing[c] = self._number_column(c, _as_float64(column, c, f), null, problems)
                if self.target is None:  # rows to be scored: no labels
                    targets, target_missing = np.full(n, np.nan), np.zeros(n, bool)
                else:
                    targets, target_missing = values.pop(self.target), missing.pop(self.target)
                ids = np.arange(first, first + n, dtype=np.int64)
                first += n
                self.position += n
                passthrough = pa.table([record_batch.column(c).cast(f.type) for c, f in zip(self.ids, self.id_fields)], schema=pa.schema(self.id_fields)) if self.ids else None
                yield RawBatch(values, missing, targets, target_texts, target_missing, problems, ids, [], f, passthrough)

    def _record_batches(self, path: str):
        """The file's record batches; a file pyarrow cannot read is an error naming it."""
        try:
            yield from pq.ParquetFile(path).iter_batches(batch_size=self.batch_rows, columns=self._read)
        except pa.ArrowException as err:  # damaged pages, a file changed since its footer was read
            raise DataFormatError(f"{path}: unreadable Parquet data ({err})") from None


def _plain_type(t: pa.DataType) -> pa.DataType:
    """A dictionary type's value type; any other type as it is."""
    return t.value_type if pa.types.is_dictionary(t) else t


def _as_float64(column: pa.Array, name: str, path: str) -> np.ndarray:
    """A number column as float64; one that does not convert (an int64 beyond 2**53) is an error naming the file and column."""
    try:
        return pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
    except pa.ArrowException as err:
        raise DataFormatError(f"{path}: column {name!r}: {err}") from None


@dataclasses.dataclass
class _Fit:
    """What the first pass learns from the rows it keeps."""

    n_rows: int = 0
    n_rejected: int = 0
    first_rejected: str | None = None  # "file, line 3: reason", for the error when no row is left
    all_numeric: bool = True
    numeric: LabelCollector = dataclasses.field(default_factory=LabelCollector)
    strings: LabelCollector = dataclasses.field(default_factory=LabelCollector)
    target_stats: ColumnStats = dataclasses.field(default_factory=lambda: ColumnStats(1))
    categories: dict = dataclasses.field(default_factory=dict)
    sums: dict = dataclasses.field(default_factory=dict)
    counts: dict = dataclasses.field(default_factory=dict)


def _row_reasons(source: _TableSource, batch: RawBatch, policy: str) -> tuple[np.ndarray, np.ndarray]:
    """``(bad, reasons)``: rows with a problem (an error unless skipping) and rows to reject.

    ``reasons`` holds every row's reason ("" for a row that is kept): its problem, a
    missing target, or (policy ``drop``) its first missing feature.
    """
    reasons = batch.problems.copy()
    bad = reasons != ""
    missing_target = np.where(batch.target_missing, f"target {source.target!r}: missing value", "")
    _first_problem(reasons, missing_target.astype(object))
    if policy == "drop":
        for c in source.features:
            _first_problem(reasons, np.where(batch.missing[c], f"column {c!r}: missing value", "").astype(object))
    return bad, reasons


def _check_bad(source, batch, bad, reasons, skip_bad_rows) -> None:
    if bad.any() and not skip_bad_rows:
        j = int(np.flatnonzero(bad)[0])
        raise DataFormatError(f"{source.where(batch, j)}: {reasons[j]}")


def _fit(source: _TableSource, policy: str, skip_bad_rows: bool, progress) -> _Fit:
    fit = _Fit()
    progress.start(source.total, source.unit, "scan")
    for batch in source.batches():
        bad, reasons = _row_reasons(source, batch, policy)
        _check_bad(source, batch, bad, reasons, skip_bad_rows)
        keep = reasons == ""
        fit.n_rows += int(keep.sum())
        fit.n_rejected += int((~keep).sum())
        if fit.first_rejected is None and not keep.all():
            j = int(np.flatnonzero(~keep)[0])
            fit.first_rejected = f"{source.where(batch, j)}: {reasons[j]}"
        numbers = batch.targets[keep]
        if batch.target_texts is not None:
            fit.strings.add(batch.target_texts[keep].astype(str))
        if fit.all_numeric and np.isnan(numbers).any():
            fit.all_numeric = False
        if fit.all_numeric:
            fit.numeric.add(numbers)
            fit.target_stats.add(numbers[:, None])
        for c in source.features:
            present = keep & ~batch.missing[c]
            values = batch.values[c][present]
            if c in source.categorical:
                counts = fit.categories.setdefault(c, {})
                for v, k in zip(*np.unique(values.astype(str), return_counts=True)):
                    counts[v] = counts.get(v, 0) + int(k)
            else:
                fit.sums[c] = fit.sums.get(c, 0.0) + float(np.sum(values))
            fit.counts[c] = fit.counts.get(c, 0) + int(present.sum())
        progress.update(source.position)
    progress.finish()
    return fit


def _fitted_encoding(source: _TableSource, fit: _Fit, policy: str) -> TableEncoding:
    categories = {c: sorted(fit.categories.get(c, {})) for c in source.features if c in source.categorical}
    means = {}
    if policy == "mean":
        for c in source.features:
            if not fit.counts.get(c):
                raise ValueError(f"{source.path}: column {c!r} has no values to take the mean of (--missing_policy mean)")
            if c in categories:
                means[c] = [fit.categories[c][v] / fit.counts[c] for v in categories[c]]
            else:
                means[c] = [fit.sums[c] / fit.counts[c]]
    return TableEncoding(list(source.features), categories, list(source.markers), policy, means)


def _like_encoding(source: _TableSource, like_info, markers, policy, categorical) -> TableEncoding:
    extra = like_info.extra or {}
    recorded = TableEncoding.from_json(extra.get("columns", []), extra.get("encoding", {}))
    if list(source.features) != recorded.columns:
        raise ValueError(f"features {_shown(list(source.features))} differ from the reference data set's {_shown(recorded.columns)}")
    if policy is not None and policy != recorded.policy:
        raise ValueError(f"--missing_policy {policy} differs from the reference data set's {recorded.policy} (--like applies its policy and means)")
    if categorical is not None and set(categorical) != set(recorded.categories):
        raise ValueError(f"--categorical {sorted(categorical)} differs from the reference data set's {sorted(recorded.categories)}")
    if markers is not None:
        recorded.markers = list(markers)
    return recorded


def convert_table(
    source: _TableSource, out, *, task=None, classes=None, like=None, feature_scaling="none", target_scaling="none",
    missing_policy=None, categorical=None, markers=None, skip_bad_rows=False, rows_per_shard=65536, n_shards=None,
    row_group_rows=4096, overwrite=False, name=None, progress=None, compression=DEFAULT_COMPRESSION, kind="table",
) -> ConversionSummary:
    """Convert a :class:`CsvColumns` or :class:`ParquetColumns` table into a data set at ``out``.

    ``like`` (a training set's Dataset or DatasetInfo) supplies the feature columns, the
    categories, the missing-value policy and means, the labels and the scalings;
    ``markers`` and ``missing_policy`` as given to the source (None: the reference's, or
    ``drop``). Other parameters as :func:`okl_core.data.csv_table.convert_csv`.
    """

    started = time.perf_counter()
    progress = progress or NullProgress()
    if source.target is None and like is None:  # the task and classes come from the labels, or from the reference
        raise ValueError(f"{source.path}: rows without a target column can only be prepared like a training set (like=...)")
    not_features = sorted(source.categorical - set(source.features))
    if not_features:
        raise ValueError(f"{source.path}: --categorical names column(s) {not_features} that are not feature columns {_shown(list(source.features))}")
    like_info = getattr(like, "info", like)
    if like_info is not None:
        encoding = _like_encoding(source, like_info, markers, missing_policy, categorical)
        source.categorical, source.markers = set(encoding.categories), list(encoding.markers)
    policy = encoding.policy if like_info is not None else (missing_policy or "drop")
    fit = _fit(source, policy, skip_bad_rows, progress)
    if not fit.n_rows:  # before inferring a task from no labels
        raise no_rows(source.path, fit.n_rejected, fit.first_rejected)
    if like_info is None:
        encoding = _fitted_encoding(source, fit, policy)
    fstats = _feature_stats(source, encoding, progress) if feature_scaling != "none" and like_info is None else None
    label_map, fscale, tscale = decide_labels_and_scaling(
        source.path, len(encoding.feature_names), fit.numeric if fit.all_numeric else fit.strings, fit.all_numeric, fstats,
        fit.target_stats, task, classes, like_info, feature_scaling, target_scaling,
    )
    if n_shards is not None:
        if int(n_shards) < 1:
            raise ValueError(f"n_shards must be >= 1, got {n_shards}")
        rows_per_shard = max(1, -(-fit.n_rows // int(n_shards)))
    extra = {"columns": list(encoding.columns), "target": source.target, "feature_names": encoding.feature_names, "encoding": encoding.to_json()}
    if source.ids:
        extra["id_columns"] = list(source.ids)
    info = {
        "classes": label_map.classes_json(), "source": f"{kind}:{os.path.abspath(source.path)}",
        "feature_scaling": {"features": fscale.to_json(), "target": tscale.to_json()}, "extra": extra,
    }
    if name:
        info["name"] = name
    unseen: dict = {}
    scaled = ScaledRows(label_map.task, fscale, tscale, source.path)
    progress.start(source.total, source.unit, "convert")
    labeled = source.target is not None
    with DatasetWriter(out, len(encoding.feature_names), label_map.task, rows_per_shard=rows_per_shard, row_group_rows=row_group_rows,
                       overwrite=overwrite, compression=compression, id_fields=source.id_fields, labeled=labeled, **info) as writer:
        rejects = RejectLog(writer.staging_dir, source.reject_columns)
        for batch in source.batches():
            _, reasons = _row_reasons(source, batch, encoding.policy)
            for j in np.flatnonzero(reasons != ""):
                source.reject(rejects, batch, int(j), reasons[j])
            keep = reasons == ""
            X = encoding.encode(batch, keep, unseen)
            ids = None if batch.passthrough is None else batch.passthrough.filter(pa.array(keep))
            y, ok = _labels(source, batch, keep, label_map) if labeled else (np.zeros(len(X)), np.ones(len(X), bool))
            if not ok.all():
                for j in np.flatnonzero(keep)[~ok]:
                    reason = f"label {_label_text(batch, j)!r} is not one of the classes {label_map.classes_json()}"
                    if not skip_bad_rows:
                        raise DataFormatError(f"{source.where(batch, int(j))}: {reason}")
                    source.reject(rejects, batch, int(j), reason)
                X, y, ids = X[ok], y[ok], None if ids is None else ids.filter(pa.array(ok))
            writer.write(*scaled(X, y), ids)
            progress.update(source.position)
        rejected = rejects.close()
        if not writer.n_rows:  # every row had a label the reference does not know
            raise no_rows(source.path, rejects.count, rejects.first)
        extra.update({"rejects": rejected} if rejected else {}, **({"unseen_categories": unseen} if unseen else {}))
        writer.set_info(extra=extra, target_range=scaled.target_range if labeled else None)
    progress.finish()
    notes = []
    if unseen:
        count = sum(unseen.values())
        note = f"{count:,} unseen categor{'y' if count == 1 else 'ies'} encoded as all-zero ({', '.join(f'{c}: {k}' for c, k in sorted(unseen.items()))})"
        _log.warning("%s: %s", source.path, note)
        notes.append(note)
    bytes_read = os.path.getsize(source.path) if os.path.isfile(source.path) else 0
    return ConversionSummary(writer.info, writer.path, n_rejected=rejected["count"] if rejected else 0, seconds=time.perf_counter() - started,
                             bytes_read=bytes_read, notes=notes)


def _label_text(batch: RawBatch, j: int):
    return batch.target_texts[j] if batch.target_texts is not None else batch.targets[j]


def _labels(source, batch, keep, label_map) -> tuple[np.ndarray, np.ndarray]:
    """Encoded labels of the kept rows and which of them are known classes."""
    if label_map.task != "regression" and any(isinstance(c, str) for c in label_map.classes):
        return label_map.encode(batch.target_texts[keep] if batch.target_texts is not None else batch.targets[keep].astype(str).astype(object))
    numbers = batch.targets[keep]
    if np.isnan(numbers).any():
        j = int(np.flatnonzero(keep)[np.flatnonzero(np.isnan(numbers))[0]])
        raise DataFormatError(f"{source.where(batch, j)}: target {_label_text(batch, j)!r} is not a number (the task is {label_map.task})")
    return label_map.encode(numbers)


def _feature_stats(source: _TableSource, encoding: TableEncoding, progress) -> ColumnStats:
    stats = ColumnStats(len(encoding.feature_names))
    progress.start(source.total, source.unit, "statistics")
    for batch in source.batches():
        _, reasons = _row_reasons(source, batch, encoding.policy)
        stats.add(encoding.encode(batch, reasons == "", {}))
        progress.update(source.position)
    progress.finish()
    return stats


def convert_parquet(
    path, out, *, target, features=None, drop=None, categorical=None, missing=None, missing_policy=None, like=None, batch_rows=8192,
    id_columns=None, **options,
) -> ConversionSummary:
    """Convert Parquet files with one column per feature into a data set at ``out``.

    ``path``: a file, a directory of ``*.parquet`` files or a glob (files in name order).
    ``features``/``drop``: items as :func:`select_columns`; ``categorical``: columns to
    one-hot; ``missing``: markers besides nulls; ``missing_policy``: ``drop`` (default) or
    ``mean``; ``like``: a training set to encode, label and scale like; ``id_columns``:
    columns carried through as they are (never features; None: ``like``'s, else none);
    ``target`` None: rows without labels, to be scored (needs ``like``). ``options`` as
    :func:`convert_table`.
    """
    like_info = getattr(like, "info", like)
    if like_info is not None:
        recorded = (like_info.extra or {})
        features = features if features is not None else recorded.get("columns")
        categorical = categorical if categorical is not None else list(recorded.get("encoding", {}).get("categories", {}))
        id_columns = id_columns if id_columns is not None else recorded_id_columns(like_info)
    table = ParquetColumns(path, target, features=features, drop=drop, categorical=categorical, markers=missing, batch_rows=batch_rows,
                           ids=id_columns or ())
    return convert_table(table, out, like=like_info, categorical=categorical, markers=missing, missing_policy=missing_policy, kind="parquet", **options)
