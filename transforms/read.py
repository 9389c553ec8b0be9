"""ReadShards: a Parquet data set -> ``(shard, BatchPiece)`` elements and dead letters.

The unit of reading is one Parquet row group. At pipeline construction the data set's
footers are listed (:class:`DatasetSource`); each row group becomes a small read task,
and the tasks are spread over workers. A task reads its rows, checks them
(:func:`okl_core.data.validate.check_rows`), and cuts its stream positions by the
:class:`~okl_core.data.plan.StreamPlan` into pieces of batches keyed by shard. Keys and
sequence numbers come from positions, so they do not depend on which worker reads what,
in which order, or on how the data set is split into files and row groups.

Bad rows go to the ``dead_letter`` output as JSON lines (row, position, shard, round,
file, reason); they never reach a learner. So do the rows of a row group that cannot be
read or decoded (a corrupt page: reason ``unreadable row group``, row -1): what can be
checked before the job -- the schema, and each file's rows against ``dataset.json`` -- is
checked when the data set is opened (:func:`okl_core.data.layout.check_shard`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import json
import os
import random
import tempfile
import time
import typing

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from okl_core.data.layout import (INFO_FILE, DatasetInfo, check_classes, check_listing, check_shard, one_line, open_dataset,
                                  read_row_group, row_group_sizes)
from okl_core.data.plan import StreamPlan
from okl_core.data.validate import check_rows, unreadable_rows
from okl_core.state import MAX_MODEL_BYTES, ModelFileError, read_model_file
from transforms.elements import BatchPiece, PieceRef
from transforms.worker import settle_worker_process

__all__ = ["DatasetSource", "ReadShards", "RowGroupReader", "piece_refs", "is_remote", "open_binary", "read_bytes", "METRICS_NAMESPACE"]

METRICS_NAMESPACE = "okl"


def is_remote(path: str) -> bool:
    """True for paths with a scheme (``gs://``, ...), read through Beam's FileSystems."""
    return "://" in str(path)


def open_binary(path: str):
    """What pyarrow should open: the local path, or a seekable FileSystems stream."""
    if is_remote(path):
        return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    return path


def read_bytes(path: str, max_bytes: int = MAX_MODEL_BYTES) -> bytes:
    """Read a model file, local or through Beam's FileSystems, never more than ``max_bytes``.

    A local path must be a regular file (:func:`okl_core.state.read_model_file`: a device
    or a FIFO would never end); a remote object is read in 1 MiB pieces up to the limit.

    Raises
    ------
    okl_core.ModelFileError
        A local path that is not a regular file, or more than ``max_bytes``.
    """
    if not is_remote(path):
        return read_model_file(path, max_bytes)
    parts: list[bytes] = []
    total = 0
    with FileSystems.open(path, compression_type="uncompressed") as f:
        while total <= max_bytes:
            part = f.read(1 << 20)
            if not part:
                return b"".join(parts)
            parts.append(part)
            total += len(part)
    raise ModelFileError(f"{path}: more than the limit of {max_bytes} bytes for a model file")


def _remote_dataset(path: str) -> tuple[DatasetInfo, list[str]]:
    """``dataset.json`` and shard files of a data set directory on a remote file system."""
    info_path = FileSystems.join(path, INFO_FILE)
    if not FileSystems.exists(info_path):
        raise FileNotFoundError(f"{path}: no {INFO_FILE}; remote inputs must be okl data set directories (globs are local only)")
    with FileSystems.open(info_path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        text = f.read()
    with tempfile.TemporaryDirectory() as tmp:  # DatasetInfo validates files; reuse it on a local copy
        local = os.path.join(tmp, INFO_FILE)
        with open(local, "wb") as f:
            f.write(text)
        try:
            info = DatasetInfo.from_file(local)
        except ValueError as err:
            raise ValueError(str(err).replace(local, info_path)) from None
    files = [FileSystems.join(path, shard["file"]) for shard in info.shards]
    return info, files


def _footer(file: str) -> pq.ParquetFile:
    """A Parquet file opened (its footer read), local or remote; errors name the file."""
    try:
        return pq.ParquetFile(open_binary(file))
    except Exception as err:  # pyarrow and the file systems raise several types
        raise ValueError(f"{file}: not a readable Parquet file ({one_line(err)})") from None


def _remote_group_rows(file: str, info: DatasetInfo, k: int, labels_optional: bool) -> tuple:
    """Rows of each row group of shard ``k`` of a remote data set, the shard checked against ``info`` (one footer read)."""
    parquet = _footer(file)
    shard = info.shards[k]
    check_shard(file, parquet.metadata, parquet.schema_arrow, info, int(shard["n_rows"]), int(shard["first_row"]), labels_optional)
    return row_group_sizes(parquet.metadata)


@dataclasses.dataclass(frozen=True)
class DatasetSource:
    """What the read steps need to know about a data set (plain data, cheap to ship).

    Attributes
    ----------
    name : str
    path : str
        Directory or glob it was opened from.
    task : str
    n_features : int
    n_classes : int or None
    row_groups : tuple of (file, group index, first position, rows)
        Every row group, in stream order.
    classes : tuple or None
        The labels the stored codes stand for (``dataset.json``'s ``classes``), when recorded
        (None for Parquet files without one: their classes are the codes themselves).
    """

    name: str
    path: str
    task: str
    n_features: int
    n_classes: int | None
    row_groups: tuple
    classes: tuple | None = None

    @classmethod
    def open(cls, path: str, task: str | None = None, classes: list | None = None, labels_optional: bool = False,
             files_own_rows: bool = True, skip: frozenset[str] = frozenset()) -> "DatasetSource":
        """List the row groups of the data set at ``path``.

        ``path`` is a local data set directory, Parquet file or glob, or a data set
        directory (with ``dataset.json``) under any scheme Beam's FileSystems know
        (``gs://...`` with ``apache-beam[gcp]``), read by the workers themselves.
        ``task``, ``classes``, ``labels_optional``, ``files_own_rows`` and ``skip`` are for files
        without ``dataset.json`` (:func:`okl_core.data.layout.open_dataset`).

        Raises
        ------
        FileNotFoundError, ValueError
            Missing or unreadable data, naming the path.
        """
        path = str(path)
        if is_remote(path):  # a local data set is checked by open_dataset; a remote one here, file by file
            info, files = _remote_dataset(path)
            check_listing(info, FileSystems.join(path, INFO_FILE))
            check_classes(info, FileSystems.join(path, INFO_FILE))
            group_rows = [_remote_group_rows(file, info, k, labels_optional) for k, file in enumerate(files)]
            recorded = info.classes
        else:
            dataset = open_dataset(path, task, classes, labels_optional, files_own_rows, skip)
            info, files = dataset.info, [shard.path for shard in dataset.shards]
            check_classes(info, os.path.join(path, INFO_FILE))
            # the row groups of the footers open_dataset read (a Dataset built by hand may not have them)
            group_rows = [shard.group_rows if shard.group_rows is not None else row_group_sizes(_footer(shard.path).metadata) for shard in dataset.shards]
            # Only a dataset.json records what the codes stand for; a glob's classes are the codes it inferred.
            recorded = dataset.recorded_classes
        groups, position = [], 0
        for file, sizes in zip(files, group_rows):
            for g, rows in enumerate(sizes):
                if rows:
                    groups.append((file, g, position, rows))
                position += rows
        n_classes = info.n_classes if info.task == "multiclass" else None
        return cls(info.name, path, info.task, int(info.n_features), n_classes, tuple(groups), None if recorded is None else tuple(recorded))

    @property
    def n_rows(self) -> int:
        """Rows (stream positions) in the data set."""
        return sum(g[3] for g in self.row_groups)

    def read_rows(self, limit: int) -> np.ndarray:
        """The first ``limit`` finite rows of ``x`` (for the median heuristic).

        Read as training reads them (page checksums verified): a row group that cannot be
        read is skipped here, as training dead-letters its rows, instead of ending the launch.
        """
        parts, have, files = [], 0, {}
        for path, g, _, _ in self.row_groups:
            try:
                if path not in files:  # each footer parsed once; the first few files hold the rows
                    files = {path: pq.ParquetFile(open_binary(path), page_checksum_verification=True)}
                table = read_row_group(files[path], g)  # files to be scored may have no y
            except (OSError, pa.ArrowException):
                continue
            X = check_rows(table, self.n_features, "regression", judge_labels=False).X  # labels not needed here
            parts.append(X[: limit - have])
            have += len(parts[-1])
            if have >= limit:
                break
        return np.concatenate(parts) if parts else np.zeros((0, self.n_features), np.float32)


def _runs(keys: np.ndarray) -> list[tuple[int, int]]:
    """``[start, stop)`` index ranges of equal consecutive rows of ``keys`` (n, k)."""
    if len(keys) == 0:
        return []
    change = np.flatnonzero((keys[1:] != keys[:-1]).any(axis=1)) + 1
    bounds = np.concatenate([[0], change, [len(keys)]])
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


def piece_refs(task: tuple, plan: StreamPlan, round: int | None) -> list[PieceRef]:
    """The pieces of batches in one row group ``(path, group, first position, rows)``.

    No I/O: positions alone decide shard, round and batch. Only the given ``round`` is
    kept (every round when None).
    """
    path, group, first, n = task
    positions = np.arange(first, first + n, dtype=np.int64)
    shard, rnd, seq = plan.locate(positions)
    return [
        PieceRef(int(shard[i0]), int(rnd[i0]), int(seq[i0]), first + i0, first + i1, path, group, first, n)
        for i0, i1 in _runs(np.stack([shard, rnd, seq], axis=1))
        if round is None or rnd[i0] == round
    ]


class RowGroupReader:
    """Reads and checks row groups for the DoFns, keeping the last few in memory.

    Consecutive pieces often lie in the same row group (a batch shorter than a row group,
    or a row group spanning two batches), so the last ``keep`` checked row groups are
    kept. Counts rows read and rejected in Beam counters named after ``split``.

    With ``read_ahead`` > 0 and the coming pieces announced (:meth:`plan`), their row
    groups are read on one background thread while the caller learns from the current
    ones: waiting for a file (``gs://``) then overlaps learning instead of adding to it.
    Every read then happens on that thread, one at a time. With ``prefetch`` > 0 (local
    files) the next planned row groups' bytes are only announced to the operating system
    (``posix_fadvise``: the kernel reads them into its page cache meanwhile) and decoded on
    the calling thread when needed: the same overlap of disk and learning, without a
    second thread decoding on the cores the learners use (see :class:`~transforms.train.TrainOnline`).

    Parameters
    ----------
    source : DatasetSource
    split : str
        ``train``, ``test``, ...; used in counter names and dead letters.
    keep : int
        Checked row groups kept in memory (besides those read ahead).
    read_ahead : int
        Row groups that may be read ahead of the one in use (0: read when asked).
    prefetch : int
        Row groups after the one being read whose bytes are announced to the OS (local files).
    judge_labels : bool
        False: rows are judged by their features only and keep their labels unjudged
        (:func:`okl_core.data.validate.check_rows`; scoring, where labels only feed metrics).
    """

    def __init__(self, source: DatasetSource, split: str, keep: int = 2, read_ahead: int = 0, prefetch: int = 0, judge_labels: bool = True):
        self.source, self.split, self.keep, self.read_ahead_groups = source, split, keep, int(read_ahead)
        self.judge_labels = judge_labels
        self.prefetch = int(prefetch)
        self._order: list[tuple[str, int]] = []  # the planned row groups, in order (prefetch)
        self._position: dict[tuple[str, int], int] = {}
        self._hinted_upto = 0
        self.rows_read = Metrics.counter(METRICS_NAMESPACE, f"{split}_rows_read")
        self.rows_rejected = Metrics.counter(METRICS_NAMESPACE, f"{split}_rows_rejected")
        self._files: dict[str, pq.ParquetFile] = {}
        self._groups: dict[tuple[str, int], object] = {}
        self._ahead: dict[tuple[str, int], concurrent.futures.Future] = {}
        self._plan: collections.deque = collections.deque()
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="okl-read") if self.read_ahead_groups else None
        self.cpu_seconds = 0.0
        """CPU seconds spent reading and checking row groups (on whichever thread read them)."""

    def close(self) -> None:
        """Stop the read-ahead thread (pending reads are dropped)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._ahead.clear()
        self._plan.clear()
        self._order, self._position = [], {}

    def _file(self, path: str) -> pq.ParquetFile:
        if path not in self._files:
            if len(self._files) >= 8:
                self._files.clear()
            self._files[path] = pq.ParquetFile(open_binary(path), page_checksum_verification=True)
        return self._files[path]

    def group_rows(self, path: str) -> list[int]:
        """Rows of each row group of ``path`` (its footer; the file opened as :meth:`checked` reads it)."""
        metadata = self._file(path).metadata
        return [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]

    def _load(self, path: str, group: int, rows: int):
        """Read and check one row group (on the calling thread), counting its CPU time."""
        began = time.thread_time()
        try:
            return self._read_and_check(path, group, rows)
        finally:
            self.cpu_seconds += time.thread_time() - began  # reads run one at a time: no race

    def _read_and_check(self, path: str, group: int, rows: int):
        try:
            # One decoding thread: the reading DoFns run several in parallel already.
            table = read_row_group(self._file(path), group, use_threads=False)
        except (OSError, pa.ArrowException) as err:
            # A corrupt page or a group that cannot be decoded: found only now, so its rows
            # are dead-lettered (counted, with the reason) and the job goes on.
            checked = unreadable_rows(rows, self.source.n_features, self.source.task, f"unreadable row group: row group {group} ({one_line(err)})")
            return checked, np.zeros(rows + 1, np.int64), np.arange(1, rows + 1)
        if table.num_rows != rows:
            raise ValueError(f"{path}: row group {group} has {table.num_rows} rows, the listing said {rows}; was the data set rewritten?")
        checked = check_rows(table, self.source.n_features, self.source.task, self.source.n_classes, self.judge_labels)
        return checked, np.concatenate([[0], np.cumsum(checked.good)]), np.cumsum(~checked.good)

    def plan(self, refs) -> None:
        """Announce the pieces that will be read, in the order they will be read.

        With ``read_ahead`` > 0 their row groups are then read in that order on the
        background thread, at most ``read_ahead`` of them ahead of the one in use.
        """
        self._plan = collections.deque(dict.fromkeys((ref.path, ref.group, ref.group_rows) for ref in refs))
        planned = {(path, group) for path, group, _ in self._plan}
        self._order = [(path, group) for path, group, _ in self._plan]
        self._position = {key: i for i, key in enumerate(self._order)}
        self._hinted_upto = 0
        self._hint_after(-1)
        for key in [k for k in self._ahead if k not in planned]:  # left by an interrupted earlier plan
            self._ahead.pop(key).cancel()
        self._top_up()

    def _top_up(self) -> None:
        while self._pool is not None and self._plan and len(self._ahead) < self.read_ahead_groups:
            path, group, rows = self._plan.popleft()
            if (path, group) not in self._groups and (path, group) not in self._ahead:
                self._ahead[(path, group)] = self._pool.submit(self._load, path, group, rows)

    def checked(self, path: str, group: int, rows: int):
        """The :class:`~okl_core.data.validate.CheckedRows` of a row group, with a good-row index."""
        key = (path, group)
        if key not in self._groups:
            if key in self._ahead:
                value = self._ahead.pop(key).result()
            elif self._pool is not None:  # keep every read on the one reading thread
                value = self._pool.submit(self._load, path, group, rows).result()
            else:
                value = self._load(path, group, rows)
            if len(self._groups) >= self.keep:
                self._groups.pop(next(iter(self._groups)))
            self._groups[key] = value
            self._top_up()
            self._hint_after(self._position.get(key))
        return self._groups[key]

    def _hint_after(self, index: int | None) -> None:
        """Announce the ``prefetch`` planned row groups after position ``index`` of the plan."""
        if not self.prefetch or index is None:
            return
        stop = min(index + 1 + self.prefetch, len(self._order))
        began = time.thread_time()  # reading's CPU: the kernel starts the reads (page cache misses) here
        for path, group in self._order[max(self._hinted_upto, index + 1) : stop]:
            self._hint(path, group)
        self._hinted_upto = max(self._hinted_upto, stop)
        self.cpu_seconds += time.thread_time() - began

    def _hint(self, path: str, group: int) -> None:
        """Ask the OS to read a local row group's bytes into its page cache (returns at once)."""
        if is_remote(path) or not hasattr(os, "posix_fadvise"):
            return
        try:
            start, stop = _byte_range(self._file(path).metadata, group)
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, start, stop - start, os.POSIX_FADV_WILLNEED)
            finally:
                os.close(fd)
        except (OSError, ValueError, pa.ArrowException):
            pass  # only a hint: the read itself reports what is wrong with the file

    def materialize(self, ref: PieceRef) -> tuple[BatchPiece, list[str]]:
        """The rows of ``ref`` and the dead-letter records (JSON) of its bad rows."""
        checked, good_before, bad_upto = self.checked(ref.path, ref.group, ref.group_rows)
        i0, i1 = ref.start - ref.group_first, ref.stop - ref.group_first
        a, b = good_before[i0], good_before[i1]
        piece = BatchPiece(ref.shard, ref.round, ref.seq, ref.start, ref.stop, checked.X[a:b], checked.y[a:b], checked.row[a:b])
        dead = []
        bad_index = np.flatnonzero(~checked.good[i0:i1]) + i0
        for i in bad_index:
            k = int(bad_upto[i]) - 1  # index of this bad row among the group's bad rows
            record = {
                "split": self.split, "row": int(checked.bad_row[k]), "position": int(ref.group_first + i), "shard": ref.shard,
                "round": ref.round, "file": ref.path, "reason": checked.reasons[k],
            }
            dead.append(json.dumps(record, sort_keys=True))
        self.rows_read.inc(i1 - i0)
        self.rows_rejected.inc(len(dead))
        return piece, dead


def _byte_range(metadata, group: int) -> tuple[int, int]:
    """``[start, stop)`` byte offsets of row group ``group``'s column chunks in its file."""
    chunks = [metadata.row_group(group).column(c) for c in range(metadata.num_columns)]
    starts = [c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset for c in chunks]
    return min(starts), max(s + c.total_compressed_size for s, c in zip(starts, chunks))


class _ReadRowGroup(beam.DoFn):
    """Read one row group: pieces of batches with their rows, and dead letters."""

    def __init__(self, source: DatasetSource, plan: StreamPlan, round: int | None, split: str, judge_labels: bool = True):
        self.source, self.plan, self.round, self.split, self.judge_labels = source, plan, round, split, judge_labels

    def setup(self):
        settle_worker_process()
        self.reader = RowGroupReader(self.source, self.split, keep=1, judge_labels=self.judge_labels)

    def process(self, task):
        for ref in piece_refs(task, self.plan, self.round):
            piece, dead = self.reader.materialize(ref)
            for record in dead:
                yield beam.pvalue.TaggedOutput("dead_letter", record)
            yield piece.shard, piece


class _ListPieces(beam.DoFn):
    """List the pieces of batches in one row group, without reading it."""

    def __init__(self, plan: StreamPlan, round: int | None):
        self.plan, self.round = plan, round

    def process(self, task):
        for ref in piece_refs(task, self.plan, self.round):
            yield ref.shard, ref


class ReadShards(beam.PTransform):
    """Read a data set as ``(shard, BatchPiece)`` for one round (or all) of a plan.

    Parameters
    ----------
    source : DatasetSource
    plan : StreamPlan
        Must have ``plan.n_rows == source.n_rows``.
    round : int, optional
        Emit only the positions of this round's segments (None: every position).
    split : str
        Name used in counters and dead letters (``train``, ``test``).
    materialize : bool
        True: read the rows here and emit :class:`BatchPiece` elements with their rows
        (and dead letters). False: emit :class:`PieceRef` elements and read nothing;
        :class:`~transforms.train.TrainOnline` reads the rows of its own shard (no rows
        cross the shuffle; bad rows are then reported by TrainOnline).
    shuffle_seed : int, optional
        Permute the read tasks (tests: the result must not depend on delivery order).
    judge_labels : bool
        False: only bad features make a dead letter; the pieces' ``y`` are the labels as
        read (float32, NaN where missing), for scoring (``pipelines.predict``).

    Returns
    -------
    dict
        ``{"batches": PCollection[(int, BatchPiece | PieceRef)], "dead_letter": PCollection[str]}``.
    """

    def __init__(
        self, source: DatasetSource, plan: StreamPlan, round: int | None = None, split: str = "train",
        materialize: bool = True, shuffle_seed: int | None = None, judge_labels: bool = True,
    ):
        super().__init__()
        if plan.n_rows != source.n_rows:
            raise ValueError(f"plan is for {plan.n_rows} rows but {source.path} has {source.n_rows}")
        self.source, self.plan, self.round, self.split = source, plan, round, split
        self.materialize, self.shuffle_seed, self.judge_labels = materialize, shuffle_seed, judge_labels

    def _tasks(self) -> list:
        tasks = list(self.source.row_groups)
        if self.round is not None:
            segments = [self.plan.segment_bounds(s, self.round) for s in range(self.plan.num_shards)]
            tasks = [t for t in tasks if any(t[2] < stop and start < t[2] + t[3] for start, stop in segments)]
        if self.shuffle_seed is not None:
            random.Random(self.shuffle_seed).shuffle(tasks)
        return tasks

    def expand(self, pbegin):
        # Row groups are spread over workers only where they are read here: references are
        # grouped by shard right after, so shuffling them first would only cost a stage.
        tasks = pbegin | "ListRowGroups" >> beam.Create(self._tasks(), reshuffle=self.materialize)
        if not self.materialize:
            refs = tasks | "ListPieces" >> beam.ParDo(_ListPieces(self.plan, self.round)).with_output_types(typing.Tuple[int, PieceRef])
            return {"batches": refs, "dead_letter": pbegin | "NoDeadLetters" >> beam.Create([]).with_output_types(str)}
        outputs = tasks | "ReadRowGroups" >> (
            beam.ParDo(_ReadRowGroup(self.source, self.plan, self.round, self.split, self.judge_labels))
            .with_output_types(typing.Tuple[int, BatchPiece])
            .with_outputs("dead_letter", main="batches")
        )
        return {"batches": outputs.batches, "dead_letter": outputs.dead_letter}
