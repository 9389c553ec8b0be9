"""Downloading public data sets to a local cache (atomic, checksummed when known).

:func:`download` streams a URL (``http(s)://`` or ``file://``) into the cache directory
through a temporary file that is renamed into place only when complete and, where a
checksum is known, verified; a cached file is reused. Several URLs may be given (the
official one first, then mirrors): each is tried in turn. :data:`KNOWN_FILES` lists the
official locations of the MNIST IDX files and of LIBSVM data sets the papers use.

The cache directory is ``$OKL_CACHE`` or ``~/.cache/okl``. Tests never use the network.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request

__all__ = ["KNOWN_FILES", "MNIST_SPLITS", "LIBSVM_NAMES", "default_cache_dir", "download", "download_known"]

_MNIST_URLS = (
    "https://yann.lecun.com/exdb/mnist/",  # the official site
    "https://ossci-datasets.s3.amazonaws.com/mnist/",  # mirrors of the same files
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)
_LIBSVM = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/"


def _mnist(name, checksum):
    return {"urls": tuple(base + name for base in _MNIST_URLS), "checksum": checksum}


KNOWN_FILES = {
    "train-images-idx3-ubyte.gz": _mnist("train-images-idx3-ubyte.gz", "md5:f68b3c2dcbeaaa9fbdd348bbdeb94873"),
    "train-labels-idx1-ubyte.gz": _mnist("train-labels-idx1-ubyte.gz", "md5:d53e105ee54ea40749a09fcbcd1e9432"),
    "t10k-images-idx3-ubyte.gz": _mnist("t10k-images-idx3-ubyte.gz", "sha256:8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"),
    "t10k-labels-idx1-ubyte.gz": _mnist("t10k-labels-idx1-ubyte.gz", "sha256:f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"),
    "a9a": {"urls": (_LIBSVM + "binary/a9a",), "checksum": "sha256:f5d5ffd8d865ff41328e7ee043e4b020816914ff6843ff15b98905ddbedce906"},
    "a9a.t": {"urls": (_LIBSVM + "binary/a9a.t",), "checksum": "sha256:4af3129b1b09137562c49d1e2c58f48af185f4b3ca130cd8ee2fbe10e7eb69b8"},
    "mnist8m.bz2": {"urls": (_LIBSVM + "multiclass/mnist8m.bz2",), "checksum": None},
    "covtype.libsvm.binary.bz2": {"urls": (_LIBSVM + "binary/covtype.libsvm.binary.bz2",), "checksum": None},
}
"""File name -> official URL(s) and checksum (``md5:`` or ``sha256:``; None when unknown)."""

MNIST_SPLITS = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
"""MNIST split -> (images file, labels file) in :data:`KNOWN_FILES`."""

LIBSVM_NAMES = {"a9a": "a9a", "a9a.t": "a9a.t", "mnist8m": "mnist8m.bz2", "covtype.binary": "covtype.libsvm.binary.bz2"}
"""Short names accepted by ``prepare libsvm --download``."""


def default_cache_dir() -> str:
    """``$OKL_CACHE`` or ``~/.cache/okl``."""
    return os.environ.get("OKL_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "okl")


def _hasher(checksum: str | None):
    if checksum is None:
        return None, None
    algorithm, _, digest = checksum.partition(":")
    if algorithm not in ("md5", "sha256") or not digest:
        raise ValueError(f"checksum must be 'md5:<hex>' or 'sha256:<hex>', got {checksum!r}")
    return hashlib.new(algorithm), digest.lower()


def _file_matches(path: str, checksum: str | None) -> bool:
    hasher, digest = _hasher(checksum)
    if hasher is None:
        return True
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest() == digest


def download(urls, filename: str | None = None, *, cache_dir: str | None = None, checksum: str | None = None, progress=None, timeout: float = 60.0) -> str:
    """Fetch ``urls`` (one URL or several alternatives) into the cache; return the path.

    Parameters
    ----------
    urls : str or sequence of str
        Tried in order until one succeeds.
    filename : str, optional
        Name in the cache (default: the last part of the first URL).
    checksum : str, optional
        ``md5:<hex>`` or ``sha256:<hex>``; a download that does not match is discarded.
    progress : Progress, optional
        Receives bytes downloaded.

    Raises
    ------
    OSError
        Every URL failed (the message lists each failure).
    """
    urls = (urls,) if isinstance(urls, str) else tuple(urls)
    filename = filename or urls[0].rstrip("/").rsplit("/", 1)[-1]
    cache_dir = cache_dir or default_cache_dir()
    os.makedirs(cache_dir, exist_ok=True)
    target = os.path.join(cache_dir, filename)
    if os.path.exists(target) and _file_matches(target, checksum):
        return target
    failures = []
    for url in urls:
        try:
            _fetch(url, target, checksum, progress, timeout)
            return target
        except (urllib.error.URLError, OSError, ValueError) as err:
            failures.append(f"{url}: {err}")
    raise OSError(f"could not download {filename}:\n  " + "\n  ".join(failures))


def _fetch(url, target, checksum, progress, timeout) -> None:
    hasher, digest = _hasher(checksum)
    fd, tmp = tempfile.mkstemp(prefix=".download-", dir=os.path.dirname(target))
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
            total = response.headers.get("Content-Length")
            if progress is not None:
                progress.start(int(total) if total and total.isdigit() else None, "B", f"download {os.path.basename(target)}")
            done = 0
            for block in iter(lambda: response.read(1 << 20), b""):
                out.write(block)
                if hasher is not None:
                    hasher.update(block)
                done += len(block)
                if progress is not None:
                    progress.update(done)
            if progress is not None:
                progress.finish()
        if hasher is not None and hasher.hexdigest() != digest:
            raise ValueError(f"checksum mismatch (got {hasher.hexdigest()}, expected {digest})")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def download_known(filename: str, *, cache_dir: str | None = None, progress=None) -> str:
    """Download one of :data:`KNOWN_FILES` (official URL first) and verify its checksum."""
    if filename not in KNOWN_FILES:
        raise ValueError(f"unknown file {filename!r}; known: {sorted(KNOWN_FILES)}")
    entry = KNOWN_FILES[filename]
    return download(entry["urls"], filename, cache_dir=cache_dir, checksum=entry["checksum"], progress=progress)
