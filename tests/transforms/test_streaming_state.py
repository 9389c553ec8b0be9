"""Bounded streaming state: version records hold what is new, a manifest is compacted, files are named relative to the watched folder.

The shard, merger and writer DoFns are driven directly, one file at a time
(:func:`bench.bench_streaming_state.drive`: a real Parquet read, a snapshot and a version
per file), with their Beam state in plain cells sized by the state specs' coders. Sizes
are asserted, never times (``python -m bench.bench_streaming_state`` prints those).
"""

from __future__ import annotations

import json
import os

import pytest

from bench.bench_streaming_state import ROWS_PER_FILE, Bag, Cell, drive, write_files
from okl_core.state import model_versions, version_file_name
from transforms.streaming import (
    MANIFEST_EVERY, ReadParquetFiles, _WriteVersion, file_identity, learned_files, manifest_file, relative_identity, watch_root,
)

# Digits that grow with the stream (version, n_seen, interval numbers) and the record's clock time.
SLACK = 24


def _stream(tmp_path, n_files):
    files = write_files(str(tmp_path / "in"), n_files)
    return files, list(drive(files, str(tmp_path / "out")))


def _check_bounded(tmp_path, n_files):
    files, rows = _stream(tmp_path, n_files)
    names = [os.path.basename(f) for f in files]
    for seen, _, _, _, _, record in rows:
        # each version records the one file learned since the version before it, by its name under the watched folder
        assert record["version"] == seen and record["files_since"] == (None if seen == 1 else seen - 1)
        assert record["new_files"] == {names[seen - 1]: {"rows": ROWS_PER_FILE, "done": True}}
        assert record["root"] == str(tmp_path / "in") and record["n_seen"] == seen * ROWS_PER_FILE
    head, tail = rows[: max(10, n_files // 10)], rows[-max(10, n_files // 10):]
    for column, what in ((2, "shard state"), (3, "merger state"), (4, "version record")):
        first, last = max(r[column] for r in head), max(r[column] for r in tail)
        assert last <= first + SLACK, f"{what}: {first} bytes over the first files, {last} over the last"
    out = str(tmp_path / "out")
    assert [v for v, _ in model_versions(out)] == list(range(1, n_files + 1))
    manifests = sorted(os.listdir(os.path.join(out, "manifests"))) if os.path.isdir(os.path.join(out, "manifests")) else []
    assert manifests == [os.path.basename(manifest_file(out, v)) for v in range(MANIFEST_EVERY, n_files + 1, MANIFEST_EVERY)]
    everything = {name: {"rows": ROWS_PER_FILE, "done": True} for name in names}
    assert learned_files(model_versions(out)[-1][1]) == everything
    for manifest in manifests[-1:]:
        newest_manifest = json.load(open(os.path.join(out, "manifests", manifest)))
        assert newest_manifest["files"] == {name: everything[name] for name in names[: newest_manifest["version"]]}
    return files, out


def test_version_records_and_state_stay_bounded_as_files_stream_in(tmp_path):
    """Issue: the merger kept every file ever learned in one JSON state cell and every version's
    record repeated the whole list (a 10 MB record per version at 100,000 files). Over 300 files
    (a version each), the shard's and merger's state and each record stay the same size, each
    record holds the one new file, and the chain of records and manifests adds up to every file."""
    _check_bounded(tmp_path, 300)


@pytest.mark.slow
def test_state_stays_bounded_over_5000_files(tmp_path):
    _check_bounded(tmp_path, 5000)


def test_a_restart_after_the_watched_folder_moved_learns_nothing_again(tmp_path):
    """Files are named relative to the watched folder: a reader on the moved folder skips them all."""
    files, out = _check_bounded(tmp_path, MANIFEST_EVERY + 6)  # read back: 6 records, then a manifest
    learned = learned_files(model_versions(out)[-1][1])
    moved = tmp_path / "elsewhere" / "watched"
    os.renames(tmp_path / "in", moved)
    read = ReadParquetFiles(3, "binary", None, 1, ROWS_PER_FILE, learned=learned, root=watch_root(str(moved / "*.parquet")))
    assert all(read.read(str(moved / os.path.basename(f)), 0) == ([], []) for f in files)
    fresh = ReadParquetFiles(3, "binary", None, 1, ROWS_PER_FILE, root=str(moved))  # without the record: read whole
    assert [b.piece.stop for b in fresh.read(str(moved / os.path.basename(files[0])), 0)[0]] == [ROWS_PER_FILE]


def test_file_identities_are_relative_to_the_watched_root(tmp_path):
    assert watch_root(str(tmp_path / "in" / "*.parquet")) == str(tmp_path / "in")
    assert watch_root(str(tmp_path / "in" / "day*" / "*.parquet")) == str(tmp_path / "in")
    assert watch_root("gs://bucket/live/*.parquet") == "gs://bucket/live"
    assert watch_root("*.parquet") == os.getcwd()
    assert file_identity(str(tmp_path / "in" / "day1" / "a.parquet"), str(tmp_path / "in")) == "day1/a.parquet"
    assert file_identity("gs://bucket/live/a.parquet", "gs://bucket/live") == "a.parquet"
    assert file_identity(str(tmp_path / "other" / "a.parquet"), str(tmp_path / "in")) == str(tmp_path / "other" / "a.parquet")
    assert relative_identity("day1/a.parquet", str(tmp_path / "in")) == "day1/a.parquet"  # already relative: unchanged


def _write(path, record: dict) -> None:
    with open(path, "w") as f:
        f.write(json.dumps(record) + "\n")


def test_a_record_in_the_old_format_reads_as_before_and_continues_a_chain(tmp_path):
    """Versions written before records held only what was new list every file by absolute path
    (``files``): read whole, named relative to the watched folder; a newer record naming one as
    the version it continues adds its new files to them."""
    root = str(tmp_path / "in")
    _write(tmp_path / "model-v000003.json", {"version": 3, "n_seen": 60, "snapshots": {"0": 2}, "time": 1.0,
                                             "files": {f"{root}/a.parquet": {"rows": 40, "done": True}, f"{root}/b.parquet": {"rows": 20, "done": False},
                                                       "/elsewhere/c.parquet": {"rows": 5, "done": True}}})
    old = {"a.parquet": {"rows": 40, "done": True}, "b.parquet": {"rows": 20, "done": False}, "/elsewhere/c.parquet": {"rows": 5, "done": True}}
    assert learned_files(str(tmp_path / version_file_name(3)), root) == old
    assert learned_files(str(tmp_path / version_file_name(3))) == {f"{root}/a.parquet": old["a.parquet"], f"{root}/b.parquet": old["b.parquet"],
                                                                    "/elsewhere/c.parquet": old["/elsewhere/c.parquet"]}
    _write(tmp_path / "model-v000004.json", {"version": 4, "files_since": 3, "new_files": {"b.parquet": {"rows": 30, "done": True},
                                                                                            "d.parquet": {"rows": 7, "done": True}}})
    assert learned_files(str(tmp_path / version_file_name(4)), root) == {**old, "b.parquet": {"rows": 30, "done": True}, "d.parquet": {"rows": 7, "done": True}}
    # the job that continued it recorded the folder it watched: the old names are relative to that one, wherever it is now
    _write(tmp_path / "model-v000004.json", {"version": 4, "files_since": 3, "root": root, "new_files": {"d.parquet": {"rows": 7, "done": True}}})
    assert learned_files(str(tmp_path / version_file_name(4)), "/moved/since") == {**old, "d.parquet": {"rows": 7, "done": True}}


@pytest.mark.parametrize("record, why", [
    ({"version": 5, "files_since": 4, "new_files": {}}, "model-v000004.json: missing, and a later version's record names it as the one it continues"),
    ({"version": 5, "files_since": 5, "new_files": {}}, "'files_since' is 5, not an earlier version number or null"),
    ({"version": 5, "files_since": "4", "new_files": {}}, "'files_since' is \"4\", not an earlier version number or null"),
    ({"version": 5, "files_since": None, "new_files": {"a.parquet": 3}}, "'new_files' entry 'a.parquet' is 3, not an object of rows"),
])
def test_a_broken_chain_of_records_is_one_line_naming_the_file(tmp_path, record, why):
    _write(tmp_path / "model-v000005.json", record)
    with pytest.raises(ValueError, match="^" + str(tmp_path).replace("\\", "\\\\") + "/model-v00000[45].json: ") as err:
        learned_files(str(tmp_path / version_file_name(5)))
    assert why in str(err.value) and "\n" not in str(err.value)


def _version(v: int, new: dict, data: bytes) -> tuple:
    record = {"version": v, "files_since": v - 1 if v > 1 else None, "new_files": new, "root": "/in", "n_seen": v, "snapshots": {}, "time": 0.0}
    return 0, (v, data, json.dumps(record, sort_keys=True))


def test_a_version_written_again_is_skipped_and_what_it_learned_reaches_the_next(tmp_path):
    """Under replay (a worker's state restored, the version already written) a version write is
    idempotent: the same bytes are not written again, and the new files it holds that the written
    version does not are carried into the next version written, so the chain loses no file. Other
    bytes under a written number go to the next free number (tests/transforms/test_streaming_replay.py)."""
    out = str(tmp_path)
    writer = _WriteVersion(out, manifest_every=2)
    last, carry = Cell(), Bag()
    assert list(writer.process(_version(1, {"a": {"rows": 4, "done": True}}, b"model-1"), last, carry)) == [(1, f"{out}/{version_file_name(1)}")]
    replayed_last = Cell()  # the writer's state as a checkpoint before version 1 left it
    assert list(writer.process(_version(1, {"a": {"rows": 4, "done": True}, "b": {"rows": 2, "done": False}}, b"model-1"), replayed_last, carry)) == []
    assert carry.read() == [("b", 2, False)]
    assert list(writer.process(_version(2, {"c": {"rows": 4, "done": True}}, b"model-2"), replayed_last, carry)) == [(2, f"{out}/{version_file_name(2)}")]
    record = json.load(open(f"{out}/model-v000002.json"))
    assert record["new_files"] == {"b": {"rows": 2, "done": False}, "c": {"rows": 4, "done": True}} and record["files_since"] == 1
    assert carry.read() == [] and open(f"{out}/{version_file_name(1)}", "rb").read() == b"model-1"
    # version 2 is a manifest's: every file learned
    assert json.load(open(manifest_file(out, 2)))["files"] == {"a": {"rows": 4, "done": True}, "b": {"rows": 2, "done": False}, "c": {"rows": 4, "done": True}}


def test_a_crash_before_a_version_is_committed_leaves_the_versions_before_it_as_they_were(tmp_path):
    """A version exists once its model file does (written last): a crash after its record and
    manifest were written leaves a restart at the version before, whose chain does not read
    them; the version written again then replaces them."""
    out = str(tmp_path)
    writer = _WriteVersion(out, manifest_every=2)
    last, carry = Cell(), Bag()
    for v, name in ((1, "a"), (2, "b"), (3, "c"), (4, "d")):
        list(writer.process(_version(v, {name: {"rows": 1, "done": True}}, f"model-{v}".encode()), last, carry))
    os.remove(f"{out}/{version_file_name(4)}")  # the crash: record and manifest of version 4 written, its model not
    assert os.path.exists(manifest_file(out, 4)) and model_versions(out)[-1][0] == 3
    assert learned_files(f"{out}/{version_file_name(3)}") == {k: {"rows": 1, "done": True} for k in "abc"}
    restarted = _WriteVersion(out, manifest_every=2)
    list(restarted.process(_version(4, {"e": {"rows": 1, "done": True}}, b"model-4 again"), Cell(), Bag()))
    assert learned_files(f"{out}/{version_file_name(4)}") == {k: {"rows": 1, "done": True} for k in "abce"}
    assert json.load(open(manifest_file(out, 4)))["files"] == {k: {"rows": 1, "done": True} for k in "abce"}
