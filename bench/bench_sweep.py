"""Sweep throughput on dask.distributed, and the per-task cost of Dask.

Prints, measured in this one process (a synthetic binary data set, FOGD):

* sweep throughput (runs/s) on a LocalCluster of 2 worker processes against 1 worker,
  the same grid, data preloaded on every worker first (target >= 1.7x on 2 cores), and
  the same runs on a plain process pool of 1 and 2 processes: the parallelism the machine
  offers at that moment (other jobs on a shared machine lower both 2-process figures);
* the per-task overhead of Dask: tiny tasks through a 1-worker cluster against calling
  ``run_task`` in this process, and ``run_task`` against the bare okl_core fold.

The four throughput set-ups are started once and then timed in turn, round after round
(best of the rounds for each), so that a change of load on a shared machine hits them
alike. Cluster start-up is not timed (it is paid once per sweep, ~1-2 s).

A run takes ~0.2 s on 60,000 rows (the default; the reproductions' runs take 1-20 s), so
that the figure is the sweep's, not the per-task overhead's (printed separately).

Run: ``python -m bench.bench_sweep [rows_per_run (60000)] [rounds (3)]``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import sys
import tempfile
import time

import numpy as np

import okl_core
from okl_core.data.layout import write_dataset
from okl_core.evaluation import permuted, run_online
from okl_experiments.data import cached_data, okl_source, preload
from okl_experiments.grid import SearchSpace
from okl_experiments.runs import dask_client, execute, run_task
from okl_experiments.sweep import SweepSettings, make_points, sweep

from bench.common import best_of, machine_line

_ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _dataset(path: str, n: int, d: int = 20, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.where(np.sin(X[:, 0]) + X[:, 1] * X[:, 2] > 0, 1, -1)
    write_dataset(path, X, y, "binary", classes=[-1, 1])


@contextlib.contextmanager
def _one_blas_thread():
    """Processes spawned inside use one BLAS thread, as Dask's workers do."""
    saved = {k: os.environ.get(k) for k in _ONE_THREAD}
    os.environ.update(_ONE_THREAD)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _pool(source, workers: int):
    with _one_blas_thread():
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=preload, initargs=(source,)) as pool:
            list(pool.map(preload, [source] * workers))  # processes up, data loaded
            yield pool


def throughputs(source, points, rounds: int) -> dict[str, float]:
    """Runs per second of the same sweep on Dask (1, 2 workers) and a process pool (1, 2)."""
    settings = SweepSettings("fogd", source, repeats=2)
    tasks = [t for p in points for t in settings.tasks(p)]
    with contextlib.ExitStack() as stack:
        setups = {}
        for workers in (1, 2):
            client = stack.enter_context(dask_client(None, workers))
            client.run(preload, source)  # load the data on every worker before timing
            setups[f"dask{workers}"] = lambda c=client: sweep(settings, points, client=c)
        for workers in (1, 2):
            pool = stack.enter_context(_pool(source, workers))
            setups[f"pool{workers}"] = lambda p=pool: list(p.map(run_task, tasks))
        best = {name: float("inf") for name in setups}
        for _ in range(rounds):
            for name, fn in setups.items():
                start = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - start)
    return {name: len(tasks) / seconds for name, seconds in best.items()}


def overhead(tmp: str, n_tasks: int = 200) -> tuple[float, float, float]:
    """Seconds per tiny task: bare fold, run_task here, run_task through a 1-worker cluster."""
    _dataset(os.path.join(tmp, "tiny"), 200, d=5)
    source = okl_source(os.path.join(tmp, "tiny"))
    points = make_points("fogd", SearchSpace.from_tokens(["n_components=16", "sigma=1.0", "eta=0.1"]), source)
    tasks = SweepSettings("fogd", source, repeats=n_tasks).tasks(points[0])
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


def main(rows: int = 60_000, rounds: int = 3) -> None:
    print(f"before: {machine_line()}")
    with tempfile.TemporaryDirectory() as tmp:
        _dataset(os.path.join(tmp, "data"), rows)
        source = okl_source(os.path.join(tmp, "data"))
        points = make_points("fogd", SearchSpace.from_tokens(["sigma=2,4,8", "eta=0.002,0.02", "n_components=200"]), source)
        start = time.perf_counter()
        t = throughputs(source, points, rounds)
        print(f"sweep of {len(points)} points x 2 runs on {rows} rows (FOGD, D=200), best of {rounds} rounds, "
              f"{time.perf_counter() - start:.0f} s in all:")
        print(f"  Dask, 1 / 2 workers        : {t['dask1']:6.2f} / {t['dask2']:6.2f} runs/s   ratio {t['dask2'] / t['dask1']:.2f}x (target >= 1.7x)")
        print(f"  process pool, 1 / 2 procs  : {t['pool1']:6.2f} / {t['pool2']:6.2f} runs/s   ratio {t['pool2'] / t['pool1']:.2f}x "
              "(the parallelism the machine offers now)")
        print(f"  Dask / pool                : {t['dask1'] / t['pool1']:.2f} (1 process), {t['dask2'] / t['pool2']:.2f} (2 processes)")
        bare_s, here_s, dask_s = overhead(tmp)
        print("per-task cost of tiny tasks (FOGD on 200 rows):")
        print(f"  bare okl_core fold       : {1e3 * bare_s:7.2f} ms")
        print(f"  run_task in this process : {1e3 * here_s:7.2f} ms  (+{1e3 * (here_s - bare_s):.2f} ms: permutation, metrics, curve)")
        print(f"  run_task through Dask    : {1e3 * dask_s:7.2f} ms  (+{1e3 * (dask_s - here_s):.2f} ms Dask overhead per task)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
