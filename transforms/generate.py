"""Beam transforms that generate data set shards in parallel (no math here).

:class:`WriteMnist8mShards` turns a PCollection of shard indices into shard files of the
infinite-MNIST data set: each worker loads the base digits once (``setup``), builds an
:class:`okl_core.data.mnist8m.Mnist8mGenerator`, and writes its shard's rows with
:func:`okl_core.data.layout.write_shard_file` into the staging directory. Row ``i`` depends
only on ``(seed, i)``, so the data set is the same for any number of shards, workers or
retries. The driver (``pipelines.prepare``) commits the staging directory afterwards.
"""

from __future__ import annotations

import os

import apache_beam as beam

from okl_core.data.layout import DEFAULT_COMPRESSION, shard_file_name, write_shard_file
from okl_core.data.mnist8m import DeformationConfig, Mnist8mGenerator, load_base

__all__ = ["ShardPlan", "WriteMnist8mShards"]


class ShardPlan:
    """``n_rows`` rows in shards of ``rows_per_shard`` (the last may be shorter)."""

    def __init__(self, n_rows: int, rows_per_shard: int):
        if n_rows < 1 or rows_per_shard < 1:
            raise ValueError("n_rows and rows_per_shard must be >= 1")
        self.n_rows, self.rows_per_shard = int(n_rows), int(rows_per_shard)

    @property
    def n_shards(self) -> int:
        return -(-self.n_rows // self.rows_per_shard)

    def shard(self, index: int) -> dict:
        """``{"file", "n_rows", "first_row"}`` of shard ``index`` (as in ``dataset.json``)."""
        first = index * self.rows_per_shard
        return {"file": shard_file_name(index, self.n_shards), "n_rows": min(self.rows_per_shard, self.n_rows - first), "first_row": first}

    def shards(self) -> list:
        return [self.shard(k) for k in range(self.n_shards)]


class _WriteMnist8mShardFn(beam.DoFn):
    def __init__(self, staging_dir, base, seed, config_dict, plan, row_group_rows, batch_rows, compression):
        self.staging_dir, self.base, self.seed = staging_dir, base, seed
        self.config_dict, self.plan = config_dict, plan
        self.row_group_rows, self.batch_rows, self.compression = row_group_rows, batch_rows, compression
        self._generator = None

    def setup(self):
        images, labels = load_base(**self.base)
        self._generator = Mnist8mGenerator(images, labels, self.seed, DeformationConfig(**self.config_dict))

    def process(self, index):
        shard = self.plan.shard(int(index))
        batches = self._generator.shard_batches(shard["first_row"], shard["n_rows"], self.batch_rows)
        n = write_shard_file(os.path.join(self.staging_dir, shard["file"]), self._generator.n_features, "multiclass", batches, shard["first_row"], self.row_group_rows, self.compression)
        yield dict(shard, n_rows=n)


class WriteMnist8mShards(beam.PTransform):
    """Shard indices -> shard files of generated MNIST-8M rows; outputs each shard's info.

    Parameters
    ----------
    staging_dir : str
        Directory the shard files go to (a :class:`~okl_core.data.layout.StagedDataset`;
        it must be reachable from the workers).
    base : dict
        Keyword arguments of :func:`okl_core.data.mnist8m.load_base` (IDX paths, rows).
    seed : int
    config_dict : dict
        :class:`~okl_core.data.mnist8m.DeformationConfig` fields.
    plan : ShardPlan
    row_group_rows, batch_rows : int
        Parquet row group size; rows generated per vectorised batch.
    compression : str
        Parquet codec (:data:`okl_core.data.layout.COMPRESSIONS`).
    """

    def __init__(self, staging_dir, base, seed, config_dict, plan, row_group_rows=4096, batch_rows=1024, compression=DEFAULT_COMPRESSION):
        super().__init__()
        self._fn = _WriteMnist8mShardFn(staging_dir, base, seed, config_dict, plan, row_group_rows, batch_rows, compression)

    def expand(self, shard_indices):
        # Reshuffle so that shards spread over workers instead of staying in one bundle.
        return shard_indices | "Spread" >> beam.Reshuffle() | "Generate" >> beam.ParDo(self._fn)
