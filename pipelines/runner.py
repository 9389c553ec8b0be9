"""Runs of okl learners as Dask tasks: data sources, the per-worker data cache, execution.

A sweep (:mod:`pipelines.sweep`) or a reproduction cuts its work into :class:`RunTask`
objects: one learner configuration, one run index (which permutation of the rows), and
the *source* of the data -- a loader function and its arguments, never the rows. A worker
process loads each source once (:func:`cached_data`, a small per-process cache keyed by
the source) and then runs :func:`run_task` on as many tasks as it is given, so the data
never travels with the tasks. :func:`execute` runs tasks in this process or on a
``distributed.Client`` and yields results as they finish (``as_completed``);
:func:`dask_client` makes the client (a LocalCluster of single-threaded worker processes,
an existing scheduler, or none). The learning itself is okl_core's
(:func:`okl_core.evaluation.run_online`, :func:`okl_core.evaluation.evaluate`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import importlib
import logging
import os
import socket
import threading
import time
import traceback
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np

from okl_core.evaluation import evaluate, metric_value, permuted, run_online, task_metrics
from okl_core.registry import make_learner

__all__ = [
    "ArrayData",
    "DataSource",
    "RunTask",
    "cached_data",
    "preload",
    "load_okl_dataset",
    "okl_source",
    "run_task",
    "execute",
    "dask_client",
]

logger = logging.getLogger(__name__)


# -- data sources and the per-worker cache ---------------------------------------------
class ArrayData(NamedTuple):
    """A data set in memory: float32 ``X``, labels/targets ``y``, task and class count."""

    X: np.ndarray
    y: np.ndarray
    task: str
    n_classes: int | None


@dataclasses.dataclass(frozen=True)
class DataSource:
    """Where a worker loads a data set from: ``loader`` (``"module:function"``) and its args.

    The function is called as ``function(*args)`` and returns an :class:`ArrayData`. The
    remaining fields describe the data for the client (which builds learner parameters
    from them) without loading it.
    """

    loader: str
    args: tuple
    n_features: int
    task: str
    n_classes: int | None = None
    n_rows: int | None = None

    def load(self) -> ArrayData:
        """Call the loader (in the worker process) and check it matches the description."""
        module, _, func = self.loader.partition(":")
        data = getattr(importlib.import_module(module), func)(*self.args)
        if data.X.ndim != 2 or data.X.shape[1] != self.n_features or data.task != self.task:
            raise ValueError(f"{self.describe()}: loaded {data.task} data of shape {data.X.shape}, expected {self.task} with {self.n_features} features")
        return data

    def describe(self) -> dict:
        """JSON-ready identity of the source (recorded with the results)."""
        return {"loader": self.loader, "args": list(self.args)}


_CACHE: "collections.OrderedDict[DataSource, ArrayData]" = collections.OrderedDict()
_CACHE_SOURCES = 4  # sources kept per process (train + test of two sweeps)
_CACHE_LOCK = threading.Lock()  # workers with several threads: load once, not once per thread
_LOADS = [0]  # loads done by this process (a run reports whether it caused one)


def cached_data(source: DataSource) -> tuple[ArrayData, bool]:
    """The source's data, loaded at most once per process; returns ``(data, loaded_now)``."""
    with _CACHE_LOCK:
        data = _CACHE.get(source)
        if data is not None:
            _CACHE.move_to_end(source)
            return data, False
        data = source.load()
        _LOADS[0] += 1
        _CACHE[source] = data
        while len(_CACHE) > _CACHE_SOURCES:
            _CACHE.popitem(last=False)
        return data, True


def preload(source: DataSource) -> int:
    """Load ``source`` into this process's cache; returns its row count.

    ``client.run(preload, source)`` loads a data set on every worker ahead of a sweep.
    """
    data, _ = cached_data(source)
    return len(data.y)


def load_okl_dataset(path: str, stamp: int | None = None) -> ArrayData:
    """Loader for okl data sets (directory or Parquet files): all rows in row order.

    ``stamp`` (the files' newest modification time) only makes a rewritten data set a
    different source, so that caches and ``--resume`` do not mix old and new rows.
    """
    from okl_core.data.layout import open_dataset

    ds = open_dataset(path)
    batch = ds.read_all()
    return ArrayData(batch.X, batch.y, ds.info.task, ds.info.n_classes)


def okl_source(path: str) -> DataSource:
    """A :class:`DataSource` for an okl data set, described from its metadata (no rows read)."""
    from okl_core.data.layout import open_dataset

    ds = open_dataset(path)
    n_classes = ds.info.n_classes
    if ds.info.task == "multiclass" and n_classes is None:
        raise ValueError(f"{path}: multiclass data set without a class list in dataset.json")
    files = [s.path for s in ds.shards] + [os.path.join(path, "dataset.json")] * os.path.isdir(path)
    stamp = max(os.stat(f).st_mtime_ns for f in files)
    return DataSource(
        loader="pipelines.runner:load_okl_dataset",
        args=(os.path.abspath(os.fspath(path)), stamp),
        n_features=ds.info.n_features,
        task=ds.info.task,
        n_classes=n_classes,
        n_rows=ds.info.n_rows,
    )


# -- one run of one point (executes on a worker) ---------------------------------------
@dataclasses.dataclass(frozen=True)
class RunTask:
    """Everything a worker needs for run ``run`` of point ``point`` (no data: sources).

    ``params`` are sorted ``(name, value)`` pairs for :func:`okl_core.make_learner`.
    ``shuffle_seed`` None keeps the stored order.
    """

    point: int
    run: int
    learner: str
    params: tuple
    train: DataSource
    test: DataSource | None = None
    shuffle_seed: int | None = 0
    reseed: bool = False
    batch_rows: int = 4096
    curve_points: int = 64


def _run_params(task: RunTask) -> dict:
    params = dict(task.params)
    if task.reseed:
        params["seed"] = int(params.get("seed", 0)) + task.run
    return params


def _result(task: RunTask, **fields) -> dict:
    """A run's result record (JSON-ready); ``fields`` override the failed-run defaults."""
    return {"point": task.point, "run": task.run, "ok": False, "error": None, "metrics": {}, "curve_n": [],
            "curve_value": [], "seconds": 0.0, "worker": "", "loaded": False, **fields}


def _failed(task: RunTask, err: BaseException, **fields) -> dict:
    return _result(task, error=f"{type(err).__name__}: {err}", **fields)


def _learn(task: RunTask) -> tuple[dict, Any]:
    """Metrics and online run of ``task``."""
    data, _ = cached_data(task.train)
    learner = make_learner(task.learner, **_run_params(task))
    X, y = (data.X, data.y) if task.shuffle_seed is None else permuted(data.X, data.y, task.shuffle_seed, task.run)
    online = run_online(learner, X, y, batch_rows=task.batch_rows, curve_points=task.curve_points)
    metrics = {f"online_{m}": metric_value(online.metrics, m) for m in task_metrics(learner.task)}
    if task.test is not None:
        test, _ = cached_data(task.test)
        scored = evaluate(learner, online.state, test.X, test.y, batch_rows=task.batch_rows)
        metrics.update({f"test_{m}": metric_value(scored, m) for m in task_metrics(learner.task)})
    return metrics, online


def run_task(task: RunTask) -> dict:
    """Run one (point, run): learner fold over the run's permutation, then test scoring.

    Never raises for a failing learner: the result then has ``ok`` False and ``error``.
    """
    started, loads_before = time.perf_counter(), _LOADS[0]
    where = {"worker": f"{socket.gethostname()}:{os.getpid()}"}
    try:
        metrics, online = _learn(task)
    except Exception as err:  # a failing point is a result, not a crash of the sweep
        logger.debug("point %d run %d failed:\n%s", task.point, task.run, traceback.format_exc())
        return _failed(task, err, seconds=time.perf_counter() - started, loaded=_LOADS[0] > loads_before, **where)
    return _result(task, ok=True, metrics=metrics, curve_n=online.curve_n.tolist(), curve_value=online.curve_value.tolist(),
                   seconds=time.perf_counter() - started, loaded=_LOADS[0] > loads_before, **where)


def execute(tasks: list[RunTask], client=None, func: Callable[[RunTask], dict] = run_task) -> Iterator[dict]:
    """Run ``func`` (default :func:`run_task`) on ``tasks``; yield results as they finish.

    ``client`` None runs them here in order (no Dask). With a ``distributed.Client`` every
    task is submitted at once and results come back through ``as_completed``; a task
    whose future errs (an exception outside the task's own guard, a killed worker) yields
    an error result.
    """
    if client is None:
        for task in tasks:
            try:
                yield func(task)
            except Exception as err:
                yield _failed(task, err)
        return
    from distributed import as_completed

    futures = {}
    for task in tasks:
        future = client.submit(func, task, pure=False, key=f"okl-run-{task.point}-{task.run}-{os.urandom(4).hex()}")
        futures[future] = task
    for future in as_completed(list(futures)):
        task = futures.pop(future)
        try:
            result = future.result()
        except Exception as err:
            result = _failed(task, err)
        future.release()
        yield result


@contextlib.contextmanager
def dask_client(scheduler: str | None = None, workers: int = 2, dashboard: bool = False):
    """A ``distributed.Client`` for ``scheduler`` (None: a new LocalCluster; ``"serial"``: None).

    The LocalCluster has ``workers`` processes with one thread each, so that numpy in each
    worker stays on one core. Its workers run without Dask's default
    ``MALLOC_TRIM_THRESHOLD_=65536``: that setting makes glibc return every large freed
    block to the system, and a learner's batch temporaries (megabytes, freed every batch)
    then cost page faults on every batch (FOGD sweep of bench/bench_sweep.py: 90 ms per run
    with it, 72 ms without). A value in the environment still wins.
    """
    if scheduler == "serial":
        yield None
        return
    import dask
    from distributed import Client, LocalCluster  # before dask.config.set: loads distributed's defaults

    if scheduler:
        client = Client(scheduler)
        try:
            yield client
        finally:
            client.close()
        return
    # The scheduler's HTTP server starts even without a dashboard: a random port (":0") keeps
    # it off :8787, which another cluster on the machine may hold.
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=":8787" if dashboard else ":0", silence_logs=logging.ERROR)
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()
