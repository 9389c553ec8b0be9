"""ReadShards: a Parquet data set -> ``(shard, BatchPiece)`` elements and dead letters.

The unit of reading is one Parquet row group. At pipeline construction the data set's
footers are listed (:class:`DatasetSource`); each row group becomes a small read task,
and the tasks are spread over workers. A task reads its rows, checks them
(:func:`okl_core.data.validate.check_rows`), and cuts its stream positions by the
:class:`~okl_core.data.plan.StreamPlan` into pieces of batches keyed by shard. Keys and
sequence numbers come from positions, so they do not depend on which worker reads what,
in which order, or on how the data set is split into files and row groups.

Bad rows go to the ``dead_letter`` output as JSON lines (row, position, shard, round,
file, reason); they never reach a learner.
"""

from __future__ import annotations

import dataclasses
import json
import random
import typing

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
from apache_beam.metrics import Metrics

from okl_core.data.layout import open_dataset
from okl_core.data.plan import StreamPlan
from okl_core.data.validate import check_rows
from transforms.elements import BatchPiece

__all__ = ["DatasetSource", "ReadShards", "METRICS_NAMESPACE"]

METRICS_NAMESPACE = "okl"


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
    """

    name: str
    path: str
    task: str
    n_features: int
    n_classes: int | None
    row_groups: tuple

    @classmethod
    def open(cls, path: str) -> "DatasetSource":
        """List the row groups of the data set at ``path`` (directory, file or glob).

        Raises
        ------
        FileNotFoundError, ValueError
            From :func:`okl_core.data.layout.open_dataset`, naming the path.
        """
        dataset = open_dataset(path)
        groups, position = [], 0
        for shard in dataset.shards:
            try:
                metadata = pq.ParquetFile(shard.path).metadata
            except Exception as err:  # pyarrow raises several types for unreadable files
                raise ValueError(f"{shard.path}: not a readable Parquet file ({err})") from None
            for g in range(metadata.num_row_groups):
                rows = metadata.row_group(g).num_rows
                if rows:
                    groups.append((shard.path, g, position, rows))
                position += rows
        info = dataset.info
        n_classes = info.n_classes if info.task == "multiclass" else None
        return cls(info.name, str(path), info.task, int(info.n_features), n_classes, tuple(groups))

    @property
    def n_rows(self) -> int:
        """Rows (stream positions) in the data set."""
        return sum(g[3] for g in self.row_groups)

    def read_rows(self, limit: int) -> np.ndarray:
        """The first ``limit`` finite rows of ``x`` (for the median heuristic)."""
        parts, have = [], 0
        for path, g, _, _ in self.row_groups:
            table = pq.ParquetFile(path).read_row_group(g, columns=["x", "y", "row"])
            X = check_rows(table, self.n_features, "regression").X  # labels not needed here
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


class _ReadRowGroup(beam.DoFn):
    """Read one row group, check its rows, emit pieces of batches and dead letters."""

    def __init__(self, source: DatasetSource, plan: StreamPlan, round: int | None, split: str):
        self.source, self.plan, self.round, self.split = source, plan, round, split
        self.rows_read = Metrics.counter(METRICS_NAMESPACE, f"{split}_rows_read")
        self.rows_rejected = Metrics.counter(METRICS_NAMESPACE, f"{split}_rows_rejected")

    def setup(self):
        self._files: dict[str, pq.ParquetFile] = {}

    def _file(self, path: str) -> pq.ParquetFile:
        if path not in self._files:
            if len(self._files) >= 8:  # keep a few footers open; row groups arrive grouped by file
                self._files.clear()
            self._files[path] = pq.ParquetFile(path)
        return self._files[path]

    def process(self, task):
        path, group, first, n = task
        table = self._file(path).read_row_group(group, columns=["x", "y", "row"])
        if table.num_rows != n:
            raise ValueError(f"{path}: row group {group} has {table.num_rows} rows, the listing said {n}; was the data set rewritten?")
        checked = check_rows(table, self.source.n_features, self.source.task, self.source.n_classes)
        positions = np.arange(first, first + n, dtype=np.int64)
        shard, rnd, seq = self.plan.locate(positions)
        mine = np.ones(n, dtype=bool) if self.round is None else rnd == self.round
        self.rows_read.inc(int(mine.sum()))
        yield from self._dead_letters(path, checked, positions, shard, rnd, mine)
        good_before = np.concatenate([[0], np.cumsum(checked.good)])  # good rows before index i
        for i0, i1 in _runs(np.stack([shard, rnd, seq], axis=1)):
            if not mine[i0]:
                continue
            a, b = good_before[i0], good_before[i1]
            piece = BatchPiece(
                int(shard[i0]), int(rnd[i0]), int(seq[i0]), int(positions[i0]), int(positions[i1 - 1]) + 1,
                checked.X[a:b], checked.y[a:b], checked.row[a:b],
            )
            yield piece.shard, piece

    def _dead_letters(self, path, checked, positions, shard, rnd, mine):
        bad_index = np.flatnonzero(~checked.good)
        for k, i in enumerate(bad_index):
            if not mine[i]:
                continue
            self.rows_rejected.inc()
            record = {
                "split": self.split, "row": int(checked.bad_row[k]), "position": int(positions[i]), "shard": int(shard[i]),
                "round": int(rnd[i]), "file": path, "reason": checked.reasons[k],
            }
            yield beam.pvalue.TaggedOutput("dead_letter", json.dumps(record, sort_keys=True))


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
    shuffle_seed : int, optional
        Permute the read tasks (tests: the result must not depend on delivery order).

    Returns
    -------
    dict
        ``{"batches": PCollection[(int, BatchPiece)], "dead_letter": PCollection[str]}``.
    """

    def __init__(self, source: DatasetSource, plan: StreamPlan, round: int | None = None, split: str = "train", shuffle_seed: int | None = None):
        super().__init__()
        if plan.n_rows != source.n_rows:
            raise ValueError(f"plan is for {plan.n_rows} rows but {source.path} has {source.n_rows}")
        self.source, self.plan, self.round, self.split, self.shuffle_seed = source, plan, round, split, shuffle_seed

    def _tasks(self) -> list:
        tasks = list(self.source.row_groups)
        if self.round is not None:
            segments = [self.plan.segment_bounds(s, self.round) for s in range(self.plan.num_shards)]
            tasks = [t for t in tasks if any(t[2] < stop and start < t[2] + t[3] for start, stop in segments)]
        if self.shuffle_seed is not None:
            random.Random(self.shuffle_seed).shuffle(tasks)
        return tasks

    def expand(self, pbegin):
        outputs = (
            pbegin
            | "ListRowGroups" >> beam.Create(self._tasks())
            | "ReadRowGroups"
            >> beam.ParDo(_ReadRowGroup(self.source, self.plan, self.round, self.split))
            .with_output_types(typing.Tuple[int, BatchPiece])
            .with_outputs("dead_letter", main="batches")
        )
        return {"batches": outputs.batches, "dead_letter": outputs.dead_letter}
