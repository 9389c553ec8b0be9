"""Streaming training: per-shard snapshots, merges by interval, versioned models fed back.

A Beam graph has no cycles, so the merged model comes back to the shards through files
(DESIGN.md)::

    new Parquet files (WatchParquet) or messages ─> (shard, BatchPiece)
      ─> StreamTrainOnline (stateful DoFn per shard, side input: newest model version)
           every N batches or T seconds: snapshot (interval k, shard, state, metrics)
      ─> MergeSnapshots (per interval k, once every shard has sent its k-th snapshot)
      ─> WriteModelVersions (model-v000001.npz, model-v000002.npz, ...: atomic, never rewritten)
    NewestModel (PeriodicImpulse reading the directory) ─> side input of StreamTrainOnline

Each shard keeps its state in Beam state (one model file's bytes and a small JSON
record: bounded size whatever the stream's length), learns the batches in the order they
arrive (``learner.update``: predict, score, then learn), and when the side input shows a
newer merged version than the last it mixed, mixes it in with
:func:`okl_core.merge.mix_states` (``(1 - w) * local + w * merged``; ``w = 0``: the shard
is the sequential fold of its own rows) before learning the next batch.

Snapshot ``k`` of a shard holds its state after its batches up to that point and the
prequential metrics of the batches since snapshot ``k - 1``. The merge of interval ``k``
is :func:`okl_core.merge_states` of the shards' ``k``-th snapshots sorted by shard
(weighted by ``n_seen``; no base, since mixed shards no longer share one); it is written
as version ``first_version + k``. A version is written only if it is newer than every
version already written by the job, so versions are strictly increasing in time.
"""

from __future__ import annotations

import json
import os
import time
import typing
import zlib

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.coders import BytesCoder, StrUtf8Coder
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.transforms import trigger, window
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.utils.timestamp import Timestamp

import okl_core
from okl_core.data.validate import check_rows
from okl_core.merge import check_mergeable, mix_states
from okl_core.metrics import Prequential
from okl_core.state import model_versions, parse_version, version_file_name, write_new_file
from transforms.elements import BatchPiece, ModelCache
from transforms.inference import read_bytes
from transforms.outputs import write_bytes
from transforms.read import METRICS_NAMESPACE, is_remote, open_binary
from transforms.train import CollectStatesFn, LearnerSpec

__all__ = [
    "StreamTrainOnline", "MergeSnapshots", "WriteModelVersions", "NewestModel", "WatchParquet", "ReadParquetFiles",
    "WriteDeadLetterFiles", "Snapshot", "newest_version", "file_shard", "dead_letter_file",
]

Snapshot = typing.Tuple[int, int, bytes, str]
"""``(interval, shard, model-file bytes, JSON metrics of the interval)``."""


def file_shard(path: str, num_shards: int) -> int:
    """The shard of a streamed file: CRC-32 of its base name mod ``num_shards`` (stable everywhere)."""
    return zlib.crc32(os.path.basename(path).encode("utf-8")) % num_shards


def newest_version(directory: str) -> tuple[int, str] | None:
    """``(version, path)`` of the newest ``model-vNNNNNN.npz`` in ``directory`` (local or remote)."""
    if not is_remote(directory):
        found = model_versions(directory)
        return found[-1] if found else None
    matches = FileSystems.match([FileSystems.join(directory, "model-v*.npz")])[0].metadata_list
    found = sorted((parse_version(m.path), m.path) for m in matches if parse_version(m.path) is not None)
    return found[-1] if found else None


class _StreamShard(beam.DoFn):
    """Per-shard learner state in Beam state; snapshots every N batches or T seconds."""

    MODEL = ReadModifyWriteStateSpec("model", BytesCoder())
    META = ReadModifyWriteStateSpec("meta", StrUtf8Coder())
    SNAPSHOT = TimerSpec("snapshot", TimeDomain.REAL_TIME)

    def __init__(self, spec: LearnerSpec, initial_model: bytes, snapshot_batches: int | None, snapshot_seconds: float | None, mix_weight: float, clock=None):
        self.spec, self.initial_model, self.clock = spec, initial_model, clock or time.time
        self.snapshot_batches, self.snapshot_seconds, self.mix_weight = snapshot_batches, snapshot_seconds, mix_weight
        self.rows = Metrics.counter(METRICS_NAMESPACE, "rows_trained")
        self.snapshots = Metrics.counter(METRICS_NAMESPACE, "snapshots")
        self.mixes = Metrics.counter(METRICS_NAMESPACE, "mixes")
        self.micros = Metrics.counter(METRICS_NAMESPACE, "train_microseconds")
        self.snapshot_micros = Metrics.counter(METRICS_NAMESPACE, "snapshot_microseconds")

    def setup(self):
        self.learner = self.spec.build()
        self.models = ModelCache()
        self.merged = ModelCache()

    def _load(self, model_state, meta_state):
        data = model_state.read()
        meta = json.loads(meta_state.read() or "null")
        if data is None:
            data = self.initial_model
        learner, state = self.models.get(data, source="streaming shard state")
        if meta is None:
            check_mergeable(self.learner, learner)
            meta = {"interval": 0, "batches": 0, "mixed_version": 0, "metrics": Prequential(self.learner.task).to_dict(), "timer": False}
        return state, meta

    def _store(self, model_state, meta_state, state, meta) -> bytes:
        data = okl_core.model_bytes(self.learner, state)
        model_state.write(data)
        meta_state.write(json.dumps(meta, sort_keys=True))
        return data

    def process(
        self, element, versions,
        model_state=beam.DoFn.StateParam(MODEL), meta_state=beam.DoFn.StateParam(META), timer=beam.DoFn.TimerParam(SNAPSHOT),
    ):
        shard, piece = element
        state, meta = self._load(model_state, meta_state)
        state = self._mix_newest(state, meta, versions)
        if len(piece.y):
            began = time.perf_counter()
            state, scores = self.learner.update(state, piece.X, piece.y)
            self.micros.inc(int((time.perf_counter() - began) * 1e6))
            metrics = Prequential(**meta["metrics"]).add(scores, piece.y)
            meta["metrics"] = metrics.to_dict()
            self.rows.inc(len(piece.y))
        meta["batches"] += 1
        if self.snapshot_seconds and not meta["timer"]:
            timer.set(Timestamp.of(self.clock() + self.snapshot_seconds))
            meta["timer"] = True
        if self.snapshot_batches and meta["batches"] >= self.snapshot_batches:
            yield self._snapshot(shard, state, meta)
        self._store(model_state, meta_state, state, meta)

    @on_timer(SNAPSHOT)
    def on_snapshot_timer(self, key=beam.DoFn.KeyParam, model_state=beam.DoFn.StateParam(MODEL), meta_state=beam.DoFn.StateParam(META)):
        state, meta = self._load(model_state, meta_state)
        meta["timer"] = False  # re-armed by the next batch: an idle shard sends nothing new
        if meta["batches"]:
            yield self._snapshot(key, state, meta)
        self._store(model_state, meta_state, state, meta)

    def _snapshot(self, shard: int, state, meta: dict) -> Snapshot:
        """The snapshot of the current interval; starts the next interval (updates ``meta``)."""
        began = time.perf_counter()
        record = {
            "shard": int(shard), "interval": meta["interval"], "batches": meta["batches"], "n_seen": int(state.n_seen),
            "mixed_version": meta["mixed_version"], "online": Prequential(**meta["metrics"]).summary(), "time": time.time(),
        }
        out = (meta["interval"], int(shard), okl_core.model_bytes(self.learner, state), json.dumps(record, sort_keys=True))
        meta.update(interval=meta["interval"] + 1, batches=0, metrics=Prequential(self.learner.task).to_dict())
        self.snapshots.inc()
        self.snapshot_micros.inc(int((time.perf_counter() - began) * 1e6))
        return out

    def _mix_newest(self, state, meta: dict, versions):
        """Mix in the newest merged version seen on the side input, if newer than the last mixed."""
        newest = max(((int(v), p) for v, p in versions), default=None)
        if newest is None or newest[0] <= meta["mixed_version"]:
            return state
        meta["mixed_version"] = newest[0]
        if self.mix_weight == 0:
            return state
        learner, merged = self.merged.get(read_bytes(newest[1]), source=newest[1])
        check_mergeable(self.learner, learner)
        self.mixes.inc()
        return mix_states(self.learner, state, merged, self.mix_weight)


class StreamTrainOnline(beam.PTransform):
    """Train one local model per shard on an unbounded stream; emit periodic snapshots.

    Parameters
    ----------
    spec : LearnerSpec
    initial_model : bytes
        Model file every shard starts from (a fresh ``learner.init()``, or a restart's
        newest version).
    models : PCollection[(version, path)], optional
        Merged model versions (usually :class:`NewestModel`); read as a side input and
        mixed into each shard with ``mix_weight`` when a newer version shows up.
    snapshot_batches : int, optional
        Snapshot after every N batches of a shard.
    snapshot_seconds : float, optional
        Snapshot T seconds (processing time) after the first batch of an interval.
    mix_weight : float
        Weight of the merged model in :func:`okl_core.merge.mix_states` (0: no mixing).
    clock : callable, optional
        Processing time in seconds (default ``time.time``); tests pass the clock of the
        runner's TestStream.

    Returns
    -------
    PCollection[Snapshot]
        ``(interval, shard, model bytes, JSON metrics)``.
    """

    def __init__(self, spec, initial_model: bytes, models=None, snapshot_batches=None, snapshot_seconds=None, mix_weight=0.0, clock=None):
        super().__init__()
        if not snapshot_batches and not snapshot_seconds:
            raise ValueError("StreamTrainOnline needs snapshot_batches or snapshot_seconds")
        if not 0.0 <= float(mix_weight) <= 1.0:
            raise ValueError(f"mix_weight must be in [0, 1], got {mix_weight}")
        self.spec, self.initial_model, self.models = spec, initial_model, models
        self.snapshot_batches, self.snapshot_seconds, self.mix_weight = snapshot_batches, snapshot_seconds, float(mix_weight)
        self.clock = clock

    def expand(self, pieces):
        models = self.models
        if models is None:
            models = pieces.pipeline | "NoModelVersions" >> beam.Create([]).with_output_types(typing.Tuple[int, str])
        fn = _StreamShard(self.spec, self.initial_model, self.snapshot_batches, self.snapshot_seconds, self.mix_weight, self.clock)
        return pieces | "TrainShards" >> (
            beam.ParDo(fn, beam.pvalue.AsList(models)).with_input_types(typing.Tuple[int, BatchPiece], typing.Any).with_output_types(Snapshot)
        )


class _MergeInterval(beam.DoFn):
    def __init__(self, spec: LearnerSpec):
        self.spec = spec

    def setup(self):
        self.learner = self.spec.build()

    def process(self, element):
        interval, items = element
        parsed = [okl_core.model_from_bytes(data, source=f"snapshot {interval} of shard {s}") for s, data in items]
        merged = okl_core.merge_states(self.learner, [state for _, state in parsed], [lrn for lrn, _ in parsed])
        yield interval, okl_core.model_bytes(self.learner, merged)


class MergeSnapshots(beam.PTransform):
    """Merge the shards' ``k``-th snapshots by seed, once all ``num_shards`` have sent theirs.

    A windowed CombineFn: snapshots are keyed by interval in the global window with a
    trigger firing after ``num_shards`` of them (each shard sends each interval once), and
    combined with :class:`~transforms.train.CollectStatesFn` (sorted by shard) and
    :func:`okl_core.merge_states`. Returns ``PCollection[(interval, model bytes)]``.
    """

    def __init__(self, spec: LearnerSpec, num_shards: int):
        super().__init__()
        self.spec, self.num_shards = spec, int(num_shards)

    def expand(self, snapshots):
        return (
            snapshots
            | "KeyByInterval" >> beam.Map(lambda s: (s[0], (s[1], s[2]))).with_output_types(typing.Tuple[int, typing.Tuple[int, bytes]])
            | "IntervalPanes" >> beam.WindowInto(
                window.GlobalWindows(), trigger=trigger.Repeatedly(trigger.AfterCount(self.num_shards)),
                accumulation_mode=trigger.AccumulationMode.DISCARDING,
            )
            | "CollectShards" >> beam.CombinePerKey(CollectStatesFn())
            | "MergeInterval" >> beam.ParDo(_MergeInterval(self.spec)).with_output_types(typing.Tuple[int, bytes])
        )


class _WriteVersion(beam.DoFn):
    """One writer (single key): version = first + interval, written only if newer than the last."""

    LAST = ReadModifyWriteStateSpec("last", StrUtf8Coder())

    def __init__(self, directory: str, first_version: int):
        self.directory, self.first_version = directory, int(first_version)
        self.stale = Metrics.counter(METRICS_NAMESPACE, "stale_merges_skipped")

    def process(self, element, last_state=beam.DoFn.StateParam(LAST)):
        _, (interval, data) = element
        version = self.first_version + int(interval)
        last = int(last_state.read() or self.first_version - 1)
        if version <= last:
            self.stale.inc()
            return
        path = f"{self.directory.rstrip('/')}/{version_file_name(version)}"
        if is_remote(path):
            if FileSystems.exists(path):
                raise FileExistsError(f"{path} exists: versioned model files are never overwritten")
            with FileSystems.create(path) as f:  # object stores publish a whole object at close
                f.write(data)
        elif not write_new_file(path, data):
            raise FileExistsError(f"{path} exists: versioned model files are never overwritten; restart with a new --output or from it (--init_model)")
        last_state.write(str(version))
        yield version, path


class WriteModelVersions(beam.PTransform):
    """Write merged intervals as ``model-vNNNNNN.npz`` (version ``first_version + interval``).

    Returns ``PCollection[(version, path)]``, strictly increasing versions.
    """

    def __init__(self, directory: str, first_version: int = 1):
        super().__init__()
        self.directory, self.first_version = directory, first_version

    def expand(self, merged):
        return (
            merged
            | "OneWriter" >> beam.Map(lambda m: (0, m))
            | "WriteVersion" >> beam.ParDo(_WriteVersion(self.directory, self.first_version)).with_output_types(typing.Tuple[int, str])
        )


class NewestModel(beam.PTransform):
    """Slowly-updating side input: every ``poll_seconds`` the newest version in ``directory``.

    ``PeriodicImpulse`` -> :func:`newest_version` -> global window re-fired on every
    element (discarding), so a side-input reader sees the latest poll. Emits
    ``(version, path)``; nothing until the first version exists. Needs a runner with
    splittable DoFns in streaming (Dataflow, Flink, Prism).
    """

    def __init__(self, directory: str, poll_seconds: float, stop_timestamp: float | None = None):
        super().__init__()
        self.directory, self.poll_seconds, self.stop_timestamp = directory, poll_seconds, stop_timestamp

    def expand(self, pbegin):
        from apache_beam.transforms.periodicsequence import PeriodicImpulse

        directory = self.directory
        kwargs = {} if self.stop_timestamp is None else {"stop_timestamp": self.stop_timestamp}
        return (
            pbegin
            | "Poll" >> PeriodicImpulse(fire_interval=self.poll_seconds, **kwargs)
            | "Newest" >> beam.FlatMap(lambda _: [newest_version(directory)] if newest_version(directory) else []).with_output_types(typing.Tuple[int, str])
            | "Latest" >> beam.WindowInto(
                window.GlobalWindows(), trigger=trigger.Repeatedly(trigger.AfterCount(1)), accumulation_mode=trigger.AccumulationMode.DISCARDING
            )
        )


class ReadParquetFiles(beam.DoFn):
    """Read one new Parquet file into ``(shard, BatchPiece)`` batches; bad rows to ``dead_letter``.

    The file's shard is :func:`file_shard`; its rows are checked against the learner's
    shape (``n_inputs``, task, classes) and cut into batches of ``batch_rows`` in file order.
    A file with bad rows (or an unreadable file) sends one ``(path, JSON lines)`` element to
    the ``dead_letter`` output: every bad row of the file, for :class:`WriteDeadLetterFiles`.
    """

    def __init__(self, n_features: int, task: str, n_classes: int | None, num_shards: int, batch_rows: int):
        self.n_features, self.task, self.n_classes = n_features, task, n_classes
        self.num_shards, self.batch_rows = num_shards, batch_rows
        self.rejected = Metrics.counter(METRICS_NAMESPACE, "train_rows_rejected")
        self.unreadable = Metrics.counter(METRICS_NAMESPACE, "train_files_unreadable")

    def process(self, path: str):
        shard = file_shard(path, self.num_shards)
        try:
            table = pq.read_table(open_binary(path), columns=["x", "y", "row"])
            checked = check_rows(table, self.n_features, self.task, self.n_classes)
        except Exception as err:  # a foreign or broken file must not stop the stream
            self.unreadable.inc()
            record = {"split": "train", "file": path, "row": None, "shard": shard, "reason": f"unreadable Parquet file: {err}"}
            yield beam.pvalue.TaggedOutput("dead_letter", (path, [json.dumps(record, sort_keys=True)]))
            return
        if checked.reasons:
            self.rejected.inc(len(checked.reasons))
            records = [
                json.dumps({"split": "train", "file": path, "row": int(checked.bad_row[k]), "shard": shard, "reason": reason}, sort_keys=True)
                for k, reason in enumerate(checked.reasons)
            ]
            yield beam.pvalue.TaggedOutput("dead_letter", (path, records))
        for seq, start in enumerate(range(0, len(checked.y), self.batch_rows)):
            stop = min(start + self.batch_rows, len(checked.y))
            yield shard, BatchPiece(shard, 0, seq, start, stop, checked.X[start:stop], checked.y[start:stop], checked.row[start:stop])


def dead_letter_file(directory: str, path: str) -> str:
    """Where the bad rows of the streamed file ``path`` go: ``directory/dead_letter/<name>.jsonl``."""
    return f"{directory.rstrip('/')}/dead_letter/{os.path.basename(path)}.jsonl"


class WriteDeadLetterFiles(beam.PTransform):
    """Write each input file's bad rows as ``dead_letter/<file name>.jsonl`` under ``directory``.

    One file per input file, written whole (atomically where local), so a stream's dead
    letters never interleave and a file read again after a restart rewrites the same
    bytes. Takes the ``dead_letter`` output of :class:`ReadParquetFiles`; returns
    ``PCollection[str]`` of the paths written.
    """

    def __init__(self, directory: str):
        super().__init__()
        self.directory = directory

    def expand(self, dead):
        directory = self.directory

        def write(element):
            path, records = element
            target = dead_letter_file(directory, path)
            write_bytes(target, "".join(r + "\n" for r in records).encode())
            return target

        return dead | "WriteFiles" >> beam.Map(write).with_output_types(str)


class WatchParquet(beam.PTransform):
    """New Parquet files matching ``pattern`` (``fileio.MatchContinuously``) -> ``(shard, BatchPiece)``.

    Files are read once each (matched by path), when they appear; a file must be complete
    when it gets its final name (write it elsewhere and rename, as okl's writers do).
    Returns ``{"batches": ..., "dead_letter": ...}``.
    """

    def __init__(self, pattern: str, read: ReadParquetFiles, poll_seconds: float, stop_timestamp: float | None = None):
        super().__init__()
        self.pattern, self.read, self.poll_seconds, self.stop_timestamp = pattern, read, poll_seconds, stop_timestamp

    def expand(self, pbegin):
        from apache_beam.io import fileio

        kwargs = {} if self.stop_timestamp is None else {"stop_timestamp": self.stop_timestamp}
        paths = (
            pbegin
            | "MatchContinuously" >> fileio.MatchContinuously(self.pattern, interval=self.poll_seconds, **kwargs)
            | "Paths" >> beam.Map(lambda m: m.path).with_output_types(str)
        )
        # Typed keys: the shards' state is keyed by int (a deterministic coder), not by "any".
        out = paths | "ReadFiles" >> (
            beam.ParDo(self.read).with_output_types(typing.Tuple[int, BatchPiece]).with_outputs("dead_letter", main="batches")
        )
        return {"batches": out.batches, "dead_letter": out.dead_letter}
