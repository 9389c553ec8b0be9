"""TrainOnline and MergeBySeed: one local model per shard, merged into one model by seed.

``TrainOnline`` groups the pieces of each shard (``GroupByKey`` on the shard key) and
folds them through the learner **in sequence order**, whatever order Beam delivers them
in: pieces wait in a per-shard buffer until their batch is complete and every earlier
batch has been learned, so only out-of-order pieces are held. Pieces come with their rows
(:class:`~transforms.elements.BatchPiece`) or as references
(:class:`~transforms.elements.PieceRef`) whose rows the shard reads itself: then no rows
cross the shuffle, memory stays at a few row groups per shard, bad rows met while reading
go to a ``dead_letter`` output, and the next two row groups are on their way while the
learner works on the current batch (local files: announced to the OS, which reads them
into its page cache, then decoded by the shard; remote files: read and decoded on a
background thread; the shard's references, sorted, give the order of its reads), so
waiting for the disk or an object store overlaps learning; ``read_seconds`` in a shard's
summary is the time it waited for (or decoded) rows.

Group-and-sort is used rather than a stateful DoFn with a per-key bag: Beam's FnApiRunner
(the DirectRunner) runs stateful stages on one worker (``fn_runner.py``: "a single key
cannot be processed concurrently"), which would serialise the shards; a grouped stage runs
its keys on all workers, on every runner, with no OrderedListState (not on Dataflow,
sorted in memory on Flink).

Each shard starts from the model of the previous round (a side input holding model-file
bytes), learns its batches with ``learner.update`` (predict, score, then learn), reports
every batch's prequential metrics as Beam counters/distributions and as a ``metrics``
output, and emits its final state as model-file bytes when its input ends.

``MergeBySeed`` combines the shards' states with :func:`okl_core.merge_states`, sorted by
shard so that the merged bytes are the same on every runner and under any bundling, and
from the model the round started from (``base``: iterative parameter mixing counts it
once).
"""

from __future__ import annotations

import itertools
import json
import math
import time
import typing

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.metrics import Metrics

import okl_core
from okl_core.data.plan import StreamPlan
from okl_core.divergence import divergence_reason
from okl_core.heartbeat import Heartbeat
from okl_core.learners.compiled import warm_up
from okl_core.merge import check_mergeable
from okl_core.metrics import Prequential
from okl_core.reporting import batch_curve, headline
from transforms.elements import BatchPiece, ModelCache, PieceRef
from transforms.read import METRICS_NAMESPACE, DatasetSource, RowGroupReader, is_remote
from transforms.worker import settle_worker_process

__all__ = ["LearnerSpec", "TrainOnline", "MergeBySeed", "CollectStatesFn", "ShardResult"]

_INT64_LIMIT = 2.0**63 - 2.0**10  # the largest float below 2**63, with margin for rounding

ShardResult = typing.Tuple[int, bytes, str]
"""``(shard, model-file bytes, JSON summary)`` emitted by TrainOnline for each shard."""


class LearnerSpec(typing.NamedTuple):
    """A learner by registry name and parameters (JSON scalars); builds it on workers."""

    name: str
    params: dict

    def build(self) -> okl_core.Learner:
        return okl_core.make_learner(self.name, **self.params)


class _FoldShard(beam.DoFn):
    """Fold one shard's batches in sequence order through the learner."""

    def __init__(self, spec: LearnerSpec, plan: StreamPlan, round: int, source: DatasetSource | None, progress_dir: str | None = None,
                 decode_ahead: bool = False):
        self.spec, self.plan, self.round, self.source, self.progress_dir = spec, plan, round, source, progress_dir
        self.decode_ahead = decode_ahead
        self.rows = Metrics.counter(METRICS_NAMESPACE, "rows_trained")
        self.batches = Metrics.counter(METRICS_NAMESPACE, "batches_trained")
        self.micros = Metrics.counter(METRICS_NAMESPACE, "train_microseconds")
        self.batch_rows = Metrics.distribution(METRICS_NAMESPACE, "batch_rows")
        self.pending_max = Metrics.distribution(METRICS_NAMESPACE, "batches_waiting_for_order")
        self.batch_error = Metrics.distribution(METRICS_NAMESPACE, "batch_online_error_ppm")
        self.diverged_batches = Metrics.counter(METRICS_NAMESPACE, "batches_diverged")

    def setup(self):
        settle_worker_process()
        self.learner = self.spec.build()
        # The first compiled update of a process costs ~0.45 s CPU (numba, cached code): paid
        # here, at worker start, not inside the shard's first batch (a third of a 100k-row shard).
        warm_up(self.learner)
        self.models = ModelCache()
        self.reader = None if self.source is None else _shard_reader(self.source, self.decode_ahead)

    def teardown(self):
        if self.reader is not None:
            self.reader.close()

    def process(self, element, initial_model: bytes):
        # CPU counted from before the first reads ahead start (below, as the reads are planned).
        cpu_began, read_cpu_began = time.process_time(), 0.0 if self.reader is None else self.reader.cpu_seconds
        shard, pieces = element[0], _plan_reads(element[1], self.reader)
        loaded_learner, state = self.models.get(initial_model, source=f"model entering round {self.round}")
        check_mergeable(self.learner, loaded_learner)
        expected = self.plan.batches(shard, self.round)
        total = Prequential(self.learner.task)
        pending: dict[int, list[BatchPiece | PieceRef]] = {}
        next_seq, seconds, read_seconds, most_waiting, diverged_at = 0, 0.0, 0.0, 0, None
        started, self.learn_cpu = time.time(), 0.0
        heartbeat = Heartbeat(self.progress_dir, f"shard-{shard}-r{self.round}")  # live progress (no-op without a folder)
        for piece in pieces:
            if piece.shard != shard or piece.round != self.round or not 0 <= piece.seq < len(expected):
                raise ValueError(f"piece of shard {piece.shard} round {piece.round} batch {piece.seq} reached shard {shard} round {self.round}")
            pending.setdefault(piece.seq, []).append(piece)
            most_waiting = max(most_waiting, len(pending))
            while next_seq < len(expected) and _complete(pending.get(next_seq, ()), expected[next_seq]):
                ready = []
                for part in pending.pop(next_seq):
                    if isinstance(part, PieceRef):
                        began = time.perf_counter()
                        part, dead = self._read(part)
                        read_seconds += time.perf_counter() - began
                        for record in dead:
                            yield beam.pvalue.TaggedOutput("dead_letter", record)
                    ready.append(part)
                state, batch, record = self._learn(state, ready, expected[next_seq], total)
                total = total.merge(batch)
                if record["diverged"] and diverged_at is None:
                    diverged_at = {"shard": shard, "round": self.round, "batch": next_seq, "row": record["start"],
                                   "reason": record["diverged_reason"]}
                seconds += record["seconds"]
                next_seq += 1
                heartbeat.beat(total.n)
                yield beam.pvalue.TaggedOutput("metrics", json.dumps(record, sort_keys=True))
        if next_seq < len(expected):
            bounds = expected[next_seq]
            raise ValueError(
                f"shard {shard} round {self.round}: rows {bounds.start}..{bounds.stop - 1} of batch {next_seq} never arrived; "
                "was the data set changed while the job ran?"
            )
        self.pending_max.update(most_waiting)
        heartbeat.beat(total.n, done=True)
        summary = {
            "shard": shard, "round": self.round, "batches": len(expected), "rows": total.n,
            "train_seconds": seconds, "read_seconds": read_seconds, "started": started, "finished": time.time(),
            # CPU of the worker process while the step ran (reading ahead and Beam's threads too): the
            # benchmark's noise-robust measure of the pipeline's work per row against the bare fold's.
            "cpu_seconds": time.process_time() - cpu_began,
            # Of which: the learner's updates and reading/checking rows (the read-ahead thread):
            # the rest is per-batch bookkeeping and Beam's own threads.
            "learn_cpu_seconds": self.learn_cpu,
            "read_cpu_seconds": 0.0 if self.reader is None else self.reader.cpu_seconds - read_cpu_began,
            "online": total.to_dict(), "diverged_at": diverged_at,
        }
        yield shard, okl_core.model_bytes(self.learner, state), json.dumps(summary, sort_keys=True)

    def _read(self, ref: PieceRef):
        if self.reader is None:
            raise ValueError("TrainOnline got piece references but no data set to read them from (pass source=)")
        return self.reader.materialize(ref)

    def _learn(self, state, pieces: list, bounds, before: Prequential):
        """Update on one complete batch; returns the new state, its metrics and its record.

        ``before``: the shard's online metrics of the round so far; divergence is judged on
        them with this batch's (an exploding loss is measured over the stream, not one batch).
        """
        pieces.sort(key=lambda p: p.start)
        X = pieces[0].X if len(pieces) == 1 else _rows_together([p.X for p in pieces])
        y = pieces[0].y if len(pieces) == 1 else np.concatenate([p.y for p in pieces])
        batch = Prequential(self.learner.task)
        took, diverged, reason, curve = 0.0, False, None, []
        if len(y):
            began, cpu = time.perf_counter(), time.thread_time()
            state, scores = self.learner.update(state, X, y)
            took = time.perf_counter() - began
            self.learn_cpu += time.thread_time() - cpu
            batch.add(scores, y)
            reason = divergence_reason(state, scores, before.merge(batch))
            diverged = reason is not None
            curve = batch_curve(self.learner.task, scores, y)  # points within the batch, for the plot
        self._count(batch, took, diverged)
        record = {
            "shard": bounds.shard, "round": bounds.round, "seq": bounds.seq, "start": bounds.start, "stop": bounds.stop,
            "rows": batch.n, "n_seen": int(state.n_seen), "seconds": took, "mistakes": batch.mistakes,
            "sum_squared_error": batch.sum_squared_error, "sum_absolute_error": batch.sum_absolute_error, "diverged": diverged,
            "curve": curve,
        }
        if reason:  # "not finite" or "exploded" (okl_core.divergence), on diverged batches only
            record["diverged_reason"] = reason
        return state, batch, record

    def _count(self, batch: Prequential, took: float, diverged: bool) -> None:
        self.rows.inc(batch.n)
        self.batches.inc()
        self.micros.inc(int(took * 1e6))
        self.batch_rows.update(batch.n)
        if diverged:
            self.diverged_batches.inc()
        ppm = getattr(batch, headline(batch.task).summary_key) * 1e6 if batch.n else math.nan
        # Beam distributions hold int64: an error too large for it (an MSE above 9.2e12, unscaled
        # targets) or not finite is left out of the distribution; metrics.json has every batch.
        if math.isfinite(ppm) and abs(ppm) < _INT64_LIMIT:
            self.batch_error.update(int(round(ppm)))


def _shard_reader(source: DatasetSource, decode_ahead: bool = False) -> RowGroupReader:
    """The reader of a shard: the next two row groups on their way while the shard learns.

    Remote files (``gs://``), and local files when ``decode_ahead`` (a spare core for each
    shard), are read and decoded on a background thread, so waiting for the object store and
    decoding overlap learning. Otherwise local files are only announced to the OS (its page
    cache fills meanwhile) and decoded by the shard itself, between updates: a second thread
    decoding on cores the workers already use costs more than it overlaps (MNIST-8M rows,
    2 shards on 2 workers, 2 cores: reading 1.5-1.7 instead of 1.7-2.4 CPU us/row, the shard
    step 17.2-17.8 instead of 17.5-19.3, the learner's updates included), while with a core
    to spare it takes the reading off the shard's path (1 shard on 1 worker, 2 cores, 200k
    rows, mfogd D = 800: steady rate 0.96-1.02 of the bare fold instead of 0.86-0.91).
    """
    if decode_ahead or is_remote(source.path) or any(is_remote(group[0]) for group in source.row_groups[:1]):
        return RowGroupReader(source, "train", read_ahead=2)
    return RowGroupReader(source, "train", prefetch=2)


def _rows_together(parts: list[np.ndarray]) -> np.ndarray:
    """The rows of ``parts`` (2-D, one dtype) in one new array, in memory from Arrow's pool.

    A batch pieced together from two row groups needs a new array each time. numpy takes
    one of that size (12.8 MB for 4096 MNIST rows) from the system, which hands back fresh
    pages each time; Arrow's pool (mimalloc) reuses those its row groups freed (a shard whose
    every batch straddled two row groups: 0.03-0.05 instead of 0.2-0.5 page faults per row,
    16.6-16.8 instead of 17.3-18.3 us of CPU per row, FOGD D = 800). The array keeps its
    buffer alive, so a state that holds a view of it stays valid.
    """
    rows, width, dtype = sum(len(p) for p in parts), parts[0].shape[1], parts[0].dtype
    out = np.frombuffer(pa.allocate_buffer(rows * width * dtype.itemsize), dtype=dtype).reshape(rows, width)
    return np.concatenate(parts, out=out)


def _plan_reads(pieces, reader: RowGroupReader | None):
    """The shard's pieces, with the reads of references announced to ``reader`` in order.

    References are small (the rows stay on disk) and, grouped by shard, known in full:
    sorted, they are the order of the reads, which the reader then runs ahead of the
    learning. Pieces that carry their rows are passed through as they come (sorting them
    would hold the whole shard in memory).
    """
    pieces = iter(pieces)
    first = next(pieces, None)
    if first is None:
        return ()
    pieces = itertools.chain([first], pieces)
    if reader is None or not isinstance(first, PieceRef):
        return pieces
    refs = sorted(pieces, key=lambda p: (p.seq, p.start))
    reader.plan(r for r in refs if isinstance(r, PieceRef))
    return refs


def _complete(pieces, bounds) -> bool:
    """True when the pieces (disjoint by construction) cover the batch's positions."""
    return sum(p.stop - p.start for p in pieces) == bounds.stop - bounds.start


class TrainOnline(beam.PTransform):
    """Train one local model per shard on one round's pieces, in sequence order.

    Parameters
    ----------
    spec : LearnerSpec
    plan : StreamPlan
    round : int
    initial_model : PCollection[bytes]
        A single model file (bytes): the starting state of every shard.
    source : DatasetSource, optional
        The data set, when the input holds :class:`~transforms.elements.PieceRef` elements
        (``ReadShards(materialize=False)``): each shard then reads its own rows, in order.
    progress_dir : str, optional
        A local folder where each shard reports its rows as it goes
        (:class:`okl_core.heartbeat.Heartbeat`; local runners only).
    decode_ahead : bool
        Decode each shard's coming row groups on a background thread while it learns
        (local files; remote ones always are): for workers with a spare core per shard
        (:func:`pipelines.common.spare_core_per_shard`). The model's bytes are the same.

    Returns
    -------
    DoOutputsTuple
        ``.states``: ``PCollection[(shard, model bytes, JSON summary)]``;
        ``.metrics``: ``PCollection[str]``, one JSON record per batch;
        ``.dead_letter``: ``PCollection[str]``, bad rows met while reading references.
    """

    def __init__(self, spec: LearnerSpec, plan: StreamPlan, round: int, initial_model, source: DatasetSource | None = None,
                 progress_dir: str | None = None, decode_ahead: bool = False):
        super().__init__()
        self.spec, self.plan, self.round, self.initial_model, self.source = spec, plan, round, initial_model, source
        self.progress_dir, self.decode_ahead = progress_dir, decode_ahead

    def expand(self, pieces):
        return (
            pieces
            | "GroupByShard" >> beam.GroupByKey()
            | "FoldShard"
            >> beam.ParDo(_FoldShard(self.spec, self.plan, self.round, self.source, self.progress_dir, self.decode_ahead), beam.pvalue.AsSingleton(self.initial_model))
            .with_output_types(ShardResult)
            .with_outputs("metrics", "dead_letter", main="states")
        )


class CollectStatesFn(beam.CombineFn):
    """Collect ``(shard, model bytes)`` pairs into one list sorted by shard."""

    def create_accumulator(self):
        return []

    def add_input(self, accumulator, element):
        accumulator.append((int(element[0]), bytes(element[1])))
        return accumulator

    def merge_accumulators(self, accumulators):
        return [item for acc in accumulators for item in acc]

    def extract_output(self, accumulator):
        items = sorted(accumulator, key=lambda item: item[0])
        shards = [s for s, _ in items]
        if len(set(shards)) != len(shards):
            raise ValueError(f"MergeBySeed: shard keys repeat: {shards}")
        return items


class _MergeWithBase(beam.DoFn):
    """Merge the sorted states with :func:`okl_core.merge_states`, from the round's base."""

    def __init__(self, spec: LearnerSpec):
        self.spec = spec

    def setup(self):
        settle_worker_process()
        self.learner = self.spec.build()
        self.models = ModelCache()

    def process(self, items, base: bytes):
        base_learner, base_state = self.models.get(base, source="model the round started from")
        parsed = [okl_core.model_from_bytes(data, source=f"shard {s}", allow_non_finite=True) for s, data in items]
        merged = okl_core.merge_states(
            self.learner, [state for _, state in parsed], [base_learner] + [lrn for lrn, _ in parsed], base=base_state
        )
        # The classes the base records (the training data's) stay in the merged model: the shards' states do not carry them.
        yield okl_core.model_bytes(self.learner, merged, okl_core.model_classes(base, source="model the round started from"))


class MergeBySeed(beam.PTransform):
    """Merge the per-shard states of TrainOnline into one model (bytes), sorted by shard.

    Parameters
    ----------
    spec : LearnerSpec
    base : PCollection[bytes]
        The model every shard started from in this round (the initial model, or the
        previous round's merge): :func:`okl_core.merge_states` weights averaging learners
        by the examples added since it and counts its examples once (summing learners add
        only what each shard learned since it). The merged model records the classes
        the base records (:func:`okl_core.model_classes`).
    """

    def __init__(self, spec: LearnerSpec, base):
        super().__init__()
        self.spec, self.base = spec, base

    def expand(self, states):
        return (
            states
            | "DropSummaries" >> beam.Map(lambda result: (result[0], result[1])).with_output_types(typing.Tuple[int, bytes])
            | "CollectStates" >> beam.CombineGlobally(CollectStatesFn()).without_defaults()
            | "MergeStates" >> beam.ParDo(_MergeWithBase(self.spec), beam.pvalue.AsSingleton(self.base)).with_output_types(bytes)
        )
