"""Benchmark: what resolving a glob of many small Parquet files costs a launch, before any job.

``okl train --input 'dir/*.parquet'`` (and ``--test``, and ``okl predict``) first opens every
file: its footer (schema, row range, row groups) and, without ``dataset.json``, the labels
that tell the task. On ``--files`` files of 50 rows x 8 features written with pyarrow, this
times, best of ``--repeats``:

* ``train``: :func:`pipelines.job.resolve_job` on a binary glob (learner and plan included);
* ``train --test``: the same with a test glob taking the training data's task and classes;
* ``train --test (labels misfit)``: a multiclass training directory (classes 0..2) and a
  test glob whose last file holds label 3: the labels are checked against the classes,
  then inferred;
* ``predict``: :func:`pipelines.predict._source` of a glob, with and without ``y``;

and counts, per resolution, the footers parsed and the ``y`` row groups read (pyarrow's
``ParquetFile`` constructor and ``read_row_group``, counted by wrapping them).

Run: ``python -m bench.bench_launch [--files 200] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import os
import shutil
import sys
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.common import best_of, machine_line  # noqa: E402

import okl_core  # noqa: E402
from okl_core.data.layout import write_dataset  # noqa: E402
from pipelines import predict, train  # noqa: E402
from pipelines.job import resolve_job  # noqa: E402

ROWS, D = 50, 8
COUNTS: collections.Counter = collections.Counter()


def _count_pyarrow() -> None:
    """Count footers parsed (a ``ParquetFile`` opened without its footer given) and ``y`` row groups read."""
    init, read = pq.ParquetFile.__init__, pq.ParquetFile.read_row_group

    def counting_init(self, source, *args, metadata=None, **kwargs):
        COUNTS["footers"] += metadata is None
        init(self, source, *args, metadata=metadata, **kwargs)

    def counting_read(self, i, columns=None, **kwargs):
        COUNTS["y groups"] += columns == ["y"]
        return read(self, i, columns=columns, **kwargs)

    pq.ParquetFile.__init__, pq.ParquetFile.read_row_group = counting_init, counting_read


def write_files(directory: str, n_files: int, rng, n_classes: int | None = None, labelled: bool = True) -> str:
    """``n_files`` files of consecutive rows; multiclass labels ``0..n_classes-1``, the last file one class more."""
    os.makedirs(directory)
    for k in range(n_files):
        X = rng.standard_normal((ROWS, D)).astype("<f4")
        y = np.where(X[:, 0] > 0, 1, -1) if n_classes is None else np.arange(ROWS) % (n_classes + (k == n_files - 1))
        columns = {"x": pa.FixedSizeBinaryArray.from_buffers(pa.binary(4 * D), ROWS, [None, pa.py_buffer(X.tobytes())]),
                   "row": pa.array(np.arange(k * ROWS, (k + 1) * ROWS, dtype=np.int64))}
        if labelled:
            columns["y"] = pa.array(y.astype(np.int32))
        pq.write_table(pa.table(columns), os.path.join(directory, f"f{k:05d}.parquet"))
    return os.path.join(directory, "*.parquet")


def _train_resolution(tmp: str, argv: list) -> None:
    args, _ = train.parse_args([*argv, "--output", os.path.join(tmp, "run")])
    resolve_job(args).abandon()


def _report(label: str, fn, repeats: int) -> None:
    COUNTS.clear()
    fn()
    counts = dict(COUNTS)
    print(f"{label:32s} {best_of(fn, repeats) * 1e3:8.1f} ms   per resolution: {counts.get('footers', 0)} footers, {counts.get('y groups', 0)} y row groups")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(machine_line())
    tmp = tempfile.mkdtemp(prefix="okl-bench-launch-")
    try:
        rng = np.random.default_rng(0)
        train_glob = write_files(os.path.join(tmp, "train"), args.files, rng)
        test_glob = write_files(os.path.join(tmp, "test"), args.files, rng)
        unlabelled = write_files(os.path.join(tmp, "unlabelled"), args.files, rng, labelled=False)
        mc_train = os.path.join(tmp, "mc_train")  # dataset.json records the classes 0..2
        write_dataset(mc_train, rng.standard_normal((600, D)), np.arange(600) % 3, "multiclass", n_shards=3, classes=[0, 1, 2])
        mc_test = write_files(os.path.join(tmp, "mc_test"), args.files, rng, n_classes=3)
        with contextlib.redirect_stdout(io.StringIO()):
            model = train.run(["--input", train_glob, "--learner", "fogd", "--output", os.path.join(tmp, "model")]).model_path
        learner, _ = okl_core.load_model(model)
        _count_pyarrow()
        print(f"{args.files} files of {ROWS} rows x {D} features; best of {args.repeats}")
        _report("train", lambda: _train_resolution(tmp, ["--input", train_glob, "--learner", "fogd"]), args.repeats)
        _report("train --test", lambda: _train_resolution(tmp, ["--input", train_glob, "--learner", "fogd", "--test", test_glob]), args.repeats)
        _report("train --test (labels misfit)", lambda: _train_resolution(tmp, ["--input", mc_train, "--learner", "mfogd", "--test", mc_test]),
                args.repeats)
        _report("predict", lambda: predict._source(test_glob, learner), args.repeats)
        _report("predict (no y)", lambda: predict._source(unlabelled, learner), args.repeats)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
