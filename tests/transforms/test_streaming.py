"""Streaming transforms driven by TestStream on Beam's legacy direct runner (no Prism needed).

The same graph runs end to end on Prism in tests/pipelines/test_streaming_prism.py; these
tests pin each step's behaviour where every element's arrival is scripted: snapshot cadence,
prequential metrics, merges of the newest snapshot of every shard, the mixing formula,
restarts, versions never overwritten.
"""

import json
import os
import typing

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_stream import TestStream as BeamTestStream

import okl_core
from bench.bench_streaming_state import Bag, Cell
from okl_core.merge import mix_states
from okl_core.state import model_versions, version_file_name
from tests.pipelines.reference import binary_data
from transforms.elements import BatchPiece, StreamEvent
from transforms.streaming import MergeSnapshots, StreamTrainOnline, WriteModelVersions, _StreamShard
from transforms.train import LearnerSpec

PARAMS = {"n_inputs": 5, "n_components": 16, "sigma": 1.0, "eta": 0.2}
SPEC = LearnerSpec("fogd", PARAMS)
BATCH = 50


def _streaming_pipeline():
    options = PipelineOptions([])
    options.view_as(StandardOptions).streaming = True
    return beam.Pipeline(runner="BundleBasedDirectRunner", options=options)


def _pieces(X, y, shard, first_batch, n_batches):
    out = []
    for seq in range(first_batch, first_batch + n_batches):
        a, b = seq * BATCH, (seq + 1) * BATCH
        out.append((shard, StreamEvent("file.parquet", seq, piece=BatchPiece(shard, 0, seq, a, b, X[a:b], y[a:b], np.arange(a, b)))))
    return out


def _stream(events, seconds_between=1.0):
    """A TestStream sending each list of elements, then advancing processing time."""
    stream = BeamTestStream()
    for elements in events:
        stream = stream.add_elements(elements).advance_processing_time(seconds_between)
    return stream.advance_watermark_to_infinity()


def _fold(learner, X, y, first_batch, n_batches, state=None):
    state = learner.init() if state is None else state
    for seq in range(first_batch, first_batch + n_batches):
        state, _ = learner.update(state, X[seq * BATCH : (seq + 1) * BATCH], y[seq * BATCH : (seq + 1) * BATCH])
    return state


_SINKS: dict = {}


def _append(element, key):
    _SINKS[key].append(element)


def _collect(pcoll, into: list, label="Collect"):
    """Side-effect sink: the BundleBasedDirectRunner runs DoFns in this process (on copies)."""
    key = f"{label}-{id(into)}"
    _SINKS[key] = into
    pcoll | label >> beam.Map(_append, key)


def _zero():
    return 0.0


def _run_shards(events, tmp_path=None, snapshot_batches=2, mix_weight=0.0, initial=None, first_version=1, merge_seconds=1000.0, spec=SPEC):
    """Snapshots (sorted by shard, interval) and written versions of a scripted stream.

    TestStream's processing-time clock starts at 0 and the steps are told so (clock=_zero):
    with the default ``merge_seconds`` no window ends during the stream, so the only merge
    is the one at its end.
    """
    learner = spec.build()
    initial = okl_core.model_bytes(learner, learner.init()) if initial is None else initial
    snaps, versions = [], []
    with _streaming_pipeline() as p:
        snapshots = p | _stream(events) | StreamTrainOnline(spec, initial, snapshot_batches=snapshot_batches, mix_weight=mix_weight, clock=_zero)
        _collect(snapshots, snaps)
        if tmp_path is not None:
            merged = snapshots | MergeSnapshots(spec, merge_seconds, first_version, clock=_zero)
            _collect(merged | WriteModelVersions(str(tmp_path)), versions, "CollectVersions")
    return sorted(snaps, key=lambda s: (s[0], s[1])), versions


def test_snapshots_every_n_batches_and_weight_zero_equals_the_batch_fold(tmp_path):
    X, y = binary_data(600)
    learner = SPEC.build()
    snaps, versions = _run_shards([[p] for p in _pieces(X, y, 0, 0, 6)], tmp_path, snapshot_batches=2)
    assert [(s[0], s[1]) for s in snaps] == [(0, 0), (0, 1), (0, 2)]
    for k, (shard, interval, data, record) in enumerate(snaps):
        record = json.loads(record)
        assert [b["seq"] for b in record["batches"]] == [2 * k, 2 * k + 1]
        assert record["online"]["n"] == 2 * BATCH and record["n_seen"] == (k + 1) * 2 * BATCH
        assert data == okl_core.model_bytes(learner, _fold(learner, X, y, 0, 2 * (k + 1)))
    # one shard, one merge at the end of the stream: its newest snapshot
    assert [v for v, _ in versions] == [1]
    assert open(model_versions(tmp_path)[0][1], "rb").read() == snaps[-1][2]
    record = json.loads(open(str(tmp_path / "model-v000001.json")).read())
    assert record["snapshots"] == {"0": 2} and record["n_seen"] == 6 * BATCH


def test_a_shard_sends_a_last_snapshot_when_its_input_ends():
    X, y = binary_data(700)
    learner = SPEC.build()
    snaps, _ = _run_shards([[p] for p in _pieces(X, y, 0, 0, 7)], snapshot_batches=2)
    assert [len(json.loads(s[3])["batches"]) for s in snaps] == [2, 2, 2, 1]
    assert snaps[-1][2] == okl_core.model_bytes(learner, _fold(learner, X, y, 0, 7))
    # (that the last merge then includes it is checked on Prism: Beam's legacy direct runner
    # fires the merger's end-of-stream timer before this snapshot reaches it)


def test_prequential_metrics_of_an_interval_match_the_fold():
    X, y = binary_data(400)
    learner = SPEC.build()
    snaps, _ = _run_shards([[p] for p in _pieces(X, y, 0, 0, 4)], snapshot_batches=4)
    state, mistakes = learner.init(), 0
    for seq in range(4):
        state, scores = learner.update(state, X[seq * BATCH : (seq + 1) * BATCH], y[seq * BATCH : (seq + 1) * BATCH])
        mistakes += int((np.where(scores >= 0, 1, -1) != y[seq * BATCH : (seq + 1) * BATCH]).sum())
    assert json.loads(snaps[0][3])["online"]["mistakes"] == mistakes


def test_a_diverging_shard_keeps_streaming_and_its_snapshots_say_from_which_batch(tmp_path):
    """A step of 1e308 overflows FOGD's weights: snapshots and versions keep coming, NaN and all."""
    spec = LearnerSpec("fogd", {**PARAMS, "eta": 1e308})
    learner = spec.build()
    X, y = binary_data(400)
    with np.errstate(all="ignore"):
        snaps, versions = _run_shards([[p] for p in _pieces(X, y, 0, 0, 4)], tmp_path, snapshot_batches=2, spec=spec)
        fold = _fold(learner, X, y, 0, 4)
    # the first batch already overflows; every later snapshot of the shard still names it
    assert [json.loads(s[3])["diverged_at"] for s in snaps] == [{"file": "file.parquet", "seq": 0, "row": 0}] * 2
    assert snaps[-1][2] == okl_core.model_bytes(learner, fold) and [v for v, _ in versions] == [1]


def test_a_merge_per_window_takes_the_newest_snapshot_of_every_shard_and_an_idle_shard_blocks_nothing(tmp_path):
    X, y = binary_data(1200)
    learner = SPEC.build()
    # t = 0..3: shards 0 and 1 each send 2 batches per second; t = 4..7: only shard 0 (shard 1 idle)
    both = [[a, b] for a, b in zip(_pieces(X, y, 0, 0, 4), _pieces(X, y, 1, 6, 4))]
    alone = [[a] for a in _pieces(X, y, 0, 4, 2)]
    snaps, versions = _run_shards(both + alone, tmp_path, snapshot_batches=1, merge_seconds=0.5)
    assert [v for v, _ in versions] == sorted(v for v, _ in versions) and len(versions) >= 4
    for version, path in model_versions(tmp_path):
        record = json.loads(open(path[: -len(".npz")] + ".json").read())
        parts = {int(s): i for s, i in record["snapshots"].items()}
        local = [_fold(learner, X, y, 6 * s, i + 1) for s, i in sorted(parts.items())]
        assert open(path, "rb").read() == okl_core.model_bytes(learner, okl_core.merge_states(learner, local))
    last = json.loads(open(model_versions(tmp_path)[-1][1][: -len(".npz")] + ".json").read())
    assert last["snapshots"] == {"0": 5, "1": 3}  # shard 1's newest snapshot is its last one, from before it went idle


def test_a_shard_mixes_the_newest_version_it_was_told_of_with_the_documented_formula(tmp_path):
    X, y = binary_data(600)
    learner = SPEC.build()
    merged = _fold(learner, X, y, 6, 3)  # some other model, as if merged elsewhere
    path = tmp_path / version_file_name(4)
    okl_core.save_model(path, learner, merged)
    weight = 0.25
    pieces = _pieces(X, y, 0, 0, 3)
    notice = (0, StreamEvent(str(path), version=4))
    older = (0, StreamEvent("model-v000002.npz", version=2))  # older than the newest seen: ignored
    snaps, _ = _run_shards([[pieces[0]], [notice, older], [pieces[1]], [pieces[2]]], snapshot_batches=3, mix_weight=weight)
    # batch 0 learned alone, version 4 mixed before batch 1, then batches 1 and 2
    expected = _fold(learner, X, y, 1, 2, state=mix_states(learner, _fold(learner, X, y, 0, 1), merged, weight))
    assert snaps[0][2] == okl_core.model_bytes(learner, expected)
    assert [b["mixed_version"] for b in json.loads(snaps[0][3])["batches"]] == [0, 4, 4]
    mixed = mix_states(learner, learner.init(), merged, weight)
    np.testing.assert_allclose(mixed.w, 0.75 * learner.init().w + 0.25 * merged.w)
    assert int(mixed.n_seen) == 0


def test_restart_from_a_version_continues_as_an_uninterrupted_run(tmp_path):
    X, y = binary_data(600)
    pieces = _pieces(X, y, 0, 0, 6)
    whole, _ = _run_shards([[p] for p in pieces], snapshot_batches=2)
    _, versions = _run_shards([[p] for p in pieces[:2]], tmp_path / "a", snapshot_batches=2)
    (v1, path), = model_versions(tmp_path / "a")
    initial = open(path, "rb").read()
    restarted, versions = _run_shards([[p] for p in pieces[2:]], tmp_path / "a", snapshot_batches=2, initial=initial, first_version=v1 + 1)
    assert [s[2] for s in restarted] == [s[2] for s in whole[1:]]
    assert [v for v, _ in versions] == [2]


def test_snapshots_every_t_seconds_of_processing_time():
    X, y = binary_data(600)
    learner = SPEC.build()
    pieces = _pieces(X, y, 0, 0, 5)
    # Batches at t = 0, 1, 2 arm a timer for t = 2.5 at the first batch, so the first
    # snapshot holds 3 batches; the next two arrive together and make the second snapshot.
    stream = BeamTestStream()
    for p in pieces[:3]:
        stream = stream.add_elements([p]).advance_processing_time(1.0)
    stream = stream.add_elements(pieces[3:]).advance_processing_time(10.0).advance_watermark_to_infinity()
    snaps = []
    with _streaming_pipeline() as pipe:
        out = pipe | stream | StreamTrainOnline(SPEC, okl_core.model_bytes(learner, learner.init()), snapshot_seconds=2.5, clock=_zero)
        _collect(out, snaps)
    snaps.sort(key=lambda s: s[1])
    assert [len(json.loads(s[3])["batches"]) for s in snaps] == [3, 2]
    assert snaps[-1][2] == okl_core.model_bytes(learner, _fold(learner, X, y, 0, 5))


def test_versions_are_never_overwritten(tmp_path):
    """A number that holds another model (a replay meeting a failed attempt's version) is left as it
    was: the merge goes to the next free number (tests/transforms/test_streaming_replay.py)."""
    X, y = binary_data(200)
    okl_core.save_model(tmp_path / version_file_name(1), SPEC.build(), SPEC.build().init())
    before = open(tmp_path / version_file_name(1), "rb").read()
    snaps, versions = _run_shards([[p] for p in _pieces(X, y, 0, 0, 2)], tmp_path, snapshot_batches=2)
    assert [v for v, _ in versions] == [2] and not os.path.exists(tmp_path / "model-v000001.json")
    assert open(tmp_path / version_file_name(1), "rb").read() == before
    assert open(tmp_path / version_file_name(2), "rb").read() == snaps[-1][2]


def test_run_inference_switches_to_a_new_version_once_written(tmp_path):
    """Beam's model-update side input (the pattern of Beam's own RunInference tests):
    model versions and examples are timestamped and windowed alike; examples after a
    version's timestamp are scored by it, without restarting the job."""
    from apache_beam.ml.inference.base import ModelMetadata, RunInference
    from apache_beam.transforms import window
    from apache_beam.transforms.window import TimestampedValue

    from transforms.inference import OklModelHandler

    X, y = binary_data(400)
    learner = SPEC.build()
    first, second = _fold(learner, X, y, 0, 2), _fold(learner, X, y, 0, 6)
    paths = [str(tmp_path / version_file_name(v)) for v in (1, 2)]
    okl_core.save_model(paths[0], learner, first)
    okl_core.save_model(paths[1], learner, second)
    t0, interval = 1_000_000, 10
    rows = [(t0 + 1, 0), (t0 + 5, 1), (t0 + 12, 2), (t0 + 25, 3)]  # (time, row)
    updates = [(t0 + 11, ModelMetadata(model_id=paths[1], model_name="v2"))]  # v2 written at t0 + 11
    got = []
    with beam.Pipeline(FnApiRunner()) as p:
        side = (
            p | "Versions" >> beam.Create(updates)
            | "StampVersions" >> beam.Map(lambda u: TimestampedValue(u[1], u[0]))
            | "WindowVersions" >> beam.WindowInto(window.FixedWindows(interval))
        )
        scored = (
            p | "Rows" >> beam.Create(rows)
            | "StampRows" >> beam.Map(lambda r: TimestampedValue(X[r[1]], r[0]))
            | "WindowRows" >> beam.WindowInto(window.FixedWindows(interval))
            | RunInference(OklModelHandler(paths[0]), model_metadata_pcoll=side)
        )
        _collect(scored | beam.Map(lambda r: (os.path.basename(r.model_id), float(r.inference))), got, "CollectScores")
    by_model = sorted(got)
    expected = sorted(
        [(os.path.basename(paths[0]), float(learner.predict(first, X[i : i + 1])[0])) for i in (0, 1)]
        + [(os.path.basename(paths[1]), float(learner.predict(second, X[i : i + 1])[0])) for i in (2, 3)]
    )
    assert [m for m, _ in by_model] == [m for m, _ in expected]
    np.testing.assert_allclose([s for _, s in by_model], [s for _, s in expected], rtol=1e-6)


def test_new_parquet_files_become_shard_batches_in_file_order(tmp_path):
    """The reading step of WatchParquet on files written into a temporary directory."""
    from okl_core.data.layout import write_dataset
    from transforms.streaming import ReadParquetFiles, file_shard

    X, y = binary_data(300)
    y = y.copy()
    y[7] = 3  # a bad label goes to the dead letters
    write_dataset(tmp_path / "ds", X, y, "binary", n_shards=2, row_group_rows=100, check_values=False)
    files = sorted(str(p) for p in (tmp_path / "ds").glob("*.parquet"))
    got, dead = [], []
    with beam.Pipeline(FnApiRunner()) as p:
        out = p | beam.Create(files) | beam.ParDo(ReadParquetFiles(5, "binary", None, 3, 60)).with_outputs("dead_letter", main="batches")
        _collect(out.batches | beam.Map(lambda kv: (kv[0], kv[1].seq, kv[1].piece.row.tolist())), got, "CollectBatches")
        _collect(out.dead_letter, dead, "CollectDead")
    assert len(dead) == 1 and dead[0][0] == files[0] and [json.loads(r)["row"] for r in dead[0][1]] == [7]
    for f, first in zip(files, (0, 150)):
        rows = [r for r in range(first, first + 150) if r != 7]
        mine = sorted((seq, rows_) for shard, seq, rows_ in got if shard == file_shard(f, 3) and rows_[0] in rows)
        assert [r for _, part in mine for r in part] == rows
        assert all(len(part) == 60 for _, part in mine[:-1])


def test_bad_rows_and_unreadable_files_of_a_stream_are_written_per_input_file(tmp_path):
    """Nothing is dropped silently: each input file's bad rows land in dead_letter/<file>.jsonl."""
    from okl_core.data.layout import write_dataset
    from transforms.streaming import ReadParquetFiles, WriteDeadLetterFiles, dead_letter_file

    X, y = binary_data(200)
    X = X.copy()
    X[[3, 150], 1] = np.nan
    write_dataset(tmp_path / "ds", X, y, "binary", n_shards=2, row_group_rows=100, check_values=False)
    files = sorted(str(p) for p in (tmp_path / "ds").glob("*.parquet"))
    broken = tmp_path / "ds" / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    out_dir = str(tmp_path / "out")
    written = []
    with beam.Pipeline(FnApiRunner()) as p:
        out = p | beam.Create(files + [str(broken)]) | beam.ParDo(ReadParquetFiles(5, "binary", None, 2, 64)).with_outputs("dead_letter", main="batches")
        _collect(out.dead_letter | WriteDeadLetterFiles(out_dir), written, "CollectWritten")
    assert sorted(written) == sorted(dead_letter_file(out_dir, f) for f in files + [str(broken)])
    first = [json.loads(line) for line in open(dead_letter_file(out_dir, files[0]))]
    second = [json.loads(line) for line in open(dead_letter_file(out_dir, files[1]))]
    assert [(r["row"], r["reason"]) for r in first + second] == [(3, "non-finite feature"), (150, "non-finite feature")]
    (unreadable,) = [json.loads(line) for line in open(dead_letter_file(out_dir, str(broken)))]
    assert unreadable["file"] == str(broken) and unreadable["reason"].startswith("unreadable Parquet file")


def _without_time(record: str) -> dict:
    """A snapshot record without its time and its whole files' progress (only whole-file events have one)."""
    return {k: v for k, v in json.loads(record).items() if k not in ("time", "files")}


def test_a_shard_reads_whole_files_itself_exactly_as_their_batches_arriving_one_by_one(tmp_path):
    """WatchParquet's whole-file events: the shard reads each file and learns its batches in file
    order, with the same snapshots (bytes and records, a snapshot in the middle of a file) and
    the same dead letters as the batches ReadParquetFiles sends, and a model equal to the fold."""
    from okl_core.data.layout import write_dataset
    from transforms.streaming import ReadParquetFiles

    X, y = binary_data(330)
    X = X.copy()
    X[[20, 200], 2] = np.nan  # one bad row in each file
    write_dataset(tmp_path / "ds", X, y, "binary", n_shards=2, row_group_rows=100, check_values=False)
    files = sorted(str(p) for p in (tmp_path / "ds").glob("*.parquet"))
    read = ReadParquetFiles(5, "binary", None, 1, BATCH)
    learner = SPEC.build()
    initial = okl_core.model_bytes(learner, learner.init())
    by_batch = [[(0, e)] for f in files for e in read.read(f, 0)[0]]  # 4 batches per file, the last one short
    snaps: dict = {"files": [], "batches": []}
    dead: list = []
    with _streaming_pipeline() as p:  # (one TestStream per pipeline on the direct runner)
        out = p | _stream([[(0, StreamEvent(f, whole_file=True))] for f in files]) | StreamTrainOnline(SPEC, initial, snapshot_batches=3, clock=_zero, read=read)
        _collect(out["snapshots"], snaps["files"])
        _collect(out["dead_letter"], dead, "CollectDead")
    with _streaming_pipeline() as p:
        _collect(p | _stream(by_batch) | StreamTrainOnline(SPEC, initial, snapshot_batches=3, clock=_zero), snaps["batches"])
    got, expected = (sorted(snaps[k], key=lambda s: s[1]) for k in ("files", "batches"))
    assert [(s[0], s[1], s[2], _without_time(s[3])) for s in got] == [(s[0], s[1], s[2], _without_time(s[3])) for s in expected]
    assert [len(_without_time(s[3])["batches"]) for s in got] == [3, 3, 2]  # the first snapshot ends inside the first file
    # How far each whole file got in each interval (good rows; 164 of each file's 165 are good): what a restart skips.
    assert [json.loads(s[3])["files"] for s in got] == [
        {files[0]: {"rows": 150, "done": False}},
        {files[0]: {"rows": 164, "done": True}, files[1]: {"rows": 100, "done": False}},
        {files[1]: {"rows": 164, "done": True}},
    ]
    good = np.isfinite(X).all(axis=1)
    fold = _fold_batches(learner, [(X[a:b][good[a:b]], y[a:b][good[a:b]]) for a, b in ((0, 165), (165, 330))])
    assert got[-1][2] == okl_core.model_bytes(learner, fold)
    assert sorted((path, [json.loads(r)["row"] for r in records]) for path, records in dead) == [(files[0], [20]), (files[1], [200])]


def _fold_batches(learner, files):
    """Each file's good rows, learned in batches of BATCH rows, file after file."""
    state = learner.init()
    for Xf, yf in files:
        for a in range(0, len(yf), BATCH):
            state, _ = learner.update(state, Xf[a : a + BATCH], yf[a : a + BATCH])
    return state


def test_the_streaming_graph_writes_its_dead_letters(tmp_path, caplog):
    """The CLI's streaming graph consumes the source's dead letters (built, not run: no Prism here),
    and its stateful shards are keyed with a deterministic coder (no warning)."""
    from okl_core.data.layout import write_dataset
    from pipelines import train
    from pipelines.job import resolve_job
    from pipelines.stream import build_streaming_graph

    X, y = binary_data(100)
    write_dataset(tmp_path / "in", X, y, "binary")
    request = train.parse_args(
        ["--streaming", "--input", str(tmp_path / "in"), "--learner", "fogd", "--sigma", "1", "--output", str(tmp_path / "out")]
    )
    graph = beam.Pipeline(options=PipelineOptions([]))
    build_streaming_graph(graph, resolve_job(request))
    labels = {t.full_label for t in graph.transforms_stack[0].parts}
    assert {"WatchParquet", "WriteDeadLetters", "StreamTrainOnline", "WriteModelVersions"} <= labels
    ours = [m for m in (r.getMessage() for r in caplog.records) if "may not be deterministic" in m and "label=[TrainShards]" in m]
    assert ours == []  # (Beam 2.62's own MatchContinuously warns about its deduplication steps)


def test_restart_picks_the_newest_version_and_continues_numbering(tmp_path):

    from pipelines.common import UsageError
    from pipelines.stream import initial_model

    learner = SPEC.build()
    X, y = binary_data(200)
    for v in (1, 2, 3):
        okl_core.save_model(tmp_path / version_file_name(v), learner, _fold(learner, X, y, 0, v))
    data, next_version, source = initial_model(None, learner, str(tmp_path))
    assert next_version == 4 and source.endswith(version_file_name(3))
    assert data == okl_core.model_bytes(learner, _fold(learner, X, y, 0, 3))
    data, next_version, _ = initial_model(str(tmp_path / version_file_name(1)), learner, str(tmp_path))
    assert next_version == 4 and data == okl_core.model_bytes(learner, _fold(learner, X, y, 0, 1))
    data, next_version, source = initial_model(None, learner, str(tmp_path / "empty"))
    assert next_version == 1 and data == okl_core.model_bytes(learner, learner.init())
    # A restart with other parameters: the version it found is named as --output's, not as an --init_model the user never gave.
    other = LearnerSpec(SPEC.name, {**SPEC.params, "sigma": SPEC.params.get("sigma", 1.0) * 2}).build()
    with pytest.raises(UsageError, match=rf"^--output {tmp_path} holds a model version this job cannot continue \(.*model-v000003.npz: .*configs differ"):
        initial_model(None, other, str(tmp_path))


_STATE_READS: list = []


class _CountedShard(_StreamShard):
    """The shard DoFn, counting its reads of Beam state here (the legacy runner's metrics drop later bundles')."""

    def setup(self):
        super().setup()
        self.state_reads = type("Tally", (), {"inc": lambda _self, n=1: _STATE_READS.append(n)})()


class _PoisonedShard(_CountedShard):
    """A worker whose kept state is stale after every batch (as after a retried bundle or a moved key):
    the kept entry is NaN under another token, so using it would change every later byte."""

    def _keep(self, shard, state, model_state, meta):
        super()._keep(shard, state, model_state, meta)
        self.live[shard] = ("a token of another write", state._replace(w=np.full_like(state.w, np.nan)))


@pytest.mark.parametrize("fn_class", [_CountedShard, _PoisonedShard])
def test_a_shard_keeps_its_decoded_state_and_reads_the_beam_state_back_when_its_copy_is_stale(fn_class):
    X, y = binary_data(600)
    learner = SPEC.build()
    fn = fn_class(SPEC, okl_core.model_bytes(learner, learner.init()), 2, None, 0.0, _zero)
    snaps = []
    _STATE_READS.clear()
    # The FnApiRunner (Beam's worker code, as on Prism) keeps DoFn instances across bundles; the
    # legacy runner that plays TestStreams sets up a new one for each, so the input here is bounded.
    with beam.Pipeline(runner=FnApiRunner()) as pipe:
        events = pipe | beam.Create(_pieces(X, y, 0, 0, 6), reshuffle=False)
        _collect(events | beam.ParDo(fn).with_input_types(typing.Tuple[int, StreamEvent]), snaps)
    snaps.sort(key=lambda s: s[1])
    assert [s[2] for s in snaps] == [okl_core.model_bytes(learner, _fold(learner, X, y, 0, 2 * (k + 1))) for k in range(3)]
    # batches 2..6 start from the kept state, or from the raw arrays written to Beam state after the previous one
    assert len(_STATE_READS) == (0 if fn_class is _CountedShard else 5)


def _two_files(tmp_path, n=330):
    """Two okl Parquet files of n/2 rows each (row groups of 100 rows, page checksums on)."""
    from okl_core.data.layout import write_dataset

    X, y = binary_data(n)
    write_dataset(tmp_path / "ds", X, y, "binary", n_shards=2, row_group_rows=100)
    return X, y, sorted(str(p) for p in (tmp_path / "ds").glob("*.parquet"))


def test_a_restart_skips_the_files_its_version_learned_and_resumes_one_learned_in_part(tmp_path):
    """Issue: a restart learned every file in --input again. The reader now skips a file the
    version continued from learned whole (no rows, no dead letters) and resumes one it learned
    in part after the good rows it holds."""
    from transforms.streaming import ReadParquetFiles

    X, y, files = _two_files(tmp_path)
    read = ReadParquetFiles(5, "binary", None, 1, BATCH, learned={files[0]: {"rows": 165, "done": True}, files[1]: {"rows": 100, "done": False}})
    assert read.read(files[0], 0) == ([], [])
    batches, dead = read.read(files[1], 0)
    assert dead == []
    assert [(b.seq, b.piece.start, b.piece.stop) for b in batches] == [(0, 100, 150), (1, 150, 165)]
    np.testing.assert_array_equal(np.concatenate([b.piece.row for b in batches]), np.arange(265, 330))
    np.testing.assert_array_equal(np.concatenate([b.piece.X for b in batches]), X[265:330])
    fresh, _ = ReadParquetFiles(5, "binary", None, 1, BATCH).read(files[0], 0)  # without a record: read whole
    assert [b.piece.start for b in fresh] == [0, 50, 100, 150]


def test_a_merge_of_shards_that_started_from_one_version_counts_its_examples_once_and_records_the_files(tmp_path):
    """Issue: each shard of a restart starts from the version's n_seen and the merge added them up
    (4,000 + 800 new rows -> n_seen 8,800). The merge now takes the start model as its base, and
    the version's record lists every file learned (the base's and the shards'), read back by learned_files."""
    from transforms.streaming import ReadParquetFiles, learned_files

    X, y, files = _two_files(tmp_path)
    learner = SPEC.build()
    base_state = _fold(learner, X, y, 0, 4)  # 200 examples learned before the restart
    base = okl_core.model_bytes(learner, base_state)
    before = {"/elsewhere/old.parquet": {"rows": 200, "done": True}}
    read = ReadParquetFiles(5, "binary", None, 2, BATCH)
    events = [[(0, StreamEvent(files[0], whole_file=True))], [(1, StreamEvent(files[1], whole_file=True))]]
    out_dir = tmp_path / "out"
    with _streaming_pipeline() as p:
        trained = p | _stream(events) | StreamTrainOnline(SPEC, base, snapshot_batches=10, clock=_zero, read=read)
        merged = trained["snapshots"] | MergeSnapshots(SPEC, 1000.0, 5, clock=_zero, base=base, learned=before)
        _collect(merged | WriteModelVersions(str(out_dir)), [], "CollectVersions")
    (version, path), = model_versions(out_dir)
    record = json.load(open(path[: -len(".npz")] + ".json"))
    assert version == 5 and record["n_seen"] == 200 + 330
    shards = [_fold_batches_from(learner, base_state, X[a:b], y[a:b]) for a, b in ((0, 165), (165, 330))]
    assert open(path, "rb").read() == okl_core.model_bytes(learner, okl_core.merge_states(learner, shards, base=base_state))
    expected = {**before, files[0]: {"rows": 165, "done": True}, files[1]: {"rows": 165, "done": True}}
    # the first version of a chain (a base from elsewhere: no files_since) records the base's files too
    assert record["files_since"] is None and record["new_files"] == expected and learned_files(path) == expected
    assert learned_files(str(tmp_path / "nowhere" / "model-v000001.npz")) == {}


@pytest.mark.parametrize("record, why", [
    (b'{"version": 1, "files": {', "Expecting property name enclosed in double quotes: line 1 column 26 (char 25)"),  # truncated
    (b"[1, 2]", "a JSON list, not an object"),
    (b'{"files": ["/in/a.parquet"]}', "'files' is a JSON list, not an object of file -> progress"),
    (b'{"files": {"/in/a.parquet": 40}}', "'files' entry '/in/a.parquet' is 40, not an object of rows (an integer >= 0) and done (true or false)"),
    (b'{"files": {"/in/a.parquet": {"rows": -1, "done": true}}}',
     "'files' entry '/in/a.parquet' is {\"rows\": -1, \"done\": true}, not an object of rows (an integer >= 0) and done (true or false)"),
    (b'{"files": {"/in/a.parquet": {"rows": 40, "done": "yes"}}}',
     "'files' entry '/in/a.parquet' is {\"rows\": 40, \"done\": \"yes\"}, not an object of rows (an integer >= 0) and done (true or false)"),
    (b'{"files": "\x80"}', "'utf-8' codec can't decode byte 0x80 in position 11: invalid start byte"),
    (b"[" * 100_000, "maximum recursion depth exceeded while decoding a JSON array from a unicode string"),
])
def test_a_damaged_version_record_is_one_line_naming_it(tmp_path, record, why):
    """Issue: a restart read the newest version's record with json.loads and .get: a truncated or
    foreign record ended the launch in a JSONDecodeError, AttributeError or TypeError traceback."""
    from transforms.streaming import learned_files

    model = tmp_path / version_file_name(1)
    (tmp_path / "model-v000001.json").write_bytes(record)
    with pytest.raises(ValueError) as err:
        learned_files(str(model))
    assert str(err.value) == f"{tmp_path / 'model-v000001.json'}: not a version record okl wrote ({why})"


def test_versions_record_the_classes_of_the_model_the_shards_started_from(tmp_path):
    """The start model records the training data's classes (pipelines.stream.initial_model); the
    shards' snapshots do not carry them, and every merged version once lost them."""
    X, y = binary_data(300)
    learner = SPEC.build()
    base = okl_core.model_bytes(learner, learner.init(), ["no", "yes"])
    with _streaming_pipeline() as p:
        snapshots = p | _stream([[e] for e in _pieces(X, y, 0, 0, 4)]) | StreamTrainOnline(SPEC, base, snapshot_batches=2, clock=_zero)
        _collect(snapshots | MergeSnapshots(SPEC, 1000.0, 1, clock=_zero, base=base) | WriteModelVersions(str(tmp_path)), [], "CollectVersions")
    (_, path), = model_versions(tmp_path)
    merged = okl_core.merge_states(learner, [_fold(learner, X, y, 0, 4)], base=learner.init())
    assert open(path, "rb").read() == okl_core.model_bytes(learner, merged, ["no", "yes"])


def _fold_batches_from(learner, state, X, y):
    for a in range(0, len(y), BATCH):
        state, _ = learner.update(state, X[a : a + BATCH], y[a : a + BATCH])
    return state


def test_the_streaming_reader_verifies_page_checksums_and_dead_letters_a_damaged_row_group(tmp_path):
    """Issue: the streaming reader read without page checksums, so a flipped byte was learned
    silently. It now reads row groups as batch training does: the damaged group's rows are dead
    letters (row -1, the batch reader's reason) and the other groups are learned."""
    import pyarrow.parquet as pq

    from transforms.streaming import ReadParquetFiles

    X, y, files = _two_files(tmp_path)
    chunk = pq.ParquetFile(files[0]).metadata.row_group(1).column(0)  # rows 100..164 of the first file
    data = bytearray(open(files[0], "rb").read())
    data[chunk.data_page_offset + 200] ^= 0x55  # compressed bytes of x: only the checksum tells
    open(files[0], "wb").write(bytes(data))
    batches, dead = ReadParquetFiles(5, "binary", None, 1, BATCH).read(files[0], 0)
    np.testing.assert_array_equal(np.concatenate([b.piece.row for b in batches]), np.arange(100))
    np.testing.assert_array_equal(np.concatenate([b.piece.X for b in batches]), X[:100])
    records = [json.loads(r) for r in dead]
    assert [r["row"] for r in records] == [-1] * 65
    assert {r["reason"] for r in records} == {
        "unreadable row group: row group 1 (could not verify page integrity, CRC checksum verification failed for page_ordinal 0)"}


def test_an_unreadable_file_says_it_is_not_retried(tmp_path):
    from transforms.streaming import ReadParquetFiles

    broken = tmp_path / "half-written.parquet"
    broken.write_bytes(b"PAR1 not yet")
    batches, (dead,) = ReadParquetFiles(5, "binary", None, 1, BATCH).read(str(broken), 0)
    reason = json.loads(dead)["reason"]
    assert batches == [] and reason.startswith("unreadable Parquet file: ")
    assert reason.endswith("; not retried: write files elsewhere and rename them into the watched directory")


class _Timer:
    def __init__(self):
        self.calls = []

    def set(self, when):
        self.calls.append(("set", float(when)))

    def clear(self):
        self.calls.append(("clear",))


def test_the_end_of_the_stream_clears_the_armed_snapshot_and_window_timers():
    """Issue: with --snapshot_seconds 1e9 a job never ended (the armed processing-time timer
    held it open). At the end of the stream the shard sends its last snapshot and clears its
    snapshot timer; the merger merges and clears its window timer."""
    from transforms.streaming import _MergeWindows

    X, y = binary_data(100)
    learner = SPEC.build()
    fn = _StreamShard(SPEC, okl_core.model_bytes(learner, learner.init()), None, 1e9, 0.0, _zero)
    fn.setup()
    model, meta, snapshot, end = Cell(), Cell(), _Timer(), _Timer()
    learned, files = Bag(), Bag()
    assert list(fn.process(_pieces(X, y, 0, 0, 1)[0], model, meta, snapshot, end, learned, files)) == []
    assert snapshot.calls == [("set", 1e9)]
    (last,) = fn.on_end_of_stream(0, model, meta, snapshot, learned, files)
    assert snapshot.calls[-1] == ("clear",) and json.loads(meta.read())["timer"] is False
    assert last[2] == okl_core.model_bytes(learner, _fold(learner, X, y, 0, 1))

    merger = _MergeWindows(SPEC, 1e9, 1, _zero)
    merger.setup()
    newest, merge_meta, window_timer, merge_end = Bag(), Cell(), _Timer(), _Timer()
    new_files = Bag()
    assert merger.process((0, last), newest, merge_meta, window_timer, merge_end, new_files) == []
    assert window_timer.calls == [("set", 1e9)]
    ((version, data, _),) = merger.on_end_of_stream(newest, merge_meta, window_timer, new_files)
    assert window_timer.calls[-1] == ("clear",) and version == 1 and data == last[2]
