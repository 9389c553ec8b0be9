"""Reading input files for the converters: decompression, clear errors, rejects, progress.

Every converter in :mod:`okl_core.data` reads its input through :func:`open_source`, which
recognises gzip and bzip2 by their magic bytes (not the file name), and turns a truncated or
corrupt compressed stream into a :class:`DataFormatError` that names the file. Bad rows are
either an error naming the file and line, or -- when the caller asks to skip them -- written
to a :class:`RejectLog` (``rejects.csv`` inside the data set directory) with the reason.
Converters report progress to a :class:`Progress` sink; the CLI draws it, library code never
prints.
"""

from __future__ import annotations

import bz2
import csv
import dataclasses
import gzip
import io
import lzma
import os
import zlib
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, TextIO

import numpy as np

from okl_core.labels import FLOAT32_LIMIT

if TYPE_CHECKING:
    from okl_core.data.layout import DatasetInfo

__all__ = [
    "DataFormatError",
    "Progress",
    "NullProgress",
    "RejectLog",
    "one_line_error",
    "ConversionSummary",
    "REJECTS_FILE",
    "open_source",
    "open_text",
    "compression_of",
    "parse_finite",
    "FLOAT32_LIMIT",
    "finite32",
    "no_rows",
    "not_utf8",
]

REJECTS_FILE = "rejects.csv"

_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz"}
_DECOMPRESSION_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError)


class DataFormatError(ValueError):
    """An input file is malformed; the message names the file and, where known, the line."""


class Progress(Protocol):
    """Where converters report progress (the CLI draws a bar; tests pass nothing)."""

    def start(self, total: int | None, unit: str, label: str) -> None:
        """Begin a phase of ``total`` units (None when unknown)."""

    def update(self, done: int) -> None:
        """Units done so far in the current phase (absolute, not an increment)."""

    def finish(self) -> None:
        """End the current phase."""


class NullProgress:
    """A :class:`Progress` that shows nothing."""

    def start(self, total, unit, label):  # noqa: D102 - protocol method
        pass

    def update(self, done):  # noqa: D102
        pass

    def finish(self):  # noqa: D102
        pass


def parse_finite(text: str, what: str) -> tuple[float | None, str | None]:
    """``(value, None)`` if ``text`` is a finite number, else ``(None, reason)``.

    Reasons read ``"{what}: missing value"``, ``"{what}: 'abc' is not a number"`` or
    ``"{what}: 'nan' is not finite"`` -- the wording of every converter's bad-row message.
    A number beyond float32's range (``1e39``) is not finite either: it would be stored as inf.
    """
    if not text:
        return None, f"{what}: missing value"
    try:
        value = float(text)
    except ValueError:
        return None, f"{what}: {text!r} is not a number"
    if not abs(value) < FLOAT32_LIMIT:  # NaN, inf, or inf once stored as float32
        return None, f"{what}: {text!r} is not finite"
    return value, None


def finite32(values) -> np.ndarray:
    """Which of the float64 ``values`` stay finite as float32 (the stored type): not NaN, inf or ``|x| >= FLOAT32_LIMIT``."""
    return np.abs(np.asarray(values, dtype=np.float64)) < FLOAT32_LIMIT


def compression_of(path: str) -> str | None:
    """Return ``'gzip'``, ``'bzip2'``, ``'xz'`` or None (plain) from the file's first bytes."""
    with open(path, "rb") as f:
        head = f.read(6)
    for magic, kind in _MAGIC.items():
        if head.startswith(magic):
            return kind
    return None


class _CheckedStream(io.RawIOBase):
    """A decompressing reader whose errors name the file; counts compressed bytes read."""

    def __init__(self, path: str, raw, stream, kind: str | None):
        self.path, self._raw, self._stream, self.kind = path, raw, stream, kind

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            data = self._stream.read(len(buffer))
        except _DECOMPRESSION_ERRORS as err:
            what = f"{self.kind} data" if self.kind else "file"
            raise DataFormatError(f"{self.path}: corrupt or truncated {what} ({err})") from None
        buffer[: len(data)] = data
        return len(data)

    def compressed_position(self) -> int:
        """Bytes of the file on disk consumed so far (for progress)."""
        try:
            return self._raw.tell()
        except (OSError, ValueError):
            return 0

    def close(self) -> None:
        if not self.closed:
            try:
                self._stream.close()
            finally:
                self._raw.close()
        super().close()


def open_source(path, buffer_size: int = 1 << 20) -> io.BufferedReader[_CheckedStream]:
    """Open ``path`` for binary reading, decompressing gzip/bzip2/xz transparently.

    Returns a buffered reader; ``reader.raw.compressed_position()`` gives the bytes of the
    file read so far and ``reader.raw.kind`` the compression (None for plain files). Read
    errors of a corrupt or truncated stream raise :class:`DataFormatError` naming the file.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    kind = compression_of(path)
    raw = open(path, "rb")
    stream: io.BufferedIOBase | BinaryIO
    try:
        if kind == "gzip":
            stream = gzip.GzipFile(fileobj=raw, mode="rb")
        elif kind == "bzip2":
            stream = bz2.BZ2File(raw, mode="rb")
        elif kind == "xz":
            stream = lzma.LZMAFile(raw, mode="rb")
        else:
            stream = raw
    except BaseException:
        raw.close()
        raise
    return io.BufferedReader(_CheckedStream(path, raw, stream, kind), buffer_size=buffer_size)


def open_text(path) -> io.TextIOWrapper[io.BufferedReader[_CheckedStream]]:
    """Open ``path`` (compressed or not, :func:`open_source`) as UTF-8 text for the csv module (a BOM is dropped)."""
    return io.TextIOWrapper(open_source(path), encoding="utf-8-sig", newline="")


class RejectLog:
    """Rows a converter skipped, written as CSV (header ``columns``) when the first arrives.

    Parameters
    ----------
    directory : str or None
        Where ``rejects.csv`` goes (the data set's staging directory, so the file appears
        atomically together with the data set); None only counts (a first pass).
    columns : sequence of str
        Column names, e.g. ``("line", "reason", "text")``.
    """

    def __init__(self, directory: str | None, columns):
        self.path = os.path.join(directory, REJECTS_FILE) if directory is not None else None
        self.columns = tuple(columns)
        self.count = 0
        self.first: str | None = None  # the first rejected row, "line 4: reason" (for errors)
        self._file: TextIO | None = None
        self._writer: Any = None  # a csv writer, made with the file

    def add(self, **fields) -> None:
        """Record one rejected row; ``fields`` are the columns."""
        if self._writer is None and self.path is not None:
            self._file = open(self.path, "w", newline="", encoding="utf-8")
            self._writer = csv.writer(self._file)
            self._writer.writerow(self.columns)
        if self._writer is not None:
            self._writer.writerow([_short(fields.get(c, "")) for c in self.columns])
        if self.first is None:
            where = ", ".join(f"{c} {fields[c]}" for c in self.columns if c in ("file", "row", "line") and c in fields)
            self.first = f"{where}: {fields.get('reason', '')}"
        self.count += 1

    def close(self) -> dict | None:
        """Close the file; return ``{"file", "count"}`` for ``dataset.json`` (None if empty)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        return {"file": REJECTS_FILE, "count": self.count} if self.count else None


def one_line_error(err: BaseException) -> str:
    """The error's message; an OS error as ``FILE: what`` (Python's own form is ``[Errno 2] No such file or directory: 'FILE'``)."""
    if isinstance(err, OSError) and err.errno is not None and err.filename:
        return f"{err.filename}: {(err.strerror or str(err)).lower()}"
    return str(err)


def not_utf8(path: str, err: UnicodeDecodeError) -> DataFormatError:
    """The error for bytes that are not UTF-8. No line number: the decoder reads ahead of the
    CSV reader, so the line being parsed is not where the byte is."""
    return DataFormatError(f"{path}: not UTF-8 text (byte 0x{err.object[err.start]:02x} is not valid UTF-8); save the file as UTF-8")


def no_rows(path: str, n_rejected: int = 0, first: str | None = None) -> DataFormatError:
    """The error of a conversion left with no row to write: none in ``path``, or all rejected.

    Raised before the writer closes, so nothing is written (``rejects.csv`` goes with the
    staging directory; ``first`` names the first rejected row instead).
    """
    if not n_rejected:
        return DataFormatError(f"no data rows in {path}")
    hint = f"the first: {first}" if first else "run without --skip_bad_rows to stop at the first, with its line and reason"
    return DataFormatError(f"{path}: all {n_rejected:,} rows were rejected ({hint}); nothing was written")


def _short(value, limit: int = 200) -> str:
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclasses.dataclass
class ConversionSummary:
    """What a conversion produced, for the CLI's one-line summary.

    Attributes
    ----------
    info : DatasetInfo
        The written data set's description.
    path : str
        The data set directory.
    n_rejected : int
        Rows skipped (see ``rejects.csv`` in the directory).
    seconds : float
        Wall time of the conversion.
    bytes_read : int
        Input bytes (on disk) read in the final pass; 0 for generated data.
    notes : list of str
        Extra facts worth one phrase in the summary (e.g. truncated molecules).
    """

    info: DatasetInfo
    path: str
    n_rejected: int = 0
    seconds: float = 0.0
    bytes_read: int = 0
    notes: list = dataclasses.field(default_factory=list)

    def line(self) -> str:
        """One line: rows, features, task, classes, shards, rejects, time and rate."""
        info = self.info
        task = info.task
        if info.classes is not None and task != "regression":
            shown = info.classes if len(info.classes) <= 10 else info.classes[:10] + ["..."]
            task += f", classes {shown}"
        rate = f"{info.n_rows / self.seconds:,.0f} rows/s" if self.seconds > 0 else ""
        if self.bytes_read and self.seconds > 0:
            rate += f", {self.bytes_read / 1e6 / self.seconds:.1f} MB/s"
        parts = [
            f"wrote {self.path}: {info.n_rows:,} rows x {info.n_features:,} features ({task})",
            f"{len(info.shards)} shard{'s' if len(info.shards) != 1 else ''}",
            f"{self.n_rejected:,} rejected" + (" (rejects.csv)" if self.n_rejected else ""),
            *self.notes,
            f"{self.seconds:.1f} s" + (f" ({rate})" if rate else ""),
        ]
        return ", ".join(parts)
