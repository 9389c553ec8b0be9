"""``python -m pipelines.train --streaming``: the streaming training graph (issue 8).

::

    python -m pipelines.train --streaming --input 'incoming/*.parquet' --learner fogd --sigma 1 \\
        --num_shards 2 --snapshot_batches 4 --mix_weight 0.5 --output runs/live \\
        --runner=PrismRunner            # or FlinkRunner / DataflowRunner (see README "## Streaming")

The graph (transforms/streaming.py)::

    WatchParquet(--input) ──────────────┐
    VersionNotices(--output, polled) ───┴─> StreamTrainOnline ─> MergeSnapshots(--merge_seconds)
          │                                       │                  ─> WriteModelVersions(--output)
          │                                       └─> WriteSnapshotRecords(--output/snapshots/run-V/)
          └─ bad rows ─> WriteDeadLetterFiles(--output/dead_letter/<file>.jsonl)

At launch the job starts from ``--init_model`` or, when ``--output`` already holds
``model-vNNNNNN.npz`` files, from the newest of them (a restart); new versions continue
from its number. ``--stop_after S`` stops watching after S seconds (a bounded run).
"""

from __future__ import annotations

import json
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import StandardOptions

import okl_core
from okl_core.state import parse_version
from pipelines.common import UsageError
from transforms.inference import read_bytes
from transforms.streaming import (
    MergeSnapshots, ReadParquetFiles, StreamTrainOnline, VersionNotices, WatchParquet, WriteDeadLetterFiles, WriteModelVersions,
    WriteSnapshotRecords, newest_version,
)
from transforms.train import LearnerSpec

__all__ = ["watch_pattern", "initial_model", "build_streaming_graph"]


def watch_pattern(path: str) -> str:
    """The file pattern watched for ``--input``: a glob as given, a directory's ``*.parquet``."""
    if any(c in path for c in "*?["):
        return path
    return path.rstrip("/") + "/*.parquet"


def initial_model(args, learner: okl_core.Learner, output: str) -> tuple[bytes, int, str]:
    """``(model bytes, next version, where from)``: --init_model, else the newest version in --output, else init()."""
    if args.init_model:
        path = args.init_model
    else:
        newest = newest_version(output)
        path = newest[1] if newest else None
    if path is None:
        return okl_core.model_bytes(learner, learner.init()), 1, "a fresh model"
    try:
        data = read_bytes(path)
        loaded, state = okl_core.model_from_bytes(data, source=path)
        okl_core.merge.check_mergeable(learner, loaded)
    except (OSError, ValueError) as err:
        raise UsageError(f"--init_model {path}: {err}") from None
    done = newest_version(output)
    next_version = max(parse_version(path) or 0, done[0] if done else 0) + 1
    return okl_core.model_bytes(learner, state), next_version, path


def check_streaming_args(args, learner: okl_core.Learner) -> None:
    """Flag checks of the streaming mode (clear errors naming the flag)."""
    if args.rounds != 1:
        raise UsageError("--rounds is for batch jobs; a streaming job mixes continuously (--mix_weight)")
    if not 0.0 <= args.mix_weight <= 1.0:
        raise UsageError(f"--mix_weight {args.mix_weight}: must be in [0, 1]")
    if args.snapshot_batches is not None and args.snapshot_batches < 1:
        raise UsageError("--snapshot_batches must be >= 1")
    if args.snapshot_seconds is not None and not args.snapshot_seconds > 0:
        raise UsageError("--snapshot_seconds must be > 0")
    if not args.poll_seconds > 0:
        raise UsageError("--poll_seconds must be > 0")
    if args.merge_seconds is not None and not args.merge_seconds > 0:
        raise UsageError("--merge_seconds must be > 0")
    if args.mix_weight > 0:
        try:
            okl_core.check_mixable(learner)
        except okl_core.NotMergeableError as err:
            raise UsageError(f"--mix_weight {args.mix_weight}: {err}; stream with --mix_weight 0") from None


def _print_snapshot(record: str) -> None:
    """One line per snapshot: shard, interval, rows and the interval's online metric."""
    r = json.loads(record)
    metric = ", ".join(f"{k} {v:.5g}" for k, v in r["online"].items() if k in ("mistake_rate", "mse"))
    print(f"shard {r['shard']} snapshot {r['interval']}: {sum(b['rows'] for b in r['batches'])} rows ({r['n_seen']} in all), online {metric}", flush=True)


def build_streaming_graph(pipeline: beam.Pipeline, job, args) -> dict:
    """Add the streaming graph of ``job`` to ``pipeline``; returns what it resolved and its outputs.

    The returned dict holds ``started_from``, ``first_version`` and ``pattern`` (printed as
    one JSON line), and the PCollections ``snapshots`` and ``versions`` for callers that
    add steps of their own.
    """
    pipeline.options.view_as(StandardOptions).streaming = True
    learner = job.learner
    check_streaming_args(args, learner)
    data, first_version, started_from = initial_model(args, learner, job.output)
    spec = LearnerSpec(learner.name, job.params)
    start = time.time()
    stop = None if args.stop_after is None else start + args.stop_after
    num_shards = job.plan.num_shards
    read = ReadParquetFiles(learner.config.n_inputs, learner.task, getattr(learner.config, "n_classes", None), num_shards, job.plan.batch_rows)
    source = pipeline | "WatchParquet" >> WatchParquet(watch_pattern(args.input), read, args.poll_seconds, start, stop)
    notices = pipeline | "VersionNotices" >> VersionNotices(job.output, args.poll_seconds, num_shards, start, stop)
    snapshot_batches = args.snapshot_batches or (None if args.snapshot_seconds else 10)
    snapshots = (
        (source["batches"], notices)
        | "BatchesAndVersions" >> beam.Flatten()
        | "StreamTrainOnline" >> StreamTrainOnline(spec, data, snapshot_batches=snapshot_batches, snapshot_seconds=args.snapshot_seconds, mix_weight=args.mix_weight)
    )
    merge_seconds = args.merge_seconds or args.poll_seconds
    versions = (
        snapshots
        | "MergeSnapshots" >> MergeSnapshots(spec, merge_seconds, first_version)
        | "WriteModelVersions" >> WriteModelVersions(job.output)
    )
    versions | "LogVersions" >> beam.Map(lambda v: print(f"model version {v[0]}: {v[1]}", flush=True))
    dead = source["dead_letter"] | "WriteDeadLetters" >> WriteDeadLetterFiles(job.output)
    dead | "LogDeadLetters" >> beam.Map(lambda path: print(f"bad rows: {path}", flush=True))
    snapshots | "WriteSnapshotRecords" >> WriteSnapshotRecords(job.output, first_version) | "LogSnapshots" >> beam.Map(_print_snapshot)
    resolved = {"started_from": started_from, "first_version": first_version, "pattern": watch_pattern(args.input), "merge_seconds": merge_seconds}
    print(json.dumps(resolved), flush=True)
    return {**resolved, "snapshots": snapshots, "versions": versions}


def add_streaming_flags(parser) -> None:
    """The ``streaming`` argument group of ``pipelines.train``."""
    group = parser.add_argument_group("streaming (--streaming)")
    group.add_argument("--streaming", action="store_true", help="watch --input for new Parquet files and train continuously")
    group.add_argument("--snapshot_batches", type=int, help="each shard snapshots its state every N batches (default 10 unless --snapshot_seconds)")
    group.add_argument("--snapshot_seconds", type=float, help="each shard snapshots its state T seconds after the first batch of an interval")
    group.add_argument("--mix_weight", type=float, default=0.0, help="weight w of a newer merged version mixed into a shard: (1-w) local + w merged (default 0: no mixing)")
    group.add_argument("--poll_seconds", type=float, default=5.0, help="how often new input files and new model versions are looked for (default %(default)s)")
    group.add_argument("--merge_seconds", type=float, help="length of the processing-time windows: one merged version per window in which a snapshot arrived (default: --poll_seconds)")
    group.add_argument("--init_model", help="model file to start from (default: the newest model-vNNNNNN.npz in --output, else a fresh model)")
    group.add_argument("--stop_after", type=float, help="stop watching after S seconds (default: run until cancelled)")
