"""Small input files for the data tests: IDX pairs and LIBSVM text written from arrays."""

import gzip

import numpy as np

_TYPE_CODES = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09, np.dtype(">i2"): 0x0B, np.dtype(">i4"): 0x0C, np.dtype(">f4"): 0x0D, np.dtype(">f8"): 0x0E}


def idx_bytes(array) -> bytes:
    """IDX encoding of ``array`` (uint8 or big-endian types)."""
    array = np.asarray(array)
    if array.dtype.kind != "u" or array.dtype.itemsize != 1:
        array = array.astype(array.dtype.newbyteorder(">"))
    code = _TYPE_CODES[array.dtype]
    header = bytes([0, 0, code, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    return header + array.tobytes()


def write_idx(path, array, gz=False) -> str:
    data = idx_bytes(array)
    with (gzip.open if gz else open)(path, "wb") as f:
        f.write(data)
    return str(path)


def digits(n=50, seed=0, size=28):
    """Random uint8 'images' ``(n, size, size)`` and labels 0..9 (all classes present)."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, size, size), dtype=np.uint8)
    labels = (np.arange(n) % 10).astype(np.uint8)
    return images, labels


def write_idx_pair(directory, n=50, gz=True, seed=0):
    images, labels = digits(n, seed)
    suffix = ".gz" if gz else ""
    return (
        write_idx(directory / f"images-idx3-ubyte{suffix}", images, gz),
        write_idx(directory / f"labels-idx1-ubyte{suffix}", labels, gz),
        images,
        labels,
    )


def libsvm_text(X, y) -> str:
    """LIBSVM lines for dense ``X`` (zeros omitted) and labels ``y``."""
    lines = []
    for row, label in zip(X, y):
        pairs = " ".join(f"{j + 1}:{v!r}" for j, v in enumerate(row.tolist()) if v != 0)
        lines.append(f"{label:g} {pairs}".rstrip())
    return "\n".join(lines) + "\n"
