"""Benchmark: what the training pipeline's read path costs per row, against the bare fold.

On the rows of ``bench_pipeline.py`` (MNIST-shaped random pixels, ~80% zeros) and on the
MNIST test digits tiled to the same count (when ../shared/data has them; real digits
compress and decode differently), written by okl's writer, in one process, CPU time per
row (best of ``--repeats``, so other jobs on the machine count little):

* ``bare fold``: mfogd (D = 800) ``learner.update`` over 4096-row batches in memory;
* ``Parquet decode``: reading every row group's ``x``, ``y``, ``row`` with pyarrow
  without page checksums (decompression and Parquet decoding), and ``page checksums``
  the extra time of verifying them (as okl reads);
* ``check_rows``: the dead-letter checks (width, finite features, labels);
* ``batch records``: a batch's prequential metrics, divergence check and curve;
* ``shard step, no Beam``: TrainOnline's DoFn (``_FoldShard.process``) over one shard's
  piece references, reading as in a pipeline (local files: the next row groups announced
  to the OS, decoded by the shard), warm process;

then, per codec, bytes per row on disk and the read time with checksums. The pipeline's
own figure (CPU per row in the shard steps, with Beam) is ``bench_pipeline.py``'s.

Run: ``python -m bench.bench_read [--rows 200000] [--repeats 3]``
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import pyarrow.parquet as pq  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.bench_pipeline import CLASSES, D_IN, LEARNERS, write_mnist_like  # noqa: E402
from bench.common import SHARED_DATA, best_of, machine_line, mnist_shaped  # noqa: E402

import okl_core  # noqa: E402
from okl_core.data.layout import DatasetWriter, open_dataset  # noqa: E402
from okl_core.data.plan import StreamPlan  # noqa: E402
from okl_core.data.validate import check_rows  # noqa: E402
from okl_core.divergence import diverged  # noqa: E402
from okl_core.metrics import Prequential  # noqa: E402
from okl_core.reporting import batch_curve  # noqa: E402
from transforms.read import DatasetSource, piece_refs  # noqa: E402
from transforms.train import LearnerSpec, _FoldShard  # noqa: E402

BATCH = 4096


def write_digits(path: str, n_rows: int, compression: str = "lz4") -> None:
    X, y = mnist_shaped(n_rows)
    with DatasetWriter(path, D_IN, "multiclass", rows_per_shard=-(-n_rows // 4), compression=compression, classes=list(range(CLASSES))) as writer:
        writer.write(X, y)


def read_groups(files: list[str], verify: bool, keep: bool = False) -> list:
    """Read every row group as the pipeline does; keep the tables only if asked (memory)."""
    tables = []
    for f in files:
        parquet = pq.ParquetFile(f, page_checksum_verification=verify)
        for g in range(parquet.num_row_groups):
            table = parquet.read_row_group(g, columns=["x", "y", "row"], use_threads=False)
            if keep:
                tables.append(table)
    return tables


def costs(path: str, repeats: int) -> dict:
    """CPU seconds per row of each step (see the module docstring)."""
    dataset = open_dataset(path)
    files, n = [s.path for s in dataset.shards], dataset.info.n_rows
    data = dataset.read_all()
    name, params = LEARNERS["fogd"]
    spec = LearnerSpec(name, {"n_inputs": D_IN, "n_classes": CLASSES, **params})
    learner = spec.build()

    def fold():
        state = learner.init()
        for i in range(0, n, BATCH):
            state, _ = learner.update(state, data.X[i : i + BATCH], data.y[i : i + BATCH])

    fold()  # compiled code loaded, memory touched
    tables = read_groups(files[:1], True, keep=True)
    table_rows = sum(t.num_rows for t in tables)
    scored = [(learner.update(learner.init(), data.X[i : i + BATCH], data.y[i : i + BATCH]), data.y[i : i + BATCH]) for i in range(0, n, BATCH)]

    def records():
        for (state, scores), y in scored:
            metrics = Prequential("multiclass").add(scores, y)
            diverged(state, scores, metrics)
            batch_curve("multiclass", scores, y)

    source = DatasetSource.open(path)
    plan = StreamPlan(n, 2, 1, BATCH)
    refs = [r for task in source.row_groups for r in piece_refs(task, plan, 0) if r.shard == 0]
    shard_rows = sum(r.stop - r.start for r in refs)
    initial = okl_core.model_bytes(learner, learner.init())

    def shard_step():
        step = _FoldShard(spec, plan, 0, source)
        step.setup()
        list(step.process((0, refs), initial))
        step.teardown()

    def shard_fold():
        state = learner.init()
        for bounds in plan.batches(0, 0):
            state, _ = learner.update(state, data.X[bounds.start : bounds.stop], data.y[bounds.start : bounds.stop])

    cpu = time.process_time
    out = {
        "bare fold": best_of(fold, repeats, cpu) / n,
        "Parquet decode": best_of(lambda: read_groups(files, False), repeats, cpu) / n,
        "with page checksums": best_of(lambda: read_groups(files, True), repeats, cpu) / n,
        "check_rows": best_of(lambda: [check_rows(t, D_IN, "multiclass", CLASSES) for t in tables], repeats, cpu) / table_rows,
        "batch records": best_of(records, repeats, cpu) / n,
        "shard fold": best_of(shard_fold, repeats, cpu) / shard_rows,
        "shard step, no Beam": best_of(shard_step, repeats, cpu) / shard_rows,
    }
    out["page checksums"] = out.pop("with page checksums") - out["Parquet decode"]
    return out


def codec_table(make, n: int, repeats: int, tmp: str) -> list[tuple[str, float, float]]:
    """``(codec, bytes per row, read CPU seconds per row with checksums)`` per codec."""
    rows = []
    for codec in ("none", "lz4", "zstd", "snappy"):
        path = os.path.join(tmp, f"codec-{codec}")
        make(path, n, codec)
        files = [s.path for s in open_dataset(path).shards]
        size = sum(os.path.getsize(f) for f in files)
        rows.append((codec, size / n, best_of(lambda: read_groups(files, True), repeats, time.process_time) / n))
        shutil.rmtree(path)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    kinds = {"random pixels": lambda p, n, c="lz4": write_mnist_like(p, n, compression=c)}
    if (SHARED_DATA / "mnist").exists():
        kinds["MNIST digits"] = write_digits
    tmp = tempfile.mkdtemp(prefix="okl-bench-read-")
    try:
        for kind, make in kinds.items():
            path = os.path.join(tmp, "data")
            make(path, args.rows)
            found = costs(path, args.repeats)
            shutil.rmtree(path)
            bare = found["bare fold"]
            print(f"\n{kind}, {args.rows} rows, LZ4 ({machine_line()}); CPU us/row (x bare fold):")
            for step in ("bare fold", "Parquet decode", "page checksums", "check_rows", "batch records", "shard fold", "shard step, no Beam"):
                print(f"  {step:20} {1e6 * found[step]:6.2f}  ({found[step] / bare:.3f})")
            overhead = found["shard step, no Beam"] - found["shard fold"]
            print(f"  shard step over its fold: {1e6 * overhead:.2f} us/row ({found['shard step, no Beam'] / found['shard fold']:.3f}x)")
            codecs = codec_table(make, min(args.rows, 60_000), args.repeats, tmp)
            print("  codec: bytes/row, read with checksums us/row (MNIST-8M's 8.1M rows on disk):")
            for codec, size, seconds in codecs:
                print(f"    {codec:7} {size:6.0f}  {1e6 * seconds:5.2f}  ({8.1e6 * size / 1e9:.1f} GB)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
