"""`pipelines.train --streaming` end to end on Beam's Prism runner, files dropped while it runs.

Each job watches a temporary directory into which a thread drops Parquet files over time
(written elsewhere, renamed in). What the job wrote is then checked against a replay in
plain okl_core: every shard's batches in the order its snapshot records list them, the
newer version mixed in before a batch exactly where the records say it was
(``learner.mix(local, merged, w)``), and every version equal, byte for byte, to the merge of
the shard states its record names.
"""

from __future__ import annotations

import json
import os
import threading
import time

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.ml.inference.base import RunInference
from apache_beam.transforms import window
from apache_beam.transforms.periodicsequence import PeriodicImpulse

import okl_core
from okl_core.data.layout import write_dataset
from okl_core.state import version_file_name
from pipelines import train
from pipelines.job import resolve_job
from pipelines.stream import build_streaming_graph, streaming_pipeline
from tests.pipelines.reference import binary_data
from transforms.inference import OklModelHandler, WatchModelVersions
from transforms.streaming import dead_letter_file, file_shard, learned_files

pytestmark = pytest.mark.prism

PARAMS = ["--learner", "fogd", "--param", "n_components=32", "--sigma", "1.5", "--eta", "0.1"]
BATCH_ROWS = 100
MIX = 0.5
POLL, MERGE = 0.5, 1.0


def _names_for(shard: int, num_shards: int, count: int, prefix: str) -> list[str]:
    """``count`` file names that :func:`file_shard` sends to ``shard``."""
    names, i = [], 0
    while len(names) < count:
        name = f"{prefix}-{i:04d}.parquet"
        if file_shard(name, num_shards) == shard:
            names.append(name)
        i += 1
    return names


class Dropper(threading.Thread):
    """Drops files into ``watched`` every ``every`` seconds: written in ``staging``, renamed in."""

    def __init__(self, staging, watched, files: list[tuple[str, np.ndarray, np.ndarray]], every: float, extra=(), started=None):
        super().__init__(daemon=True)
        self.staging, self.watched, self.files, self.every, self.extra = staging, watched, files, every, extra
        self.started = started  # a path that exists once the job has learned something
        self.landed: dict[str, float] = {}

    def run(self):
        deadline = time.time() + 120
        while self.started is not None and not os.path.exists(self.started) and time.time() < deadline:
            time.sleep(0.1)  # the runner is still starting: files dropped now would all be read at once
        for name, X, y in self.files:
            time.sleep(self.every)
            os.rename(_write_file(self.staging, name, X, y), os.path.join(self.watched, name))
            self.landed[name] = time.time()
        for name, data in self.extra:  # files that are not okl data
            tmp = os.path.join(self.staging, name)
            with open(tmp, "wb") as f:
                f.write(data)
            os.rename(tmp, os.path.join(self.watched, name))


def _write_file(staging, name, X, y) -> str:
    out = os.path.join(staging, name + ".d")
    write_dataset(out, X, y, "binary", n_shards=1, check_values=False)
    return os.path.join(out, "part-00000-of-00001.parquet")


def _files(names, seed, n_rows=250, bad=None):
    files = []
    for k, name in enumerate(names):
        X, y = binary_data(n_rows, seed=seed + k)
        if name == bad:
            X[[3, 117]] = np.nan  # two bad rows: dead letters, never learned
        files.append((name, X, y))
    return files


def _records(output, first_version=1) -> dict[int, list[dict]]:
    """Snapshot records of the job that wrote ``first_version`` on, per shard, in interval order."""
    out: dict[int, list[dict]] = {}
    folder = os.path.join(output, "snapshots", f"run-{first_version:06d}")
    for name in sorted(os.listdir(folder)):
        record = json.loads(open(os.path.join(folder, name)).read())
        out.setdefault(record["shard"], []).append(record)
    for shard, records in out.items():
        assert [r["interval"] for r in records] == list(range(len(records))), f"shard {shard} skipped a snapshot"
    return out


def _versions(output) -> list[tuple[int, dict, bytes]]:
    found = []
    for version, path in okl_core.model_versions(output):
        with open(path, "rb") as f:
            found.append((version, json.loads(open(path[: -len(".npz")] + ".json").read()), f.read()))
    return found


def _learned_whole(output) -> list[str]:
    """The names of the files the newest version in ``output`` has learned whole (its chain of records read back)."""
    return sorted(os.path.basename(f) for f, d in learned_files(okl_core.model_versions(output)[-1][1]).items() if d["done"])


def _roundtrip(learner, state):
    return okl_core.model_from_bytes(okl_core.model_bytes(learner, state))[1]


def _replay(learner, start_state, records, files: dict, output) -> dict[tuple[int, int], object]:
    """The state of each (shard, interval), recomputed from the records with plain okl_core."""
    good = {name: np.isfinite(X).all(axis=1) for name, (X, y) in files.items()}
    states = {}
    for shard, shard_records in records.items():
        state, mixed = start_state, 0
        for record in shard_records:
            for batch in record["batches"]:
                name = os.path.basename(batch["file"])
                X, y = files[name]
                X, y = X[good[name]], y[good[name]]
                if batch["mixed_version"] > mixed:
                    mixed = batch["mixed_version"]
                    merged = okl_core.load_model(os.path.join(output, version_file_name(mixed)))[1]
                    state = okl_core.mix_states(learner, state, merged, MIX)
                state, _ = learner.update(state, X[batch["start"] : batch["stop"]], y[batch["start"] : batch["stop"]])
                state = _roundtrip(learner, state)
            states[(shard, record["interval"])] = state
    return states


def _check_versions(learner, versions, states, first_version, base=None):
    assert [v for v, _, _ in versions] == list(range(first_version, first_version + len(versions)))
    for version, record, data in versions:
        parts = [states[(int(shard), interval)] for shard, interval in sorted(record["snapshots"].items(), key=lambda kv: int(kv[0]))]
        expected = okl_core.merge_states(learner, parts, base=base)  # every shard started from base
        assert data == okl_core.model_bytes(learner, expected), f"version {version} is not the merge of {record['snapshots']}"
    seen = [record["n_seen"] for _, record, _ in versions]
    assert seen == sorted(seen), "a later version has seen fewer rows"
    windows = [int(record["time"] // MERGE) for _, record, _ in versions[:-1]]  # the last one may be the end-of-stream merge
    assert len(set(windows)) == len(windows), f"two versions in one {MERGE} s window: {windows}"


def run_first_job(root, runner_args, stop_after=14.0) -> dict:
    """Two shards, mixing 0.5, 12 files over ~8 s once the job runs (one with NaN rows, one not Parquet)."""
    root = str(root)
    watched, staging, output = (os.path.join(root, d) for d in ("in", "staging", "out"))
    os.makedirs(watched), os.makedirs(staging)
    names = [n for pair in zip(_names_for(0, 2, 6, "a"), _names_for(1, 2, 6, "a")) for n in pair]
    files = _files(names, seed=10, bad=names[3])
    first, later = files[0], files[1:]
    os.rename(_write_file(staging, *first), os.path.join(watched, first[0]))  # a file must exist at launch
    started = os.path.join(output, "snapshots", "run-000001")
    dropper = Dropper(staging, watched, later, every=0.7, extra=[("garbage.parquet", b"not a parquet file")], started=started)
    argv = [
        "--streaming", "--input", os.path.join(watched, "*.parquet"), *PARAMS, "--num_shards", "2", "--batch_rows", str(BATCH_ROWS),
        "--snapshot_batches", "1", "--mix_weight", str(MIX), "--poll_seconds", str(POLL), "--merge_seconds", str(MERGE),
        "--stop_after", str(stop_after), "--output", output, *runner_args,
    ]
    began = time.time()
    dropper.start()
    result = train.run(argv)
    elapsed = time.time() - began
    dropper.join()
    return {"output": output, "files": {n: (X, y) for n, X, y in files}, "bad": names[3], "elapsed": elapsed, "result": result,
            "landed": dropper.landed, "stop_after": stop_after}


@pytest.fixture(scope="module")
def first_job(tmp_path_factory, prism_location):
    return run_first_job(tmp_path_factory.mktemp("stream"), ["--runner=PrismRunner", f"--prism_location={prism_location}"])


def test_each_file_is_learned_once_and_bad_input_is_dead_lettered(first_job):
    records = _records(first_job["output"])
    learned = [(os.path.basename(b["file"]), b["seq"]) for rs in records.values() for r in rs for b in r["batches"]]
    assert len(learned) == len(set(learned)), "a batch was learned twice"
    expected = set()
    for name, (X, _) in first_job["files"].items():
        n_good = int(np.isfinite(X).all(axis=1).sum())
        expected |= {(name, seq) for seq in range((n_good + BATCH_ROWS - 1) // BATCH_ROWS)}
    assert set(learned) == expected
    for shard, rs in records.items():
        assert all(file_shard(b["file"], 2) == shard for r in rs for b in r["batches"])
    bad = [json.loads(line) for line in open(dead_letter_file(first_job["output"], first_job["bad"]))]
    assert [r["row"] for r in bad] == [3, 117] and all("NaN" in r["reason"] or "finite" in r["reason"] for r in bad)
    garbage = [json.loads(line) for line in open(dead_letter_file(first_job["output"], "garbage.parquet"))]
    assert len(garbage) == 1 and garbage[0]["reason"].startswith("unreadable Parquet file")


def test_versions_follow_the_merge_windows_and_equal_the_replayed_merges(first_job):
    learner = okl_core.load_model(okl_core.model_versions(first_job["output"])[0][1])[0]
    records = _records(first_job["output"])
    states = _replay(learner, learner.init(), records, first_job["files"], first_job["output"])
    versions = _versions(first_job["output"])
    assert len(versions) >= 4
    _check_versions(learner, versions, states, first_version=1)
    # Every learned row is in the last version: the end of the stream merged what was left.
    last = versions[-1][1]
    assert last["snapshots"] == {str(s): rs[-1]["interval"] for s, rs in records.items()}
    assert last["n_seen"] == sum(rs[-1]["n_seen"] for rs in records.values())


def test_a_shard_mixes_a_merged_version_in_the_middle_of_its_stream(first_job):
    records = _records(first_job["output"])
    picked = []
    for shard, rs in records.items():
        batches = [b for r in rs for b in r["batches"]]
        picked += [(shard, k, b["mixed_version"]) for k, b in enumerate(batches) if k > 0 and b["mixed_version"] > batches[k - 1]["mixed_version"]]
    assert picked, "no shard picked up a merged version mid-stream"
    # (the replay in the previous test checks the mixed states byte for byte)


def test_stop_after_ends_the_job(first_job):
    assert first_job["result"].pipeline_result.state == beam.runners.runner.PipelineState.DONE
    assert first_job["elapsed"] < first_job["stop_after"] + 40


def _serve(pipeline, output, rows, into, start, stop):
    """RunInference on ``rows`` every 0.25 s with the newest version of ``output``; one JSON file per result."""

    def record(result, w=beam.DoFn.WindowParam):
        name = f"{float(w.start):.3f}-{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}.json"
        with open(os.path.join(into, name), "w") as f:
            json.dump({"window": float(w.start), "model": result.model_id, "scores": np.asarray(result.inference).tolist()}, f)

    newest = okl_core.model_versions(output)[-1][1]
    (
        pipeline
        | "Tick" >> PeriodicImpulse(start_timestamp=start, stop_timestamp=stop, fire_interval=0.25)
        | "Rows" >> beam.Map(lambda _: (0, rows))
        | "Windows" >> beam.WindowInto(window.FixedWindows(POLL))
        | "PerWindow" >> beam.GroupByKey()
        | "Blocks" >> beam.FlatMap(lambda kv: kv[1])
        | "Score" >> RunInference(OklModelHandler(newest), model_metadata_pcoll=pipeline | "Versions" >> WatchModelVersions(output, POLL, start, stop))
        | "Record" >> beam.Map(record)
    )


def test_restart_continues_from_the_newest_version_while_an_idle_shard_blocks_nothing_and_inference_follows(first_job, tmp_path, prism_location):
    """A second job on the same --output: starts every shard from the newest version, numbers after it;
    all its files go to shard 0, shard 1 stays idle; RunInference in the same job serves each new version."""
    output = first_job["output"]
    before = okl_core.model_versions(output)
    newest_version, newest_path = before[-1]
    learner, restart_state = okl_core.load_model(newest_path)
    watched, staging, served = tmp_path / "in", tmp_path / "staging", tmp_path / "served"
    for d in (watched, staging, served):
        d.mkdir()
    files = _files(_names_for(0, 2, 8, "b"), seed=100)
    os.rename(_write_file(staging, *files[0]), watched / files[0][0])
    argv = [
        "--streaming", "--input", str(watched / "*.parquet"), *PARAMS, "--num_shards", "2", "--batch_rows", str(BATCH_ROWS),
        "--snapshot_batches", "1", "--mix_weight", str(MIX), "--poll_seconds", str(POLL), "--merge_seconds", str(MERGE),
        "--stop_after", "12", "--output", output,
    ]
    request = train.parse_args(argv)
    job = resolve_job(request)
    pipeline, _ = streaming_pipeline([*request.beam_args, "--runner=PrismRunner", f"--prism_location={prism_location}"])
    resolved = build_streaming_graph(pipeline, job)
    assert resolved["started_from"] == newest_path and resolved["first_version"] == newest_version + 1
    rows = binary_data(16, seed=999)[0]
    start = time.time()
    _serve(pipeline, output, rows, str(served), start, start + 12)
    dropper = Dropper(staging, watched, files[1:], every=0.8, started=os.path.join(output, "snapshots", f"run-{newest_version + 1:06d}"))
    dropper.start()
    pipeline.run().wait_until_finish()
    dropper.join()

    # Liveness: shard 1 never received a file, and versions kept coming.
    new_records = _records(output, newest_version + 1)
    assert set(new_records) == {0}
    versions = [v for v in _versions(output) if v[0] > newest_version]
    assert len(versions) >= 4
    # The restarted shard continues from the newest version, and every new version is its replay.
    states = _replay(learner, restart_state, new_records, {n: (X, y) for n, X, y in files}, output)
    _check_versions(learner, versions, states, first_version=newest_version + 1, base=restart_state)

    # Serving: each result was scored by the version it names, and newer versions took over while the job trained.
    results = [json.loads(open(os.path.join(served, n)).read()) for n in sorted(os.listdir(served))]
    results.sort(key=lambda r: r["window"])
    used = [int(os.path.basename(r["model"])[len("model-v") : -len(".npz")]) for r in results]
    assert used == sorted(used), "an older version served after a newer one"
    assert len(set(used)) >= 3 and used[-1] > newest_version
    for r in results[:: max(1, len(results) // 10)]:
        lrn, state = okl_core.load_model(r["model"])
        np.testing.assert_array_equal(np.asarray(r["scores"]), lrn.predict(state, rows))


def test_a_restart_learns_only_new_files_counts_rows_once_and_a_pending_snapshot_timer_ends_nothing(tmp_path, prism_location):
    """Issues: a restart learned every file again (n_seen 4,000 for 2,000 rows) and, with several
    shards, summed the version's n_seen once per shard; with --snapshot_seconds 1e9 the job never
    ended; a restart after the watched folder moved learned every file again (records named
    files by absolute path). Two short jobs on one --output, the folder moved between them:
    the second learns only the two new files (one per shard), and each ends soon after --stop_after."""
    watched, output = tmp_path / "in", str(tmp_path / "out")
    watched.mkdir()
    X, y = binary_data(1500, seed=7)
    write_dataset(tmp_path / "staging", X, y, "binary", n_shards=6)  # 6 files of 250 rows, disjoint row numbers
    parts = sorted((tmp_path / "staging").glob("*.parquet"))
    names = _names_for(0, 2, 2, "r") + _names_for(1, 2, 2, "r")  # 1,000 rows at launch: two files per shard
    new = _names_for(0, 2, 1, "s") + _names_for(1, 2, 1, "s")  # then one more file per shard
    for part, name in zip(parts[:4], names):
        os.rename(part, watched / name)
    argv = ["--streaming", "--input", str(watched), *PARAMS, "--num_shards", "2", "--batch_rows", str(BATCH_ROWS), "--snapshot_seconds", "1e9",
            "--poll_seconds", str(POLL), "--stop_after", "4", "--output", output, "--runner=PrismRunner", f"--prism_location={prism_location}"]
    began = time.time()
    train.run(argv)
    assert time.time() - began < 4 + 30  # it once waited for the 1e9 s snapshot timer
    first = _versions(output)[-1][1]
    assert first["n_seen"] == 1000 and _learned_whole(output) == sorted(names)
    assert all(not os.path.isabs(f) for f in learned_files(okl_core.model_versions(output)[-1][1]))  # relative to the watched folder
    moved = tmp_path / "moved" / "in"
    os.renames(watched, moved)
    for part, name in zip(parts[4:], new):
        os.rename(part, moved / name)
    restart_from = okl_core.model_versions(output)[-1][0]
    argv[argv.index("--input") + 1] = str(moved)
    train.run(argv)
    records = _records(output, restart_from + 1)
    learned = sorted({os.path.basename(b["file"]) for rs in records.values() for r in rs for b in r["batches"]})
    assert learned == sorted(new)  # not the four files the first job learned
    last = _versions(output)[-1][1]
    assert last["n_seen"] == 1000 + 500  # (was 2 x 1,000 + 500: each shard's copy of the base counted)
    assert _learned_whole(output) == sorted(names + new)


def test_the_versions_of_a_data_set_record_its_classes_and_data_of_other_classes_cannot_continue_them(tmp_path, prism_location, capsys):
    """A streamed data set directory (dataset.json classes [0, 1]): every version records the
    classes, a restart on the same data continues, one on the same rows prepared with [1, 0] is refused."""
    X, y = binary_data(300)
    write_dataset(tmp_path / "b01", X, y, "binary", classes=[0, 1])
    write_dataset(tmp_path / "b10", X, -y, "binary", classes=[1, 0])
    output = str(tmp_path / "out")
    argv = ["--streaming", *PARAMS, "--batch_rows", str(BATCH_ROWS), "--poll_seconds", str(POLL), "--stop_after", "3", "--output", output,
            "--runner=PrismRunner", f"--prism_location={prism_location}"]
    train.run(["--input", str(tmp_path / "b01"), *argv])
    versions = _versions(output)
    assert versions and all(okl_core.model_classes(data) == [0, 1] for _, _, data in versions)
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        train.run(["--input", str(tmp_path / "b10"), *argv])
    assert refused.value.code == 2
    newest = okl_core.model_versions(output)[-1][1]
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m pipelines.train: error: --input {tmp_path / 'b10' / 'dataset.json'} has the classes [1, 0], the model {newest} was "
        "trained on [0, 1]: its labels would be scored as other classes; prepare it with --like the training data set")
    assert _versions(output) == versions


def test_ctrl_c_twice_ends_a_streaming_job_with_one_line(tmp_path, prism_location):
    """Issue: one Ctrl-C exited 130 after ~90 lines of gRPC thread tracebacks, and a second one
    within a second deadlocked in Beam's job server handler. Two SIGINTs to the process group
    (as a terminal sends them), 0.2 s apart: one line, exit status 130."""
    import signal
    import subprocess
    import sys

    from tests.pipelines.test_interrupt import ROOT

    watched = tmp_path / "in"
    watched.mkdir()
    X, y = binary_data(250, seed=3)
    os.rename(_write_file(str(tmp_path), "a.parquet", X, y), watched / "a.parquet")
    cmd = [sys.executable, "-m", "pipelines.train", "--streaming", "--input", str(watched), *PARAMS, "--snapshot_batches", "1",
           "--poll_seconds", str(POLL), "--output", str(tmp_path / "out"), "--runner=PrismRunner", f"--prism_location={prism_location}"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not okl_core.model_versions(tmp_path / "out"):  # running: it has written a version
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate(timeout=5) if proc.poll() is not None else "no version"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["python -m pipelines.train: interrupted"], err[-3000:]


def test_a_learner_over_its_cap_ends_a_streaming_job_with_the_cap_line(tmp_path, prism_location):
    """Issue: max_support reached in a streaming job ended in ~210 lines (Beam's traceback printed by the
    in-process SDK worker, Prism's bundle-error log, the job's RuntimeError); batch train printed one line.
    Now the same line, exit status 1, and no model version."""
    import subprocess
    import sys

    from tests.pipelines.test_interrupt import ROOT

    watched = tmp_path / "in"
    watched.mkdir()
    X, y = binary_data(250, seed=3)
    os.rename(_write_file(str(tmp_path), "a.parquet", X, y), watched / "a.parquet")
    cmd = [sys.executable, "-m", "pipelines.train", "--streaming", "--input", str(watched), "--learner", "kernel_ogd", "--param", "max_support=5",
           "--sigma", "1", "--stop_after", "20", "--output", str(tmp_path / "out"), "--runner=PrismRunner", f"--prism_location={prism_location}"]
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert proc.stderr == ("python -m pipelines.train: error: kernel_ogd: the support set would exceed max_support=5; it holds one row per "
                           "update: raise max_support, or use a budgeted (nogd) or random-feature (fogd) learner for long streams\n")
    assert okl_core.model_versions(tmp_path / "out") == []


def _foreign_parquet(path) -> bytes:
    """A Parquet file of another schema (no x, y, row), as its bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [1, 2, 3]}), path)
    return open(path, "rb").read()


def _job_beside_bad_files(tmp_path, prism_location, X, y, n_files):
    """A streaming job on ``a.parquet`` (the first of ``n_files`` files of ``X, y``) while an unreadable
    file and a Parquet file of another schema land beside it. Returns ``(watched folder, output, the
    files, the bad files (name, bytes), argv)``."""
    watched, staging, output = tmp_path / "in", tmp_path / "staging", str(tmp_path / "out")
    watched.mkdir(), staging.mkdir()
    write_dataset(staging / "set", X, y, "binary", n_shards=n_files, check_values=False)
    parts = sorted((staging / "set").glob("*.parquet"))
    os.rename(parts[0], watched / "a.parquet")
    bad = [("garbage.parquet", b"not a parquet file"), ("foreign.parquet", _foreign_parquet(staging / "foreign"))]
    argv = ["--streaming", "--input", str(watched), *PARAMS, "--batch_rows", str(BATCH_ROWS), "--snapshot_batches", "1",
            "--poll_seconds", str(POLL), "--stop_after", "6", "--output", output, "--runner=PrismRunner", f"--prism_location={prism_location}"]
    dropper = Dropper(str(staging), str(watched), [], every=0, extra=bad, started=os.path.join(output, "snapshots", "run-000001"))
    dropper.start()
    train.run(argv)
    dropper.join()
    return watched, output, parts, bad, argv


def test_a_restart_skips_the_files_the_previous_job_dead_lettered(tmp_path, prism_location, capsys):
    """Issue: a relaunch on the same --output was refused ("--input ...: foreign.parquet: not in the okl
    layout") while the watched folder still held a file the previous job had dead-lettered. The
    restart launches, leaves the two dead-lettered files (not Parquet; another schema) alone -- their
    dead letters as the first job wrote them, not reported again -- and learns only the new file."""
    X, y = binary_data(750, seed=11)
    watched, output, parts, bad, argv = _job_beside_bad_files(tmp_path, prism_location, X, y, 3)  # 3 files of 250 rows, disjoint row numbers
    letters = {name: (os.stat(dead_letter_file(output, name)).st_mtime_ns, open(dead_letter_file(output, name), "rb").read()) for name, _ in bad}
    assert json.loads(letters["garbage.parquet"][1].splitlines()[0])["reason"].startswith("unreadable Parquet file")
    assert all(json.loads(line)["row"] == -1 for line in letters["foreign.parquet"][1].splitlines())  # its row group cannot be read
    first = _versions(output)[-1]
    assert first[1]["n_seen"] == 250
    capsys.readouterr()
    # The restart reads a record as okl wrote them before records held only what was new: every
    # file learned, by absolute path (backward compatibility).
    old_record = {k: v for k, v in first[1].items() if k not in ("files_since", "new_files", "root")}
    old_record["files"] = {str(watched / "a.parquet"): {"rows": 250, "done": True}}
    with open(os.path.join(output, version_file_name(first[0])[: -len(".npz")] + ".json"), "w") as f:
        f.write(json.dumps(old_record, sort_keys=True) + "\n")

    os.rename(parts[1], watched / "b.parquet")
    argv[argv.index("--stop_after") + 1] = "3"
    train.run(argv)  # was: SystemExit 2, the launch refused foreign.parquet
    out = capsys.readouterr().out
    launch = json.loads(out.splitlines()[0])
    assert (launch["files_learned"], launch["files_dead_lettered"]) == (1, 2)
    assert "bad rows:" not in out  # the dead letters are not written (nor reported) again
    assert {name: (os.stat(dead_letter_file(output, name)).st_mtime_ns, open(dead_letter_file(output, name), "rb").read()) for name, _ in bad} == letters
    records = _records(output, first[0] + 1)
    assert sorted({os.path.basename(b["file"]) for rs in records.values() for r in rs for b in r["batches"]}) == ["b.parquet"]
    last = _versions(output)[-1][1]
    assert last["n_seen"] == 500 and _learned_whole(output) == ["a.parquet", "b.parquet"]


FIRST_JOB_CHECKS = (
    test_each_file_is_learned_once_and_bad_input_is_dead_lettered,
    test_versions_follow_the_merge_windows_and_equal_the_replayed_merges,
    test_a_shard_mixes_a_merged_version_in_the_middle_of_its_stream,
    test_stop_after_ends_the_job,
)


if __name__ == "__main__":
    # python -m tests.pipelines.test_streaming_prism ROOT RUNNER_FLAG...: the first job on another
    # runner (tests/pipelines/test_flink.py runs it on Flink in .venv-flink), with its checks.
    import sys

    job = run_first_job(sys.argv[1], sys.argv[2:], stop_after=40.0)
    for check in FIRST_JOB_CHECKS:
        check(job)
        print(f"passed: {check.__name__}", flush=True)


def test_a_restart_after_the_watched_folder_moved_does_not_dead_letter_its_files_again(tmp_path, prism_location, capsys):
    """Issue: dead letters named their file by absolute path only, so after the watched folder moved a
    restart did not know the files an earlier job had dead-lettered (the launch refused the foreign
    file, or the job reported them again). Dead letters now also name the file relative to the
    watched folder, as version records do: the restart from the moved folder launches, leaves the
    dead-lettered files and their dead letters alone, and learns only the new file."""
    X, y = binary_data(500, seed=12)
    X[[5, 60]] = np.nan  # two bad rows in the first file: learned whole, its dead letter written once
    watched, output, parts, bad, argv = _job_beside_bad_files(tmp_path, prism_location, X, y, 2)
    names = ["a.parquet", *(name for name, _ in bad)]
    letters = {name: (os.stat(dead_letter_file(output, name)).st_mtime_ns, open(dead_letter_file(output, name), "rb").read()) for name in names}
    assert sorted(os.listdir(os.path.join(output, "dead_letter"))) == sorted(n + ".jsonl" for n in names)
    assert {json.loads(line)["identity"] for name in names for line in letters[name][1].splitlines()} == set(names)
    assert [json.loads(line)["row"] for line in letters["a.parquet"][1].splitlines()] == [5, 60]
    assert _versions(output)[-1][1]["n_seen"] == 248
    capsys.readouterr()

    moved = tmp_path / "moved" / "in"
    os.renames(watched, moved)
    os.rename(parts[1], moved / "b.parquet")
    argv[argv.index("--input") + 1] = str(moved)
    argv[argv.index("--stop_after") + 1] = "3"
    train.run(argv)
    out = capsys.readouterr().out
    launch = json.loads(out.splitlines()[0])
    assert (launch["files_learned"], launch["files_dead_lettered"]) == (1, 2)
    assert "bad rows:" not in out  # no dead letter written (nor reported) again
    assert sorted(os.listdir(os.path.join(output, "dead_letter"))) == sorted(n + ".jsonl" for n in names)
    assert {name: (os.stat(dead_letter_file(output, name)).st_mtime_ns, open(dead_letter_file(output, name), "rb").read()) for name in names} == letters
    assert _versions(output)[-1][1]["n_seen"] == 248 + 250 and _learned_whole(output) == ["a.parquet", "b.parquet"]
