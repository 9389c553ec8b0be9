"""BatchPieceCoder round trips; ModelCache parses each model once."""

import numpy as np

import okl_core
from transforms.elements import BatchPiece, BatchPieceCoder, ModelCache, PieceRef, PieceRefCoder


def test_coder_round_trip_labels_targets_and_empty():
    coder = BatchPieceCoder()
    rng = np.random.default_rng(0)
    for y in (np.array([1, -1, 1], np.int32), np.array([0.5, -2.0, 3.25], np.float32)):
        piece = BatchPiece(3, 1, 7, 100, 104, rng.normal(size=(3, 5)).astype(np.float32), y, np.array([100, 101, 103]))
        data = coder.encode(piece)
        assert len(data) < 64 + 3 * 5 * 4 + 3 * 4 + 3 * 8  # header + raw arrays, nothing else
        back = coder.decode(data)
        assert (back.shard, back.round, back.seq, back.start, back.stop) == (3, 1, 7, 100, 104)
        for name in ("X", "y", "row"):
            np.testing.assert_array_equal(getattr(back, name), getattr(piece, name))
            assert getattr(back, name).dtype == getattr(piece, name).dtype or name == "row"
    empty = coder.decode(coder.encode(BatchPiece(0, 0, 0, 5, 9, np.zeros((0, 4), np.float32), np.zeros(0, np.int32), np.zeros(0, np.int64))))
    assert empty.X.shape == (0, 4) and len(empty) == 0 and coder.is_deterministic()


def test_model_cache_parses_once_per_value(monkeypatch):
    learner = okl_core.make_learner("fogd", n_inputs=3, n_components=4)
    data = okl_core.model_bytes(learner, learner.init())
    calls = []
    original = okl_core.model_from_bytes
    monkeypatch.setattr(okl_core, "model_from_bytes", lambda d, source, **kw: calls.append(source) or original(d, source, **kw))
    cache = ModelCache()
    first = cache.get(data, "a")
    assert cache.get(bytes(data), "b") is first and calls == ["a"]
    state, _ = learner.update(learner.init(), np.ones((1, 3), np.float32), np.array([1]))
    cache.get(okl_core.model_bytes(learner, state), "c")
    assert calls == ["a", "c"]


def test_piece_ref_coder_round_trip():
    ref = PieceRef(2, 1, 9, 4100, 4200, "/data/part-00001-of-00004.parquet", 3, 4096, 4096)
    assert PieceRefCoder().decode(PieceRefCoder().encode(ref)) == ref
