"""Benchmark: the Beam training pipeline against the bare okl_core fold on the same rows.

For FOGD (``mfogd``, D = 800, the FOGD paper's MNIST setting) and DSG (softmax, blocks of
256 features, mini-batches of 1024) on MNIST-shaped data (d = 784, 10 classes, ~80% zero
pixels, random values; the learning result does not matter here, only the work):

* ``bare``: ``learner.update`` over batches of 4096 rows held in memory, one process
  (``bare+read`` adds the time to read the Parquet data set into memory);
* ``pipeline 1 shard``: ``pipelines.train`` in-process, one shard (Beam's cost on one core);
* ``pipeline 2 shards / 2 workers``: ``--num_shards 2 --direct_num_workers 2
  --direct_running_mode multi_processing`` (the target: >= 1.6 x the bare rate).

Pipeline times are end to end (worker start-up, reading Parquet, training, merging,
writing the model, metrics and plot); ``marginal`` discounts the fixed cost measured by
the same 2-worker run on ``--small_rows`` rows: ``(n - n_small) / (t - t_small)``. BLAS is limited to one thread per
process so that "one process" means one core. DSG's prediction cost grows with the blocks
learned, so two shards of n/2 rows cost less than half of one shard of n rows: its
speed-up is superlinear by construction and says little about Beam's overhead; the FOGD
figures do.

``--million`` also runs 1M rows of FOGD end to end on 2 workers and reports the wall time
and peak memory (RSS of this process and its workers, sampled).

Run: ``python bench/bench_pipeline.py [--fogd_rows N] [--dsg_rows N] [--million]``.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # set before numpy loads; inherited by Beam's workers

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import okl_core  # noqa: E402
from okl_core.data.layout import DatasetWriter, open_dataset  # noqa: E402
from okl_core.random import block_bit_generator, uniform_open  # noqa: E402
from pipelines import train  # noqa: E402

D_IN, CLASSES, CHUNK = 784, 10, 16384
LEARNERS = {
    "fogd": ("mfogd", {"n_components": 800, "sigma": 8.0, "eta": 0.005}),
    "dsg": ("dsg", {"loss": "softmax", "block_size": 256, "batch_size": 1024, "sigma": 8.0, "nu": 0.0005, "theta": 1.0}),
}


def write_mnist_like(path: str, n_rows: int, seed: int = 0) -> None:
    """MNIST-shaped rows: 784 features in [0, 1], about 80% zeros; labels 0..9."""
    with DatasetWriter(path, D_IN, "multiclass", rows_per_shard=max(CHUNK, -(-n_rows // 4)), classes=list(range(CLASSES))) as writer:
        for chunk, start in enumerate(range(0, n_rows, CHUNK)):
            m = min(CHUNK, n_rows - start)
            u = uniform_open(block_bit_generator(seed, chunk).random_raw(m * D_IN + m)).astype(np.float32)
            X = u[: m * D_IN].reshape(m, D_IN)
            X = np.where(X < 0.8, 0.0, (X - 0.8) * 5.0).astype(np.float32)
            y = np.minimum((u[m * D_IN :] * CLASSES).astype(np.int32), CLASSES - 1)
            writer.write(X, y)


def bare_seconds(path: str, name: str, params: dict, batch_rows: int = 4096) -> tuple[float, float]:
    """Seconds of the plain fold (data already in memory), and of reading the data set."""
    began = time.perf_counter()
    data = open_dataset(path).read_all()
    read = time.perf_counter() - began
    learner = okl_core.make_learner(name, n_inputs=D_IN, n_classes=CLASSES, **params)
    state = learner.init()
    began = time.perf_counter()
    for start in range(0, len(data.y), batch_rows):
        state, _ = learner.update(state, data.X[start : start + batch_rows], data.y[start : start + batch_rows])
    return time.perf_counter() - began, read


class PeakRSS:
    """Sample the resident memory of this process and its children (Linux /proc)."""

    def __init__(self, interval: float = 0.2):
        self.interval, self.peak, self._stop = interval, 0, threading.Event()

    @staticmethod
    def _rss(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            return 0

    def _tree(self, pid: int) -> list[int]:
        out = [pid]
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                for child in f.read().split():
                    out.extend(self._tree(int(child)))
        except OSError:
            pass
        return out

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, sum(self._rss(p) for p in self._tree(os.getpid())))
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def pipeline_seconds(path: str, out: str, name: str, params: dict, shards: int, workers: int) -> float:
    args = ["--input", path, "--learner", name, "--num_shards", str(shards), "--output", out, "--runner=DirectRunner"]
    for key, value in params.items():
        args += ["--param", f"{key}={json.dumps(value)}"]
    if workers > 1:
        args += [f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing"]
    began = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # the run's own report
        train.run(args)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fogd_rows", type=int, default=200_000)
    parser.add_argument("--dsg_rows", type=int, default=60_000)
    parser.add_argument("--small_rows", type=int, default=8192, help="rows of the run that measures the fixed cost")
    parser.add_argument("--million", action="store_true", help="also 1M FOGD rows end to end (time, peak memory)")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="okl-bench-")
    try:
        results = []
        for key, rows in (("fogd", args.fogd_rows), ("dsg", args.dsg_rows)):
            name, params = LEARNERS[key]
            path, small = os.path.join(tmp, f"{key}-data"), os.path.join(tmp, f"{key}-small")
            write_mnist_like(path, rows)
            write_mnist_like(small, args.small_rows, seed=1)
            bare, read = bare_seconds(path, name, params)
            one = pipeline_seconds(path, os.path.join(tmp, f"{key}-1"), name, params, 1, 1)
            two = pipeline_seconds(path, os.path.join(tmp, f"{key}-2"), name, params, 2, 2)
            fixed = pipeline_seconds(small, os.path.join(tmp, f"{key}-s"), name, params, 2, 2)
            results.append((key, rows, bare, read, one, two, fixed))
            shutil.rmtree(path)
        print(f"\nload average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; rows/s, and ratio to the bare fold")
        print(f"{'learner':8} {'rows':>8} {'bare':>7} {'bare+read':>10} {'1 shard':>14} {'2 shards/2 workers':>19} {'same, marginal':>15}")
        for key, rows, bare, read, one, two, fixed in results:
            base = rows / bare
            marginal = (rows - args.small_rows) / (two - fixed) if two > fixed else float("nan")
            print(
                f"{key:8} {rows:8d} {base:7.0f} {rows / (bare + read):10.0f} {rows / one:8.0f} ({rows / one / base:4.2f})"
                f" {rows / two:12.0f} ({rows / two / base:4.2f}) {marginal:8.0f} ({marginal / base:4.2f})"
            )
        print(f"(fixed cost of a 2-worker run, from {args.small_rows} rows: " + ", ".join(f"{r[0]} {r[6]:.1f} s" for r in results) + ")")
        if args.million:
            name, params = LEARNERS["fogd"]
            path = os.path.join(tmp, "million")
            began = time.perf_counter()
            write_mnist_like(path, 1_000_000)
            written = time.perf_counter() - began
            with PeakRSS() as memory:
                seconds = pipeline_seconds(path, os.path.join(tmp, "million-out"), name, params, 2, 2)
            print(f"1M MNIST-shaped rows, mfogd D=800, 2 shards on 2 workers: {seconds:.1f} s end to end "
                  f"({1e6 / seconds:.0f} rows/s; writing the Parquet data set took {written:.1f} s); "
                  f"peak memory {memory.peak / 2**30:.2f} GiB (this process + workers)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
