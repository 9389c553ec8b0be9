"""TrainOnline folds each shard in sequence order whatever the delivery order; MergeBySeed sorts."""

import json
import random
import typing

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that

import okl_core
from okl_core.data.plan import StreamPlan
from transforms.elements import BatchPiece
from transforms.train import LearnerSpec, MergeBySeed, TrainOnline, _rows_together

PARAMS = {"n_inputs": 4, "n_components": 16, "sigma": 1.0, "eta": 0.1}


def _data(n=900):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    return X, np.where(X[:, 0] * X[:, 1] > 0, 1, -1).astype(np.int32)


def _pieces(X, y, plan, round):
    """Every batch cut into two pieces, with the second piece's first row 'bad' (dropped)."""
    out = []
    for shard in range(plan.num_shards):
        for b in plan.batches(shard, round):
            mid = (b.start + b.stop) // 2
            out.append((shard, BatchPiece(shard, round, b.seq, b.start, mid, X[b.start : mid], y[b.start : mid], np.arange(b.start, mid))))
            keep = np.arange(mid + 1, b.stop)
            out.append((shard, BatchPiece(shard, round, b.seq, mid, b.stop, X[keep], y[keep], keep)))
    return out


def _fold(learner, X, y, plan, shard, round):
    state = learner.init()
    for b in plan.batches(shard, round):
        mid = (b.start + b.stop) // 2
        keep = np.r_[b.start:mid, mid + 1 : b.stop]
        state, _ = learner.update(state, X[keep], y[keep])
    return state


def test_out_of_order_pieces_give_the_sequential_fold_per_shard():
    X, y = _data()
    plan = StreamPlan(900, 2, 1, 100)
    learner = okl_core.make_learner("fogd", **PARAMS)
    pieces = _pieces(X, y, plan, 0)
    random.Random(0).shuffle(pieces)
    expected = {s: okl_core.model_bytes(learner, _fold(learner, X, y, plan, s, 0)) for s in range(2)}

    def check_states(results):
        assert {shard: model for shard, model, _ in results} == expected
        for shard, _, summary in results:
            summary = json.loads(summary)
            assert summary["batches"] == 5 and summary["rows"] == 450 - 5  # one dropped row per batch

    def check_metrics(records):
        records = [json.loads(r) for r in records]
        assert sorted((r["shard"], r["seq"]) for r in records) == [(s, q) for s in range(2) for q in range(5)]
        seen = {shard: [r["n_seen"] for r in sorted(records, key=lambda r: r["seq"]) if r["shard"] == shard] for shard in range(2)}
        assert seen[0] == [99, 198, 297, 396, 445]  # positions 0..449 cut at multiples of 100: 100, 100, 100, 100, 50
        assert seen[1] == [49, 148, 247, 346, 445]  # 450..899: 50, 100, 100, 100, 100

    with beam.Pipeline(runner="apache_beam.runners.portability.fn_api_runner.FnApiRunner") as p:
        initial = p | "Init" >> beam.Create([okl_core.model_bytes(learner, learner.init())])
        trained = (
            p
            | "Pieces" >> beam.Create(pieces).with_output_types(typing.Tuple[int, BatchPiece])
            | "Train" >> TrainOnline(LearnerSpec("fogd", PARAMS), plan, 0, initial)
        )
        assert_that(trained.states, check_states, label="States")
        assert_that(trained.metrics, check_metrics, label="Metrics")
        merged = trained.states | "Merge" >> MergeBySeed(LearnerSpec("fogd", PARAMS), base=initial)
        want = okl_core.model_bytes(learner, okl_core.merge_states(learner, [okl_core.model_from_bytes(expected[s])[1] for s in range(2)]))
        assert_that(merged, lambda got: got == [want] or pytest.fail("merged model differs"), label="Merged")


def test_rows_of_a_batch_in_two_pieces_are_put_together_in_an_array_of_their_own():
    rng = np.random.default_rng(0)
    parts = [rng.random((n, 7), dtype=np.float32) for n in (5, 0, 3)]
    want = np.concatenate(parts)
    got = _rows_together(parts)
    assert got.dtype == np.float32 and got.flags.c_contiguous and got.flags.writeable
    np.testing.assert_array_equal(got, want)
    view = got[2:4]
    del got, parts
    np.testing.assert_array_equal(view, want[2:4])  # a view (a state may hold one) outlives the batch


def test_a_missing_piece_is_an_error_not_a_silent_gap():
    X, y = _data()
    plan = StreamPlan(900, 1, 1, 100)
    learner = okl_core.make_learner("fogd", **PARAMS)
    pieces = [item for item in _pieces(X, y, plan, 0) if not (item[1].seq == 3 and item[1].start > 300)]
    with pytest.raises(Exception, match="rows 300..399 of batch 3 never arrived"):
        with beam.Pipeline(runner="apache_beam.runners.portability.fn_api_runner.FnApiRunner") as p:
            initial = p | "Init" >> beam.Create([okl_core.model_bytes(learner, learner.init())])
            _ = (
                p
                | "Pieces" >> beam.Create(pieces).with_output_types(typing.Tuple[int, BatchPiece])
                | "Train" >> TrainOnline(LearnerSpec("fogd", PARAMS), plan, 0, initial)
            )


def test_merge_by_seed_sorts_by_shard_and_refuses_foreign_models():
    learner = okl_core.make_learner("fogd", **PARAMS)
    X, y = _data()
    states = [learner.update(learner.init(), X[i * 300 : (i + 1) * 300], y[i * 300 : (i + 1) * 300])[0] for i in range(3)]
    results = [(i, okl_core.model_bytes(learner, s), "{}") for i, s in enumerate(states)]
    want = okl_core.model_bytes(learner, okl_core.merge_states(learner, states))
    init = okl_core.model_bytes(learner, learner.init())
    with beam.Pipeline(runner="apache_beam.runners.portability.fn_api_runner.FnApiRunner") as p:
        base = p | "Base" >> beam.Create([init])
        merged = p | beam.Create(results[::-1]) | MergeBySeed(LearnerSpec("fogd", PARAMS), base=base)
        assert_that(merged, lambda got: got == [want] or pytest.fail("merged model differs"))
    other = okl_core.make_learner("fogd", **{**PARAMS, "seed": 9})
    foreign = [results[0], (1, okl_core.model_bytes(other, other.init()), "{}")]
    with pytest.raises(Exception, match="configs differ"):
        with beam.Pipeline(runner="apache_beam.runners.portability.fn_api_runner.FnApiRunner") as p:
            base = p | "Base" >> beam.Create([init])
            _ = p | beam.Create(foreign) | MergeBySeed(LearnerSpec("fogd", PARAMS), base=base)


@pytest.mark.parametrize("num_shards", [1, 2])
def test_decoding_ahead_on_a_thread_gives_the_same_models_as_decoding_between_updates(tmp_path, num_shards):
    """decode_ahead only moves where row groups are decoded: each shard's model (and its
    dead-lettered rows) are byte for byte those of the shard decoding between its updates."""
    from okl_core.data.layout import write_dataset
    from transforms.read import DatasetSource, ReadShards

    rng = np.random.default_rng(3)
    X = rng.normal(size=(2000, 4)).astype(np.float32)
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1).astype(np.int32)
    X[777, 2] = np.nan  # one bad row, dead-lettered either way
    write_dataset(tmp_path / "d", X, y, "binary", n_shards=3, row_group_rows=128, check_values=False)
    source = DatasetSource.open(str(tmp_path / "d"))
    plan = StreamPlan(2000, num_shards, 1, 100)
    learner = okl_core.make_learner("fogd", **PARAMS)
    keep = np.delete(np.arange(2000), 777)

    def fold(shard):  # the plain fold of the shard's good rows, batch by batch
        state = learner.init()
        for b in plan.batches(shard, 0):
            rows = keep[(keep >= b.start) & (keep < b.stop)]
            state, _ = learner.update(state, X[rows], y[rows])
        return okl_core.model_bytes(learner, state)

    want = {shard: fold(shard) for shard in range(num_shards)}
    for decode_ahead in (False, True):
        with beam.Pipeline(runner="apache_beam.runners.portability.fn_api_runner.FnApiRunner") as p:
            initial = p | "Init" >> beam.Create([okl_core.model_bytes(learner, learner.init())])
            read = p | "Read" >> ReadShards(source, plan, round=0)
            trained = read["batches"] | "Train" >> TrainOnline(LearnerSpec("fogd", PARAMS), plan, 0, initial, source=source, decode_ahead=decode_ahead)
            assert_that(trained.states, lambda results: {s: m for s, m, _ in results} == want or pytest.fail("models differ from the fold"))
            dead = (read["dead_letter"], trained.dead_letter) | beam.Flatten()
            assert_that(dead | beam.Map(lambda r: json.loads(r)["position"]), lambda got: list(got) == [777] or pytest.fail(f"dead letters {got}"), label="Dead")
