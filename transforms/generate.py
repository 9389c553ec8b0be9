"""Beam transforms that generate data set shards in parallel (no math here).

:class:`WriteMnist8mShards` turns a PCollection of shard indices into shard files of the
infinite-MNIST data set: each worker loads the base digits once (``setup``), builds an
:class:`okl_core.data.mnist8m.Mnist8mGenerator`, and writes its shard's rows with
:func:`okl_core.data.layout.write_shard_file` into the staging directory. Row ``i`` depends
only on ``(seed, i)``, so the data set is the same for any number of shards, workers or
retries. :func:`generate_mnist8m` runs it into a staged data set directory and commits it
(``pipelines.prepare mnist8m``), reporting the rows written so far as progress: each shard
reports its rows as it writes them (:class:`okl_core.heartbeat.Heartbeat`, every
quarter second, into a hidden folder beside the staging directory, which the workers reach
as they reach the staging directory), so the bar moves by batches, not by whole shards.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time

import apache_beam as beam

from okl_core.data.layout import DEFAULT_COMPRESSION, DatasetInfo, StagedDataset, shard_file_name, write_shard_file
from okl_core.data.mnist8m import GENERATOR_NAME, DeformationConfig, Mnist8mGenerator, class_task, load_base
from okl_core.data.sources import ConversionSummary, DataFormatError
from okl_core.heartbeat import Heartbeat, read_heartbeats
from transforms.worker import settle_worker_process

__all__ = ["ShardPlan", "WriteMnist8mShards", "generate_mnist8m"]


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
    def __init__(self, staging_dir, base, seed, config_dict, plan, row_group_rows, batch_rows, compression, progress_dir=None):
        self.staging_dir, self.base, self.seed, self.progress_dir = staging_dir, base, seed, progress_dir
        self.config_dict, self.plan = config_dict, plan
        self.row_group_rows, self.batch_rows, self.compression = row_group_rows, batch_rows, compression
        self._generator: Mnist8mGenerator | None = None  # made by setup, on the worker

    def setup(self):
        settle_worker_process()
        images, labels = load_base(**self.base)
        self._generator = Mnist8mGenerator(images, labels, self.seed, DeformationConfig(**self.config_dict))

    def process(self, index):
        generator = self._generator
        assert generator is not None  # made by setup
        shard = self.plan.shard(int(index))
        batches = _counted(generator.shard_batches(shard["first_row"], shard["n_rows"], self.batch_rows),
                           Heartbeat(self.progress_dir, f"shard-{int(index)}"))
        task = class_task(self.base.get("classes"))
        n = write_shard_file(os.path.join(self.staging_dir, shard["file"]), generator.n_features, task, batches, shard["first_row"], self.row_group_rows, self.compression)
        yield dict(shard, n_rows=n)


def _counted(batches, heartbeat: Heartbeat):
    """The ``(X, y)`` batches, reporting the rows passed on so far to ``heartbeat``."""
    done = 0
    for X, y in batches:
        yield X, y
        done += len(y)
        heartbeat.beat(done)
    heartbeat.beat(done, done=True)


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
    progress_dir : str, optional
        A folder (reachable from the workers) where each shard reports the rows it has written.
    """

    def __init__(self, staging_dir, base, seed, config_dict, plan, row_group_rows=4096, batch_rows=1024, compression=DEFAULT_COMPRESSION,
                 progress_dir=None):
        super().__init__()
        self._fn = _WriteMnist8mShardFn(staging_dir, base, seed, config_dict, plan, row_group_rows, batch_rows, compression, progress_dir)

    def expand(self, shard_indices):
        # Reshuffle so that shards spread over workers instead of staying in one bundle.
        return shard_indices | "Spread" >> beam.Reshuffle() | "Generate" >> beam.ParDo(self._fn)


class _ShardWatcher(threading.Thread):
    """Report the rows the shards have written as progress (their heartbeats in ``directory``)."""

    def __init__(self, directory, progress, interval=0.5):
        super().__init__(daemon=True)
        self.directory, self.progress, self.interval = directory, progress, interval
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.wait(self.interval):
            try:
                beats = read_heartbeats(self.directory)
            except OSError:
                return
            self.progress.update(sum(beat["rows"] for beat in beats.values()))


def generate_mnist8m(pipeline: beam.Pipeline, run, out: str, base: dict, seed: int, config: DeformationConfig, rows: int,
                     rows_per_shard: int, progress, *, overwrite: bool = False, name: str | None = None, row_group_rows: int = 4096,
                     batch_rows: int = 1024, compression: str = DEFAULT_COMPRESSION) -> ConversionSummary:
    """Generate an MNIST-8M data set at ``out`` with :class:`WriteMnist8mShards` on ``pipeline``.

    ``run(pipeline)`` runs the job to completion; ``base`` holds the keyword arguments of
    :func:`okl_core.data.mnist8m.load_base` (checked here, in the driver, before any job);
    ``progress`` (:class:`okl_core.data.sources.Progress`) sees the rows written so far. The
    shards are staged and committed together with ``dataset.json``; nothing is left behind
    by a failure.
    """
    started = time.perf_counter()
    base_images, base_labels = load_base(**base)  # fail early on bad input, in the driver
    classes = sorted(set(base_labels.tolist()))
    if base.get("classes") is None and classes != list(range(len(classes))):
        raise DataFormatError(f"{base['labels']}: base labels must be 0..C-1 for the generator, found {classes[:20]}")
    task = class_task(base.get("classes"))
    if base.get("classes") is not None:
        classes = [int(c) for c in base["classes"]]  # original digits in class order ([negative, positive] when binary)
    plan = ShardPlan(rows, rows_per_shard)
    staged = StagedDataset(out, overwrite)
    progress_dir = tempfile.mkdtemp(prefix=".okl-progress-", dir=os.path.dirname(os.path.abspath(staged.tmp)))
    watcher = _ShardWatcher(progress_dir, progress)
    try:
        progress.start(plan.n_rows, "rows", "mnist8m")
        watcher.start()
        _ = (
            pipeline
            | "ShardIds" >> beam.Create(list(range(plan.n_shards)))
            | "WriteShards" >> WriteMnist8mShards(staged.tmp, base, seed, config.to_dict(), plan, row_group_rows, batch_rows, compression,
                                                 progress_dir=progress_dir)
        )
        run(pipeline)
        watcher.stopped.set()
        missing = [s["file"] for s in plan.shards() if not os.path.exists(os.path.join(staged.tmp, s["file"]))]
        if missing:
            raise RuntimeError(f"the pipeline finished without writing {len(missing)} shard(s): {missing[:5]}")
        progress.update(plan.n_rows)
        progress.finish()
        start, stop = base.get("start", 0), base.get("stop")
        info = DatasetInfo(
            name=name or os.path.basename(staged.path), task=task, n_rows=plan.n_rows, n_features=int(base_images[0].size),
            classes=classes, source=f"mnist8m:{base['images']},{base['labels']}", generator_seed=seed, shards=plan.shards(),
            extra={"generator": GENERATOR_NAME, "deformation": config.to_dict(), "base_rows": [start, stop if stop is not None else start + _base_count(base)],
                   "base_digits": int(len(base_labels)), "row_key": "block_bit_generator(seed, row)"},
        )
        staged.commit(info)
    except BaseException:
        watcher.stopped.set()
        staged.abort()
        raise
    finally:
        watcher.join()
        shutil.rmtree(progress_dir, ignore_errors=True)
    return ConversionSummary(info, staged.path, seconds=time.perf_counter() - started)


def _base_count(base: dict) -> int:
    """Rows of the base IDX file from ``start`` on (before any class filter)."""
    from okl_core.data.idx import read_idx_images

    return len(read_idx_images(base["images"], base["labels"])[1]) - int(base.get("start", 0))
