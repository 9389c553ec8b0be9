"""How a training stream is cut into shards, rounds and batches (DESIGN.md, "transforms").

The stream is the data set's rows in order, numbered by *position* ``0..n_rows-1``
(the order of the shard files and of the rows inside them). A :class:`StreamPlan` cuts
it three ways, all pure functions of ``(n_rows, num_shards, rounds, batch_rows, align)``
and never of the file layout, so that the same rows give the same batches however the
data set is split into files and row groups:

* **shards**: ``num_shards`` contiguous parts, each trained as its own local model;
* **segments**: each shard's part is cut into ``rounds`` contiguous segments; round ``r``
  trains segment ``r`` of every shard, starting from the model merged after round
  ``r - 1`` (iterative parameter mixing; ``rounds = 1`` is one-shot averaging);
* **batches**: each segment is cut at the multiples of ``batch_rows`` (stream positions),
  so its first and last batches may be shorter; batches are numbered ``seq = 0, 1, ...``
  and a learner updates on one batch at a time. Cutting at multiples of ``batch_rows``
  rather than every ``batch_rows`` rows from the segment's start lines batches up with
  the row groups of data sets whose row groups are too (okl's writer: 4096 rows from
  position 0, the default ``batch_rows``): a batch is read from one row group instead of
  being pieced together from two (a shard whose every batch straddled two row groups
  trained about 9% slower; FOGD, MNIST-8M rows).

Boundaries are ``start + align * floor(i * length / (parts * align))``: parts are as equal
as the alignment allows and every boundary but the last falls on a multiple of ``align``
from the start. Learners defined on mini-batches (DSG) pass their mini-batch size as
``align`` (and a multiple of it as ``batch_rows``) so that only a segment's last
mini-batch can be short.

``num_shards = rounds = 1`` gives one segment, the whole stream: the paper's sequential
algorithm, batch by batch.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

__all__ = ["StreamPlan", "BatchBounds"]


@dataclasses.dataclass(frozen=True)
class BatchBounds:
    """One batch: stream positions ``[start, stop)`` of ``shard`` in ``round``, number ``seq``."""

    shard: int
    round: int
    seq: int
    start: int
    stop: int


def _cuts(start: np.ndarray, stop: np.ndarray, parts: int, align: int) -> np.ndarray:
    """``parts + 1`` boundaries of each ``[start, stop)``, aligned to ``align`` from ``start``."""
    i = np.arange(parts + 1, dtype=np.int64)
    length = (stop - start)[:, None]
    cuts = start[:, None] + align * ((i * length) // (parts * align))
    cuts[:, -1] = stop
    return cuts


@dataclasses.dataclass(frozen=True)
class StreamPlan:
    """Shards, segments and batches of a stream of ``n_rows`` positions.

    Parameters
    ----------
    n_rows : int
        Rows in the stream (>= 1).
    num_shards : int
        Local models trained in parallel (>= 1).
    rounds : int
        Train/merge stages (>= 1).
    batch_rows : int
        Positions per batch (>= 1).
    align : int
        Shard and segment boundaries fall on multiples of ``align`` from the start.

    Raises
    ------
    ValueError
        Bad numbers, or a segment that would be empty (too many shards x rounds for the
        rows).
    """

    n_rows: int
    num_shards: int = 1
    rounds: int = 1
    batch_rows: int = 4096
    align: int = 1

    def __post_init__(self):
        for name in ("n_rows", "num_shards", "rounds", "batch_rows", "align"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        starts = self.segment_starts()
        lengths = np.diff(np.append(starts, self.n_rows))
        if (lengths < 1).any():
            raise ValueError(
                f"cannot cut {self.n_rows} rows into {self.num_shards} shards x {self.rounds} rounds"
                + (f" aligned to {self.align} rows" if self.align > 1 else "")
                + ": some segments would be empty; use fewer shards or rounds"
            )

    @functools.cached_property
    def _segment_cuts(self) -> np.ndarray:
        """``(num_shards, rounds + 1)`` segment boundaries."""
        shards = _cuts(np.zeros(1, np.int64), np.full(1, self.n_rows, np.int64), self.num_shards, self.align)[0]
        return _cuts(shards[:-1], shards[1:], self.rounds, self.align)

    def shard_bounds(self, shard: int) -> tuple[int, int]:
        """Positions ``[start, stop)`` of ``shard``."""
        return int(self._segment_cuts[shard, 0]), int(self._segment_cuts[shard, -1])

    def segment_bounds(self, shard: int, round: int) -> tuple[int, int]:
        """Positions ``[start, stop)`` of segment ``round`` of ``shard``."""
        return int(self._segment_cuts[shard, round]), int(self._segment_cuts[shard, round + 1])

    def segment_starts(self) -> np.ndarray:
        """First position of every segment, shard-major (``shard * rounds + round``)."""
        return self._segment_cuts[:, :-1].reshape(-1)

    def batches(self, shard: int, round: int) -> list[BatchBounds]:
        """The batches of segment ``round`` of ``shard``, in order."""
        start, stop = self.segment_bounds(shard, round)
        first_cut = (start // self.batch_rows + 1) * self.batch_rows
        cuts = [start, *range(first_cut, stop, self.batch_rows), stop]
        return [BatchBounds(shard, round, seq, a, b) for seq, (a, b) in enumerate(zip(cuts[:-1], cuts[1:]))]

    def locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(shard, round, seq)`` of each stream position (vectorised)."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= self.n_rows):
            raise ValueError(f"positions must be in [0, {self.n_rows})")
        starts = self.segment_starts()
        segment = np.searchsorted(starts, positions, side="right") - 1
        seq = positions // self.batch_rows - starts[segment] // self.batch_rows
        return segment // self.rounds, segment % self.rounds, seq

    def to_dict(self) -> dict:
        """JSON-ready fields."""
        return dataclasses.asdict(self)
