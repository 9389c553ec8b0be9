"""ReadShards: pieces cover each position of a round exactly once, keyed by the plan."""

import json
import os

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that

from okl_core.data.layout import write_dataset
from okl_core.data.plan import StreamPlan
from transforms.read import DatasetSource, ReadShards, RowGroupReader, piece_refs


@pytest.fixture()
def source(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 3)).astype(np.float32)
    y = rng.integers(0, 3, 1000).astype(np.int32)
    X[123, 0] = np.nan
    y[840] = 7
    write_dataset(tmp_path / "d", X, y, "multiclass", n_shards=3, row_group_rows=150, classes=[0, 1, 2], check_values=False)
    return DatasetSource.open(str(tmp_path / "d")), X, y


def test_source_lists_row_groups_in_stream_order(source):
    src, X, _ = source
    assert src.n_rows == 1000 and src.n_features == 3 and src.n_classes == 3 and src.task == "multiclass"
    firsts = [g[2] for g in src.row_groups]
    assert firsts == sorted(firsts) and sum(g[3] for g in src.row_groups) == 1000 and len(src.row_groups) == 9
    np.testing.assert_array_equal(src.read_rows(200), np.delete(X[:201], 123, axis=0))


@pytest.mark.parametrize("round", [0, 1])
def test_pieces_cover_the_round_once(source, round):
    src, X, y = source
    plan = StreamPlan(1000, 2, 2, 64)

    def check(elements):
        covered = []
        for shard, piece in elements:
            assert shard == piece.shard and piece.round == round
            assert plan.locate([piece.start])[2][0] == piece.seq and piece.stop <= plan.batches(shard, round)[piece.seq].stop
            keep = [p for p in range(piece.start, piece.stop) if p not in (123, 840)]
            np.testing.assert_array_equal(piece.row, keep)
            np.testing.assert_array_equal(piece.X, X[keep])
            np.testing.assert_array_equal(piece.y, y[keep])
            covered.extend(range(piece.start, piece.stop))
        want = [p for s in range(2) for p in range(*plan.segment_bounds(s, round))]
        assert sorted(covered) == want

    def check_dead(records):
        records = [json.loads(r) for r in records]
        in_round = [p for p in (123, 840) if plan.locate([p])[1][0] == round]
        assert sorted(r["position"] for r in records) == in_round
        assert all(r["split"] == "train" and r["file"].endswith(".parquet") for r in records)

    with beam.Pipeline(runner="apache_beam.runners.portability.fn_api_runner.FnApiRunner") as p:
        read = p | ReadShards(src, plan, round=round, shuffle_seed=round)
        assert_that(read["batches"], check, label="Pieces")
        assert_that(read["dead_letter"], check_dead, label="Dead")


def test_plan_must_match_the_data(source):
    with pytest.raises(ValueError, match="plan is for 999 rows"):
        ReadShards(source[0], StreamPlan(999))


def test_references_cover_the_rounds_and_read_back_the_same_rows(source):
    src, X, y = source
    plan = StreamPlan(1000, 3, 2, 100)
    refs = [ref for task in src.row_groups for ref in piece_refs(task, plan, None)]
    assert sorted(p for r in refs for p in range(r.start, r.stop)) == list(range(1000))
    reader = RowGroupReader(src, "train")
    dead = []
    for ref in refs:
        assert plan.locate([ref.start, ref.stop - 1])[2].tolist() == [ref.seq] * 2
        piece, records = reader.materialize(ref)
        keep = [p for p in range(ref.start, ref.stop) if p not in (123, 840)]
        np.testing.assert_array_equal(piece.X, X[keep])
        np.testing.assert_array_equal(piece.y, y[keep])
        dead += [json.loads(r) for r in records]
    assert [(d["position"], d["reason"].split(":")[0]) for d in dead] == [(123, "non-finite feature"), (840, "bad label")]


def test_reading_ahead_reads_the_planned_row_groups_in_order_on_one_thread(source):
    """read_ahead=2: the announced row groups are read in plan order, at most two ahead,
    on the reader's own thread; the pieces are those of the synchronous reader."""
    import threading

    src, _, _ = source
    plan = StreamPlan(1000, 2, 1, 64)
    refs = sorted((r for task in src.row_groups for r in piece_refs(task, plan, 0) if r.shard == 1), key=lambda r: r.seq)
    ahead, direct = RowGroupReader(src, "train", read_ahead=2), RowGroupReader(src, "train")
    loads = []
    original = ahead._load

    def recording_load(path, group, rows):
        loads.append((group, threading.current_thread().name))
        return original(path, group, rows)

    ahead._load = recording_load
    gate = threading.Event()
    ahead._pool.submit(gate.wait)  # hold the reading thread: nothing is read before we look
    ahead.plan(refs)
    assert len(ahead._ahead) == 2 and loads == []
    gate.set()
    try:
        for ref in refs:
            got, got_dead = ahead.materialize(ref)
            want, want_dead = direct.materialize(ref)
            np.testing.assert_array_equal(got.X, want.X)
            np.testing.assert_array_equal(got.row, want.row)
            assert got_dead == want_dead
    finally:
        ahead.close()
    groups = list(dict.fromkeys((r.path, r.group) for r in refs))
    assert [g for g, _ in loads] == [g for _, g in groups]  # each row group once, in plan order
    assert {name.split("_")[0] for _, name in loads} == {"okl-read"}


def test_a_failed_read_ahead_is_raised_where_the_rows_are_needed(source, tmp_path):
    """An error on the reading thread (here: a file rewritten after listing) reaches the caller, naming the file."""
    src, X, y = source
    plan = StreamPlan(1000, 1, 1, 100)
    refs = [r for task in src.row_groups for r in piece_refs(task, plan, 0)]
    first_file = src.row_groups[0][0]
    write_dataset(tmp_path / "other", X[:334], y[:334], "multiclass", row_group_rows=50, classes=[0, 1, 2], check_values=False)
    (tmp_path / "other" / "part-00000-of-00001.parquet").replace(first_file)  # 50-row groups where 150 were listed
    reader = RowGroupReader(src, "train", read_ahead=2)
    reader.plan(refs)
    try:
        with pytest.raises(ValueError, match=f"{first_file}: row group 0 has 50 rows, the listing said 150"):
            reader.materialize(refs[0])
    finally:
        reader.close()


def test_a_new_plan_drops_reads_left_by_an_interrupted_one(source):
    src, _, _ = source
    plan = StreamPlan(1000, 2, 1, 64)
    shard = {s: [r for task in src.row_groups for r in piece_refs(task, plan, 0) if r.shard == s] for s in (0, 1)}
    reader = RowGroupReader(src, "train", read_ahead=2)
    try:
        reader.plan(shard[0])  # shard 0's first row groups are read ahead, then never used
        reader.plan(shard[1])
        wanted = list(dict.fromkeys((r.path, r.group) for r in shard[1]))[:2]
        assert sorted(reader._ahead) == sorted(wanted)
        piece, _ = reader.materialize(shard[1][0])
        assert piece.start == shard[1][0].start
    finally:
        reader.close()


def test_prefetching_announces_the_next_planned_row_groups_and_decodes_on_the_caller(source, monkeypatch):
    """prefetch=2 (local files): each read announces the next two planned row groups to the
    OS, in plan order and once each; the rows are decoded on the calling thread and are
    those of the plain reader."""
    import threading

    src, _, _ = source
    plan = StreamPlan(1000, 2, 1, 64)
    refs = sorted((r for task in src.row_groups for r in piece_refs(task, plan, 0) if r.shard == 1), key=lambda r: r.seq)
    groups = list(dict.fromkeys((r.path, r.group) for r in refs))
    assert len(groups) >= 4
    reader, direct = RowGroupReader(src, "train", prefetch=2), RowGroupReader(src, "train")
    hints, loads, original = [], [], reader._load
    monkeypatch.setattr(reader, "_hint", lambda path, group: hints.append((path, group)))

    def recording_load(path, group, rows):
        loads.append((path, group, threading.current_thread() is threading.main_thread(), list(hints)))
        return original(path, group, rows)

    monkeypatch.setattr(reader, "_load", recording_load)
    reader.plan(refs)
    assert hints == groups[:2] and loads == []
    for ref in refs:
        got, got_dead = reader.materialize(ref)
        want, want_dead = direct.materialize(ref)
        np.testing.assert_array_equal(got.X, want.X)
        np.testing.assert_array_equal(got.row, want.row)
        assert got_dead == want_dead
    reader.close()
    assert [(p, g) for p, g, _, _ in loads] == groups and all(main for _, _, main, _ in loads)
    assert hints == groups[:]  # every planned group announced once, in order
    # When row group k is decoded, the groups up to k + 2 have been announced (k + 1 before it).
    assert [len(seen) for _, _, _, seen in loads] == [min(k + 2, len(groups)) for k in range(len(groups))]


def test_a_hint_names_the_row_groups_bytes(source):
    """The announced byte range of a row group covers its column chunks and nothing before them."""
    import pyarrow.parquet as pq

    from transforms.read import _byte_range

    src, _, _ = source
    path, group = src.row_groups[1][0], src.row_groups[1][1]
    metadata = pq.ParquetFile(path).metadata
    start, stop = _byte_range(metadata, group)
    chunks = [metadata.row_group(group).column(c) for c in range(metadata.num_columns)]
    assert start == min(c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset for c in chunks)
    assert stop - start >= sum(c.total_compressed_size for c in chunks)
    assert stop <= (os.path.getsize(path) if group == metadata.num_row_groups - 1 else _byte_range(metadata, group + 1)[0])
