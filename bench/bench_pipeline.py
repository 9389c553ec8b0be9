"""Benchmark: the Beam training pipeline against the bare okl_core fold on the same rows.

For FOGD (``mfogd``, D = 800, the FOGD paper's MNIST setting) and DSG (softmax, blocks of
256 features, mini-batches of 1024) on MNIST-shaped data (d = 784, 10 classes, ~80% zero
pixels, random values; the learning result does not matter here, only the work):

* ``bare``: ``learner.update`` over batches of 4096 rows held in memory, one process
  (``bare+read`` adds the time to read the Parquet data set into memory);
* ``of 2 read procs``: the steady rate against two plain processes that each read half of
  the data set's Parquet files and fold them (the shards' work without Beam);
* ``2 bare procs``: two plain processes fold one half each (no Beam, no reading): what two
  workers can get from this machine at this moment -- other jobs on a shared machine
  lower it, so the pipeline figures are read against it;
* ``pipeline 1 shard``: ``python -m pipelines.train`` in-process, one shard;
* ``pipeline 2x2``: ``--num_shards 2 --direct_num_workers 2 --direct_running_mode
  multi_processing`` (the target: >= 1.6 x the bare rate).

Pipeline runs are separate processes, timed end to end (start-up, reading Parquet,
training, merging, writing model, metrics and plot); their CPU time counts the launcher
and the Beam workers. ``steady`` is the rate while the shards train: rows divided by the
time from the first shard step's start to the last one's end (``metrics.json`` timing):
reading Parquet, checking rows, learning and Beam's per-element work, without worker
start-up and the final outputs. ``fixed`` is the rest of the end-to-end time, and ``at
8.1M`` the end-to-end ratio that fixed + steady give for MNIST-8M's 8.1M rows (the bare
rate held). BLAS runs one thread per process so that a process is a core.

This machine is a Firecracker VM: the first touch of guest memory that no process has
used yet costs a host page fault (large fresh allocations can take 10x longer than the
same work on reused memory), so the benchmark first touches ``--warm_gib`` GiB once. DSG's prediction cost grows with the blocks learned, so two
shards of n/2 rows cost about half of one shard of n rows in total: its speed-up is
superlinear by construction and says little about Beam's overhead; the FOGD figures do.

``--million`` also runs 1M rows of FOGD end to end on 2 workers and reports the wall time
and peak memory (proportional set size of the launcher and its workers, sampled);
``--million_from DIR`` does the same on an existing data set (for example the output of
``python -m pipelines.prepare mnist8m``), against the bare fold of its first 400k rows, and
its steady rate against two plain processes folding 200k of those rows each (the "of 2 procs"
figure at that scale, measured in the same run).

Run: ``python -m bench.bench_pipeline [--fogd_rows N] [--dsg_rows N] [--repeats K] [--million | --million_from DIR]``
(``--fogd_rows 0 --dsg_rows 0``: only the end-to-end run).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # set before numpy loads; inherited by Beam's workers

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import okl_core  # noqa: E402
from okl_core.data.layout import DEFAULT_COMPRESSION, DatasetWriter, open_dataset  # noqa: E402
from okl_core.random import block_bit_generator, uniform_open  # noqa: E402
from bench.common import machine_line  # noqa: E402

D_IN, CLASSES, CHUNK = 784, 10, 16384
SAMPLE_ROWS = 400_000  # rows of the bare fold's sample for the --million run (its rate is the reference)
LEARNERS = {
    "fogd": ("mfogd", {"n_components": 800, "sigma": 8.0, "eta": 0.005}),
    "dsg": ("dsg", {"loss": "softmax", "block_size": 256, "batch_size": 1024, "sigma": 8.0, "nu": 0.0005, "theta": 1.0}),
}


def write_mnist_like(path: str, n_rows: int, seed: int = 0, compression: str = DEFAULT_COMPRESSION) -> None:
    """MNIST-shaped rows: 784 features in [0, 1], about 80% zeros; labels 0..9."""
    rows_per_shard = max(CHUNK, -(-n_rows // 4))
    with DatasetWriter(path, D_IN, "multiclass", rows_per_shard=rows_per_shard, compression=compression, classes=list(range(CLASSES))) as writer:
        for chunk, start in enumerate(range(0, n_rows, CHUNK)):
            m = min(CHUNK, n_rows - start)
            u = uniform_open(block_bit_generator(seed, chunk).random_raw(m * D_IN + m)).astype(np.float32)
            X = u[: m * D_IN].reshape(m, D_IN)
            X = np.where(X < 0.8, 0.0, (X - 0.8) * 5.0).astype(np.float32)
            y = np.minimum((u[m * D_IN :] * CLASSES).astype(np.int32), CLASSES - 1)
            writer.write(X, y)


def bare_seconds(path: str, name: str, params: dict, batch_rows: int = 4096) -> tuple[float, float, float]:
    """Wall and CPU seconds of the plain fold (data in memory), and seconds to read the data."""
    began = time.perf_counter()
    data = open_dataset(path).read_all()
    read = time.perf_counter() - began
    return (*fold_seconds(data.X, data.y, name, params, batch_rows), read)


def fold_seconds(X: np.ndarray, y: np.ndarray, name: str, params: dict, batch_rows: int = 4096) -> tuple[float, float]:
    """Wall and CPU seconds of the plain fold of rows ``X, y`` held in memory, in batches of ``batch_rows``."""
    learner = okl_core.make_learner(name, n_inputs=D_IN, n_classes=CLASSES, **params)
    state = learner.init()
    began, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(y), batch_rows):
        state, _ = learner.update(state, X[start : start + batch_rows], y[start : start + batch_rows])
    return time.perf_counter() - began, time.process_time() - cpu


def first_rows(path: str, rows: int, batch_rows: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """The first ``rows`` rows of a data set, in memory (a sample of one too large for memory)."""
    parts, have = [], 0
    for batch in open_dataset(path).iter_batches(batch_rows=batch_rows):
        if have >= rows:
            break
        parts.append(batch)
        have += len(batch)
    return np.concatenate([b.X for b in parts])[:rows], np.concatenate([b.y for b in parts])[:rows]


def _fold_half(args) -> float:
    """Seconds of the plain fold of one half (run in a forked process, data inherited)."""
    name, params, X, y, batch_rows = args
    return fold_seconds(X, y, name, params, batch_rows)[0]


def two_process_seconds(path: str, name: str, params: dict, batch_rows: int = 4096) -> float:
    """Wall seconds of two plain processes folding one half each, side by side.

    No Beam and no reading: the most any two-worker system gets from this machine at
    this moment (other jobs on a shared machine lower it), measured in the same run.
    """
    data = open_dataset(path).read_all()
    return two_process_fold_seconds(data.X, data.y, name, params, batch_rows)


def two_process_fold_seconds(X: np.ndarray, y: np.ndarray, name: str, params: dict, batch_rows: int = 4096) -> float:
    """Wall seconds of two plain processes folding one half of rows ``X, y`` (in memory) each, side by side."""
    half = len(y) // 2
    jobs = [(name, params, X[:half], y[:half], batch_rows), (name, params, X[half:], y[half:], batch_rows)]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        return max(pool.map(_fold_half, jobs))


def _read_and_fold(args) -> float:
    """Seconds to read some file shards of a data set and fold their batches (a forked process)."""
    path, shards, name, params, batch_rows = args
    learner = okl_core.make_learner(name, n_inputs=D_IN, n_classes=CLASSES, **params)
    state = learner.init()
    began = time.perf_counter()
    dataset = open_dataset(path)
    for shard in shards:
        for batch in dataset.iter_batches(shard=shard, batch_rows=batch_rows):
            state, _ = learner.update(state, batch.X, batch.y)
    return time.perf_counter() - began


def two_process_read_seconds(path: str, name: str, params: dict, batch_rows: int = 4096) -> float:
    """Wall seconds of two plain processes each reading half of the data set's files and folding them.

    The same work as the pipeline's two shards (read Parquet, learn), without Beam: what the
    pipeline's steady rate is read against to isolate Beam's own cost.
    """
    shards = list(range(len(open_dataset(path).info.shards)))
    half = len(shards) // 2
    jobs = [(path, shards[:half], name, params, batch_rows), (path, shards[half:], name, params, batch_rows)]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        return max(pool.map(_read_and_fold, jobs))


class PeakRSS:
    """Sample the memory (PSS) of this process's children and their descendants (Linux /proc).

    This process (the benchmark, holding its own data) is not counted: only the pipeline's
    launcher and its workers."""

    def __init__(self, interval: float = 0.2):
        self.interval, self.peak, self.at_peak, self._stop = interval, 0, [], threading.Event()

    @staticmethod
    def _rss(pid: int) -> int:
        """Proportional set size: pages shared by forked workers and their server count once."""
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                return next(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
        try:
            with open(f"/proc/{pid}/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            return 0

    def _tree(self, pid: int) -> list[int]:
        out = [pid]
        try:
            tasks = os.listdir(f"/proc/{pid}/task")  # children hang off the thread that started them
        except OSError:
            return out
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    for child in f.read().split():
                        out.extend(self._tree(int(child)))
            except OSError:
                pass
        return out

    @staticmethod
    def _cmdline(pid: int) -> bytes:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return f.read()
        except OSError:
            return b""

    def _run(self):
        own = self._cmdline(os.getpid())
        while not self._stop.is_set():
            # A child that still runs this program's command line is this process between
            # (v)fork and exec: it shares this process's memory, which is not the pipeline's.
            sizes = [self._rss(p) for p in self._tree(os.getpid())[1:] if self._cmdline(p) != own]
            if sum(sizes) > self.peak:
                self.peak, self.at_peak = sum(sizes), sizes  # in process-tree order
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def warm_memory(gib: float) -> None:
    """Touch ``gib`` GiB once so that later allocations get memory the VM has backed already."""
    block = np.ones(int(gib * 2**30) // 8)
    del block


def steady_seconds(out: str) -> float:
    """Seconds from the first shard step's start to the last one's end (``metrics.json``)."""
    with open(os.path.join(out, "metrics.json")) as f:
        steps = json.load(f)["timing"]["shard_steps"]
    return max(s["end"] for s in steps) - min(s["start"] for s in steps)


def steady_cpu_seconds(out: str) -> tuple[float, float, float]:
    """CPU seconds of the workers while their shard steps ran, summed (``metrics.json``):
    all of it, the learner's updates, and reading/checking rows (the read-ahead threads)."""
    with open(os.path.join(out, "metrics.json")) as f:
        timing = json.load(f)["timing"]
    return tuple(sum(timing[f"{key}_per_shard"]) for key in ("cpu_seconds", "learn_cpu_seconds", "read_cpu_seconds"))


def pipeline_run(path: str, out: str, name: str, params: dict, shards: int, workers: int) -> tuple[float, float]:
    """Wall and CPU seconds (all processes: launcher and Beam workers) of ``pipelines.train``."""
    shutil.rmtree(out, ignore_errors=True)  # a repeat writes into a fresh output (a used one is refused)
    args = [sys.executable, "-m", "pipelines.train", "--input", path, "--learner", name, "--num_shards", str(shards), "--output", out, "--runner=DirectRunner"]
    for key, value in params.items():
        args += ["--param", f"{key}={json.dumps(value)}"]
    if workers > 1:
        args += [f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing"]
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(args, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # waited-for descendants: the workers too
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fogd_rows", type=int, default=200_000)
    parser.add_argument("--dsg_rows", type=int, default=60_000)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each measure; the best is reported")
    parser.add_argument("--warm_gib", type=float, default=2.0, help="GiB of memory touched once before measuring")
    parser.add_argument("--million", action="store_true", help="also 1M FOGD rows end to end (time, peak memory)")
    parser.add_argument("--million_from", help="run that end-to-end measurement on this data set instead (e.g. `prepare mnist8m` output)")
    args = parser.parse_args()
    warm_memory(args.warm_gib)
    tmp = tempfile.mkdtemp(prefix="okl-bench-")
    try:
        results = []
        for key, rows in (("fogd", args.fogd_rows), ("dsg", args.dsg_rows)):
            if rows <= 0:
                continue
            name, params = LEARNERS[key]
            path = os.path.join(tmp, f"{key}-data")
            write_mnist_like(path, rows)
            # Best of --repeats for each measure: the least disturbed run on a shared machine.
            bare, bare_cpu, read = min(bare_seconds(path, name, params) for _ in range(args.repeats))
            ideal = min(two_process_seconds(path, name, params) for _ in range(args.repeats))
            ideal_read = min(two_process_read_seconds(path, name, params) for _ in range(args.repeats))
            one, one_cpu = min(pipeline_run(path, os.path.join(tmp, f"{key}-1"), name, params, 1, 1) for _ in range(args.repeats))
            runs = []
            for _ in range(args.repeats):
                wall, cpu = pipeline_run(path, os.path.join(tmp, f"{key}-2"), name, params, 2, 2)
                out = os.path.join(tmp, f"{key}-2")
                runs.append((wall, cpu, steady_seconds(out), steady_cpu_seconds(out)))
            two, two_cpu, _, _ = min(runs)
            steady = min(r[2] for r in runs)
            steady_cpu = min(r[3] for r in runs)  # (all, learning, reading) of the least CPU
            results.append((key, rows, bare, bare_cpu, read, ideal, one, one_cpu, two, two_cpu, steady, steady_cpu, ideal_read))
            shutil.rmtree(path)
        print(f"\n{machine_line()} (other jobs share the machine)")
        print("wall-clock rows/s (ratio to bare):" if results else "(--fogd_rows 0 --dsg_rows 0: no table)")
        print(f"{'learner':7} {'rows':>7} {'bare':>6} {'bare+read':>16} {'2 bare procs':>16} {'pipeline 1 shard':>17} {'pipeline 2x2':>16} {'2x2 steady':>16} {'of 2 procs':>10} {'of 2 read procs':>15} {'fixed':>6} {'at 8.1M':>7}")
        for key, rows, bare, _, read, ideal, one, _, two, _, steady, _, ideal_read in results:
            base = rows / bare

            def cell(rate):
                return f"{rate:9.0f} ({rate / base:4.2f})"

            fixed = two - steady
            at_scale = (8.1e6 / base) / (fixed + 8.1e6 * steady / rows)
            print(
                f"{key:7} {rows:7d} {base:6.0f} {cell(rows / (bare + read))} {cell(rows / ideal)} {cell(rows / one):>17} {cell(rows / two)} "
                f"{cell(rows / steady)} {ideal / steady:9.0%} {ideal_read / steady:14.0%} {fixed:5.1f}s {at_scale:6.2f}x"
            )
        print("CPU microseconds per row, all processes (ratio to bare):")
        print(f"{'learner':7} {'bare':>6} {'pipeline 1 shard':>17} {'pipeline 2x2':>16} {'2x2 shard steps':>16} {'of which: learn':>16} {'read':>12} {'rest':>12}")
        for key, rows, bare, bare_cpu, _, _, one, one_cpu, two, two_cpu, _, steady_cpu, _ in results:
            per = 1e6 * bare_cpu / rows
            all_, learn, read = steady_cpu
            parts = [1e6 * v / rows for v in (all_, learn, read, all_ - learn - read)]
            print(f"{key:7} {per:6.1f} {1e6 * one_cpu / rows:9.1f} ({1e6 * one_cpu / rows / per:4.2f})  {1e6 * two_cpu / rows:9.1f} ({1e6 * two_cpu / rows / per:4.2f})"
                  f"  {parts[0]:9.1f} ({parts[0] / per:4.2f}) {parts[1]:9.1f} ({parts[1] / per:4.2f}) {parts[2]:5.2f} ({parts[2] / per:4.2f}) {parts[3]:5.2f} ({parts[3] / per:4.2f})")
        print(
            "2 bare procs: two plain processes fold one half each, no Beam, no reading: what two workers can get from the\n"
            "machine now. of 2 read procs: steady rate / the rate of two plain processes that each read half the Parquet\n"
            "files and fold them (the shards' work without Beam: Beam's own share). 2x2: 2 shards on 2 workers, end to end. steady: while the shards train (first shard start to last\n"
            "shard end); of 2 procs: steady rate / 2 bare procs rate (the noise-robust figure: both see the same machine).\n"
            "fixed: the rest of the 2x2 time (imports, worker start-up, merge, outputs). at 8.1M: end-to-end ratio to bare\n"
            "projected for 8.1M rows from fixed + steady. CPU: all processes end to end; 2x2 shard steps: the workers' CPU while\n"
            "their shards trained (reading, checking, learning, Beam's threads; bare: learning only), robust to other jobs;\n"
            "of which learn: the learner's updates (the bare fold's work, on a shared machine), read: reading and checking\n"
            "rows (read-ahead threads), rest: per-batch bookkeeping and Beam's own threads (gRPC, state, counters)."
        )
        if args.million or args.million_from:
            name, params = LEARNERS["fogd"]
            if args.million_from:
                path, made = args.million_from, "an existing data set"
            else:
                path = os.path.join(tmp, "million")
                began = time.perf_counter()
                write_mnist_like(path, 1_000_000)
                made = f"MNIST-shaped rows written in {time.perf_counter() - began:.1f} s"
            n = open_dataset(path).info.n_rows
            sample = min(n, SAMPLE_ROWS)
            X, y = first_rows(path, sample)  # the reference sample, read once
            bare, bare_cpu = min(fold_seconds(X, y, name, params) for _ in range(args.repeats))
            two = min(two_process_fold_seconds(X, y, name, params) for _ in range(args.repeats))
            del X, y
            with PeakRSS() as memory:
                seconds, cpu = pipeline_run(path, os.path.join(tmp, "million-out"), name, params, 2, 2)
            steady = steady_seconds(os.path.join(tmp, "million-out"))
            print(f"{n:,} rows ({made}), mfogd D=800, 2 shards on 2 workers: {seconds:.1f} s end to end "
                  f"({n / seconds:.0f} rows/s, {n / seconds / (sample / bare):.2f} x bare), steady {n / steady / (sample / bare):.2f} x bare, "
                  f"{cpu:.0f} CPU s; peak memory {memory.peak / 2**30:.2f} GiB (PSS of the launcher and workers: "
                  f"{', '.join(f'{m / 2**20:.0f}' for m in memory.at_peak)} MB); "
                  f"bare: {sample / bare:.0f} rows/s, the fold of the first {sample:,} rows in memory")
            print(f"steady: {n / steady / (sample / two):.0%} of 2 plain processes folding half of the same sample each in memory "
                  f"({sample / two / (sample / bare):.2f} x bare, measured just before)")
            all_, learn, read = steady_cpu_seconds(os.path.join(tmp, "million-out"))
            per = 1e6 * bare_cpu / sample
            print(f"CPU us/row while the shards trained: {1e6 * all_ / n:.2f} ({1e6 * all_ / n / per:.2f} x the bare fold's {per:.2f}); "
                  f"learn {1e6 * learn / n:.2f}, read {1e6 * read / n:.2f}, rest {1e6 * (all_ - learn - read) / n:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
