"""The okl data set layout: a directory of equal-sized Parquet shards plus ``dataset.json``.

The layout's four parts, gathered under one name (callers import from here):

* :mod:`okl_core.data.schema`: the columns (``x`` float32 bytes, ``y``, ``row``; layout
  version 2), the shard names, ``dataset.json`` (:class:`DatasetInfo`) and the checks of
  files against them;
* :mod:`okl_core.data.writing`: :class:`DatasetWriter` writes streaming (bounded memory)
  into a temporary directory renamed into place only when complete; parallel writers each
  write one shard with :func:`write_shard_file` into a :class:`StagedDataset`;
* :mod:`okl_core.data.reading`: :func:`open_dataset` reads a data set directory, or any
  Parquet file/glob of this schema;
* :mod:`okl_core.data.inference`: what files without ``dataset.json`` hold (row order,
  width, task and classes).
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
