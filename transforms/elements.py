"""The elements that travel between okl's Beam steps, and their compact coders.

A :class:`BatchPiece` carries the good rows of stream positions ``[start, stop)`` that
belong to batch ``seq`` of ``shard`` in ``round`` (see :class:`okl_core.data.plan.StreamPlan`).
A batch is usually one piece; when it spans two Parquet row groups it arrives as several
pieces, which :class:`~transforms.train.TrainOnline` puts back together by position.
Rows rejected by :func:`okl_core.data.validate.check_rows` are not in the piece, but
their positions are: a batch is complete when its pieces cover its positions.

A :class:`PieceRef` names the same piece without its rows: the row group it lies in. The
training step reads referenced rows itself (``ReadShards(materialize=False)``), so the
rows never cross a shuffle.

Learner states travel as model-file bytes (:func:`okl_core.model_bytes`), never pickled.
The coders write a fixed header and the raw array bytes: encoding is a copy.
"""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
from apache_beam import coders

import okl_core

__all__ = ["BatchPiece", "BatchPieceCoder", "PieceRef", "PieceRefCoder", "StreamEvent", "StreamEventCoder", "ModelCache"]

_HEADER = struct.Struct("<qqqqqqqB")  # shard, round, seq, start, stop, n, d, y dtype
_Y_DTYPES = {0: np.dtype("<i4"), 1: np.dtype("<f4")}
_Y_CODES = {v: k for k, v in _Y_DTYPES.items()}


@dataclasses.dataclass(frozen=True, eq=False)
class BatchPiece:
    """Good rows of positions ``[start, stop)`` of batch ``seq`` of ``shard`` in ``round``.

    Attributes
    ----------
    shard, round, seq : int
    start, stop : int
        Stream positions covered (bad rows included).
    X : (n, d) float32
    y : (n,) int32 labels or float32 targets
    row : (n,) int64 ``row`` column of the rows
    """

    shard: int
    round: int
    seq: int
    start: int
    stop: int
    X: np.ndarray
    y: np.ndarray
    row: np.ndarray

    def __len__(self) -> int:
        return len(self.row)


class BatchPieceCoder(coders.Coder):
    """Header + raw little-endian arrays: ``X`` float32, ``y`` int32/float32, ``row`` int64."""

    def encode(self, piece: BatchPiece) -> bytes:
        X = np.ascontiguousarray(piece.X, dtype="<f4")
        y = np.ascontiguousarray(piece.y)
        y = y.astype("<f4" if y.dtype.kind == "f" else "<i4", copy=False)
        row = np.ascontiguousarray(piece.row, dtype="<i8")
        n, d = X.shape
        header = _HEADER.pack(piece.shard, piece.round, piece.seq, piece.start, piece.stop, n, d, _Y_CODES[y.dtype])
        return b"".join((header, X.tobytes(), y.tobytes(), row.tobytes()))

    def decode(self, data: bytes | memoryview) -> BatchPiece:
        shard, rnd, seq, start, stop, n, d, code = _HEADER.unpack_from(data)
        offset = _HEADER.size
        X = np.frombuffer(data, dtype="<f4", count=n * d, offset=offset).reshape(n, d)
        offset += 4 * n * d
        y = np.frombuffer(data, dtype=_Y_DTYPES[code], count=n, offset=offset)
        offset += 4 * n
        row = np.frombuffer(data, dtype="<i8", count=n, offset=offset)
        return BatchPiece(shard, rnd, seq, start, stop, X, y, row)

    def is_deterministic(self) -> bool:
        return True

    def to_type_hint(self):
        return BatchPiece

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))


coders.registry.register_coder(BatchPiece, BatchPieceCoder)

_REF_HEADER = struct.Struct("<qqqqqqqq")  # shard, round, seq, start, stop, group, group first position, group rows


@dataclasses.dataclass(frozen=True)
class PieceRef:
    """Positions ``[start, stop)`` of batch ``seq`` of ``shard`` in ``round``, by location.

    Attributes
    ----------
    shard, round, seq, start, stop : int
        As in :class:`BatchPiece`.
    path : str
        Parquet file.
    group : int
        Row group index in the file.
    group_first : int
        Stream position of the row group's first row.
    group_rows : int
        Rows in the row group.
    """

    shard: int
    round: int
    seq: int
    start: int
    stop: int
    path: str
    group: int
    group_first: int
    group_rows: int


class PieceRefCoder(coders.Coder):
    """Header of integers + the UTF-8 path."""

    def encode(self, ref: PieceRef) -> bytes:
        header = _REF_HEADER.pack(ref.shard, ref.round, ref.seq, ref.start, ref.stop, ref.group, ref.group_first, ref.group_rows)
        return header + ref.path.encode("utf-8")

    def decode(self, data: bytes) -> PieceRef:
        shard, rnd, seq, start, stop, group, first, rows = _REF_HEADER.unpack_from(data)
        return PieceRef(shard, rnd, seq, start, stop, bytes(data[_REF_HEADER.size :]).decode("utf-8"), group, first, rows)

    def is_deterministic(self) -> bool:
        return True

    def to_type_hint(self):
        return PieceRef

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))


coders.registry.register_coder(PieceRef, PieceRefCoder)


class ModelCache:
    """Parse model-file bytes once per distinct value (a side input repeats per element).

    The bytes are models this job produced (its initial model, a round's merge, a shard's
    state), so NaN or inf are accepted: a diverged shard is reported, it does not kill the job.
    """

    def __init__(self):
        self._data, self._parsed = None, None

    def get(self, data: bytes, source: str):
        """``(learner, state)`` of ``data``; errors name ``source``."""
        if data is not self._data and data != self._data:
            self._parsed = okl_core.model_from_bytes(data, source=source, allow_non_finite=True)
            self._data = data
        return self._parsed


_EVENT_HEADER = struct.Struct("<qqqB")  # seq, version, path bytes, kind (_VERSION, _PIECE or _FILE)
_VERSION, _PIECE, _FILE = 0, 1, 2


@dataclasses.dataclass(frozen=True, eq=False)
class StreamEvent:
    """What reaches a streaming shard: a batch of a streamed file, a whole file, or a newer model version.

    Versions travel to the shards as ordinary elements (not a side input): every runner
    delivers them, and a shard sees them in the order it processes its input. A whole-file
    event names a Parquet file that the shard reads and cuts into batches itself, so the
    rows never cross a shuffle (:class:`~transforms.streaming.StreamTrainOnline`).

    Attributes
    ----------
    path : str
        The streamed Parquet file (a batch) or the model version file (a version).
    seq : int
        Batch number within the file (0 for a version).
    version : int
        Model version number (0 for a batch).
    piece : BatchPiece or None
        The batch's good rows; None for a version or a whole file.
    whole_file : bool
        The event is the whole file ``path``, still to be read.
    """

    path: str
    seq: int = 0
    version: int = 0
    piece: BatchPiece | None = None
    whole_file: bool = False

    @property
    def is_version(self) -> bool:
        return self.piece is None and not self.whole_file


class StreamEventCoder(coders.Coder):
    """Header of integers and the event's kind + the UTF-8 path + the piece's :class:`BatchPieceCoder` bytes."""

    _pieces = BatchPieceCoder()

    def encode(self, event: StreamEvent) -> bytes:
        path = event.path.encode("utf-8")
        kind = _PIECE if event.piece is not None else _FILE if event.whole_file else _VERSION
        header = _EVENT_HEADER.pack(event.seq, event.version, len(path), kind)
        body = b"" if event.piece is None else self._pieces.encode(event.piece)
        return b"".join((header, path, body))

    def decode(self, data: bytes) -> StreamEvent:
        seq, version, n_path, kind = _EVENT_HEADER.unpack_from(data)
        start = _EVENT_HEADER.size
        path = bytes(data[start : start + n_path]).decode("utf-8")
        piece = self._pieces.decode(memoryview(data)[start + n_path :]) if kind == _PIECE else None  # no copy of the rows
        return StreamEvent(path, seq, version, piece, kind == _FILE)

    def is_deterministic(self) -> bool:
        return True

    def to_type_hint(self):
        return StreamEvent

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))


coders.registry.register_coder(StreamEvent, StreamEventCoder)
