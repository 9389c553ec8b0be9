"""BatchPieceCoder, PieceRefCoder and StreamEventCoder round trips; ModelCache parses each model once."""

import numpy as np

import okl_core
from transforms.elements import BatchPiece, BatchPieceCoder, ModelCache, PieceRef, PieceRefCoder, StreamEvent, StreamEventCoder


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


def test_stream_event_coder_keeps_the_kind_of_event():
    coder = StreamEventCoder()
    piece = BatchPiece(1, 0, 2, 10, 12, np.ones((2, 3), np.float32), np.array([1, -1], np.int32), np.array([10, 11]))
    batch, version, whole = StreamEvent("a.parquet", 2, piece=piece), StreamEvent("model-v000003.npz", version=3), StreamEvent("b.parquet", whole_file=True)
    back = [coder.decode(coder.encode(e)) for e in (batch, version, whole)]
    assert [(e.path, e.seq, e.version, e.is_version, e.whole_file, e.piece is None) for e in back] == [
        ("a.parquet", 2, 0, False, False, False), ("model-v000003.npz", 0, 3, True, False, True), ("b.parquet", 0, 0, False, True, True)
    ]
    np.testing.assert_array_equal(back[0].piece.X, piece.X)
