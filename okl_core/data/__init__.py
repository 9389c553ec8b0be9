"""Data sets for okl: the Parquet layout, converters, generators, and in-memory readers.

Layout and reader (every pipeline reads this)::

    ds = open_dataset("out/mnist")          # directory, Parquet file or glob
    for batch in ds.iter_batches():         # Batch(X float32, y, row), row order, by shard
        ...

In-memory readers for tests and reproductions::

    X, y = read_idx(images_path, labels_path)   # X float32 (n, 784) in [0, 1], y int64
    X, y = read_libsvm(path, n_features=None)   # X float32 dense, y float64 as in the file

Converters writing a data set directory (used by ``python -m pipelines.prepare``):
:func:`convert_mnist`, :func:`convert_libsvm`, :func:`convert_csv`, :func:`convert_parquet`,
:func:`convert_molecules`, and :class:`Mnist8mGenerator` for the infinite-MNIST rows;
:func:`prepare_like` prepares raw records as a model's training set was (``okl predict``).
"""

import importlib

# Names resolve on first use (PEP 562): the pipelines read data sets through
# okl_core.data.layout and never need the converters, whose imports (scipy.ndimage for
# MNIST-8M, RDKit for molecules) would add ~0.2 s to every Beam worker's start.
_EXPORTS = {
    "convert_csv": "csv_table",
    "convert_mnist": "idx", "read_idx": "idx", "read_idx_array": "idx",
    "Batch": "layout", "Dataset": "layout", "DatasetInfo": "layout", "DatasetWriter": "layout", "StagedDataset": "layout",
    "open_dataset": "layout", "write_dataset": "layout", "write_shard_file": "layout",
    "convert_libsvm": "libsvm", "read_libsvm": "libsvm",
    "DeformationConfig": "mnist8m", "Mnist8mGenerator": "mnist8m",
    "MolecularConfig": "molecular", "convert_molecules": "molecular",
    "prepare_like": "preparation",
    "SCALING_METHODS": "scaling", "Scaling": "scaling",
    "ConversionSummary": "sources", "DataFormatError": "sources",
    "convert_parquet": "table",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = sorted(_EXPORTS)
