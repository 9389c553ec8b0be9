"""``python -m pipelines.train --streaming``: the streaming training graph (issue 8).

::

    python -m pipelines.train --streaming --input 'incoming/*.parquet' --learner fogd --sigma 1 \\
        --num_shards 2 --snapshot_batches 4 --mix_weight 0.5 --output runs/live \\
        --runner=PrismRunner            # or FlinkRunner / DataflowRunner (see docs/streaming.md)

The graph (transforms/streaming.py)::

    WatchParquet(--input) ──────────────┐  (file names: each shard reads its own files)
    VersionNotices(--output, polled) ───┴─> StreamTrainOnline ─> MergeSnapshots(--merge_seconds)
                                                  │                  ─> WriteModelVersions(--output)
                                                  ├─> WriteSnapshotRecords(--output/snapshots/run-V/)
                                                  └─ bad rows ─> WriteDeadLetterFiles(--output/dead_letter/<file>.jsonl)

At launch the job starts from ``--init_model`` or, when ``--output`` already holds
``model-vNNNNNN.npz`` files, from the newest of them (a restart); new versions continue
from its number. ``--stop_after S`` stops watching after S seconds (a bounded run).
:func:`run_streaming` runs it; with no runner (or DirectRunner) on Beam's Prism runner.
"""

from __future__ import annotations

import json
import os
import time
from urllib.parse import urlsplit

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

import okl_core
from okl_core.data.schema import one_line
from okl_core.jsonio import loads_json
from okl_core.reporting import headline
from okl_core.state import parse_version
from pipelines.cli import reclaim_interrupt
from pipelines.common import (DIRECT_NAMES, PRISM_NAMES, UsageError, _first_url_error, make_pipeline, pipeline_options, runner_name,
                              start_job, use_local_prism)
from pipelines.job import TrainJob, TrainResult, check_model_classes, counters, data_classes, start_refused, write_preparation
from pipelines.requests import DEFAULT_POLL_SECONDS, StreamRequest
from transforms.streaming import (
    MergeSnapshots, ReadParquetFiles, StreamTrainOnline, VersionNotices, WatchParquet, WriteDeadLetterFiles, WriteModelVersions,
    WriteSnapshotRecords, continued_from, newest_version, relative_identity, watch_root,
)
from transforms.read import DatasetSource, is_remote, read_bytes
from transforms.train import LearnerSpec

__all__ = ["watch_pattern", "version_in", "initial_model", "check_mix_weight", "build_streaming_graph", "streaming_pipeline",
           "check_prism", "run_streaming", "add_streaming_flags"]


def watch_pattern(path: str) -> str:
    """The file pattern watched for ``--input``: a glob as given, a directory's ``*.parquet``."""
    if any(c in path for c in "*?["):
        return path
    return path.rstrip("/") + "/*.parquet"


def initial_model(init_model: str | None, learner: okl_core.Learner, output: str, source: DatasetSource | None = None) -> tuple[bytes, int, str]:
    """``(model bytes, next version, where from)``: ``init_model`` (``--init_model``), else the newest version in --output, else init().

    The bytes record the classes of ``source`` (the --input, when its ``dataset.json``
    records them), else those of the model continued from: the versions keep them. A model
    whose recorded classes differ from the data's is refused (:func:`pipelines.job.check_model_classes`).
    """
    classes = None if source is None else data_classes(source, learner.task)
    path = continued_from(output, init_model)
    if path is None:
        return okl_core.model_bytes(learner, learner.init(), classes), 1, "a fresh model"
    try:
        data = read_bytes(path)
        loaded, state = okl_core.model_from_bytes(data, source=path)
    except (OSError, ValueError) as err:
        raise start_refused(output, init_model, path, err, damaged=True) from None
    try:
        okl_core.merge.check_mergeable(learner, loaded)
    except ValueError as err:
        raise start_refused(output, init_model, path, err, damaged=False) from None
    try:  # the data is what to fix here (prepare it --like the training data), not the learner or the output
        if source is not None:
            check_model_classes(source, data, f"the model {path} was trained on")
    except ValueError as err:
        raise UsageError(str(err)) from None
    done = newest_version(output)
    next_version = max(parse_version(path) or 0, done[0] if done else 0) + 1
    return okl_core.model_bytes(learner, state, classes if classes is not None else okl_core.model_classes(data)), next_version, path


def version_in(output: str, path: str | None) -> int | None:
    """The version number of ``path`` when it is a version in ``output`` (a restart from it: the
    new versions' records continue its chain of files learned), else None."""
    version = None if path is None else parse_version(path)
    if path is None or version is None:
        return None
    norm = (lambda p: p.rstrip("/")) if is_remote(output) else (lambda p: os.path.abspath(p))
    return version if norm(path.rsplit("/", 1)[0] if "/" in path else ".") == norm(output) else None


def check_mix_weight(stream: StreamRequest, learner: okl_core.Learner) -> None:
    """Refuse at launch a ``--mix_weight`` above 0 for a learner that cannot mix (the flags themselves: :class:`StreamRequest`)."""
    if stream.mix_weight > 0:
        try:
            okl_core.check_mixable(learner)
        except okl_core.NotMergeableError as err:
            raise UsageError(f"--mix_weight {stream.mix_weight}: {err}; stream with --mix_weight 0") from None


def _print_snapshot(record: str, key: str) -> None:
    """One line per snapshot: shard, interval, rows and the interval's online metric ``key``."""
    r = loads_json(record)
    metric = f"{key} {r['online'][key]:.5g}" if key in r["online"] else ""
    diverged = r.get("diverged_at")
    note = f"; DIVERGED from {diverged['file']} batch {diverged['seq']} (row {diverged['row']})" if diverged else ""
    print(f"shard {r['shard']} snapshot {r['interval']}: {sum(b['rows'] for b in r['batches'])} rows ({r['n_seen']} in all), online {metric}{note}", flush=True)


def build_streaming_graph(pipeline: beam.Pipeline, job: TrainJob) -> dict:
    """Add the streaming graph of ``job`` (its request's streaming flags) to ``pipeline``; returns what it resolved and its outputs.

    The returned dict holds ``started_from``, ``first_version`` and ``pattern`` (printed as
    one JSON line), and the PCollections ``snapshots`` and ``versions`` for callers that
    add steps of their own.
    """
    pipeline.options.view_as(StandardOptions).streaming = True
    learner, stream, input_path = job.learner, job.request.streaming, job.request.input
    if stream is None or input_path is None:
        raise ValueError("not a streaming job: resolve it from a request with --streaming and --input")
    check_mix_weight(stream, learner)
    data, first_version, started_from = initial_model(stream.init_model, learner, job.output, job.source)
    # The files the model continued from has learned (read again, they would count twice), and
    # those an earlier job on this output dead-lettered (reported once): read at launch.
    learned, dead_lettered = job.restart
    # Files are named relative to the watched folder: a restart after it moved (or on a worker that
    # mounts it elsewhere) knows them. Records okl wrote before name them by absolute path.
    root = watch_root(watch_pattern(input_path))
    learned = {relative_identity(key, root): got for key, got in learned.items()}
    dead_lettered = frozenset(relative_identity(key, root) for key in dead_lettered)
    spec = LearnerSpec(learner.name, job.params)
    start = time.time()
    stop = None if stream.stop_after is None else start + stream.stop_after
    num_shards = job.plan.num_shards
    read = ReadParquetFiles(learner.config.n_inputs, learner.task, getattr(learner.config, "n_classes", None), num_shards, job.plan.batch_rows, learned,
                            dead_lettered, root)
    files = pipeline | "WatchParquet" >> WatchParquet(watch_pattern(input_path), num_shards, stream.poll_seconds, start, stop)
    notices = pipeline | "VersionNotices" >> VersionNotices(job.output, stream.poll_seconds, num_shards, start, stop)
    trained = (
        (files, notices)
        | "FilesAndVersions" >> beam.Flatten()
        | "StreamTrainOnline" >> StreamTrainOnline(spec, data, snapshot_batches=stream.snapshot_every, snapshot_seconds=stream.snapshot_seconds,
                                                  mix_weight=stream.mix_weight, read=read)
    )
    snapshots = trained["snapshots"]
    merge_seconds = stream.window_seconds
    versions = (
        snapshots
        | "MergeSnapshots" >> MergeSnapshots(spec, merge_seconds, first_version, base=data, learned=learned,
                                             since=version_in(job.output, started_from), root=root)
        | "WriteModelVersions" >> WriteModelVersions(job.output)
    )
    versions | "LogVersions" >> beam.Map(lambda v: print(f"model version {v[0]}: {v[1]}", flush=True))
    dead = trained["dead_letter"] | "WriteDeadLetters" >> WriteDeadLetterFiles(job.output)
    dead | "LogDeadLetters" >> beam.Map(lambda path: print(f"bad rows: {path}", flush=True))
    snapshots | "WriteSnapshotRecords" >> WriteSnapshotRecords(job.output, first_version) | "LogSnapshots" >> beam.Map(_print_snapshot, headline(learner.task).summary_key)
    resolved = {"started_from": started_from, "first_version": first_version, "pattern": watch_pattern(input_path), "merge_seconds": merge_seconds,
                "files_learned": sum(1 for f in learned.values() if f["done"]),  # skipped when they match the pattern
                "files_dead_lettered": len(dead_lettered)}  # by an earlier job: skipped unless they now hold rows to learn
    print(json.dumps(resolved), flush=True)
    return {**resolved, "snapshots": snapshots, "versions": versions}


def add_streaming_flags(parser) -> None:
    """The ``streaming`` argument group of ``pipelines.train``."""
    group = parser.add_argument_group("streaming (--streaming)")
    group.add_argument("--streaming", action="store_true", help="watch --input for new Parquet files and train continuously")
    group.add_argument("--snapshot_batches", type=int, help="each shard snapshots its state every N batches (default 10 unless --snapshot_seconds)")
    group.add_argument("--snapshot_seconds", type=float, help="each shard snapshots its state T seconds after the first batch of an interval")
    group.add_argument("--mix_weight", type=float, default=0.0, help="weight w of a newer merged version mixed into a shard: (1-w) local + w merged (default 0: no mixing)")
    # default None: a batch job can then tell that it was given (pipelines.requests.TrainRequest.from_args)
    group.add_argument("--poll_seconds", type=float, help=f"how often new input files and new model versions are looked for (default {DEFAULT_POLL_SECONDS})")
    group.add_argument("--merge_seconds", type=float, help="length of the processing-time windows: one merged version per window in which a snapshot arrived (default: --poll_seconds)")
    group.add_argument("--init_model", help="model file to start from (default: the newest model-vNNNNNN.npz in --output, else a fresh model)")
    group.add_argument("--stop_after", type=float, help="stop watching after S seconds (default: run until cancelled)")


_PRISM_HELP = (
    "local streaming runs on Beam's Prism runner, which could not be started ({error}). Build it with Go from "
    "the Go module proxy (`python -m pipelines.engines install prism`, or `make runners`: okl then uses it), "
    "or pass --prism_location=PATH to a Prism binary of apache-beam {version}, or run on Flink or Dataflow "
    "(docs/streaming.md)"
)


def streaming_pipeline(beam_argv: list[str]) -> tuple[beam.Pipeline, bool]:
    """A streaming pipeline on the requested runner, and whether it runs locally on Prism.

    With no runner (or DirectRunner) the graph runs on Beam's Prism runner: the FnApiRunner
    behind okl's batch default is batch-only, and Beam's legacy direct runner cannot run
    the file-watching source.
    """
    options = pipeline_options(beam_argv)
    options.view_as(StandardOptions).streaming = True
    name = runner_name(options)
    local = name is None or name in DIRECT_NAMES | PRISM_NAMES
    if local:
        use_local_prism(options, beam_argv)
        check_prism(options)
    return make_pipeline(options, runner="PrismRunner" if local else None), local


def check_prism(options: PipelineOptions) -> None:
    """Find the Prism binary a local run will start (fetching it as Beam would next), before Beam tries.

    ``--prism_location`` (okl's cached binary, :func:`pipelines.common.use_local_prism`, when
    not given) must be a file when it is a local path. Otherwise Beam's own resolution and
    fetcher (``PrismJobServer``: a file system path, an Apache Beam GitHub release, or the
    release of the installed apache-beam) fetch it into Beam's cache, where Beam then finds
    it; a failed fetch is read from the ``URLError`` it raised, not from Beam's message texts.

    Raises
    ------
    UsageError
        No binary: :data:`_PRISM_HELP` with why (one line).
    """
    from apache_beam.options.pipeline_options import PrismRunnerOptions
    from apache_beam.runners.portability.prism_runner import PrismJobServer

    location = options.view_as(PrismRunnerOptions).prism_location
    if location and not urlsplit(location).scheme:
        if not os.path.isfile(location):
            raise UsageError(_prism_help(f"--prism_location {location}: {'not a file' if os.path.exists(location) else 'no such file'}"))
        return
    try:
        source = PrismJobServer(options).path_to_binary()
        PrismJobServer.local_bin(source)
    except ValueError as err:  # a --prism_location Beam cannot read, or no release binary for this platform
        raise UsageError(_prism_help(one_line(err))) from None
    except RuntimeError as err:
        why = _first_url_error(err)
        if why is None:
            raise
        raise UsageError(_prism_help(f"fetching {location or 'it from GitHub'} failed: {why.reason}")) from None


def _prism_help(error: str) -> str:
    """:data:`_PRISM_HELP` for ``error``, with the installed Beam version."""
    return _PRISM_HELP.format(error=error, version=beam.__version__)


def run_streaming(job: TrainJob) -> TrainResult:
    """Run the streaming graph of ``job`` until --stop_after or cancellation.

    Raises
    ------
    UsageError
        Bad streaming flags, or a local run without a Prism binary (:func:`check_prism`:
        the message says what to do).
    """
    pipeline, _ = streaming_pipeline(list(job.request.beam_args))
    build_streaming_graph(pipeline, job)
    write_preparation(job)  # beside the versions, once the launch is accepted (a refused one leaves no file)
    pipeline_result = start_job(pipeline)
    reclaim_interrupt()  # Beam's job server put its own Ctrl-C handler in place: not reentrant (a 2nd Ctrl-C deadlocked)
    pipeline_result.wait_until_finish()
    files = {**job.files, "model": (okl_core.model_versions(job.output) or [(0, job.files["model"])])[-1][1]}
    return TrainResult(pipeline_result, job.output, files, None, counters(pipeline_result))
