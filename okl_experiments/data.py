"""Data sets of experiments: described by a :class:`DataSource`, loaded once per process.

A sweep or a reproduction never ships rows: a :class:`DataSource` names a loader
(``"module:function"``) and its arguments, and describes the data (features, task,
classes, rows) without loading it. Whatever process needs the rows -- a Dask worker, or
this process to resolve a ``"median"`` parameter -- calls :func:`cached_data`, which
loads each source at most once per process. Two loaders:

* :func:`load_okl_dataset` (:func:`okl_source`): an okl data set (Parquet shards +
  ``dataset.json``), all rows in row order;
* :func:`load_real` (:func:`real_source`): a public data set of :data:`DATASETS` (LIBSVM or
  IDX files under a data root), read by :func:`read_real_files` with okl_core's readers.

:meth:`DataSource.facts` is what learner parameters are derived from
(:mod:`okl_experiments.params`).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import importlib
import os
import threading
from typing import NamedTuple

import numpy as np

from okl_core.data.idx import read_idx_images
from okl_core.data.libsvm import read_libsvm
from okl_experiments.params import DataFacts

__all__ = [
    "ArrayData",
    "DataSource",
    "cached_data",
    "preload",
    "load_okl_dataset",
    "okl_source",
    "okl_sources",
    "RealData",
    "DATASETS",
    "read_real_files",
    "load_real",
    "real_source",
    "available",
    "loads_done",
]


class ArrayData(NamedTuple):
    """A data set in memory: float32 ``X``, labels/targets ``y``, task and class count."""

    X: np.ndarray
    y: np.ndarray
    task: str
    n_classes: int | None


@dataclasses.dataclass(frozen=True)
class DataSource:
    """Where a process loads a data set from: ``loader`` (``"module:function"``) and its args.

    The function is called as ``function(*args)`` and returns an :class:`ArrayData`. The
    remaining fields describe the data for the client (which builds learner parameters
    from them) without loading it.
    """

    loader: str
    args: tuple
    n_features: int
    task: str
    n_classes: int | None = None
    n_rows: int | None = None

    def load(self) -> ArrayData:
        """Call the loader (in the worker process) and check it matches the description."""
        module, _, func = self.loader.partition(":")
        data = getattr(importlib.import_module(module), func)(*self.args)
        if data.X.ndim != 2 or data.X.shape[1] != self.n_features or data.task != self.task:
            raise ValueError(f"{self.describe()}: loaded {data.task} data of shape {data.X.shape}, expected {self.task} with {self.n_features} features")
        return data

    def describe(self) -> dict:
        """JSON-ready identity of the source (recorded with the results)."""
        return {"loader": self.loader, "args": list(self.args)}

    def facts(self) -> DataFacts:
        """What parameters are derived from; the rows (for ``"median"``) load only when asked for."""
        return DataFacts(self.n_features, self.task, self.n_classes, self.n_rows,
                         rows=lambda: cached_data(self)[0].X, name=str(self.args[0]) if self.args else self.loader)


_CACHE: "collections.OrderedDict[DataSource, ArrayData]" = collections.OrderedDict()
_CACHE_SOURCES = 4  # sources kept per process (train + test of two sweeps)
_CACHE_LOCK = threading.Lock()  # workers with several threads: load once, not once per thread
_LOADS = [0]  # loads done by this process (a run reports whether it caused one)


def loads_done() -> int:
    """How many sources this process has loaded so far."""
    return _LOADS[0]


def cached_data(source: DataSource) -> tuple[ArrayData, bool]:
    """The source's data, loaded at most once per process; returns ``(data, loaded_now)``."""
    with _CACHE_LOCK:
        data = _CACHE.get(source)
        if data is not None:
            _CACHE.move_to_end(source)
            return data, False
        data = source.load()
        _LOADS[0] += 1
        _CACHE[source] = data
        while len(_CACHE) > _CACHE_SOURCES:
            _CACHE.popitem(last=False)
        return data, True


def preload(source: DataSource) -> int:
    """Load ``source`` into this process's cache; returns its row count.

    ``client.run(preload, source)`` loads a data set on every worker ahead of a sweep.
    """
    data, _ = cached_data(source)
    return len(data.y)


# -- okl data sets ------------------------------------------------------------------------
def load_okl_dataset(path: str, stamp: int | None = None) -> ArrayData:
    """Loader for okl data sets (directory or Parquet files): all rows in row order.

    ``stamp`` (the files' newest modification time) only makes a rewritten data set a
    different source, so that caches and ``--resume`` do not mix old and new rows.
    """
    from okl_core.data.layout import open_dataset

    ds = open_dataset(path)
    batch = ds.read_all()
    return ArrayData(batch.X, batch.y, ds.info.task, ds.info.n_classes)


def okl_source(path: str) -> DataSource:
    """A :class:`DataSource` for an okl data set, described from its metadata (no rows read)."""
    from okl_core.data.layout import open_dataset

    ds = open_dataset(path)
    n_classes = ds.info.n_classes
    if ds.info.task == "multiclass" and n_classes is None:
        raise ValueError(f"{path}: multiclass data set without a class list in dataset.json")
    files = [s.path for s in ds.shards] + [os.path.join(path, "dataset.json")] * os.path.isdir(path)
    stamp = max(os.stat(f).st_mtime_ns for f in files)
    return DataSource(
        loader="okl_experiments.data:load_okl_dataset",
        args=(os.path.abspath(os.fspath(path)), stamp),
        n_features=ds.info.n_features,
        task=ds.info.task,
        n_classes=n_classes,
        n_rows=ds.info.n_rows,
    )


# -- public data files ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class RealData:
    """A data set built from public files.

    Attributes
    ----------
    kind : {'libsvm', 'idx'}
    files : tuple of str
        Relative to the data root. LIBSVM: files concatenated in order. IDX: (images, labels).
    n_features, task, n_classes : the data's shape and task.
    feature_map : {'none', 'divide255'}
        ``divide255``: pixels to [0, 1] (MNIST, as LIBSVM's mnist.scale).
    """

    kind: str
    files: tuple
    n_features: int
    task: str
    n_classes: int | None = None
    feature_map: str = "none"
    n_rows: int | None = None


DATASETS = {
    "a9a": RealData("libsvm", ("a9a/a9a",), 123, "binary", n_rows=32561),
    "a9a.t": RealData("libsvm", ("a9a/a9a.t",), 123, "binary", n_rows=16281),
    "a9a+a9a.t": RealData("libsvm", ("a9a/a9a", "a9a/a9a.t"), 123, "binary", n_rows=48842),
    "mnist-test": RealData("idx", ("mnist/t10k-images-idx3-ubyte.gz", "mnist/t10k-labels-idx1-ubyte.gz"), 784,
                           "multiclass", n_classes=10, feature_map="divide255", n_rows=10000),
}
"""Name -> files and preprocessing of the public data sets the reproductions use."""


def read_real_files(kind: str, paths: list[str], n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Read public data files into dense ``(X float32, y int32)``: the one place files are parsed.

    LIBSVM (``kind='libsvm'``): each file with :func:`okl_core.data.libsvm.read_libsvm` and
    ``n_features`` columns, rows concatenated. IDX (``'idx'``): ``paths = (images, labels)``
    with :func:`okl_core.data.idx.read_idx_images`, images flattened to ``n_features``
    columns of raw 0-255 values (a data set's ``feature_map`` scales them).
    """
    if kind == "libsvm":
        parts = [read_libsvm(path, n_features=n_features) for path in paths]
        return np.concatenate([p[0] for p in parts]).astype(np.float32), np.concatenate([p[1] for p in parts]).astype(np.int32)
    if kind == "idx":
        images, labels = read_idx_images(*paths)
        X = images.reshape(len(images), -1).astype(np.float32)
        if X.shape[1] != n_features:
            raise ValueError(f"{paths[0]}: images have {X.shape[1]} pixels, expected {n_features}")
        return X, labels.astype(np.int32)
    raise ValueError(f"unknown data file kind {kind!r}")


@functools.lru_cache(maxsize=4)
def load_real(name: str, data_root: str) -> ArrayData:
    """Data set ``name`` of :data:`DATASETS` from ``data_root`` (a DataSource loader)."""
    spec = DATASETS[name]
    paths = [os.path.join(data_root, f) for f in spec.files]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise FileNotFoundError(f"data set {name!r} needs {missing}")
    X, y = read_real_files(spec.kind, paths, spec.n_features)
    if spec.feature_map == "divide255":
        X = X / np.float32(255.0)
    if spec.task == "binary" and not np.isin(y, (-1, 1)).all():
        raise ValueError(f"data set {name!r}: binary labels must be -1/+1, got {np.unique(y)[:5]}")
    return ArrayData(np.ascontiguousarray(X, dtype=np.float32), y, spec.task, spec.n_classes)


def real_source(name: str, data_root: str) -> DataSource:
    """A :class:`DataSource` for data set ``name`` (processes load it with :func:`load_real`)."""
    spec = DATASETS[name]
    return DataSource("okl_experiments.data:load_real", (name, os.path.abspath(data_root)), spec.n_features,
                      spec.task, spec.n_classes, spec.n_rows)


def available(name: str, data_root: str) -> bool:
    """Whether all files of data set ``name`` are under ``data_root``."""
    return all(os.path.exists(os.path.join(data_root, f)) for f in DATASETS[name].files)


def okl_sources(train: str, test: str | None = None) -> tuple[DataSource, DataSource | None]:
    """Sources of a training set and an optional test set, checked to hold the same kind of rows."""
    train_source = okl_source(train)
    test_source = okl_source(test) if test else None
    if test_source is not None and (test_source.n_features, test_source.task) != (train_source.n_features, train_source.task):
        raise ValueError(f"--test {test}: {test_source.task} with {test_source.n_features} features, "
                         f"but --input is {train_source.task} with {train_source.n_features}")
    return train_source, test_source
