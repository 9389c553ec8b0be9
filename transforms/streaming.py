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
"""

from __future__ import annotations

import json
import math
import os
import time
import typing
import uuid
import zlib

import apache_beam as beam
import numpy as np
from apache_beam.coders import BooleanCoder, BytesCoder, StrUtf8Coder, TupleCoder, VarIntCoder
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.transforms import window
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.utils.timestamp import Duration, Timestamp

import okl_core
from okl_core.data.layout import one_line
from okl_core.data.validate import CheckedRows
from okl_core.divergence import diverged as is_diverged
from okl_core.learners.compiled import warm_up
from okl_core.merge import check_mergeable, mix_states
from okl_core.metrics import Prequential
from okl_core.state import model_versions, parse_version, raw_state_bytes, state_from_raw_bytes, version_file_name, write_new_file
from okl_experiments.text import strict_json
from transforms.elements import BatchPiece, ModelCache, StreamEvent
from transforms.outputs import write_bytes
from transforms.read import METRICS_NAMESPACE, DatasetSource, RowGroupReader, is_remote, read_bytes
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


def file_shard(path: str, num_shards: int) -> int:
    """The shard of a streamed file: CRC-32 of its base name mod ``num_shards`` (stable everywhere)."""
    return zlib.crc32(os.path.basename(path).encode("utf-8")) % num_shards


def learned_key(path: str) -> str:
    """How a streamed file is named in the records of what was learned: a local path made absolute."""
    return path if is_remote(path) else os.path.abspath(path)


def watch_root(pattern: str) -> str:
    """The folder whose files a watched ``pattern`` matches: its leading folders without glob
    characters (absolute where local). Streamed files are named relative to it (:func:`file_identity`)."""
    fixed = []
    for part in pattern.split("/")[:-1]:
        if any(c in part for c in "*?["):
            break
        fixed.append(part)
    root = "/".join(fixed) or ("/" if pattern.startswith("/") else ".")
    return root if is_remote(root) else os.path.abspath(root)


def file_identity(path: str, root: str | None) -> str:
    """How a streamed file is named in the records of what was learned: its path relative to
    ``root`` (:func:`watch_root`; ``/``-separated), so that a restart after the watched folder
    moved, or on a worker that mounts it elsewhere, still knows it; outside ``root`` (or
    without one), :func:`learned_key`."""
    return relative_identity(learned_key(path), root)


def relative_identity(key: str, root: str | None) -> str:
    """``key`` (a :func:`learned_key` or an identity already relative) relative to ``root`` when it lies under it."""
    prefix = None if root is None else root.rstrip("/") + "/"
    return key[len(prefix):] if prefix is not None and key.startswith(prefix) else key


MANIFEST_EVERY = 64
"""Every this many versions, the whole set of files learned is written as a manifest (:func:`manifest_file`)."""


def manifest_file(directory: str, version: int) -> str:
    """The compacted manifest of what version ``version`` has learned: ``directory/manifests/learned-vNNNNNN.json``."""
    return f"{directory.rstrip('/')}/manifests/learned-v{version:06d}.json"


def _exists(path: str) -> bool:
    return FileSystems.exists(path) if is_remote(path) else os.path.isfile(path)


def _record_path(model_path: str) -> str | None:
    return model_path[: -len(".npz")] + ".json" if model_path.endswith(".npz") else None


def _read_json(path: str, what: str):
    """A JSON file okl wrote (ValueError, one line naming it, when it cannot be read or parsed)."""
    try:
        return json.loads(read_bytes(path))
    except OSError as err:
        raise ValueError(f"{path}: the {what} cannot be read ({one_line(err)})") from None
    except (ValueError, RecursionError) as err:  # JSONDecodeError, UnicodeDecodeError: ValueErrors; RecursionError: nested too deeply
        raise ValueError(f"{path}: not a {what} okl wrote ({one_line(err)})") from None


def learned_files(model_path: str, root: str | None = None) -> dict[str, dict]:
    """What the model version ``model_path`` has learned, from its record (``model-vNNNNNN.json``).

    ``{file identity: {"rows": good rows learned, "done": whole file learned}}``; empty for a
    model without a record (``--init_model`` of another file). A record holds the files new
    since the version it names (``files_since``): the chain of records is followed back to
    a compacted manifest (:func:`manifest_file`) or to its start, at most
    :data:`MANIFEST_EVERY` records. A record written by okl before versions held only what
    was new lists every file by absolute path (``files``): those under the folder watched
    then (the ``root`` of the newer record that continues it, else ``root``: the watched
    folder, :func:`watch_root`) are named relative to it.

    Raises
    ------
    ValueError
        A record or manifest that cannot be read or is not one okl writes (truncated, not
        JSON, ``files`` of another shape, a chain that names a missing record): one line
        naming the file. A restart must not guess which files a version holds: skipping
        too many loses rows, too few learns rows twice.
    """
    record_path = _record_path(model_path)
    if record_path is None or not _exists(record_path):
        return {}
    directory = model_path.rsplit("/", 1)[0] if "/" in model_path else "."
    learned: dict[str, dict] = {}
    recorded_root = None  # the folder watched by the job that continued the record read next
    while True:
        record = _read_json(record_path, "version record")
        try:
            if not (isinstance(record, dict) and "files_since" in record):  # a record of every file, by absolute path
                old_root = recorded_root or root  # the folder it watched, as the job that continued it knew it
                return add_learned(learned, {relative_identity(k, old_root): v for k, v in _record_files(record).items()})
            recorded_root = record.get("root") if isinstance(record.get("root"), str) else recorded_root
            add_learned(learned, _record_files(record, "new_files"))
            since = record["files_since"]
            if not (since is None or (isinstance(since, int) and not isinstance(since, bool) and 0 < since < int(record.get("version", since + 1)))):
                raise ValueError(f"'files_since' is {json.dumps(since)[:40]}, not an earlier version number or null")
        except ValueError as err:
            raise ValueError(f"{record_path}: not a version record okl wrote ({err})") from None
        manifest = manifest_file(directory, int(record["version"]))
        if _exists(manifest):
            try:
                return add_learned(learned, _record_files(_read_json(manifest, "manifest of learned files")))
            except ValueError as err:
                raise ValueError(f"{manifest}: not a manifest of learned files okl wrote ({one_line(err)})") from None
        if since is None:
            return learned
        record_path = f"{directory}/{version_file_name(since)[: -len('.npz')]}.json"
        if not _exists(record_path):
            raise ValueError(f"{record_path}: missing, and a later version's record names it as the one it continues (files_since)")


def _record_files(record, key: str = "files") -> dict[str, dict]:
    """The ``files`` of a parsed version record, checked: ``{path: {"rows": int >= 0, "done": bool}}`` (ValueError saying what is wrong)."""
    if not isinstance(record, dict):
        raise ValueError(f"a JSON {type(record).__name__}, not an object")
    files = record.get(key) or {}
    if not isinstance(files, dict):
        raise ValueError(f"'{key}' is a JSON {type(files).__name__}, not an object of file -> progress")
    for path, got in files.items():
        rows = got.get("rows") if isinstance(got, dict) else None
        if not (isinstance(rows, int) and not isinstance(rows, bool) and rows >= 0 and isinstance(got.get("done"), bool)):
            raise ValueError(f"'{key}' entry {path!r} is {json.dumps(got)[:80]}, not an object of rows (an integer >= 0) and done (true or false)")
    return dict(files)


def add_learned(into: dict, files: dict) -> dict:
    """Fold the file progress ``files`` into ``into`` (more rows wins; done stays done)."""
    for path, got in files.items():
        had = into.get(path, {"rows": 0, "done": False})
        into[path] = {"rows": max(int(had["rows"]), int(got["rows"])), "done": bool(had["done"] or got["done"])}
    return into


def continued_from(output: str, init_model: str | None) -> str | None:
    """The model file a streaming job on ``output`` starts from: ``init_model``, else the newest
    version in ``output`` (a restart), else None (a fresh model)."""
    if init_model:
        return init_model
    newest = newest_version(output)
    return newest[1] if newest else None


def dead_lettered_files(directory: str, learned: dict, root: str | None = None) -> frozenset[str]:
    """The streamed files an earlier job on ``directory`` dead-lettered (``dead_letter/<name>.jsonl``,
    which names the file) that ``learned`` (:func:`learned_files` of the version continued from)
    does not hold whole, as :func:`learned_key` names them.

    A dead letter names its file by its path and by its identity under the folder watched
    then (:func:`file_identity`): with ``root`` (the folder watched now, :func:`watch_root`)
    the file is the one with that identity under ``root``, so a restart after the watched
    folder moved knows it too. A restart leaves them out of its launch checks, and does not
    dead-letter them again when they still hold nothing to learn (:class:`ReadParquetFiles`):
    an unreadable file, or one whose every row was bad, is reported once.
    """
    folder = f"{directory.rstrip('/')}/dead_letter"
    if is_remote(folder):
        letters = [m.path for m in FileSystems.match([FileSystems.join(folder, "*.jsonl")])[0].metadata_list]
    else:
        letters = [os.path.join(folder, name) for name in sorted(os.listdir(folder))] if os.path.isdir(folder) else []
    found = set()
    for letter in letters:
        named = _dead_letter_subject(letter, root)
        if named is not None and not (learned.get(relative_identity(named, root)) or learned.get(named) or {}).get("done"):
            found.add(named)
    return frozenset(found)


def _dead_letter_subject(path: str, root: str | None = None) -> str | None:
    """The streamed file a dead-letter file is about (its first record's ``identity`` under ``root``,
    else its ``file``), as :func:`learned_key` names it."""
    try:
        with (FileSystems.open(path) if is_remote(path) else open(path, "rb")) as f:
            first = json.loads(f.readline() or b"null")
    except (OSError, ValueError):  # not a dead letter okl wrote: nothing to skip
        return None
    if not (isinstance(first, dict) and isinstance(first.get("file"), str)):
        return None
    identity = first.get("identity")
    if root is not None and isinstance(identity, str) and identity and not (identity.startswith("/") or is_remote(identity)):
        return f"{root.rstrip('/')}/{identity}"  # relative to the folder watched then: the same name under the one watched now
    return learned_key(first["file"])


def input_root(path: str) -> str:
    """The watched folder of a streaming job's ``--input``: a glob's :func:`watch_root`, else the folder itself
    (as ``pipelines.stream`` watches ``<folder>/*.parquet``)."""
    return watch_root(path if any(c in path for c in "*?[") else path.rstrip("/") + "/*.parquet")


def newest_version(directory: str) -> tuple[int, str] | None:
    """``(version, path)`` of the newest ``model-vNNNNNN.npz`` in ``directory`` (local or remote)."""
    if not is_remote(directory):
        found = model_versions(directory)
        return found[-1] if found else None
    matches = FileSystems.match([FileSystems.join(directory, "model-v*.npz")])[0].metadata_list
    found = sorted((parse_version(m.path), m.path) for m in matches if parse_version(m.path) is not None)  # type: ignore[misc]
    return found[-1] if found else None


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
        if not 0.0 <= float(mix_weight) <= 1.0:
            raise ValueError(f"mix_weight must be in [0, 1], got {mix_weight}")
        self.spec, self.initial_model = spec, initial_model
        self.snapshot_batches, self.snapshot_seconds, self.mix_weight = snapshot_batches, snapshot_seconds, float(mix_weight)
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
            if _exists(path):
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
            written = _read_json(record_path, "version record") if _exists(record_path) else {}
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
        kwargs = {} if self.stop_timestamp is None else {"stop_timestamp": self.stop_timestamp}

        def notices(_):
            newest = newest_version(directory)
            return [] if newest is None else [(shard, StreamEvent(newest[1], version=newest[0])) for shard in range(num_shards)]

        return (
            pbegin
            | "Poll" >> PeriodicImpulse(start_timestamp=self.start_timestamp, fire_interval=self.poll_seconds, **kwargs)
            | "Newest" >> beam.FlatMap(notices).with_output_types(typing.Tuple[int, StreamEvent])
        )


class ReadParquetFiles(beam.DoFn):
    """Read one new Parquet file into ``(shard, StreamEvent)`` batches; bad rows to ``dead_letter``.

    The file's shard is :func:`file_shard`; its rows are checked against the learner's
    shape (``n_inputs``, task, classes) and cut into batches of ``batch_rows`` in file order.
    A file with bad rows (or an unreadable file) sends one ``(path, JSON lines)`` element to
    the ``dead_letter`` output: every bad row of the file, for :class:`WriteDeadLetterFiles`.
    Row groups are read by the batch reader (:class:`~transforms.read.RowGroupReader`): page
    checksums verified, the rows of a row group that cannot be read dead-lettered (row -1,
    ``unreadable row group: row group G (...)``) while the rest of the file is learned.
    ``learned`` (a restart: :func:`learned_files` of the version continued from) maps a
    file to the good rows already in that version: a file learned whole is skipped, one
    learned in part resumes after those rows. ``dead_lettered`` (a restart:
    :func:`dead_lettered_files`) names the files an earlier job dead-lettered: one that
    still holds nothing to learn is skipped, its dead letter left as that job wrote it.
    :class:`StreamTrainOnline` reads whole-file events with the same :meth:`read`.
    Files are named in ``learned`` and ``dead_lettered`` by :func:`file_identity`: relative
    to ``root`` (the watched folder, :func:`watch_root`) when given.
    """

    def __init__(self, n_features: int, task: str, n_classes: int | None, num_shards: int, batch_rows: int, learned: dict | None = None,
                 dead_lettered: frozenset[str] = frozenset(), root: str | None = None):
        self.n_features, self.task, self.n_classes = n_features, task, n_classes
        self.num_shards, self.batch_rows, self.root = num_shards, batch_rows, root
        self.learned, self.dead_lettered = dict(learned or {}), frozenset(dead_lettered)
        self.files = Metrics.counter(METRICS_NAMESPACE, "train_files_read")
        self.skipped = Metrics.counter(METRICS_NAMESPACE, "train_files_skipped")  # learned by the version continued from
        self.rejected = Metrics.counter(METRICS_NAMESPACE, "train_rows_rejected")
        self.unreadable = Metrics.counter(METRICS_NAMESPACE, "train_files_unreadable")

    def _checked(self, path: str) -> CheckedRows:
        """Every row group of ``path`` checked as batch training checks it (unreadable groups: bad rows)."""
        source = DatasetSource(os.path.basename(path), path, self.task, self.n_features, self.n_classes, ())
        reader = RowGroupReader(source, "train", keep=1)
        parts = [reader.checked(path, g, rows)[0] for g, rows in enumerate(reader.group_rows(path))]
        if not parts:  # no row groups: no rows
            empty = np.zeros(0, np.int64)
            y = np.zeros(0, np.float32 if self.task == "regression" else np.int32)
            return CheckedRows(np.zeros((0, self.n_features), np.float32), y, empty, np.zeros(0, bool), empty, [])
        joined = {k: np.concatenate([getattr(c, k) for c in parts]) for k in ("X", "y", "row", "good", "bad_row")}
        return CheckedRows(**joined, reasons=[r for c in parts for r in c.reasons])

    def identity(self, path: str) -> str:
        """How ``path`` is named in the records of what was learned (:func:`file_identity` under ``root``)."""
        return file_identity(path, self.root)

    def read(self, path: str, shard: int) -> tuple[list[StreamEvent], list[str]]:
        """The file's batches in file order, and its dead-letter records (JSON lines: every bad row, or the unreadable file)."""
        key = self.identity(path)
        done = self.learned.get(key)
        if done is not None and done["done"]:
            self.skipped.inc()
            return [], []
        try:
            checked = self._checked(path)
        except Exception as err:  # a foreign or broken file must not stop the stream
            if key in self.dead_lettered:  # an earlier job reported it: once is enough
                self.skipped.inc()
                return [], []
            self.unreadable.inc()
            # The watcher matches each name once: a file still being written, or replaced later, is not read again.
            reason = f"unreadable Parquet file: {one_line(err)}; not retried: write files elsewhere and rename them into the watched directory"
            record = {"split": "train", "file": path, "identity": key, "row": None, "shard": shard, "reason": reason}
            return [], [json.dumps(record, sort_keys=True)]
        first = 0 if done is None else min(int(done["rows"]), len(checked.y))  # good rows the version continued from holds
        batches = []
        for seq, start in enumerate(range(first, len(checked.y), self.batch_rows)):
            stop = min(start + self.batch_rows, len(checked.y))
            piece = BatchPiece(shard, 0, seq, start, stop, checked.X[start:stop], checked.y[start:stop], checked.row[start:stop])
            batches.append(StreamEvent(path, seq=seq, piece=piece))
        if not batches and key in self.dead_lettered:  # every row bad, reported by an earlier job (with rows to learn, it is read as new)
            self.skipped.inc()
            return [], []
        self.files.inc()
        if checked.reasons:
            self.rejected.inc(len(checked.reasons))
        dead = [
            json.dumps({"split": "train", "file": path, "identity": key, "row": int(checked.bad_row[k]), "shard": shard, "reason": reason}, sort_keys=True)
            for k, reason in enumerate(checked.reasons)
        ]
        return batches, dead

    def process(self, path: str):
        shard = file_shard(path, self.num_shards)
        batches, dead = self.read(path, shard)
        if dead:
            yield beam.pvalue.TaggedOutput("dead_letter", (path, dead))
        for event in batches:
            yield shard, event


def dead_letter_file(directory: str, path: str) -> str:
    """Where the bad rows of the streamed file ``path`` go: ``directory/dead_letter/<name>.jsonl``."""
    return f"{directory.rstrip('/')}/dead_letter/{os.path.basename(path)}.jsonl"


def snapshot_record_file(directory: str, first_version: int, shard: int, interval: int) -> str:
    """Where a snapshot's record goes: ``directory/snapshots/run-VVVVVV/shard-SSSS-interval-KKKKKK.json``.

    ``VVVVVV`` is the first version the job writes: a restarted job counts its intervals
    from 0 again, in a folder of its own.
    """
    return f"{directory.rstrip('/')}/snapshots/run-{first_version:06d}/shard-{shard:04d}-interval-{interval:06d}.json"


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


class WriteSnapshotRecords(beam.PTransform):
    """Write each snapshot's JSON record (metrics of the interval, the batches it learned).

    One whole file per snapshot, at :func:`snapshot_record_file` (``first_version``: the
    first version this job writes). Returns ``PCollection[str]`` of the records.
    """

    def __init__(self, directory: str, first_version: int):
        super().__init__()
        self.directory, self.first_version = directory, int(first_version)

    def expand(self, snapshots):
        directory, first_version = self.directory, self.first_version

        def write(snapshot):
            shard, interval, _, record = snapshot
            write_bytes(snapshot_record_file(directory, first_version, shard, interval), (record + "\n").encode())
            return record

        return snapshots | "WriteRecords" >> beam.Map(write).with_output_types(str)


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
