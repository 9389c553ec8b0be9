"""Data sets for okl: the Parquet layout, converters, generators, and in-memory readers.

Layout and reader (every pipeline reads this)::

    ds = open_dataset("out/mnist")          # directory, Parquet file or glob
    for batch in ds.iter_batches():         # Batch(X float32, y, row), row order, by shard
        ...

In-memory readers for tests and reproductions::

    X, y = read_idx(images_path, labels_path)   # X float32 (n, 784) in [0, 1], y int64
    X, y = read_libsvm(path, n_features=None)   # X float32 dense, y float64 as in the file

Converters writing a data set directory (used by ``python -m pipelines.prepare``):
:func:`convert_mnist`, :func:`convert_libsvm`, :func:`convert_csv`,
:func:`convert_molecules`, and :class:`Mnist8mGenerator` for the infinite-MNIST rows.
"""

from okl_core.data.csv_table import convert_csv
from okl_core.data.idx import convert_mnist, read_idx, read_idx_array
from okl_core.data.layout import (
    Batch,
    Dataset,
    DatasetInfo,
    DatasetWriter,
    StagedDataset,
    open_dataset,
    write_dataset,
    write_shard_file,
)
from okl_core.data.libsvm import convert_libsvm, read_libsvm
from okl_core.data.mnist8m import DeformationConfig, Mnist8mGenerator
from okl_core.data.molecular import MolecularConfig, convert_molecules
from okl_core.data.scaling import SCALING_METHODS, Scaling
from okl_core.data.sources import ConversionSummary, DataFormatError

__all__ = [
    "Batch",
    "ConversionSummary",
    "DataFormatError",
    "Dataset",
    "DatasetInfo",
    "DatasetWriter",
    "DeformationConfig",
    "Mnist8mGenerator",
    "MolecularConfig",
    "SCALING_METHODS",
    "Scaling",
    "StagedDataset",
    "convert_csv",
    "convert_libsvm",
    "convert_mnist",
    "convert_molecules",
    "open_dataset",
    "read_idx",
    "read_idx_array",
    "read_libsvm",
    "write_dataset",
    "write_shard_file",
]
