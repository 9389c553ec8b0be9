"""LIBSVM / svmlight text files: a streaming, vectorised reader and the data set converter.

Format: one example per line, ``label index:value index:value ...`` with 1-based integer
indices (missing pairs are zeros); ``#`` starts a comment; blank lines are skipped;
``qid:N`` pairs are ignored. Files may be plain, gzip, bzip2 or xz (recognised by content).

Reading is streamed in blocks of lines (bounded memory, whatever the file size: the real
mnist8m file is 8.1M rows). Each block is parsed by pyarrow compute kernels: a structural
check (every feature token is ``digits:value``, the label has no colon), one split, one
string-to-float cast. A block that fails any check is re-parsed line by line in Python,
which names the first bad line (or, with ``skip_bad_rows``, records each bad line in
``rejects.csv``), so errors are exact and the common path is fast. Rejected: malformed
tokens, non-integer or < 1 indices, indices beyond ``n_features``, duplicate indices,
NaN/inf labels or values. Indices need not be sorted.

Labels become okl labels via :mod:`okl_core.data.targets` (binary -> -1/+1, multiclass ->
0..C-1, originals recorded as ``classes``); :func:`convert_libsvm` makes a first pass for
the labels, the feature count (largest index) and scaling statistics unless they are given.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from okl_core.data.layout import DEFAULT_COMPRESSION, DatasetWriter
from okl_core.data.scaling import ColumnStats, ScaledRows, Scaling
from okl_core.data.sources import ConversionSummary, DataFormatError, NullProgress, RejectLog, finite32, no_rows, open_source, parse_finite
from okl_core.data.targets import LabelCollector, LabelMap, infer_label_map

__all__ = ["LibsvmBlock", "LibsvmScan", "iter_libsvm", "scan_libsvm", "read_libsvm", "convert_libsvm", "MAX_INFERRED_FEATURES"]

BLOCK_BYTES = 4 << 20
MAX_INFERRED_FEATURES = 1_000_000
"""The most features inferred from the largest index (a dense float32 row of 4 MB): a
larger index is a bad row (an absurd ``99999999999`` would otherwise ask for terabytes)
unless ``n_features`` is given."""
DENSE_BYTES = 64 << 20
"""Largest dense array a block is expanded to at once (wide rows go in slices of rows)."""
# A line is structurally suspect if: its first token has a colon, a colon has an empty
# side, a token has two colons, or an index contains a non-digit (also catches qid:).
_SUSPECT = r"^\s*\S*:|\s:|:\s|:$|:[^\s:]*:|[^\s:0-9][0-9]*:"


@dataclasses.dataclass
class LibsvmBlock:
    """Parsed consecutive examples in CSR form.

    Attributes
    ----------
    labels : ndarray of float64, shape (n,)
    indptr : ndarray of int64, shape (n + 1,)
    indices : ndarray of int64, shape (nnz,)
        0-based feature indices.
    values : ndarray of float64, shape (nnz,)
    lines : ndarray of int64, shape (n,)
        1-based line number of each example in the file.
    """

    labels: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    lines: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def max_index(self) -> int:
        """Largest 1-based index in the block (0 if no pairs)."""
        return int(self.indices.max()) + 1 if len(self.indices) else 0

    def dense(self, n_features: int, dtype=np.float32) -> np.ndarray:
        """The block as a dense ``(n, n_features)`` array (float64 keeps the parsed values)."""
        X = np.zeros((len(self.labels), n_features), dtype=dtype)
        rows = np.repeat(np.arange(len(self.labels)), np.diff(self.indptr))
        X[rows, self.indices] = self.values
        return X

    def slices(self, n_features: int, max_bytes: int = DENSE_BYTES) -> Iterator["LibsvmBlock"]:
        """Consecutive parts of the block whose dense float64 form takes at most ``max_bytes``."""
        step = max(1, max_bytes // (8 * max(1, n_features)))
        if len(self) <= step:
            yield self
            return
        for i in range(0, len(self), step):
            j = min(i + step, len(self))
            a, b = self.indptr[i], self.indptr[j]
            yield LibsvmBlock(self.labels[i:j], self.indptr[i : j + 1] - a, self.indices[a:b], self.values[a:b], self.lines[i:j])

    def select(self, keep: np.ndarray) -> "LibsvmBlock":
        """The examples where ``keep`` is True."""
        if keep.all():
            return self
        counts = np.diff(self.indptr)
        pair_keep = np.repeat(keep, counts)
        return LibsvmBlock(
            self.labels[keep], np.concatenate([[0], np.cumsum(counts[keep])]).astype(np.int64),
            self.indices[pair_keep], self.values[pair_keep], self.lines[keep],
        )


def _line_batches(path: str, block_bytes: int, position: list) -> Iterator[tuple[int, pa.Array]]:
    """Yield ``(first_line_number, lines)``; ``position[0]`` tracks on-disk bytes read."""
    read_options = pacsv.ReadOptions(column_names=["line"], block_size=int(block_bytes), use_threads=True)
    parse_options = pacsv.ParseOptions(delimiter="\x01", quote_char=False, escape_char=False, newlines_in_values=False, ignore_empty_lines=False)
    convert_options = pacsv.ConvertOptions(column_types={"line": pa.string()}, strings_can_be_null=False, quoted_strings_can_be_null=False)
    next_line = 1
    with open_source(path) as f:
        if not f.peek(1):  # pyarrow would say "Empty CSV file"
            raise DataFormatError(f"{path} is empty")
        try:
            reader = pacsv.open_csv(f, read_options=read_options, parse_options=parse_options, convert_options=convert_options)
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    break
                position[0] = f.raw.compressed_position()
                lines = batch.column(0)
                yield next_line, lines
                next_line += len(lines)
        except (pa.ArrowInvalid, pa.ArrowException) as err:
            raise _unreadable(path, next_line, err) from None


def _unreadable(path: str, next_line: int, err: Exception) -> DataFormatError:
    """A block pyarrow could not read: not UTF-8 (somewhere from ``next_line`` on), or another reason, without pyarrow's "CSV" words."""
    if "invalid UTF8" in str(err):
        return DataFormatError(f"{path}: not UTF-8 text (in the block of lines from line {next_line}); save the file as UTF-8")
    reason = str(err).replace("In CSV column #0: ", "").replace("CSV ", "")
    return DataFormatError(f"{path}: unreadable text after line {next_line - 1} ({reason})")


def _parse_fast(lines: pa.Array, first_line: int, n_features: int | None) -> LibsvmBlock | None:
    """Vectorised parse of well-formed lines; None when anything looks wrong.

    ``n_features`` None: indices up to :data:`MAX_INFERRED_FEATURES`.
    """
    limit = MAX_INFERRED_FEATURES if n_features is None else n_features
    if pc.any(pc.match_substring(lines, "#")).as_py():
        lines = pc.replace_substring_regex(lines, "#.*", "")
    if pc.any(pc.match_substring_regex(lines, _SUSPECT)).as_py():
        return None
    colons = pc.count_substring(lines, ":").to_numpy(zero_copy_only=False).astype(np.int64)
    # Arrow's split keeps an empty token for leading/trailing whitespace: trim first.
    tokens = pc.ascii_split_whitespace(pc.ascii_trim_whitespace(pc.replace_substring(lines, ":", " ")))
    counts = pc.list_value_length(tokens).to_numpy(zero_copy_only=False).astype(np.int64)
    nonblank = counts > 0
    if not np.array_equal(counts[nonblank], 1 + 2 * colons[nonblank]):
        return None
    try:
        flat = pc.cast(pc.list_flatten(tokens), pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    offsets = tokens.offsets.to_numpy()
    starts = offsets[:-1][nonblank]
    is_label = np.zeros(len(flat), dtype=bool)
    is_label[starts] = True
    labels = flat[starts]
    pairs = flat[~is_label]
    index1, values = pairs[0::2], pairs[1::2]
    per_line = colons[nonblank]
    n = len(labels)
    if not (finite32(labels).all() and finite32(values).all()):
        return None
    if len(index1) and (index1.min() < 1 or index1.max() > limit):
        return None
    indices = index1.astype(np.int64) - 1
    # Keys increase strictly iff every line's indices are strictly increasing (sorted,
    # unique); otherwise let the line-by-line parser check for duplicates.
    width = int(indices.max()) + 2 if len(indices) else 1
    keys = np.repeat(np.arange(n, dtype=np.int64), per_line) * width + indices
    if len(keys) > 1 and not (np.diff(keys) > 0).all():
        return None
    line_numbers = first_line + np.flatnonzero(nonblank).astype(np.int64)
    indptr = np.concatenate([[0], np.cumsum(per_line)]).astype(np.int64)
    return LibsvmBlock(labels, indptr, indices, values, line_numbers)


def _parse_line(text: str, n_features: int | None, inferred: bool = False) -> tuple[float, list[int], list[float]] | str | None:
    """Parse one line: ``(label, indices0, values)``, None if blank, or an error message.

    ``inferred``: ``n_features`` was inferred from the file (an index above
    :data:`MAX_INFERRED_FEATURES` then reads as such, not as "exceeds n_features").
    """
    tokens = text.split("#", 1)[0].split()
    if not tokens:
        return None
    if ":" in tokens[0]:
        return f"missing label (line starts with the feature {tokens[0]!r})"
    label, problem = parse_finite(tokens[0], "label")
    if label is None:
        return problem
    indices: list[int] = []
    values: list[float] = []
    seen: set[int] = set()
    for tok in tokens[1:]:
        if tok.startswith("qid:"):
            continue
        head, sep, tail = tok.partition(":")
        if not sep or not head or not tail or ":" in tail:
            return f"malformed feature {tok!r} (expected index:value)"
        if not head.isdigit():
            return f"feature index {head!r} is not a positive integer"
        index = int(head)
        if index < 1:
            return f"feature index {index} (indices are 1-based)"
        if (n_features is None or inferred) and index > MAX_INFERRED_FEATURES:
            return (f"feature index {index} is above {MAX_INFERRED_FEATURES:,}, the most features okl infers; "
                    "pass --n_features if the rows really are that wide")
        if n_features is not None and index > n_features:
            return f"feature index {index} exceeds n_features = {n_features}"
        if index in seen:
            return f"duplicate feature index {index}"
        value, problem = parse_finite(tail, f"value of feature {index}")
        if value is None:
            return problem
        seen.add(index)
        indices.append(index - 1)
        values.append(value)
    return label, indices, values


def _parse_slow(lines: list, first_line: int, n_features: int | None, path: str, rejects, inferred: bool = False) -> tuple[LibsvmBlock, int]:
    """Line-by-line parse: the exact error, or bad lines skipped into ``rejects``."""
    labels, indptr, indices, values, line_numbers = [], [0], [], [], []
    n_bad = 0
    for j, text in enumerate(lines):
        line = first_line + j
        parsed = _parse_line(text, n_features, inferred)
        if parsed is None:
            continue
        if isinstance(parsed, str):
            if rejects is None:
                raise DataFormatError(f"{path}, line {line}: {parsed}")
            n_bad += 1
            rejects.add(line=line, reason=parsed, text=text)
            continue
        label, idx, vals = parsed
        labels.append(label)
        indices.extend(idx)
        values.extend(vals)
        indptr.append(len(indices))
        line_numbers.append(line)
    block = LibsvmBlock(
        np.array(labels, dtype=np.float64), np.array(indptr, dtype=np.int64), np.array(indices, dtype=np.int64),
        np.array(values, dtype=np.float64), np.array(line_numbers, dtype=np.int64),
    )
    return block, n_bad


def iter_libsvm(path, *, n_features: int | None = None, rejects=None, block_bytes: int = BLOCK_BYTES, position: list | None = None,
                inferred: bool = False) -> Iterator[tuple[LibsvmBlock, int]]:
    """Yield ``(block, n_bad)`` for consecutive blocks of ``path``.

    Parameters
    ----------
    n_features : int, optional
        Indices beyond it are errors (None: beyond :data:`MAX_INFERRED_FEATURES`).
    inferred : bool
        ``n_features`` was inferred by a first pass (indices beyond the inference cap are
        reported as such).
    rejects : RejectLog or None
        None: a bad line raises :class:`DataFormatError` naming the file and line. A
        :class:`RejectLog`: bad lines are recorded there and skipped (a first pass's
        ``RejectLog(None, ...)`` only counts them and keeps the first).
    position : list, optional
        ``position[0]`` is kept at the on-disk bytes read (progress).
    """
    path = os.fspath(path)
    position = position if position is not None else [0]
    for first_line, lines in _line_batches(path, block_bytes, position):
        block = _parse_fast(lines, first_line, n_features)
        if block is not None:
            yield block, 0
        else:
            yield _parse_slow(lines.to_pylist(), first_line, n_features, path, rejects, inferred)


@dataclasses.dataclass
class LibsvmScan:
    """What a first pass learned: rows, largest index, labels, statistics, bad lines (and the first of them)."""

    n_rows: int
    max_index: int
    labels: LabelCollector
    feature_stats: ColumnStats | None
    target_stats: ColumnStats | None
    n_bad: int
    first_bad: str | None = None  # "line 3: reason" of the first bad line (skip_bad_rows)


def scan_libsvm(path, *, n_features=None, feature_stats=False, target_stats=False, skip_bad_rows=False, progress=None, block_bytes=BLOCK_BYTES) -> LibsvmScan:
    """First pass: count rows, find the largest index, collect labels and statistics.

    Feature statistics are over the dense rows (implicit zeros included); columns first
    seen late are back-filled with the zeros of the rows before them, so the statistics
    are those of the final dense matrix.
    """
    path = os.fspath(path)
    progress = progress or NullProgress()
    collector = LabelCollector()
    fstats = ColumnStats(n_features or 0) if feature_stats else None
    tstats = ColumnStats(1) if target_stats else None
    n_rows = max_index = n_bad = 0
    position = [0]
    counted = RejectLog(None, ("line", "reason")) if skip_bad_rows else None  # counts, keeps the first for errors
    progress.start(os.path.getsize(path), "B", "scan")
    for block, bad in iter_libsvm(path, n_features=n_features, rejects=counted, block_bytes=block_bytes, position=position):
        n_bad += bad
        n_rows += len(block)
        max_index = max(max_index, block.max_index)
        collector.add(block.labels)
        if fstats is not None:
            width = n_features or max(max_index, fstats.min.shape[0])
            fstats.grow(width)
            for part in block.slices(width):
                fstats.add(part.dense(width, np.float64))
        if tstats is not None:
            tstats.add(block.labels[:, None])
        progress.update(position[0])
    progress.finish()
    return LibsvmScan(n_rows, max_index, collector, fstats, tstats, n_bad, counted.first if counted else None)


def read_libsvm(path, n_features: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Read a whole LIBSVM file into memory (one pass).

    Returns
    -------
    X : ndarray of float32, shape (n, d)
        Dense features; ``d = n_features`` or the largest index in the file.
    y : ndarray of float64, shape (n,)
        The labels as written in the file (not mapped), like scikit-learn's
        ``load_svmlight_file``.
    """
    blocks = [block for block, _ in iter_libsvm(path, n_features=n_features)]
    d = n_features if n_features is not None else max([b.max_index for b in blocks] + [0])
    if d < 1:
        raise DataFormatError(f"{path}: no features found (pass n_features)")
    X = np.concatenate([b.dense(d) for b in blocks]) if blocks else np.zeros((0, d), np.float32)
    y = np.concatenate([b.labels for b in blocks]) if blocks else np.zeros(0)
    return X, y


def convert_libsvm(
    path, out, *, n_features=None, task=None, classes=None, like=None, feature_scaling="none", target_scaling="none",
    skip_bad_rows=False, rows_per_shard=65536, n_shards=None, row_group_rows=4096, overwrite=False, name=None, compression=DEFAULT_COMPRESSION,
    progress=None, block_bytes=BLOCK_BYTES,
) -> ConversionSummary:
    """Convert a LIBSVM file into a data set at ``out`` (see the module docstring).

    Parameters
    ----------
    n_features : int, optional
        Feature count; default: the largest index (first pass).
    task : {'binary', 'multiclass', 'regression'}, optional
        Default: inferred from the labels (:mod:`okl_core.data.targets`).
    classes : sequence, optional
        Original labels in class order (binary: negative, positive); skips label inference.
    like : Dataset or DatasetInfo, optional
        Reuse a data set's n_features, task, classes and scalings (a test set labelled and
        scaled like its training set).
    feature_scaling, target_scaling : str
        :data:`okl_core.data.scaling.SCALING_METHODS`; target scaling only for regression.
    skip_bad_rows : bool
        Skip bad lines into ``rejects.csv`` instead of stopping at the first.
    rows_per_shard, n_shards : int
        Shard size, or the number of equal shards (needs the first pass).
    """
    started = time.perf_counter()
    path = os.fspath(path)
    progress = progress or NullProgress()
    label_map, d, fscale, tscale, scan = _plan(path, n_features, task, classes, like, feature_scaling, target_scaling, skip_bad_rows, progress, block_bytes, force_scan=n_shards is not None)
    if n_shards is not None:
        rows_per_shard = _equal_shards(scan.n_rows, n_shards)
    info = {
        "classes": label_map.classes_json(),
        "source": f"libsvm:{os.path.abspath(path)}",
        "feature_scaling": {"features": fscale.to_json(), "target": tscale.to_json()},
    }
    if name:
        info["name"] = name
    position = [0]
    scaled = ScaledRows(label_map.task, fscale, tscale, path)
    progress.start(os.path.getsize(path), "B", "convert")
    with DatasetWriter(out, d, label_map.task, rows_per_shard=rows_per_shard, row_group_rows=row_group_rows, overwrite=overwrite, compression=compression, **info) as writer:
        rejects = RejectLog(writer.staging_dir, ("line", "reason", "text")) if skip_bad_rows else None
        inferred = n_features is None and like is None
        for block, _ in iter_libsvm(path, n_features=d, rejects=rejects, block_bytes=block_bytes, position=position, inferred=inferred):
            y, ok = label_map.encode(block.labels)
            if not ok.all():
                block, y = _drop_unknown_labels(block, y, ok, label_map, path, rejects)
            # Dense float64 only when scaling, so values are rounded to float32 once.
            dtype = np.float32 if fscale.method == "none" else np.float64
            start = 0
            for part in block.slices(d):
                writer.write(*scaled(part.dense(d, dtype), y[start : start + len(part)]))
                start += len(part)
            progress.update(position[0])
        rejected = rejects.close() if rejects is not None else None
        if not writer.n_rows:  # no scan found it out first (labels and width given)
            raise no_rows(path, rejects.count if rejects else 0, rejects.first if rejects else None)
        writer.set_info(extra={"rejects": rejected} if rejected else {}, target_range=scaled.target_range)
    progress.finish()
    return ConversionSummary(writer.info, writer.path, n_rejected=rejected["count"] if rejected else 0, seconds=time.perf_counter() - started, bytes_read=os.path.getsize(path))


def _equal_shards(n_rows: int, n_shards: int) -> int:
    if int(n_shards) < 1:
        raise ValueError(f"n_shards must be >= 1, got {n_shards}")
    return max(1, -(-int(n_rows) // int(n_shards)))


def _plan(path, n_features, task, classes, like, feature_scaling, target_scaling, skip_bad_rows, progress, block_bytes, force_scan=False):
    """Decide label map, width and scalings (and the scan), with a first pass only when needed."""
    scan = scan_libsvm(path, n_features=n_features, skip_bad_rows=skip_bad_rows, progress=progress, block_bytes=block_bytes) if force_scan and like is not None else None
    if like is not None:
        like_info = getattr(like, "info", like)
        if n_features is not None and int(n_features) != like_info.n_features:
            raise ValueError(f"n_features {n_features} differs from the reference data set's {like_info.n_features}")
        label_map = LabelMap.from_info(like_info.task, like_info.classes)
        recorded = like_info.feature_scaling or {}
        fscale = Scaling.from_json(recorded.get("features", {"method": "none"}), like_info.n_features, like_info.name)
        tscale = Scaling.from_json(recorded.get("target", {"method": "none"}), 1, like_info.name)
        return label_map, like_info.n_features, fscale, tscale, scan
    if task is not None and task != "regression" and target_scaling != "none":
        raise ValueError("target scaling applies to regression targets only")
    given_labels = classes is not None or task == "regression"
    need_scan = force_scan or n_features is None or not given_labels or feature_scaling != "none" or target_scaling != "none"
    if need_scan:
        scan = scan_libsvm(
            path, n_features=n_features, feature_stats=feature_scaling != "none", target_stats=target_scaling != "none",
            skip_bad_rows=skip_bad_rows, progress=progress, block_bytes=block_bytes,
        )
    if scan is not None and not scan.n_rows:  # before inferring a task from no labels
        raise no_rows(path, scan.n_bad, scan.first_bad)
    if classes is not None:
        classes = tuple(classes)
        label_map = LabelMap(task or ("binary" if len(classes) == 2 else "multiclass"), classes)
    elif task == "regression":
        label_map = LabelMap("regression")
    else:
        assert scan is not None  # labels not given: scanned
        label_map = infer_label_map(scan.labels, task, source=path)
    if label_map.task != "regression" and target_scaling != "none":
        raise ValueError(f"{path}: target scaling applies to regression targets only (the labels make this {label_map.task})")
    if n_features is not None:
        d = int(n_features)
    else:
        assert scan is not None  # no n_features: scanned
        d = scan.max_index
    if d < 1:
        raise DataFormatError(f"{path}: no features found (pass --n_features)")
    fscale = Scaling.fit(feature_scaling, scan.feature_stats if scan else None, where=path)
    tscale = Scaling.fit(target_scaling, scan.target_stats if scan else None, "--target_scaling", path)
    return label_map, d, fscale, tscale, scan


def _drop_unknown_labels(block, y, ok, label_map, path, rejects):
    first_bad = int(np.flatnonzero(~ok)[0])
    if rejects is None:
        raise DataFormatError(f"{path}, line {int(block.lines[first_bad])}: label {block.labels[first_bad]:g} is not one of the classes {label_map.classes_json()}")
    for j in np.flatnonzero(~ok):
        rejects.add(line=int(block.lines[j]), reason=f"label {block.labels[j]:g} is not one of the classes {label_map.classes_json()}", text="")
    return block.select(ok), y[ok]
