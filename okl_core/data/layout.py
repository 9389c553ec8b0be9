"""The okl data set layout: a directory of equal-sized Parquet shards plus ``dataset.json``.

Columns (DESIGN.md, "Data layout"; layout version 2):

* ``x``   ``fixed_size_binary[4 d]``: the ``d`` features of a row as little-endian float32
  bytes (field metadata ``okl.encoding = float32-le``, ``okl.n_features = d``); read it
  with :func:`x_matrix` or ``np.frombuffer(column.buffers()[1], "<f4").reshape(-1, d)``
* ``y``   ``int32`` label (binary -1/+1, multiclass 0..C-1) or ``float32`` target
* ``row`` ``int64`` global row number (the stream's order)

Shard ``k`` of ``n`` is ``part-{k:05d}-of-{n:05d}.parquet`` and holds the consecutive rows
``[k R, (k + 1) R)`` with ``R = rows_per_shard`` (the last shard may be shorter), in row
groups of ``row_group_rows`` rows that end at multiples of ``row_group_rows`` in the stream
(a shard that starts between two multiples begins with a shorter group), where the
training plan cuts its batches too (:mod:`okl_core.data.plan`). ``dataset.json`` records the name, task, row and
feature counts, classes or target range, feature scaling, source, generator seed and each
shard's rows.

:class:`DatasetWriter` writes streaming (bounded memory) into a temporary directory that
is renamed into place only when complete, so a reader never sees a half-written data set.
Parallel writers (the MNIST-8M generator's Beam workers) each write one shard with
:func:`write_shard_file` into a :class:`StagedDataset`, which the driver commits.
:func:`open_dataset` reads a data set directory, or any Parquet file/glob of this schema.

This module gathers the layout's four parts under one name (callers import from here):
:mod:`okl_core.data.schema` (the schema, ``dataset.json``, the checks of files against
them), :mod:`okl_core.data.writing`, :mod:`okl_core.data.reading` and
:mod:`okl_core.data.inference` (what files without ``dataset.json`` hold).
"""

from __future__ import annotations

from okl_core.data.inference import (
    MAX_GLOB_CLASSES,
    GlobFile,
    describe_files,
    infer_task,
    labels_fit,
)
from okl_core.data.reading import (
    Dataset,
    ShardFile,
    files_name,
    open_dataset,
    read_row_group,
    read_shard,
    row_group_sizes,
)
from okl_core.data.schema import (
    COMPRESSIONS,
    DEFAULT_COMPRESSION,
    INFO_FILE,
    LAYOUT_VERSION,
    MAX_ROW,
    READABLE_LAYOUT_VERSIONS,
    X_ENCODING,
    Batch,
    DatasetInfo,
    as_array,
    check_classes,
    check_compression,
    check_info_value,
    check_listing,
    check_same_classes,
    check_shard,
    has_labels,
    label_type,
    one_line,
    parquet_file,
    recorded_id_columns,
    row_nulls,
    row_range,
    row_range_problem,
    schema_for,
    schema_problem,
    shard_file_name,
    x_matrix,
    x_shape_problem,
    x_width,
)
from okl_core.data.writing import (
    MAX_FEATURES,
    MAX_LABEL_CLASSES,
    ROW_GROUP_BYTES,
    DatasetWriter,
    StagedDataset,
    write_dataset,
    write_shard_file,
)

__all__ = [
    "LAYOUT_VERSION",
    "check_same_classes",
    "DatasetInfo",
    "DatasetWriter",
    "StagedDataset",
    "write_shard_file",
    "Dataset",
    "ShardFile",
    "Batch",
    "write_dataset",
    "open_dataset",
    "files_name",
    "infer_task",
    "labels_fit",
    "read_row_group",
    "row_range",
    "row_group_sizes",
    "MAX_GLOB_CLASSES",
    "shard_file_name",
    "schema_for",
    "x_width",
    "x_matrix",
    "x_shape_problem",
    "as_array",
    "schema_problem",
    "check_shard",
    "check_listing",
    "check_classes",
    "recorded_id_columns",
    "X_ENCODING",
    "COMPRESSIONS",
    "DEFAULT_COMPRESSION",
    "INFO_FILE",
    "READABLE_LAYOUT_VERSIONS",
    "MAX_ROW",
    "MAX_FEATURES",
    "MAX_LABEL_CLASSES",
    "ROW_GROUP_BYTES",
    "GlobFile",
    "describe_files",
    "read_shard",
    "one_line",
    "parquet_file",
    "has_labels",
    "label_type",
    "check_compression",
    "check_info_value",
    "row_nulls",
    "row_range_problem",
]
