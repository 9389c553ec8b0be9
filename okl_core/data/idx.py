"""IDX files (the MNIST distribution format): parsing, validation, and conversion.

An IDX file is a big-endian header -- two zero bytes, a type code, the number of
dimensions ``k``, then ``k`` uint32 sizes -- followed by the array in C order. MNIST
images are ``ubyte`` ``(n, 28, 28)`` (magic 2051 = 0x00000803), labels ``ubyte`` ``(n,)``
(magic 2049 = 0x00000801). Files may be gzip-compressed (recognised by content).

:func:`read_idx` returns an image/label pair as ``X`` float32 in [0, 1] (pixels / 255,
one row per image, row-major pixels) and ``y`` int64; :func:`convert_mnist` writes the pair
as a multiclass data set with ``classes`` = the digits 0..9.
"""

from __future__ import annotations

import os
import time

import numpy as np

from okl_core.data.layout import DEFAULT_COMPRESSION, DatasetWriter
from okl_core.data.sources import ConversionSummary, DataFormatError, NullProgress, open_source

__all__ = ["read_idx_array", "read_idx_images", "read_idx", "images_to_rows", "convert_mnist", "IDX_TYPES"]

IDX_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
"""IDX type code -> element dtype (big-endian)."""

_MAX_ELEMENTS = 1 << 34  # refuse absurd headers before allocating


def read_idx_array(path, expect_ndim: int | None = None) -> np.ndarray:
    """Read one IDX file (plain or gzip) into an array of its own dtype and shape.

    Parameters
    ----------
    path : str
    expect_ndim : int, optional
        Required number of dimensions (3 for images, 1 for labels).

    Raises
    ------
    DataFormatError
        Wrong magic, unexpected dimensions, or a body shorter or longer than the header says;
        the message names the file.
    """
    path = os.fspath(path)
    with open_source(path) as f:
        head = f.read(4)
        if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] not in IDX_TYPES:
            raise DataFormatError(f"{path}: not an IDX file (magic bytes {head.hex() or 'missing'}; expected 0000 + type + ndim)")
        dtype, ndim = IDX_TYPES[head[2]], head[3]
        if expect_ndim is not None and ndim != expect_ndim:
            raise DataFormatError(f"{path}: IDX file has {ndim} dimensions, expected {expect_ndim} (magic {int.from_bytes(head, 'big')})")
        dims_raw = f.read(4 * ndim)
        if len(dims_raw) < 4 * ndim:
            raise DataFormatError(f"{path}: IDX header truncated")
        shape = tuple(int(v) for v in np.frombuffer(dims_raw, dtype=">u4"))
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if count > _MAX_ELEMENTS:
            raise DataFormatError(f"{path}: IDX header claims {shape}, too large")
        nbytes = count * dtype.itemsize
        body = f.read(nbytes)
        if len(body) < nbytes:
            raise DataFormatError(f"{path}: IDX body truncated: header {shape} needs {nbytes} bytes, found {len(body)}")
        if f.read(1):
            raise DataFormatError(f"{path}: IDX file has data beyond the {shape} array its header declares")
    return np.frombuffer(body, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


def read_idx_images(images_path, labels_path) -> tuple[np.ndarray, np.ndarray]:
    """Read and cross-check an IDX image/label pair: uint8 images ``(n, h, w)``, int64 labels."""
    images = read_idx_array(images_path, expect_ndim=3)
    labels = read_idx_array(labels_path, expect_ndim=1)
    if images.dtype != np.uint8:
        raise DataFormatError(f"{images_path}: images must be unsigned bytes (IDX type 0x08), got {images.dtype}")
    if len(images) != len(labels):
        raise DataFormatError(f"image/label count mismatch: {images_path} has {len(images)} images, {labels_path} has {len(labels)} labels")
    if labels.dtype.kind == "f" and not np.all(labels == np.round(labels)):
        raise DataFormatError(f"{labels_path}: labels must be integers")
    return images, labels.astype(np.int64)


def read_idx(images_path, labels_path) -> tuple[np.ndarray, np.ndarray]:
    """Read an IDX image/label pair into memory.

    Returns
    -------
    X : ndarray of float32, shape (n, h * w)
        Pixels / 255, images flattened row-major.
    y : ndarray of int64, shape (n,)
        Labels as stored (0..9 for MNIST).
    """
    images, labels = read_idx_images(images_path, labels_path)
    return images_to_rows(images), labels


def images_to_rows(images: np.ndarray) -> np.ndarray:
    """uint8 images ``(n, h, w)`` -> float32 rows in [0, 1] ``(n, h * w)``."""
    return (images.reshape(len(images), -1).astype(np.float32) / np.float32(255.0)).astype(np.float32)


def convert_mnist(images_path, labels_path, out, *, rows_per_shard=65536, row_group_rows=4096, overwrite=False, name=None, progress=None, batch_rows=8192, compression=DEFAULT_COMPRESSION) -> ConversionSummary:
    """Convert an IDX image/label pair into a multiclass data set at ``out``.

    The classes are always the digits ``0..9`` and ``y`` is the digit, whichever digits the
    file holds: a training and a test set then share their codes. A label outside ``0..9``
    and a file without items are errors naming the file (and the item).
    """
    started = time.perf_counter()
    progress = progress or NullProgress()
    images, labels = read_idx_images(images_path, labels_path)
    _check_digits(images_path, labels_path, labels)
    y = labels
    info = {
        "classes": list(range(10)),
        "source": f"idx:{os.path.abspath(images_path)},{os.path.abspath(labels_path)}",
        "extra": {"image_shape": list(images.shape[1:]), "pixel_scale": "x / 255"},
    }
    if name:
        info["name"] = name
    d = int(np.prod(images.shape[1:]))
    progress.start(len(images), "rows", "mnist")
    with DatasetWriter(out, d, "multiclass", rows_per_shard=rows_per_shard, row_group_rows=row_group_rows, overwrite=overwrite, compression=compression, **info) as writer:
        for start in range(0, len(images), batch_rows):
            writer.write(images_to_rows(images[start : start + batch_rows]), y[start : start + batch_rows])
            progress.update(writer.n_rows)
    progress.finish()
    nbytes = os.path.getsize(images_path) + os.path.getsize(labels_path)
    return ConversionSummary(writer.info, writer.path, seconds=time.perf_counter() - started, bytes_read=nbytes)


def _check_digits(images_path, labels_path, labels: np.ndarray) -> None:
    """Refuse an empty pair and a label that is not a digit 0..9 (naming the file and the item)."""
    if len(labels) == 0:
        raise DataFormatError(f"no data rows in {images_path}")
    bad = np.flatnonzero((labels < 0) | (labels > 9))
    if len(bad):
        i = int(bad[0])
        raise DataFormatError(f"{labels_path}, item {i}: label {int(labels[i])} is not a digit 0..9")
