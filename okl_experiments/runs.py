"""Runs of okl learners as Dask tasks: one (point, run) each, executed where the data is cached.

A sweep (:mod:`okl_experiments.sweep`) or a reproduction cuts its work into :class:`RunTask`
objects: one learner configuration, one run index (which permutation of the rows), and
the *source* of the data (:class:`okl_experiments.data.DataSource`), never the rows. A
worker process loads each source once (:func:`okl_experiments.data.cached_data`) and then
runs :func:`run_task` on as many tasks as it is given, so the data never travels with the
tasks. :func:`execute` runs tasks in this process or on a
``distributed.Client`` and yields results as they finish (``as_completed``);
:func:`dask_client` makes the client (a LocalCluster of single-threaded worker processes,
an existing scheduler, or none). The learning itself is okl_core's
(:func:`okl_core.evaluation.run_online`, :func:`okl_core.evaluation.evaluate`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import signal
import socket
import threading
import time
import traceback
from typing import Any, Callable, Iterator

from okl_core.derived import make_learner
from okl_core.divergence import explosion_text
from okl_core.evaluation import constant_baseline, evaluate, metric_value, permuted, run_online
from okl_core.reporting import metric_of
from okl_experiments.data import DataSource, cached_data, loads_done
from okl_experiments.metrics import experiment_metrics
from okl_experiments.params import DEFAULT_BATCH_ROWS

__all__ = ["RunTask", "run_seed", "run_task", "execute", "dask_client"]

logger = logging.getLogger(__name__)


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
    batch_rows: int = DEFAULT_BATCH_ROWS
    curve_points: int = 64


def run_seed(base: int, run: int) -> int:
    """The learner seed of run ``run`` when runs are reseeded: ``base + run`` (new random features per run)."""
    return int(base) + run


def _run_params(task: RunTask) -> dict:
    params = dict(task.params)
    if task.reseed:
        params["seed"] = run_seed(params.get("seed", 0), task.run)
    return params


def _result(task: RunTask, **fields) -> dict:
    """A run's result record (JSON-ready); ``fields`` override the failed-run defaults."""
    return {"point": task.point, "run": task.run, "ok": False, "error": None, "diverged": None, "metrics": {}, "baseline": {},
            "one_class": False, "curve_n": [],
            "curve_value": [], "seconds": 0.0, "worker": "", "loaded": False, **fields}


def _failed(task: RunTask, err: BaseException, **fields) -> dict:
    return _result(task, error=f"{type(err).__name__}: {err}", **fields)


def _learn(task: RunTask) -> tuple[dict, Any, dict, bool]:
    """Metrics, online run, constant baselines of the same rows (:func:`okl_core.evaluation.constant_baseline`,
    by experiment metric name) and whether the model answered one class for every row of ``task``."""
    data, _ = cached_data(task.train)
    learner = make_learner(task.learner, **_run_params(task))
    X, y = (data.X, data.y) if task.shuffle_seed is None else permuted(data.X, data.y, task.shuffle_seed, task.run)
    online = run_online(learner, X, y, batch_rows=task.batch_rows, curve_points=task.curve_points)
    measured = {"online": online.metrics}  # and "test": the held-out set's, when there is one
    if task.test is not None:
        test, _ = cached_data(task.test)
        measured["test"] = evaluate(learner, online.state, test.X, test.y, batch_rows=task.batch_rows)
    names = experiment_metrics(learner.task, task.test is not None)
    metrics = {name: metric_value(measured[name.split("_")[0]], metric_of(name)) for name in names}
    rows = {"online": y, "test": None if task.test is None else test.y}
    baselines = {split: constant_baseline(learner.task, labels) for split, labels in rows.items() if labels is not None}
    baseline = {name: baselines[name.split("_")[0]][metric_of(name)] for name in names}
    return metrics, online, baseline, measured.get("test", online.metrics).one_class


def _divergence(online, metrics: dict) -> str | None:
    """Why a finished run counts as diverged (one line), or None."""
    if online.diverged_at is not None and online.diverged_reason == "exploded":
        return f"diverged at row {online.diverged_at} (the loss exploded; over the run: {explosion_text(online.metrics)})"
    if online.diverged_at is not None:
        return f"diverged at row {online.diverged_at} (NaN or inf in the scores, model or errors)"
    bad = sorted(name for name, value in metrics.items() if not math.isfinite(value))
    return f"diverged: {', '.join(bad)} not finite" if bad else None


def run_task(task: RunTask) -> dict:
    """Run one (point, run): learner fold over the run's permutation, then test scoring.

    Never raises for a failing learner: the result then has ``ok`` False and ``error``.
    ``baseline`` holds each metric of the best constant answer over the same rows, and
    ``one_class`` whether the model answered one class for every (test, else online) row.
    A run that diverges (:attr:`okl_core.evaluation.OnlineRun.diverged_at`, or a metric
    that is NaN or inf) finishes: ``ok`` True, and ``diverged`` says where.
    """
    started, loads_before = time.perf_counter(), loads_done()
    where = {"worker": f"{socket.gethostname()}:{os.getpid()}"}
    try:
        metrics, online, baseline, one_class = _learn(task)
    except Exception as err:  # a failing point is a result, not a crash of the sweep
        logger.debug("point %d run %d failed:\n%s", task.point, task.run, traceback.format_exc())
        return _failed(task, err, seconds=time.perf_counter() - started, loaded=loads_done() > loads_before, **where)
    return _result(task, ok=True, diverged=_divergence(online, metrics), metrics=metrics, baseline=baseline, one_class=one_class, curve_n=online.curve_n.tolist(), curve_value=online.curve_value.tolist(),
                   seconds=time.perf_counter() - started, loaded=loads_done() > loads_before, **where)


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
def _sigint_ignored_by_children():
    """Processes started while this lasts ignore SIGINT (an ignored signal stays ignored across
    exec, and Python then installs no KeyboardInterrupt handler). Ctrl-C in a terminal reaches
    every process of the group; a LocalCluster's workers leave it to the client, which shuts
    them down, instead of each printing its own traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _quiet_worker_logs():
    """A Dask worker plugin that keeps the workers' own ``distributed`` logs off the terminal.

    ``LocalCluster(silence_logs=...)`` sets the level of the scheduler's and the nannies'
    loggers, not that of the worker processes (their ``distributed.worker`` logger stayed at
    INFO). When a sweep ends, or Ctrl-C stops it, the scheduler closes while a worker's
    heartbeat may be on its way, and that worker printed "Failed to communicate with
    scheduler during heartbeat" and a traceback at ERROR on the command's stderr (1 of about
    20 CI runs of ``test_ctrl_c_ends_a_sweep_with_one_line_and_its_finished_points``).
    Nothing of a run is lost by it: a task's exception reaches the client, which records the
    run as failed (:func:`execute`), and a worker that dies shows as the client's error. A
    plugin, so that a worker the nanny restarts is quiet too.
    """
    from distributed import WorkerPlugin

    class QuietWorkerLogs(WorkerPlugin):
        name = "okl-quiet-worker-logs"

        def setup(self, worker):
            logging.getLogger("distributed").setLevel(logging.CRITICAL)

    return QuietWorkerLogs()


def _connect(client_class, scheduler: str):
    """A client of the scheduler at ``scheduler``; ValueError naming ``--scheduler`` when none answers there."""
    try:
        return client_class(scheduler)
    except (OSError, TimeoutError, ValueError, TypeError) as err:  # refused, timed out, an address Dask cannot parse
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ValueError(f"--scheduler {scheduler}: cannot connect to a Dask scheduler there ({reason})") from None


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
        client = _connect(Client, scheduler)
        try:
            yield client
        finally:
            client.close()
        return
    # The scheduler's HTTP server starts even without a dashboard: a random port (":0") keeps
    # it off :8787, which another cluster on the machine may hold.
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}), _sigint_ignored_by_children():
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=":8787" if dashboard else ":0", silence_logs=logging.ERROR)
    client = Client(cluster)
    try:
        client.register_plugin(_quiet_worker_logs())
        yield client
    finally:
        client.close()
        cluster.close()
