"""Streaming training: per-shard snapshots, merges per processing-time window, versions fed back.

A Beam graph has no cycles, so the merged model comes back to the shards through files
(DESIGN.md, "Streaming")::

    new Parquet files (WatchParquet) ─> (shard, whole-file event) ─┐
    model-v*.npz polled (VersionNotices) ─> (shard, version event) ──┴─> Flatten
      ─> StreamTrainOnline (stateful DoFn per shard: reads each file, learns its batches)
           every N batches or T seconds, and when the stream ends: snapshot
      ─> MergeSnapshots (one merge per processing-time window of --merge_seconds in
           which a snapshot arrived: the newest snapshot of every shard, by seed)
      ─> WriteModelVersions (model-v000001.npz, ...: atomic, never rewritten)

New versions reach the shards as ordinary elements of their input, not as a side input:
Prism refuses triggered global-window side inputs (Beam issue #31438), and on Prism 2.77
a fixed-window side input is read without waiting for its window to be complete (a batch
read 1.4 s after a version was polled saw an empty side input in 5 of 6 windows), so the
version a shard mixed would depend on timing. As input elements, versions work the same
on every runner: each shard records the newest version it has been told of, and mixes it
in before its next batch.

Each shard keeps its decoded state in the DoFn between batches and writes it to Beam state
after every input element (a batch, or a whole file) for fault tolerance (its arrays as raw bytes,
:func:`okl_core.state.raw_state_bytes`, and a small JSON record: bounded whatever the
stream's length). The record holds a token naming the last write; a worker reuses its
decoded state only when its token is the record's, so a restarted bundle, a new worker or a
key moved to another worker reads the state back from the bytes. It learns its batches in the order they arrive,
a whole file's batches in file order (``learner.update``: predict, score, then learn) and,
before a batch, mixes in the newest
version it has been told of when that is newer than the last it mixed:
``learner.mix(local, merged, w)`` (``okl_core.mix_states``; ``w = 0``: the shard stays the
sequential fold of its own rows).

Snapshot ``k`` of a shard holds its state after its batches so far, the prequential
metrics of the batches since snapshot ``k - 1`` and the list of those batches (file,
batch number, positions, the version mixed before each). The merge of a window is
:func:`okl_core.merge_states` of the newest snapshot of every shard that has sent one,
sorted by shard (weighted by ``n_seen``): a shard that stays idle never blocks a version,
and one that has been idle contributes its last snapshot. When the input ends
(``--stop_after``, a drained or bounded source), every shard sends a last snapshot and
the last window is merged, so no learned row is left out of the last version.

What the stream reads and records of its files (the reader of new files, file identities,
the chain of version records and manifests, dead letters) is in :mod:`transforms.stream_files`;
its names are exported here too.
"""

from __future__ import annotations

import json
import math
import time
import typing
import uuid

import apache_beam as beam
from apache_beam.coders import BooleanCoder, BytesCoder, StrUtf8Coder, TupleCoder, VarIntCoder
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.transforms import window
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.utils.timestamp import MAX_TIMESTAMP, Duration, Timestamp

import okl_core
from okl_core.divergence import diverged as is_diverged
from okl_core.jsonio import strict_json
from okl_core.learners.compiled import warm_up
from okl_core.learners.base import mixing_weight
from okl_core.merge import check_mergeable, mix_states
from okl_core.metrics import Prequential
from okl_core.state import raw_state_bytes, state_from_raw_bytes, version_file_name, write_new_file
from transforms.elements import ModelCache, StreamEvent
from transforms.outputs import write_bytes
from transforms.read import METRICS_NAMESPACE, is_remote, read_bytes
from transforms.stream_files import (
    MANIFEST_EVERY, ReadParquetFiles, WriteDeadLetterFiles, WriteSnapshotRecords, add_learned, continued_from, dead_letter_file,
    dead_lettered_files, file_exists, file_identity, file_shard, input_root, learned_files, learned_key, manifest_file, newest_version,
    read_json_file, relative_identity, snapshot_record_file, watch_root,
)
from transforms.train import LearnerSpec
from transforms.worker import settle_worker_process

__all__ = [
    "StreamTrainOnline", "MergeSnapshots", "WriteModelVersions", "VersionNotices", "WatchParquet", "ReadParquetFiles",
    "WriteDeadLetterFiles", "WriteSnapshotRecords", "Snapshot", "MergedVersion", "newest_version", "file_shard",
    "learned_key", "learned_files", "add_learned", "continued_from", "dead_lettered_files",
    "dead_letter_file", "snapshot_record_file", "watch_root", "input_root", "file_identity", "relative_identity", "manifest_file", "MANIFEST_EVERY",
]

Snapshot = typing.Tuple[int, int, bytes, str]
"""``(shard, interval, model-file bytes, JSON record of the interval)``."""

MergedVersion = typing.Tuple[int, bytes, str]
"""``(version, model-file bytes, JSON record: which snapshot of each shard it merges)``."""

_END_OF_STREAM = window.GlobalWindow().max_timestamp()
# The shards' last snapshots are timestamped a second before the merger's end-of-stream
# timer, so that timer cannot fire before they have arrived (the legacy direct runner
# fired both at the same watermark).
_SHARDS_END = _END_OF_STREAM - Duration(seconds=1)


def _now() -> float:
    return time.time()


def _in_order(numbered) -> list:
    """The items of JSON ``[n, item]`` strings, by ``n``."""
    return [item for _, item in sorted((json.loads(text) for text in numbered), key=lambda pair: pair[0])]


class _StreamShard(beam.DoFn):
    """Per-shard learner state, decoded in the DoFn and written to Beam state as raw arrays; snapshots
    every N batches, T seconds and at the end.

    Keeping the decoded state saves parsing a model file and rebuilding the learner per
    batch, and the raw arrays cost 11-57x less to write than a model file
    (:func:`okl_core.state.raw_state_bytes`). A whole-file event is read here (``read``)
    and its batches learned one after the other, the state written once at the end.
    """

    MODEL = ReadModifyWriteStateSpec("model", BytesCoder())
    META = ReadModifyWriteStateSpec("meta", StrUtf8Coder())
    # What the interval learned, appended batch by batch and read once per snapshot: the JSON
    # record of each batch, and (file, rows, done) of whole files (how far each got). In the
    # small META record they were parsed and rewritten with every element of the interval.
    LEARNED = BagStateSpec("learned", StrUtf8Coder())
    FILES = BagStateSpec("files", TupleCoder((StrUtf8Coder(), VarIntCoder(), BooleanCoder())))
    SNAPSHOT = TimerSpec("snapshot", TimeDomain.REAL_TIME)
    END = TimerSpec("end", TimeDomain.WATERMARK)

    def __init__(self, spec: LearnerSpec, initial_model: bytes, snapshot_batches: int | None, snapshot_seconds: float | None, mix_weight: float, clock=None,
                 read: "ReadParquetFiles | None" = None):
        self.spec, self.initial_model, self.clock, self.read = spec, initial_model, clock or _now, read
        self.snapshot_batches, self.snapshot_seconds, self.mix_weight = snapshot_batches, snapshot_seconds, mix_weight
        self.rows = Metrics.counter(METRICS_NAMESPACE, "rows_trained")
        self.snapshots = Metrics.counter(METRICS_NAMESPACE, "snapshots")
        self.mixes = Metrics.counter(METRICS_NAMESPACE, "mixes")
        self.micros = Metrics.counter(METRICS_NAMESPACE, "train_microseconds")
        self.snapshot_micros = Metrics.counter(METRICS_NAMESPACE, "snapshot_microseconds")
        self.state_reads = Metrics.counter(METRICS_NAMESPACE, "shard_state_reads")  # decoded from Beam state, not kept

    def setup(self):
        settle_worker_process()
        self.learner = self.spec.build()
        warm_up(self.learner)  # the first compiled update's one-time cost, before the first batch
        self.models = ModelCache()
        self.merged = ModelCache()
        # shard -> (token, state): the state this instance last wrote for the shard. Tokens are
        # unique to the instance and the write, so a stale entry can never match the record.
        self.live: dict[int, tuple[str, typing.Any]] = {}
        self.instance, self.writes = uuid.uuid4().hex, 0

    def _meta(self, meta_state) -> dict:
        meta = json.loads(meta_state.read() or "null")
        if meta is None:
            meta = {"interval": 0, "mixed_version": 0, "newest": None, "timer": False, "end_timer": False, "batches": 0,
                    "metrics": Prequential(self.learner.task).to_dict()}
        return meta

    def _state(self, shard: int, model_state, meta: dict):
        """The shard's state: the decoded one when this instance wrote the record's state, else read back."""
        live = self.live.get(shard)
        if live is not None and live[0] == meta.get("token"):
            return live[1]
        data = model_state.read()
        if data is not None:
            self.state_reads.inc()
            return state_from_raw_bytes(self.learner, data, source=f"streaming state of shard {shard}")
        learner, state = self.models.get(self.initial_model, source="initial model of the streaming shards")
        check_mergeable(self.learner, learner)
        return state

    def _keep(self, shard: int, state, model_state, meta: dict) -> None:
        """Write the state to Beam state (raw arrays) and keep it decoded under a new token."""
        self.writes += 1
        meta["token"] = f"{self.instance}-{self.writes}"
        self.live[shard] = (meta["token"], state)
        model_state.write(raw_state_bytes(self.learner, state))

    def process(
        self, element, model_state=beam.DoFn.StateParam(MODEL), meta_state=beam.DoFn.StateParam(META),
        timer=beam.DoFn.TimerParam(SNAPSHOT), end=beam.DoFn.TimerParam(END), learned=beam.DoFn.StateParam(LEARNED),
        files=beam.DoFn.StateParam(FILES),
    ):
        shard, event = element
        meta = self._meta(meta_state)
        if event.is_version:
            if meta["newest"] is None or event.version > meta["newest"][0]:
                meta["newest"] = [event.version, event.path]
                meta_state.write(json.dumps(meta, sort_keys=True))
            return
        batches = [event]
        if event.whole_file:
            if self.read is None:
                raise ValueError(f"{event.path}: a whole-file event needs StreamTrainOnline(read=ReadParquetFiles(...))")
            batches, dead = self.read.read(event.path, shard)
            if dead:
                yield beam.pvalue.TaggedOutput("dead_letter", (event.path, dead))
            if not batches:
                return
        state = self._state(shard, model_state, meta)
        key = self.read.identity(event.path) if self.read is not None and event.whole_file else None  # what a restart from a version holding this snapshot may skip
        for k, batch in enumerate(batches):
            state = self._learn(state, batch, meta, timer, end, learned)
            if key is not None:
                files.add((key, int(batch.piece.stop), k == len(batches) - 1))
            if self.snapshot_batches and meta["batches"] >= self.snapshot_batches:
                yield self._snapshot(shard, state, meta, learned, files)
        self._keep(shard, state, model_state, meta)  # once per element: Beam commits state per bundle anyway
        meta_state.write(json.dumps(meta, sort_keys=True))

    def _learn(self, state, event, meta: dict, timer, end, learned):
        """Learn one batch (after mixing in the newest version told of); records it in ``meta``, arms the timers."""
        state = self._mix_newest(state, meta)
        piece = event.piece
        if len(piece.y):
            began = time.perf_counter()
            state, scores = self.learner.update(state, piece.X, piece.y)
            self.micros.inc(int((time.perf_counter() - began) * 1e6))
            batch = Prequential(self.learner.task).add(scores, piece.y)
            interval = Prequential(**meta["metrics"]).merge(batch)
            meta["metrics"] = interval.to_dict()
            self.rows.inc(len(piece.y))
            # Judged on the interval's cumulative metrics: an exploding loss is only measurable over many rows.
            if meta.get("diverged_at") is None and is_diverged(state, scores, interval):  # reported, never raised
                meta["diverged_at"] = {"file": event.path, "seq": event.seq, "row": piece.start}
        # numbered: a bag's read order is not its order of writes on every runner
        learned.add(json.dumps([meta["batches"], {"file": event.path, "seq": event.seq, "start": piece.start, "stop": piece.stop, "rows": len(piece.y),
                                                  "mixed_version": meta["mixed_version"]}], sort_keys=True))
        meta["batches"] += 1
        if not meta["end_timer"]:
            end.set(_SHARDS_END)  # fires once the input ends: the last snapshot
            meta["end_timer"] = True
        if self.snapshot_seconds and not meta["timer"]:
            timer.set(Timestamp.of(self.clock() + self.snapshot_seconds))
            meta["timer"] = True
        return state

    @on_timer(SNAPSHOT)
    def on_snapshot_timer(self, key=beam.DoFn.KeyParam, model_state=beam.DoFn.StateParam(MODEL), meta_state=beam.DoFn.StateParam(META),
                          learned=beam.DoFn.StateParam(LEARNED), files=beam.DoFn.StateParam(FILES)):
        meta = self._meta(meta_state)
        meta["timer"] = False  # re-armed by the next batch: an idle shard sends nothing new
        if meta["batches"]:
            yield self._snapshot(key, self._state(key, model_state, meta), meta, learned, files)
        meta_state.write(json.dumps(meta, sort_keys=True))

    @on_timer(END)
    def on_end_of_stream(self, key=beam.DoFn.KeyParam, model_state=beam.DoFn.StateParam(MODEL), meta_state=beam.DoFn.StateParam(META),
                         timer=beam.DoFn.TimerParam(SNAPSHOT), learned=beam.DoFn.StateParam(LEARNED), files=beam.DoFn.StateParam(FILES)):
        meta = self._meta(meta_state)
        if meta["timer"]:
            # The last snapshot is sent now: an armed processing-time timer (--snapshot_seconds 1e9)
            # would otherwise hold the job open until it fired.
            timer.clear()
            meta["timer"] = False
        if meta["batches"]:
            yield self._snapshot(key, self._state(key, model_state, meta), meta, learned, files)
        meta_state.write(json.dumps(meta, sort_keys=True))

    def _snapshot(self, shard: int, state, meta: dict, learned, files) -> Snapshot:
        """The snapshot of the current interval; starts the next interval (updates ``meta``, empties ``learned`` and ``files``)."""
        began = time.perf_counter()
        record = {
            "shard": int(shard), "interval": meta["interval"], "n_seen": int(state.n_seen), "mixed_version": meta["mixed_version"],
            "online": Prequential(**meta["metrics"]).summary(), "batches": _in_order(learned.read()), "time": _now(),
            "diverged_at": meta.get("diverged_at"),  # the shard's first batch whose numbers turned NaN or inf
        }
        progress: dict[str, dict] = {}
        for key, rows, done in files.read():
            add_learned(progress, {key: {"rows": rows, "done": done}})
        if progress:  # whole files read in this interval: how far each got (MergeSnapshots adds them up)
            record["files"] = dict(sorted(progress.items()))
        out = (int(shard), meta["interval"], okl_core.model_bytes(self.learner, state), strict_json(record, sort_keys=True))
        learned.clear()
        files.clear()
        meta.update(interval=meta["interval"] + 1, batches=0, metrics=Prequential(self.learner.task).to_dict())
        self.snapshots.inc()
        self.snapshot_micros.inc(int((time.perf_counter() - began) * 1e6))
        return out

    def _mix_newest(self, state, meta: dict):
        """Mix in the newest version this shard has been told of, if newer than the last mixed."""
        newest = meta["newest"]
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
    snapshot_batches : int, optional
        Snapshot after every N batches of a shard.
    snapshot_seconds : float, optional
        Snapshot T seconds (processing time) after the first batch of an interval.
    mix_weight : float
        Weight ``w`` of a newer merged version in ``learner.mix(local, merged, w)`` (0: no
        mixing).
    clock : callable, optional
        Processing time in seconds (default ``time.time``); tests pass the clock of the
        runner's TestStream.
    read : ReadParquetFiles, optional
        Reader of whole-file events (:class:`WatchParquet`).

    The input is ``PCollection[(shard, StreamEvent)]``: batches (:class:`ReadParquetFiles`,
    or a message source), whole files (:class:`WatchParquet`) and model versions
    (:class:`VersionNotices`), flattened. A shard reads a whole file itself (``read``) and
    learns its batches in file order, as if they had arrived one by one: the rows never
    cross a shuffle (with a reading step that sent them to the shards, Prism took a median
    0.26-0.33 s from submission to the first row learned on 100k rows, against 0.13-0.16 s
    without it and 0.09-0.16 s for the batch job). A shard also sends a last snapshot when
    the input ends.

    Returns
    -------
    PCollection[Snapshot]
        ``(shard, interval, model bytes, JSON record)``; with ``read``, a dict of it
        (``"snapshots"``) and of the files' bad rows (``"dead_letter"``, as
        :class:`ReadParquetFiles` sends them).
    """

    def __init__(self, spec, initial_model: bytes, snapshot_batches=None, snapshot_seconds=None, mix_weight=0.0, clock=None, read=None):
        super().__init__()
        if not snapshot_batches and not snapshot_seconds:
            raise ValueError("StreamTrainOnline needs snapshot_batches or snapshot_seconds")
        self.spec, self.initial_model = spec, initial_model
        self.snapshot_batches, self.snapshot_seconds, self.mix_weight = snapshot_batches, snapshot_seconds, mixing_weight(mix_weight)
        self.clock, self.read = clock, read

    def expand(self, events):
        fn = _StreamShard(self.spec, self.initial_model, self.snapshot_batches, self.snapshot_seconds, self.mix_weight, self.clock, self.read)
        out = events | "TrainShards" >> (
            beam.ParDo(fn).with_input_types(typing.Tuple[int, StreamEvent]).with_output_types(Snapshot).with_outputs("dead_letter", main="snapshots")
        )
        return out.snapshots if self.read is None else {"snapshots": out.snapshots, "dead_letter": out.dead_letter}


class _MergeWindows(beam.DoFn):
    """One key: the newest snapshot of every shard; a merge per processing-time window that got one."""

    NEWEST = BagStateSpec("newest", TupleCoder((VarIntCoder(), VarIntCoder(), BytesCoder())))
    # (file, rows, done) of the snapshots since the last version: appended per snapshot, read
    # and cleared once per version, so a snapshot costs what it learned, not the stream's age
    NEW_FILES = BagStateSpec("new_files", TupleCoder((StrUtf8Coder(), VarIntCoder(), BooleanCoder())))
    META = ReadModifyWriteStateSpec("meta", StrUtf8Coder())
    WINDOW = TimerSpec("window", TimeDomain.REAL_TIME)
    END = TimerSpec("end", TimeDomain.WATERMARK)

    def __init__(self, spec: LearnerSpec, merge_seconds: float, first_version: int, clock=None, base: bytes | None = None, learned: dict | None = None,
                 since: int | None = None, root: str | None = None):
        self.spec, self.merge_seconds, self.first_version, self.clock = spec, float(merge_seconds), int(first_version), clock or _now
        self.base, self.learned, self.since, self.root = base, dict(learned or {}), since, root
        self.merges = Metrics.counter(METRICS_NAMESPACE, "merges")

    def setup(self):
        settle_worker_process()
        self.learner = self.spec.build()
        self.base_state, self.classes = None, None
        if self.base is not None:
            # the launcher built these bytes with this learner (pipelines.stream.initial_model checked the file)
            _, self.base_state = okl_core.model_from_bytes(self.base, source="the model the streaming shards started from")
            self.classes = okl_core.model_classes(self.base)  # the training data's: every version records them

    def _meta(self, meta_state) -> dict:
        # "since": the version the next one's record continues (its files_since); None: the first
        # version records the base's files itself (a fresh model, or --init_model from elsewhere)
        return json.loads(meta_state.read() or "null") or {"version": self.first_version - 1, "dirty": False, "end_timer": False, "since": self.since}

    def process(self, element, newest=beam.DoFn.StateParam(NEWEST), meta_state=beam.DoFn.StateParam(META),
                timer=beam.DoFn.TimerParam(WINDOW), end=beam.DoFn.TimerParam(END), new_files=beam.DoFn.StateParam(NEW_FILES)):
        _, (shard, interval, data, record) = element
        newest.add((int(shard), int(interval), data))
        meta = self._meta(meta_state)
        # The files this snapshot learned (how far): the next version records them, a restart from it skips them.
        for key, got in (json.loads(record).get("files") or {}).items():
            new_files.add((key, int(got["rows"]), bool(got["done"])))
        if not meta["dirty"]:
            # The window of processing time this snapshot arrived in ends at the next multiple of merge_seconds.
            timer.set(Timestamp.of(math.floor(self.clock() / self.merge_seconds + 1) * self.merge_seconds))
            meta["dirty"] = True
        if not meta["end_timer"]:
            end.set(_END_OF_STREAM)
            meta["end_timer"] = True
        meta_state.write(json.dumps(meta, sort_keys=True))
        return []  # nothing until a window ends

    @on_timer(WINDOW)
    def on_window_end(self, newest=beam.DoFn.StateParam(NEWEST), meta_state=beam.DoFn.StateParam(META), new_files=beam.DoFn.StateParam(NEW_FILES)):
        yield from self._merge(newest, meta_state, new_files)

    @on_timer(END)
    def on_end_of_stream(self, newest=beam.DoFn.StateParam(NEWEST), meta_state=beam.DoFn.StateParam(META), timer=beam.DoFn.TimerParam(WINDOW),
                         new_files=beam.DoFn.StateParam(NEW_FILES)):
        timer.clear()  # this merge takes what the window would have: its timer must not hold the job open
        yield from self._merge(newest, meta_state, new_files)

    def _new_files(self, new_files, meta: dict) -> dict:
        """The files learned since the last version (read and cleared), with the base's in a chain's first version."""
        files = dict(self.learned) if meta["since"] is None and meta["version"] == self.first_version - 1 else {}
        for key, rows, done in new_files.read():
            add_learned(files, {key: {"rows": rows, "done": done}})
        new_files.clear()
        return dict(sorted(files.items()))

    def _merge(self, newest, meta_state, new_files):
        meta = self._meta(meta_state)
        if not meta["dirty"]:
            return
        latest: dict[int, tuple[int, bytes]] = {}
        for shard, interval, data in newest.read():
            if shard not in latest or interval > latest[shard][0]:
                latest[shard] = (interval, data)
        newest.clear()
        for shard, (interval, data) in sorted(latest.items()):
            newest.add((shard, interval, data))
        parsed = [okl_core.model_from_bytes(data, source=f"snapshot {interval} of shard {shard}", allow_non_finite=True) for shard, (interval, data) in sorted(latest.items())]
        # Every shard started from the base: its examples count once (as in the batch merge of a round).
        merged = okl_core.merge_states(self.learner, [state for _, state in parsed], [lrn for lrn, _ in parsed], base=self.base_state)
        files, since = self._new_files(new_files, meta), meta["since"]
        meta.update(version=meta["version"] + 1, dirty=False, since=meta["version"] + 1)
        meta_state.write(json.dumps(meta, sort_keys=True))
        self.merges.inc()
        # What is new since the version "files_since" (the chain a restart follows back, learned_files), not every file learned.
        record = {"version": meta["version"], "snapshots": {str(s): i for s, (i, _) in sorted(latest.items())}, "n_seen": int(merged.n_seen), "time": _now(),
                  "files_since": since, "new_files": files, "root": self.root}
        yield meta["version"], okl_core.model_bytes(self.learner, merged, self.classes), strict_json(record, sort_keys=True)


class MergeSnapshots(beam.PTransform):
    """Merge the newest snapshot of every shard once per processing-time window that got one.

    Windows are the multiples of ``merge_seconds`` of processing time; the merge at the end
    of a window in which at least one snapshot arrived is :func:`okl_core.merge_states` of
    the newest snapshot of every shard so far, sorted by shard, numbered ``first_version``,
    ``first_version + 1``, ... (strictly increasing). A shard that sends nothing does not
    hold a version back. When the input ends, a last merge takes what is left.

    ``base`` (model bytes) is the model every shard started from: the merge is then
    ``merge_states(..., base=base)``, so its examples count once in ``n_seen`` and shards
    are weighted by what they added since, and every version records the classes it
    records (:func:`okl_core.model_classes`).

    A version's record holds the files learned since the version before it (``new_files``:
    how far each got) and names that version (``files_since``), not every file learned:
    its size and the merger's state grow with what is new, not with the stream's age
    (:func:`learned_files` follows the chain back; :class:`WriteModelVersions` compacts it
    into a manifest every :data:`MANIFEST_EVERY` versions). ``since`` is the version of the
    same output the first version continues (a restart from it); without one (a fresh
    model, ``--init_model`` from elsewhere) the first version also records ``learned``
    (:func:`learned_files` of the base). ``root`` (:func:`watch_root`) is recorded.

    Returns ``PCollection[MergedVersion]``: ``(version, model bytes, JSON record)``.
    ``clock`` (default ``time.time``) is for tests driven by a TestStream.
    """

    def __init__(self, spec: LearnerSpec, merge_seconds: float, first_version: int = 1, clock=None, base: bytes | None = None, learned: dict | None = None,
                 since: int | None = None, root: str | None = None):
        super().__init__()
        if not merge_seconds > 0:
            raise ValueError(f"merge_seconds must be > 0, got {merge_seconds}")
        self.spec, self.merge_seconds, self.first_version, self.clock = spec, float(merge_seconds), int(first_version), clock
        self.base, self.learned, self.since, self.root = base, learned, since, root

    def expand(self, snapshots):
        return (
            snapshots
            | "OneMerger" >> beam.Map(lambda s: (0, s)).with_output_types(typing.Tuple[int, Snapshot])
            | "MergeWindows" >> beam.ParDo(_MergeWindows(self.spec, self.merge_seconds, self.first_version, self.clock, self.base, self.learned, self.since, self.root))
            .with_output_types(MergedVersion)
        )


def _write_new(path: str, data: bytes) -> bool:
    """Write a file that must not exist yet (versions are never overwritten); False when it exists."""
    if is_remote(path):
        if FileSystems.exists(path):
            return False
        with FileSystems.create(path) as f:  # object stores publish a whole object at close
            f.write(data)
        return True
    return write_new_file(path, data)


class _WriteVersion(beam.DoFn):
    """One writer (single key): each merged version written once, under the next free number.

    Idempotent under replay. After a restore from a checkpoint (Flink) the merger proposes
    again the numbers the failed attempt already wrote, with other contents (its merges
    fall in other processing-time windows). Nothing is written before the number is
    checked: a proposal whose number holds a version with the same model bytes that
    continues the same version (``files_since``) is that version, replayed: nothing is
    written; one that differs goes to the next free number, and the proposals after it
    keep that offset (``LAST``: the last number written and the offset, proposed ->
    written), so no version is lost, overwritten or written twice with other contents.
    Each record continues the last version this writer wrote (``files_since``): the
    failed attempt's versions are left out of the chain a restart reads, and the files
    they learned are learned again by the replay.

    A proposal not written (one behind the last written, or a replay of a written version)
    still passes the files it learned on to the next version written (``CARRY``): a record
    adds files up by taking the most rows, so recording a file twice is harmless and
    dropping it is not.
    """

    LAST = ReadModifyWriteStateSpec("last", StrUtf8Coder())
    CARRY = BagStateSpec("carry", TupleCoder((StrUtf8Coder(), VarIntCoder(), BooleanCoder())))

    def __init__(self, directory: str, manifest_every: int = MANIFEST_EVERY):
        self.directory, self.manifest_every = directory.rstrip("/"), int(manifest_every)
        self.stale = Metrics.counter(METRICS_NAMESPACE, "stale_merges_skipped")
        self.renumbered = Metrics.counter(METRICS_NAMESPACE, "versions_renumbered")  # a replay's versions moved past the failed attempt's

    def process(self, element, last_state=beam.DoFn.StateParam(LAST), carry=beam.DoFn.StateParam(CARRY)):
        _, (proposed, data, record) = element
        last, offset = _last_written(last_state.read())
        parsed = json.loads(record)
        new = dict(parsed.get("new_files") or {})
        if last is not None and proposed + offset <= last:  # behind what this writer wrote: a stale merge
            self.stale.inc()
            _add_to(carry, new)
            return
        if "new_files" in parsed:
            add_learned(new, {k: {"rows": r, "done": d} for k, r, d in carry.read()})
            parsed["new_files"] = dict(sorted(new.items()))
            if last is not None:
                parsed["files_since"] = last  # the chain of what this writer wrote, not the proposal's numbering
        version = proposed + offset
        while True:
            parsed["version"] = version
            path = f"{self.directory}/{version_file_name(version)}"
            if file_exists(path):
                if self._replayed(path, data, parsed):  # this version, written before the restore: nothing to write
                    self.stale.inc()
                    self._done(last_state, carry, version, proposed)
                    _add_to(carry, _not_in(new, self._written_record(path).get("new_files") or {}))
                    return
                version += 1
                continue
            text = strict_json(parsed, sort_keys=True)
            write_bytes(path[: -len(".npz")] + ".json", (text + "\n").encode())  # no model under this number: a failed attempt's record at most
            if self.manifest_every and version % self.manifest_every == 0 and "new_files" in parsed:
                self._write_manifest(version, parsed)
            if _write_new(path, data):  # the version exists from here on: its record and manifest are in place
                break
            version += 1  # written meanwhile by another writer (a worker of the failed attempt still running)
        if version != proposed:
            self.renumbered.inc()
        self._done(last_state, carry, version, proposed)
        yield version, path

    @staticmethod
    def _done(last_state, carry, version: int, proposed: int) -> None:
        last_state.write(json.dumps([version, version - proposed]))
        carry.clear()

    @staticmethod
    def _replayed(path: str, data: bytes, record: dict) -> bool:
        """The version at ``path`` holds these model bytes and continues the same version as ``record``."""
        return read_bytes(path) == data and _WriteVersion._written_record(path).get("files_since", False) == record.get("files_since")

    @staticmethod
    def _written_record(path: str) -> dict:
        """The record of the version at ``path`` ({} when it has none okl could read)."""
        record_path = path[: -len(".npz")] + ".json"
        try:
            written = read_json_file(record_path, "version record") if file_exists(record_path) else {}
        except ValueError:
            return {}
        return written if isinstance(written, dict) else {}

    def _write_manifest(self, version: int, record: dict) -> None:
        """Every file the version has learned, so that a restart reads this instead of the records before it."""
        since = record.get("files_since")
        learned = {} if since is None else learned_files(f"{self.directory}/{version_file_name(since)}", record.get("root"))
        add_learned(learned, record["new_files"])
        manifest = {"version": version, "root": record.get("root"), "files": dict(sorted(learned.items()))}
        write_bytes(manifest_file(self.directory, version), (strict_json(manifest, sort_keys=True) + "\n").encode())


def _last_written(text: str | None) -> tuple[int | None, int]:
    """``(last version written, offset proposed -> written)`` of :class:`_WriteVersion`'s state (a bare number: offset 0)."""
    if not text:
        return None, 0
    value = json.loads(text)
    return (int(value), 0) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _add_to(carry, files: dict) -> None:
    """Append the file progress ``files`` to the writer's ``CARRY`` bag."""
    for key, got in files.items():
        carry.add((key, int(got["rows"]), bool(got["done"])))


def _not_in(files: dict, recorded: dict) -> dict:
    """The entries of ``files`` that ``recorded`` does not already hold (as many rows, done alike)."""
    return {k: v for k, v in files.items()
            if k not in recorded or int(v["rows"]) > int(recorded[k]["rows"]) or (bool(v["done"]) and not recorded[k]["done"])}


class WriteModelVersions(beam.PTransform):
    """Write merged versions as ``model-vNNNNNN.npz`` and ``model-vNNNNNN.json`` (what it merges).

    The model file is written last, atomically and never over an existing one: a reader
    that sees the model sees its record, and every ``manifest_every``-th version's
    manifest of every file learned (:func:`manifest_file`). Writes are idempotent under
    replay: a version written again with the same bytes is skipped, and a replay with
    other contents (after a restore from a checkpoint) is written under the next free
    number. Returns ``PCollection[(version, path)]``, strictly increasing versions (the
    numbers written, which may run ahead of the merger's).
    """

    def __init__(self, directory: str, manifest_every: int = MANIFEST_EVERY):
        super().__init__()
        self.directory, self.manifest_every = directory, manifest_every

    def expand(self, merged):
        return (
            merged
            | "OneWriter" >> beam.Map(lambda m: (0, m)).with_output_types(typing.Tuple[int, MergedVersion])
            | "WriteVersion" >> beam.ParDo(_WriteVersion(self.directory, self.manifest_every)).with_output_types(typing.Tuple[int, str])
        )


class VersionNotices(beam.PTransform):
    """Every ``poll_seconds``, the newest version in ``directory`` as an event for every shard.

    ``PeriodicImpulse`` -> :func:`newest_version` -> ``(shard, StreamEvent(version))`` for
    each of ``num_shards`` shards; nothing until the first version exists. Flattened with
    the batches into :class:`StreamTrainOnline`'s input.
    """

    def __init__(self, directory: str, poll_seconds: float, num_shards: int, start_timestamp: float, stop_timestamp: float | None = None):
        super().__init__()
        self.directory, self.poll_seconds, self.num_shards = directory, poll_seconds, int(num_shards)
        self.start_timestamp, self.stop_timestamp = start_timestamp, stop_timestamp

    def expand(self, pbegin):
        from apache_beam.transforms.periodicsequence import PeriodicImpulse

        directory, num_shards = self.directory, self.num_shards
        stop = MAX_TIMESTAMP if self.stop_timestamp is None else self.stop_timestamp  # PeriodicImpulse's own default

        def notices(_):
            newest = newest_version(directory)
            return [] if newest is None else [(shard, StreamEvent(newest[1], version=newest[0])) for shard in range(num_shards)]

        return (
            pbegin
            | "Poll" >> PeriodicImpulse(start_timestamp=self.start_timestamp, stop_timestamp=stop, fire_interval=self.poll_seconds)
            | "Newest" >> beam.FlatMap(notices).with_output_types(typing.Tuple[int, StreamEvent])
        )


class WatchParquet(beam.PTransform):
    """New Parquet files matching ``pattern`` (``fileio.MatchContinuously``) -> ``(shard, StreamEvent)`` whole files.

    Files are read once each (matched by path), when they appear, by the shard
    :func:`file_shard` sends them to (:class:`StreamTrainOnline` with ``read``); a file must
    be complete when it gets its final name (write it elsewhere and rename, as okl's writers
    do). Returns ``PCollection[(shard, StreamEvent)]`` of whole-file events.
    """

    def __init__(self, pattern: str, num_shards: int, poll_seconds: float, start_timestamp: float, stop_timestamp: float | None = None):
        super().__init__()
        self.pattern, self.num_shards, self.poll_seconds = pattern, int(num_shards), poll_seconds
        self.start_timestamp, self.stop_timestamp = start_timestamp, stop_timestamp

    def expand(self, pbegin):
        from apache_beam.io import fileio

        kwargs = {} if self.stop_timestamp is None else {"stop_timestamp": self.stop_timestamp}
        num_shards = self.num_shards
        # Typed keys: the shards' state is keyed by int (a deterministic coder), not by "any".
        return (
            pbegin
            | "MatchContinuously" >> fileio.MatchContinuously(self.pattern, interval=self.poll_seconds, start_timestamp=self.start_timestamp, **kwargs)
            | "ToShards" >> beam.Map(lambda m: (file_shard(m.path, num_shards), StreamEvent(m.path, whole_file=True))).with_output_types(typing.Tuple[int, StreamEvent])
        )
