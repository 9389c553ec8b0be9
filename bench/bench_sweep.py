"""Sweep throughput on dask.distributed, and the per-task cost of Dask.

Prints, measured in this one process (a synthetic binary data set, FOGD):

* sweep throughput (runs/s) on a LocalCluster of 2 worker processes against 1 worker,
  the same grid, data preloaded on every worker first (target >= 1.7x on 2 cores), and
  the same runs on a plain process pool of 1 and 2 processes: the parallelism the machine
  offers at that moment (other jobs on a shared machine lower both 2-process figures);
* the per-task overhead of Dask: tiny tasks through a 1-worker cluster against calling
  ``run_task`` in this process, and ``run_task`` against the bare okl_core fold.

Cluster start-up is not timed (it is paid once per sweep, ~1-2 s). The load average is
printed: other processes on the machine lower the 2-worker figure.

Run: ``python bench/bench_sweep.py [rows_per_run]``.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import sys
import tempfile
import time

import numpy as np

import okl_core
from okl_core.data.layout import write_dataset
from okl_core.evaluation import permuted, run_online
from pipelines.grid import SearchSpace
from pipelines.runner import cached_data, dask_client, execute, okl_source, preload, run_task
from pipelines.sweep import SweepSettings, make_points, sweep

from common import best_of

_ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _dataset(path: str, n: int, d: int = 20, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.where(np.sin(X[:, 0]) + X[:, 1] * X[:, 2] > 0, 1, -1)
    write_dataset(path, X, y, "binary", classes=[-1, 1])


def throughput(source, points, workers: int) -> float:
    """Runs per second of a sweep on a LocalCluster of ``workers`` processes (best of 3)."""
    settings = SweepSettings("fogd", source, repeats=2)
    with dask_client(None, workers) as client:
        client.run(preload, source)  # load the data on every worker before timing
        seconds = best_of(lambda: sweep(settings, points, client=client), repeats=3)
    return len(points) * settings.repeats / seconds


def pool_throughput(source, points, workers: int) -> float:
    """Runs per second of the same runs on a plain process pool: what the machine allows now."""
    tasks = [t for p in points for t in SweepSettings("fogd", source, repeats=2).tasks(p)]
    context = multiprocessing.get_context("spawn")
    saved = {k: os.environ.get(k) for k in _ONE_THREAD}
    os.environ.update(_ONE_THREAD)  # as Dask's workers: one BLAS thread per process
    try:
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=preload, initargs=(source,)) as pool:
            list(pool.map(preload, [source] * workers))  # start the processes before timing
            seconds = best_of(lambda: list(pool.map(run_task, tasks)), repeats=3)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return len(tasks) / seconds


def overhead(tmp: str, n_tasks: int = 200) -> tuple[float, float, float]:
    """Seconds per tiny task: bare fold, run_task here, run_task through a 1-worker cluster."""
    _dataset(os.path.join(tmp, "tiny"), 200, d=5)
    source = okl_source(os.path.join(tmp, "tiny"))
    points = make_points("fogd", SearchSpace.from_tokens(["n_components=16", "sigma=1.0", "eta=0.1"]), source)
    tasks = [t for t in SweepSettings("fogd", source, repeats=n_tasks).tasks(points[0])]
    data, _ = cached_data(source)
    learner = okl_core.make_learner("fogd", **points[0].params)

    def bare():
        for t in tasks:
            run_online(learner, *permuted(data.X, data.y, 0, t.run))

    bare_s = best_of(bare) / n_tasks
    here_s = best_of(lambda: [run_task(t) for t in tasks]) / n_tasks
    with dask_client(None, 1) as client:
        client.run(preload, source)
        dask_s = best_of(lambda: list(execute(tasks, client))) / n_tasks
    return bare_s, here_s, dask_s


def main(rows: int = 20_000) -> None:
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        _dataset(os.path.join(tmp, "data"), rows)
        source = okl_source(os.path.join(tmp, "data"))
        points = make_points("fogd", SearchSpace.from_tokens(["sigma=2,4,8", "eta=0.002,0.02", "n_components=200"]), source)
        start = time.perf_counter()
        one, two = throughput(source, points, 1), throughput(source, points, 2)
        pool_one, pool_two = pool_throughput(source, points, 1), pool_throughput(source, points, 2)
        print(f"sweep of {len(points)} points x 2 runs on {rows} rows (FOGD, D=200), {time.perf_counter() - start:.0f} s in all:")
        print(f"  Dask, 1 worker        : {one:6.2f} runs/s")
        print(f"  Dask, 2 workers       : {two:6.2f} runs/s   ratio {two / one:.2f}x (target >= 1.7x)")
        print(f"  process pool, 1 / 2   : {pool_one:6.2f} / {pool_two:.2f} runs/s   ratio {pool_two / pool_one:.2f}x "
              "(the parallelism the machine offers right now)")
        print(f"  Dask 2 workers / pool 2 processes = {two / pool_two:.2f}")
        bare_s, here_s, dask_s = overhead(tmp)
        print("per-task cost of tiny tasks (FOGD on 200 rows):")
        print(f"  bare okl_core fold       : {1e3 * bare_s:7.2f} ms")
        print(f"  run_task in this process : {1e3 * here_s:7.2f} ms  (+{1e3 * (here_s - bare_s):.2f} ms: permutation, metrics, curve)")
        print(f"  run_task through Dask    : {1e3 * dask_s:7.2f} ms  (+{1e3 * (dask_s - here_s):.2f} ms Dask overhead per task)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
