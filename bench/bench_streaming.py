"""Streaming vs batch training throughput, and the cost of snapshots/merges.

Runs on this machine, in one process:

* batch: ``pipelines.train`` (FnApiRunner) over a data set of N rows, 2 shards;
* streaming: the same rows as (shard, batch) elements through a TestStream on Beam's
  streaming DirectRunner (BundleBasedDirectRunner: the only local streaming runner that
  works offline) into StreamTrainOnline -> MergeSnapshots -> WriteModelVersions, with a
  snapshot every ``--snapshot_batches`` batches, and again with snapshots as rare as
  possible (one per shard) to isolate the snapshot/merge/write overhead;
* bare: the learner folded over the same batches in plain numpy (the ceiling).

Prints rows/s and the ratios. ``python bench/bench_streaming.py [--rows N]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import apache_beam as beam  # noqa: E402
import numpy as np  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions  # noqa: E402
from apache_beam.testing.test_stream import TestStream  # noqa: E402

import okl_core  # noqa: E402
from okl_core.data.layout import write_dataset  # noqa: E402
from transforms.elements import BatchPiece  # noqa: E402
from transforms.streaming import MergeSnapshots, StreamTrainOnline, WriteModelVersions  # noqa: E402
from transforms.train import LearnerSpec  # noqa: E402

PARAMS = {"n_inputs": 20, "n_components": 400, "sigma": 4.0, "eta": 0.05}


def _data(n):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 20)).astype(np.float32)
    return X, np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] >= 0, 1, -1).astype(np.int32)


def streaming(X, y, batch, shards, snapshot_batches, out):
    spec = LearnerSpec("fogd", PARAMS)
    learner = spec.build()
    per = len(y) // shards
    stream = TestStream()
    for seq in range(per // batch):
        items = []
        for s in range(shards):
            a = s * per + seq * batch
            items.append((s, BatchPiece(s, 0, seq, a, a + batch, X[a : a + batch], y[a : a + batch], np.arange(a, a + batch))))
        stream = stream.add_elements(items)
    stream = stream.advance_watermark_to_infinity()
    options = PipelineOptions([])
    options.view_as(StandardOptions).streaming = True
    began = time.perf_counter()
    with beam.Pipeline(runner="BundleBasedDirectRunner", options=options) as p:
        snaps = p | stream | StreamTrainOnline(spec, okl_core.model_bytes(learner, learner.init()), snapshot_batches=snapshot_batches)
        snaps | MergeSnapshots(spec, shards) | WriteModelVersions(out)
    return time.perf_counter() - began, len(okl_core.model_versions(out))


def batch_pipeline(X, y, batch, shards, tmp):
    from pipelines.train import run

    write_dataset(os.path.join(tmp, "ds"), X, y, "binary", n_shards=shards, row_group_rows=batch)
    argv = ["--input", os.path.join(tmp, "ds"), "--learner", "fogd", "--batch_rows", str(batch), "--num_shards", str(shards), "--output", os.path.join(tmp, "batch")]
    for k, v in PARAMS.items():
        if k != "n_inputs":
            argv += ["--param", f"{k}={v}"]
    began = time.perf_counter()
    run(argv)
    return time.perf_counter() - began


def bare(X, y, batch):
    learner = okl_core.make_learner("fogd", **PARAMS)
    state = learner.init()
    began = time.perf_counter()
    for a in range(0, len(y), batch):
        state, _ = learner.update(state, X[a : a + batch], y[a : a + batch])
    return time.perf_counter() - began


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--snapshot_batches", type=int, default=5)
    args = parser.parse_args()
    X, y = _data(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        t_bare = bare(X, y, args.batch)
        t_batch = batch_pipeline(X, y, args.batch, args.shards, tmp)
        t_stream, n_versions = streaming(X, y, args.batch, args.shards, args.snapshot_batches, os.path.join(tmp, "s1"))
        rare = args.rows // args.shards // args.batch
        t_rare, _ = streaming(X, y, args.batch, args.shards, rare, os.path.join(tmp, "s2"))
    n = args.rows
    print(f"rows {n}, batch {args.batch}, shards {args.shards}, fogd D={PARAMS['n_components']}")
    print(f"bare learner fold:        {n / t_bare:10.0f} rows/s")
    print(f"batch pipeline:           {n / t_batch:10.0f} rows/s  ({t_batch:.2f} s, incl. job start)")
    print(f"streaming, snapshot/{args.snapshot_batches}b:  {n / t_stream:10.0f} rows/s  ({t_stream:.2f} s, {n_versions} versions)  = {t_batch / t_stream:.2f} x batch")
    print(f"streaming, 1 snapshot:    {n / t_rare:10.0f} rows/s  ({t_rare:.2f} s)")
    print(f"snapshot/merge/write overhead: {(t_stream - t_rare) / t_stream:.1%} of the streaming time")


if __name__ == "__main__":
    main()
