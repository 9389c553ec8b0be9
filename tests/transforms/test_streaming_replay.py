"""Version writes under replay: what a restore from a checkpoint (Flink) sends the version writer again.

After a TaskManager is lost, Flink restores every DoFn's state from the last checkpoint and
the input after it is read again. The merges of the replay fall in other processing-time
windows than the failed attempt's, so the merger proposes the numbers the failed attempt
already wrote with other contents. Here the failed attempt's versions are written by the
real shard, merger and writer DoFns (one version per file), and the replay's proposals
(the same files, merged in other groups) go through ``WriteModelVersions`` in a real
streaming pipeline (TestStream on Beam's direct runner), in the order the merger made them.
"""

from __future__ import annotations

import hashlib
import json
import os

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing.test_stream import TestStream as BeamTestStream

import okl_core
from bench.bench_streaming_state import PARAMS, ROWS_PER_FILE, Bag, Cell, N_FEATURES, write_files
from okl_core.state import model_versions, version_file_name
from transforms import streaming
from transforms.elements import StreamEvent
from transforms.streaming import WriteModelVersions, _WriteVersion, learned_files
from transforms.train import LearnerSpec

SPEC = LearnerSpec("fogd", PARAMS)


def _proposals(files: list[str], groups: list[list[int]], root: str) -> list[tuple]:
    """The merger's proposals ``(version, model bytes, record)`` when the files of each group are learned between two merges.

    The real shard and merger DoFns of one shard, their state in plain cells; processing
    time stands still, windows end when told.
    """
    learner = SPEC.build()
    init = okl_core.model_bytes(learner, learner.init())
    zero = lambda: 0.0  # noqa: E731
    read = streaming.ReadParquetFiles(N_FEATURES, "binary", None, 1, ROWS_PER_FILE, root=root)
    shard = streaming._StreamShard(SPEC, init, 1, None, 0.0, zero, read)
    merger = streaming._MergeWindows(SPEC, 1e9, 1, zero, base=init, root=root)
    shard.setup(), merger.setup()
    shard_cells = [Cell(), Cell(), Cell(), Cell(), Bag(), Bag()]
    newest, meta, window, end, new_files = Bag(), Cell(), Cell(), Cell(), Bag()
    out = []
    for group in groups:
        for k in group:
            for snapshot in shard.process((0, StreamEvent(files[k], whole_file=True)), *shard_cells):
                merger.process((0, snapshot), newest, meta, window, end, new_files)
        out.extend(merger.on_window_end(newest, meta, new_files))
    return out


def _write_in_a_pipeline(output: str, proposals: list[tuple]) -> list[tuple[int, str]]:
    """The proposals through ``WriteModelVersions`` in a streaming pipeline, one after the other; what it wrote."""
    options = PipelineOptions([])
    options.view_as(StandardOptions).streaming = True
    stream = BeamTestStream()
    for proposal in proposals:
        stream = stream.add_elements([proposal]).advance_processing_time(1.0)
    written: list[tuple[int, str]] = []
    _WRITTEN[output] = written
    with beam.Pipeline(runner="BundleBasedDirectRunner", options=options) as p:
        p | stream.advance_watermark_to_infinity() | WriteModelVersions(output, manifest_every=4) | beam.Map(_keep, output)
    return written


_WRITTEN: dict[str, list] = {}


def _keep(element, output):
    _WRITTEN[output].append(tuple(element))


def _files_now(output: str) -> dict[str, str]:
    """Every file under ``output``: sha256 of its bytes."""
    found = {}
    for folder, _, names in os.walk(output):
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                found[os.path.relpath(os.path.join(folder, name), output)] = hashlib.sha256(f.read()).hexdigest()
    return found


def _record(output: str, version: int) -> dict:
    with open(os.path.join(output, version_file_name(version)[: -len(".npz")] + ".json")) as f:
        return json.load(f)


def test_a_replay_after_a_restore_keeps_the_failed_attempts_versions_and_learns_each_file_once(tmp_path):
    """The failed attempt wrote versions 1-5 (a file each). The restore goes back to its state
    before version 3 was written; the replay learns files 2 and 3 in one merge, then file 4.
    Was: version 3 met the failed attempt's (FileExistsError, after its record had been
    overwritten) until Flink's attempts ran out. Now nothing the failed attempt wrote changes,
    the replay's versions follow the failed attempt's (6, 7), each record continues the one
    before it in the replay (2 -> 6 -> 7), and the last holds every file and row once."""
    root = str(tmp_path / "in")
    files = write_files(root, 5)
    names = [os.path.basename(f) for f in files]
    output = str(tmp_path / "out")
    failed = _proposals(files, [[0], [1], [2], [3], [4]], root)
    assert [v for v, _ in _write_in_a_pipeline(output, failed)] == [1, 2, 3, 4, 5]
    before = _files_now(output)

    replay = _proposals(files, [[0], [1], [2, 3], [4]], root)
    assert [v for v, _, _ in replay] == [1, 2, 3, 4]  # the merger's numbers: the failed attempt's
    assert [p[1] for p in replay[:2]] == [p[1] for p in failed[:2]] and replay[2][1] != failed[2][1]
    # the restored writer's state (version 2 written) is a fresh writer's given the proposals from version 1:
    # versions 1 and 2 are the same bytes continuing the same version, a replay of what was written
    written = _write_in_a_pipeline(output, replay)
    assert written == [(6, f"{output}/{version_file_name(6)}"), (7, f"{output}/{version_file_name(7)}")]
    assert {k: v for k, v in _files_now(output).items() if k in before} == before  # nothing the failed attempt wrote changed
    assert [v for v, _ in model_versions(output)] == [1, 2, 3, 4, 5, 6, 7]
    six, seven = _record(output, 6), _record(output, 7)
    assert (six["version"], six["files_since"], sorted(six["new_files"])) == (6, 2, names[2:4])
    assert (seven["version"], seven["files_since"], sorted(seven["new_files"])) == (7, 6, names[4:])
    every = {name: {"rows": ROWS_PER_FILE, "done": True} for name in names}
    assert learned_files(f"{output}/{version_file_name(7)}") == every
    assert seven["n_seen"] == 5 * ROWS_PER_FILE
    assert open(f"{output}/{version_file_name(7)}", "rb").read() == replay[3][1]  # the replay's last merge, as proposed
    assert learned_files(f"{output}/{version_file_name(5)}") == every  # the failed attempt's chain is whole too

    # Restored once more, from before version 1: every proposal is a version already written (1, 2, 6, 7).
    again = _files_now(output)
    assert _write_in_a_pipeline(output, replay) == []
    assert _files_now(output) == again


def test_a_manifest_version_of_a_replay_compacts_the_replays_chain(tmp_path):
    """A replay's version at a manifest number (every 4th here) gets the manifest of its own chain,
    not of the failed attempt's versions it skipped; a manifest the failed attempt wrote at a
    number the replay moved past stays as it was."""
    root = str(tmp_path / "in")
    files = write_files(root, 6)
    names = [os.path.basename(f) for f in files]
    output = str(tmp_path / "out")
    _write_in_a_pipeline(output, _proposals(files, [[0], [1], [2], [3]], root))
    with open(streaming.manifest_file(output, 4), "rb") as f:
        failed_manifest = f.read()
    # the replay from before version 2: files 1 and 2 in one merge, then 3, 4 and 5 -> versions 5 (since 1), 6, 7, 8
    written = _write_in_a_pipeline(output, _proposals(files, [[0], [1, 2], [3], [4], [5]], root))
    assert [v for v, _ in written] == [5, 6, 7, 8]
    assert [_record(output, v)["files_since"] for v in (5, 6, 7, 8)] == [1, 5, 6, 7]
    with open(streaming.manifest_file(output, 8)) as f:
        assert json.load(f)["files"] == {name: {"rows": ROWS_PER_FILE, "done": True} for name in names}
    with open(streaming.manifest_file(output, 4), "rb") as f:
        assert f.read() == failed_manifest
    assert _record(output, 8)["n_seen"] == 6 * ROWS_PER_FILE


def _version(v: int, new: dict, data: bytes, since: int | None = -1) -> tuple:
    record = {"version": v, "files_since": (v - 1 if v > 1 else None) if since == -1 else since, "new_files": new, "root": "/in",
              "n_seen": v, "snapshots": {}, "time": 0.0}
    return 0, (v, data, json.dumps(record, sort_keys=True))


def test_the_writer_checks_a_number_before_it_writes_anything_and_keeps_the_offset(tmp_path):
    """Driven directly: a proposal under a number that holds another version writes no record
    there (was: the record was overwritten, then the model refused) but goes to the next free
    number; the proposals after it keep that offset; a record without a model (a crash between
    the two) is no version and is replaced."""
    out = str(tmp_path)
    first = _WriteVersion(out, manifest_every=0)
    last, carry = Cell(), Bag()
    for v in (1, 2):
        assert [w for w, _ in first.process(_version(v, {f"f{v}": {"rows": 1, "done": True}}, f"model-{v}".encode()), last, carry)] == [v]
    with open(f"{out}/model-v000003.json", "w") as f:
        f.write("{}")  # a crash after version 3's record was written, before its model
    record_1 = open(f"{out}/model-v000001.json", "rb").read()
    replay_last, replay_carry = Cell(), Bag()
    writer = _WriteVersion(out, manifest_every=0)
    assert list(writer.process(_version(1, {"g1": {"rows": 1, "done": True}}, b"other-1"), replay_last, replay_carry)) == [
        (3, f"{out}/{version_file_name(3)}")]
    assert open(f"{out}/model-v000001.json", "rb").read() == record_1 and open(f"{out}/{version_file_name(1)}", "rb").read() == b"model-1"
    assert _record(out, 3)["files_since"] is None and _record(out, 3)["version"] == 3
    assert [w for w, _ in writer.process(_version(2, {"g2": {"rows": 1, "done": True}}, b"other-2"), replay_last, replay_carry)] == [4]
    assert (_record(out, 4)["files_since"], _record(out, 4)["new_files"]) == (3, {"g2": {"rows": 1, "done": True}})
    # a proposal behind the last written (a stale merge) writes nothing; its files reach the next version
    assert list(writer.process(_version(1, {"late": {"rows": 2, "done": False}}, b"stale"), replay_last, replay_carry)) == []
    assert [w for w, _ in writer.process(_version(3, {"g3": {"rows": 1, "done": True}}, b"other-3"), replay_last, replay_carry)] == [5]
    assert _record(out, 5)["new_files"] == {"g3": {"rows": 1, "done": True}, "late": {"rows": 2, "done": False}}
    assert learned_files(f"{out}/{version_file_name(5)}") == {k: {"rows": 1, "done": True} for k in ("g1", "g2", "g3")} | {"late": {"rows": 2, "done": False}}
    assert learned_files(f"{out}/{version_file_name(2)}") == {k: {"rows": 1, "done": True} for k in ("f1", "f2")}
