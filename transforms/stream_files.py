"""The files of a stream: new Parquet files read, what each model version has learned, dead letters.

:mod:`transforms.streaming` trains on a watched folder and writes model versions; this module
names and reads what it touches on the way:

* :class:`ReadParquetFiles` reads a new file into batches (its bad rows to a dead letter);
  :func:`file_shard` says which shard learns it;
* files are named relative to the watched folder (:func:`watch_root`, :func:`file_identity`),
  so that a restart after the folder moved, or on a worker that mounts it elsewhere, knows them;
* a version's record holds the files new since the version it continues, and
  :func:`learned_files` follows that chain back to a compacted manifest (:func:`manifest_file`);
* :func:`dead_lettered_files` names the files an earlier job dead-lettered, which a restart
  leaves alone; :class:`WriteDeadLetterFiles` and :class:`WriteSnapshotRecords` write a
  stream's dead letters and snapshot records.
"""

from __future__ import annotations

import json
import os
import zlib

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from okl_core.data.layout import one_line
from okl_core.data.validate import CheckedRows
from okl_core.state import model_versions, parse_version, version_file_name
from transforms.elements import BatchPiece, StreamEvent
from transforms.outputs import write_bytes
from transforms.read import METRICS_NAMESPACE, DatasetSource, RowGroupReader, is_remote, read_bytes

__all__ = [
    "ReadParquetFiles", "WriteDeadLetterFiles", "WriteSnapshotRecords", "newest_version", "file_shard", "learned_key", "learned_files",
    "add_learned", "continued_from", "dead_lettered_files", "dead_letter_file", "snapshot_record_file", "watch_root", "input_root",
    "file_identity", "relative_identity", "manifest_file", "MANIFEST_EVERY", "file_exists", "read_json_file",
]


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


def file_exists(path: str) -> bool:
    """Whether the file ``path`` exists (local or remote)."""
    return FileSystems.exists(path) if is_remote(path) else os.path.isfile(path)


def _record_path(model_path: str) -> str | None:
    return model_path[: -len(".npz")] + ".json" if model_path.endswith(".npz") else None


def read_json_file(path: str, what: str):
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
    if record_path is None or not file_exists(record_path):
        return {}
    directory = model_path.rsplit("/", 1)[0] if "/" in model_path else "."
    learned: dict[str, dict] = {}
    recorded_root = None  # the folder watched by the job that continued the record read next
    while True:
        record = read_json_file(record_path, "version record")
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
        if file_exists(manifest):
            try:
                return add_learned(learned, _record_files(read_json_file(manifest, "manifest of learned files")))
            except ValueError as err:
                raise ValueError(f"{manifest}: not a manifest of learned files okl wrote ({one_line(err)})") from None
        if since is None:
            return learned
        record_path = f"{directory}/{version_file_name(since)[: -len('.npz')]}.json"
        if not file_exists(record_path):
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
