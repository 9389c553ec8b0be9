"""Synthetic data sets generated from a seed (no download): the built-in demo and tests.

* :func:`dsg_regression` -- the DSG paper's synthetic regression (spec/dsg.md):
  ``y = cos(0.5 pi ||x||) exp(-0.1 pi ||x||) + 0.1 e`` with ``x`` uniform in
  ``[-5, 5]^2`` and ``e`` standard normal. ``python -m pipelines.train`` trains on it
  when no ``--input`` is given.
* :func:`gaussian_blobs` -- a multiclass stream: ``n_classes`` Gaussian clusters in
  ``n_features`` dimensions; ``sort_by_label=True`` orders the stream by class (a drifting
  stream whose contiguous parts hold different classes).

Rows are generated in chunks of :data:`CHUNK_ROWS`; chunk ``c`` draws its inputs (or
labels) from the generator keyed by ``(seed, 2 c)`` and its noise from ``(seed, 2 c + 1)``
(:func:`okl_core.random.block_bit_generator`), so the first ``n`` rows are the same
whatever the total, and generation streams with bounded memory. Draws
use the library's platform-stable transforms; the regression target then applies numpy's
``cos``/``exp``, which may differ in the last bit between CPUs.
"""

from __future__ import annotations

import os
from typing import Iterator

import numpy as np

from okl_core.data.layout import INFO_FILE, DatasetInfo, DatasetWriter
from okl_core.learners.base import check_int, check_nonnegative, check_seed
from okl_core.random import block_bit_generator, standard_normal, uniform_open

__all__ = ["CHUNK_ROWS", "dsg_regression", "iter_dsg_regression", "gaussian_blobs", "write_synthetic"]

CHUNK_ROWS = 65536
_BLOB_CENTERS_KEY = 2**63  # block key of the blob centers (chunks use small keys)


def iter_dsg_regression(n_rows: int, seed: int = 0, noise: float = 0.1) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(X, y)`` chunks of the DSG synthetic regression, ``n_rows`` (>= 1) in total.

    The arguments are checked at the call, not at the first chunk (a plain function
    returning a generator), so :func:`write_synthetic` refuses them before creating anything.
    """
    check_int("n_rows", n_rows, 1)
    check_seed("seed", seed)
    check_nonnegative("noise", noise)
    return _dsg_chunks(n_rows, seed, noise)


def _dsg_chunks(n_rows: int, seed: int, noise: float) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The chunks of :func:`iter_dsg_regression`, its arguments already checked."""
    for chunk, start in enumerate(range(0, n_rows, CHUNK_ROWS)):
        m = min(CHUNK_ROWS, int(n_rows) - start)
        X = 10.0 * uniform_open(block_bit_generator(seed, 2 * chunk).random_raw(2 * m)).reshape(m, 2) - 5.0
        radius = np.sqrt((X * X).sum(axis=1))
        e = standard_normal(block_bit_generator(seed, 2 * chunk + 1), m)
        y = np.cos(0.5 * np.pi * radius) * np.exp(-0.1 * np.pi * radius) + noise * e
        yield X.astype(np.float32), y.astype(np.float32)


def dsg_regression(n_rows: int, seed: int = 0, noise: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """The DSG synthetic regression as arrays: ``X`` ``(n, 2)`` float32, ``y`` ``(n,)`` float32."""
    parts = list(iter_dsg_regression(n_rows, seed, noise))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def gaussian_blobs(
    n_rows: int, seed: int = 0, n_classes: int = 8, n_features: int = 10, spread: float = 1.0, sort_by_label: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Multiclass Gaussian clusters: centers ``N(0, I)`` (fixed by ``seed``), rows ``center + spread N(0, I)``.

    Returns
    -------
    X : (n_rows, n_features) float32
    y : (n_rows,) int32 labels in ``0..n_classes-1``, uniform

    Raises
    ------
    ValueError
        ``n_rows`` or ``n_features`` below 1, ``n_classes`` below 2 (a multiclass stream),
        a seed outside ``[0, 2**64)`` or a negative ``spread``.
    """
    check_int("n_rows", n_rows, 1)
    check_int("n_classes", n_classes, 2)
    check_int("n_features", n_features, 1)
    check_seed("seed", seed)
    check_nonnegative("spread", spread)
    centers = standard_normal(block_bit_generator(seed, _BLOB_CENTERS_KEY), n_classes * n_features).reshape(n_classes, n_features)
    X_parts, y_parts = [], []
    for chunk, start in enumerate(range(0, int(n_rows), CHUNK_ROWS)):
        m = min(CHUNK_ROWS, int(n_rows) - start)
        y = np.minimum((uniform_open(block_bit_generator(seed, 2 * chunk).random_raw(m)) * n_classes).astype(np.int32), n_classes - 1)
        X = centers[y] + spread * standard_normal(block_bit_generator(seed, 2 * chunk + 1), m * n_features).reshape(m, n_features)
        X_parts.append(X.astype(np.float32))
        y_parts.append(y)
    X, y = np.concatenate(X_parts), np.concatenate(y_parts)
    if sort_by_label:
        order = np.argsort(y, kind="stable")
        X, y = X[order], y[order]
    return X, y


def write_synthetic(
    path, n_rows: int, seed: int = 0, rows_per_shard: int = 65536, row_group_rows: int = 4096, overwrite: bool = False, name: str = "dsg_synthetic"
) -> DatasetInfo:
    """Write the DSG synthetic regression as an okl data set at ``path`` (streaming); ``n_rows`` >= 1."""
    chunks = iter_dsg_regression(n_rows, seed)  # checks the arguments before anything is created
    lo, hi = np.inf, -np.inf
    with DatasetWriter(
        path, 2, "regression", rows_per_shard=rows_per_shard, row_group_rows=row_group_rows, overwrite=overwrite, name=name,
        source="okl_core.data.synthetic.dsg_regression", generator_seed=int(seed),
        extra={"generator": "dsg_regression", "noise": 0.1},
    ) as writer:
        for X, y in chunks:
            writer.write(X, y)
            lo, hi = min(lo, float(y.min())), max(hi, float(y.max()))
        writer.set_info(target_range=[lo, hi])
    return DatasetInfo.from_file(os.path.join(os.fspath(path), INFO_FILE))
