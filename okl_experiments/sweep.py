"""Hyperparameter sweeps of okl learners on dask.distributed (DESIGN.md, "Dask").

``python -m pipelines.sweep`` is its command line; :func:`sweep` runs a list of
:class:`Point` under :class:`SweepSettings`, :func:`make_points` makes the points of a
:class:`~okl_experiments.grid.SearchSpace` on a data set. Each grid point runs
``repeats`` times, run ``r`` on the data in the order of
``okl_core.random.permutation(n, shuffle_seed, r)`` (all runs are random permutations;
``shuffle_seed=None`` keeps the stored order), folding the okl_core learner over the rows in
batches (:func:`okl_core.evaluation.run_online`; ``batch_rows`` rounded for mini-batch
learners by :func:`okl_experiments.params.batch_rows_for`) and, with a test set, scoring
the final state on it. ``reseed`` also gives run ``r`` the model seed ``seed + r`` (new
random features per run), otherwise every run uses the point's seed.

How it runs
-----------
* One Dask task per (point, run): a small :class:`RunTask` naming the learner, its
  parameters and the data *source* (a loader and a path), never the data. A worker loads
  each source once and keeps it in a per-process cache keyed by the source
  (:mod:`okl_experiments.data`), so the data crosses the network zero times; the path must be
  readable where the workers run.
* The client comes from :func:`okl_experiments.runs.dask_client`: a ``LocalCluster`` of
  single-threaded worker processes, an existing scheduler, or none (this process, without
  Dask: debugging, references).
* Results stream back with ``distributed.as_completed``; a progress line per finished run
  goes to stderr. When all runs of a point are in, the point's mean +- std (sample std,
  ddof = 1) lands in ``OUTPUT/results.parquet`` (rewritten atomically after every point, so an
  interrupted sweep keeps what it finished) and a Markdown table is printed at the end.
* A worker lost mid-sweep (killed, its machine gone) costs time, not results: the scheduler
  runs its tasks again on the workers left (each task may be lost this way a few times,
  Dask's ``allowed-failures``), and the client records each run once, when its future
  completes, so no point is missing or counted twice.
* A run that raises (invalid parameters, a learner/task mismatch, a dead worker) marks its
  point ``error`` with the message; the sweep goes on. A run whose scores, model or metrics
  turn NaN or inf (a step size too large) finishes and marks its point ``diverged``, with
  the row it diverged at in ``error``; such a point is never ranked or chosen as best.
* ``resume`` keeps the points of ``OUTPUT/results.parquet`` whose status is ``ok`` or
  ``diverged`` and runs the rest (failed points are retried). The settings that change the numbers (learner,
  data, test data, repeats, order, seeds, batch rows, curve points) must match the file's, and
  every point of the file must be one of this sweep's (a space may grow, never change):
  points are matched by their complete learner configuration (:func:`point_identity`).
  ``best.json`` is deleted before the table changes and written again when a point is chosen.
* The best point by ``metric`` (lower is better; ties: lower point index) is written to
  ``OUTPUT/best.json`` as ``{"learner": name, "params": {...}}`` with the learner's complete
  configuration: the format ``pipelines.train --config`` reads, and ``make_learner(name,
  **params)`` accepts.

Metrics: ``online_mistake_rate`` / ``online_mse`` / ``online_mae`` (prequential, over the
stream) and, with a test set, ``test_mistake_rate`` / ``test_mse`` / ``test_mae``
(:func:`okl_experiments.metrics.experiment_metrics`). Every metric of the task is
recorded; ``metric`` picks the ranking one (default
:func:`okl_experiments.metrics.ranking_metric`: the online metric, never the test set),
recorded in the table's metadata (``rank_by``) and in ``best.json``.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import json
import math
import os
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from okl_core.derived import make_learner
from okl_core.evaluation import beats_baseline, mean_std
from okl_core.registry import learner_class
from okl_core.reporting import baseline_name
from okl_core.state import atomic_write_bytes
from okl_experiments.data import DataSource
from okl_experiments.grid import SearchSpace, point_key, whole_as_int
from okl_experiments.metrics import NOT_BETTER, experiment_metric, experiment_metrics, ranking_metric
from okl_experiments.params import DEFAULT_BATCH_ROWS, batch_rows_for, check_fit, check_task, learner_config, learner_params
from okl_experiments.progress import RunProgress
from okl_experiments.runs import RunTask, execute
from okl_experiments.text import format_value, markdown_table as _markdown, mean_std_text, write_json, write_text

__all__ = [
    "Point",
    "SweepSettings",
    "SweepResult",
    "make_points",
    "sweep",
    "read_results",
    "ranked",
    "markdown_table",
    "baseline_flag",
    "best_config",
    "check_settings",
]

RESULTS_FILE = "results.parquet"
BEST_FILE = "best.json"
MARKDOWN_FILE = "results.md"
_METADATA_KEY = b"okl_sweep"
_RESULTS_VERSION = 1
_FINISHED = ("ok", "diverged")  # statuses --resume keeps: a diverged point would diverge again


# -- points, settings, results -----------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Point:
    """A grid point: its index, the varying values, and the full learner parameters."""

    index: int
    swept: dict
    params: dict

    @property
    def key(self) -> str:
        """The parameters as given: the table's ``params`` column."""
        return point_key(self.params)


def _built(learner: str, params: dict):
    """The learner ``params`` make, or None (an invalid point fails in its runs, where it is recorded)."""
    try:
        return make_learner(learner, **params)
    except (TypeError, ValueError):
        return None


def point_identity(learner: str, params: dict, built=None) -> str:
    """What ``--resume`` matches finished points by: the complete configuration of ``learner``
    made from ``params`` (the parameters themselves when they make none), whole floats written as
    integers, so a default typed out (``sigma=8``) or left out (``8.0``) is one and the same point.
    ``built``: that learner when the caller has it already."""
    built = built if built is not None else _built(learner, params)
    if built is None:
        return point_key(params)
    return point_key({k: whole_as_int(v) for k, v in learner_config(built)["params"].items()})


@dataclasses.dataclass(frozen=True)
class SweepSettings:
    """What determines the numbers of a sweep (checked on ``--resume``)."""

    learner: str
    train: DataSource
    test: DataSource | None = None
    repeats: int = 1
    shuffle_seed: int | None = 0
    reseed: bool = False
    batch_rows: int = DEFAULT_BATCH_ROWS
    curve_points: int = 64

    def identity(self) -> dict:
        return {
            "learner": self.learner,
            "train": self.train.describe(),
            "test": self.test.describe() if self.test else None,
            "repeats": self.repeats,
            "shuffle_seed": self.shuffle_seed,
            "reseed": self.reseed,
            "batch_rows": self.batch_rows,
            "curve_points": self.curve_points,
        }

    @property
    def task(self) -> str:
        return self.train.task

    def metric_names(self) -> list[str]:
        return experiment_metrics(self.task, self.test is not None)

    def default_metric(self) -> str:
        return ranking_metric(self.task)

    def batch_rows_of(self, point: Point) -> int:
        """Rows per update for ``point``: :attr:`batch_rows`, rounded for a mini-batch learner."""
        try:
            learner = make_learner(self.learner, **point.params)
        except (TypeError, ValueError):  # an invalid point fails in its runs, where it is recorded
            return self.batch_rows
        return batch_rows_for(learner, self.batch_rows)

    def tasks(self, point: Point) -> list[RunTask]:
        params = tuple(sorted(point.params.items()))
        batch_rows = self.batch_rows_of(point)
        return [RunTask(point.index, r, self.learner, params, self.train, self.test, self.shuffle_seed,
                        self.reseed, batch_rows, self.curve_points) for r in range(self.repeats)]


def _row(settings: SweepSettings, point: Point, results: list[dict]) -> dict:
    """One results-table row from the runs of a point."""
    results = sorted(results, key=lambda r: r["run"])
    errors = [r["error"] for r in results if not r["ok"]]
    diverged = [f"run {r['run']} {r['diverged']}" for r in results if r["ok"] and r.get("diverged")]
    row = {
        "point": point.index,
        "learner": settings.learner,
        "params": point.key,
        "status": "error" if errors else "diverged" if diverged else "ok",
        "error": errors[0] if errors else diverged[0] if diverged else None,
        "runs": sum(r["ok"] for r in results),
        "seconds": float(sum(r["seconds"] for r in results)),
    }
    finished = [r for r in results if r["ok"]] if not errors else []
    for name in settings.metric_names():
        values = [r["metrics"][name] for r in finished]
        row[f"{name}_mean"], row[f"{name}_std"] = mean_std(values)
        row[f"{name}_runs"] = values
        # Every run permutes the same rows: one constant baseline for all (the first run's).
        row[f"{name}_baseline"] = next((r["baseline"][name] for r in finished if name in r.get("baseline", {})), None)
    row["one_class"] = any(r.get("one_class") for r in finished)
    curves = [r for r in results if r["ok"]] if not errors else []
    row["curve_n"] = curves[0]["curve_n"] if curves else []
    row["curve_value"] = np.mean([c["curve_value"] for c in curves], axis=0).tolist() if curves else []
    for name, value in point.swept.items():
        row[f"param_{name}"] = value
    return row


def _schema(settings: SweepSettings, swept_types: dict[str, pa.DataType], space: dict, rank_by: str | None) -> pa.Schema:
    fields = [
        ("point", pa.int64()), ("learner", pa.string()), ("params", pa.string()), ("status", pa.string()),
        ("error", pa.string()), ("runs", pa.int64()), ("seconds", pa.float64()),
    ]
    for name in settings.metric_names():
        fields += [(f"{name}_mean", pa.float64()), (f"{name}_std", pa.float64()), (f"{name}_runs", pa.list_(pa.float64())),
                   (f"{name}_baseline", pa.float64())]
    fields += [("one_class", pa.bool_())]
    fields += [("curve_n", pa.list_(pa.int64())), ("curve_value", pa.list_(pa.float64()))]
    fields += [(f"param_{name}", t) for name, t in swept_types.items()]
    meta = {"version": _RESULTS_VERSION, "settings": settings.identity(), "space": space, "metrics": settings.metric_names(),
            "rank_by": rank_by or settings.default_metric()}
    return pa.schema(fields, metadata={_METADATA_KEY: json.dumps(meta, sort_keys=True).encode()})


def _param_type(values: list) -> pa.DataType:
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return pa.float64() if numeric else pa.string()


def _param_cell(value, dtype):
    if pa.types.is_float64(dtype):
        return float(value)
    return value if isinstance(value, str) else json.dumps(value)


def write_results(path: str, rows: list[dict], settings: SweepSettings, space: dict, swept: list[str],
                  rank_by: str | None = None) -> None:
    """Write the results table atomically (rows sorted by point); its metadata names the ranking metric."""
    rows = sorted(rows, key=lambda r: r["point"])
    swept_types = {name: _param_type([r[f"param_{name}"] for r in rows if f"param_{name}" in r]) for name in swept}
    schema = _schema(settings, swept_types, space, rank_by)
    columns = {}
    for field in schema:
        if field.name.startswith("param_"):
            columns[field.name] = [_param_cell(r.get(field.name), field.type) if r.get(field.name) is not None else None for r in rows]
        else:
            columns[field.name] = [r.get(field.name) for r in rows]
    table = pa.Table.from_pydict(columns, schema=schema)
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def read_results(path: str) -> tuple[list[dict], dict]:
    """Rows (dicts) and metadata of a results table written by a sweep."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as err:
        raise ValueError(f"{path}: not a readable results table ({err})") from None
    meta = (table.schema.metadata or {}).get(_METADATA_KEY)
    if meta is None:
        raise ValueError(f"{path}: not an okl sweep results table (no {_METADATA_KEY.decode()} metadata)")
    return _current_names(table.to_pylist(), json.loads(meta))


def _current_names(rows: list[dict], meta: dict) -> tuple[list[dict], dict]:
    """Rows and metadata with today's metric names (tables of okl <= 0.1 say ``online_error``)."""
    def renamed(key: str) -> str:
        for suffix in ("_mean", "_std", "_runs"):
            if key.endswith(suffix):
                return experiment_metric(key[: -len(suffix)]) + suffix
        return key

    rows = [{renamed(k): v for k, v in row.items()} for row in rows]
    meta = {**meta, "metrics": [experiment_metric(m) for m in meta.get("metrics", [])]}
    if meta.get("rank_by"):
        meta["rank_by"] = experiment_metric(meta["rank_by"])
    return rows, meta


def ranked(rows: list[dict], metric: str) -> list[dict]:
    """Rows ordered best first by ``metric`` mean (lower is better); failed points last."""
    def key(r):
        value = r.get(f"{metric}_mean")
        bad = r["status"] != "ok" or value is None or math.isnan(value)
        return (bad, value if not bad else 0.0, r["point"])

    return sorted(rows, key=key)


def baseline_flag(row: dict, metric: str) -> str | None:
    """Why an ``ok`` row's result must not be read as a plain number, or None.

    ``no better than the majority class`` (the mean, the median) when its ``metric`` mean
    does not beat the constant baseline of the same rows
    (:func:`okl_core.evaluation.beats_baseline`), and ``one class for every row`` when the
    model answered one class. Rows of tables written before baselines were kept have none.
    """
    if row["status"] != "ok":
        return None
    flags = []
    baseline = row.get(f"{metric}_baseline")
    if baseline is not None and not beats_baseline(row.get(f"{metric}_mean", math.nan), baseline):
        flags.append(NOT_BETTER.format(baseline_name(metric)))
    if row.get("one_class"):
        flags.append("one class for every row")
    return "; ".join(flags) or None


def markdown_table(rows: list[dict], metric: str, swept: list[str]) -> str:
    """Markdown table of the points, best first, each beside the constant baseline of its rows.

    A point no better than the baseline (or answering one class) says so in its status
    (:func:`baseline_flag`); a diverged one says where (the learner's loss turned NaN or
    inf, or exploded: :mod:`okl_core.divergence`).
    """
    head = ["rank", "point", *swept, f"{metric} (mean ± std)", f"{baseline_name(metric)} (baseline)", "runs", "seconds", "status"]
    cells = []
    for rank, r in enumerate(ranked(rows, metric), 1):
        params = json.loads(r["params"])
        status = "ok" if r["status"] == "ok" else f"{r['status']}: {r['error']}"
        flag = baseline_flag(r, metric)
        baseline = r.get(f"{metric}_baseline")
        cells.append([str(rank), str(r["point"]), *(format_value(params.get(n)) for n in swept),
                      mean_std_text(r.get(f"{metric}_mean"), r.get(f"{metric}_std")), "" if baseline is None else mean_std_text(baseline),
                      str(r["runs"]), f"{r['seconds']:.1f}", f"ok: {flag}" if flag else status])
    return _markdown(head, cells)


def best_config(rows: list[dict], rank_by: str) -> dict | None:
    """``{"learner", "params", "rank_by"}`` of the best ``ok`` point: the complete learner
    config, and the metric it was ranked by with its mean and std (``rank_by``)."""
    best = ranked(rows, rank_by)
    if not best or best[0]["status"] != "ok" or math.isnan(best[0].get(f"{rank_by}_mean", math.nan)):
        return None
    ranking = {"metric": rank_by, "mean": best[0][f"{rank_by}_mean"], "std": best[0].get(f"{rank_by}_std")}
    return {**learner_config(make_learner(best[0]["learner"], **json.loads(best[0]["params"]))), "rank_by": ranking}


@dataclasses.dataclass
class SweepResult:
    """What a sweep produced: rows (all points in the table), the best config, counts."""

    rows: list[dict]
    best: dict | None
    rank_by: str
    swept: list[str]
    ran: int
    skipped: int
    results_path: str | None
    best_path: str | None
    task_results: list[dict] = dataclasses.field(default_factory=list)


def check_settings(settings: SweepSettings, rank_by: str | None = None) -> str:
    """The ranking metric (``rank_by`` under today's name, or the default), after checking that
    ``settings`` can run: ``--reseed`` needs a ``seed`` parameter, the metric must be recorded.

    Raises
    ------
    ValueError
        One line naming the flag.
    """
    rank_by = experiment_metric(rank_by) if rank_by else settings.default_metric()
    if settings.reseed and "seed" not in {f.name for f in dataclasses.fields(learner_class(settings.learner).config_class)}:
        raise ValueError(f"--reseed: learner {settings.learner} has no seed parameter (its runs differ only by the order of the rows)")
    if rank_by not in settings.metric_names():
        raise ValueError(f"--rank_by {rank_by!r} is not available here; choose from {settings.metric_names()}"
                         + ("" if settings.test is not None else " (test_* metrics need --test)"))
    return rank_by


def sweep(settings: SweepSettings, points: list[Point], *, out_dir: str | None = None, rank_by: str | None = None,
          resume: bool = False, client=None, space: dict | None = None, swept: list[str] | None = None,
          progress=None, on_result: Callable[[dict], None] | None = None) -> SweepResult:
    """Run every point of ``points`` ``settings.repeats`` times; table, best config.

    Parameters
    ----------
    settings : SweepSettings
    points : list of Point
    out_dir : str, optional
        Directory for ``results.parquet``, ``results.md`` and ``best.json`` (None: keep
        everything in memory).
    rank_by : str, optional
        Ranking metric (default :meth:`SweepSettings.default_metric`).
    resume : bool
        Skip the points already ``ok`` in ``out_dir/results.parquet``.
    client : distributed.Client or None
        None runs in this process.
    space : dict, optional
        Description of the search space, recorded in the table's metadata.
    swept : list of str, optional
        Names shown as columns (default: the keys of the points' ``swept`` dicts).
    progress : file, optional
        Stream for progress lines (None: quiet).
    on_result : callable, optional
        Called with each run's raw result as it arrives.
    """
    rank_by = check_settings(settings, rank_by)
    swept = list(swept) if swept is not None else list(dict.fromkeys(k for p in points for k in p.swept))
    space = space or {}
    results_path = os.path.join(out_dir, RESULTS_FILE) if out_dir else None
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    if resume and not results_path:
        raise ValueError("resume needs an output directory")
    identities = {p.index: point_identity(settings.learner, p.params) for p in points}
    done_rows = _finished_rows(results_path, settings, set(identities.values()), progress) if resume and results_path else {}
    if out_dir:
        _remove_best(out_dir)
    todo = [p for p in points if identities[p.index] not in done_rows]
    rows = [_as_point(done_rows[identities[p.index]], p) for p in points if identities[p.index] in done_rows]
    tasks = [t for p in todo for t in settings.tasks(p)]
    by_index = {p.index: p for p in todo}
    pending: dict[int, list[dict]] = collections.defaultdict(list)
    tracker = RunProgress(len(tasks), len(todo), rank_by, progress)
    all_results = []
    for result in execute(tasks, client):
        all_results.append(result)
        point = by_index[result["point"]]
        pending[point.index].append(result)
        if on_result is not None:
            on_result(result)
        if len(pending[point.index]) == settings.repeats:
            rows.append(_row(settings, point, pending.pop(point.index)))
            tracker.point_done()
            if results_path:
                write_results(results_path, rows, settings, space, swept, rank_by)
        tracker.run_done(result, point.index, point.swept)
    if results_path and not todo:
        write_results(results_path, rows, settings, space, swept, rank_by)
    rows = sorted(rows, key=lambda r: r["point"])
    best = best_config(rows, rank_by)
    best_path = None
    if out_dir:
        write_text(os.path.join(out_dir, MARKDOWN_FILE), markdown_table(rows, rank_by, swept))
        if best is not None:
            best_path = write_json(os.path.join(out_dir, BEST_FILE), best, indent=2, sort_keys=True)
    return SweepResult(rows=rows, best=best, rank_by=rank_by, swept=swept, ran=len(todo), skipped=len(points) - len(todo),
                       results_path=results_path, best_path=best_path, task_results=all_results)


_LEGACY_SETTINGS = {"curve_points": 64}  # tables written before a setting was recorded: its value then


def _finished_rows(results_path: str, settings: SweepSettings, identities: set[str], progress) -> dict[str, dict]:
    """The finished rows of an earlier sweep by :func:`point_identity` (``identities``: this sweep's points').

    Its settings must match, and each of its points must be one of ``points``: a resume may
    add points to a space (a longer list, more samples), never mix another space's points
    into this table (they would be ranked and chosen as best under this sweep's name).
    """
    if not os.path.exists(results_path):
        if progress is not None:
            print(f"--resume: nothing at {results_path} yet, running every point", file=progress)
        return {}
    old_rows, meta = read_results(results_path)
    stored = {**_LEGACY_SETTINGS, **meta["settings"]}
    mismatched = sorted(k for k, v in settings.identity().items() if stored.get(k) != v)
    if mismatched:
        raise ValueError(f"--resume: {results_path} was made with other settings ({', '.join(mismatched)} differ); "
                         "use another --output or the same settings")
    by_identity = {point_identity(settings.learner, json.loads(r["params"])): r for r in old_rows}
    outside = [r for k, r in by_identity.items() if k not in identities]
    if outside:
        raise ValueError(f"--resume: {results_path} holds {len(outside)} point(s) outside this search space "
                         f"(point {outside[0]['point']}: {outside[0]['params']}); it was made over {json.dumps(meta.get('space'))}, "
                         "this sweep's points do not include them: resume with that space (more values may be added), "
                         "use another --output, or --overwrite")
    return {k: r for k, r in by_identity.items() if r["status"] in _FINISHED}


def _as_point(row: dict, point: Point) -> dict:
    """``row`` under ``point``'s index, parameters and swept columns (an equal config typed otherwise)."""
    row = {k: v for k, v in row.items() if not k.startswith("param_")}
    return {**row, "point": point.index, "params": point.key, **{f"param_{n}": v for n, v in point.swept.items()}}


def _remove_best(out_dir: str) -> None:
    """Delete ``best.json`` before the results change: it never outlives the table it was chosen
    from (a sweep that chooses none, or is interrupted, leaves none)."""
    try:
        os.remove(os.path.join(out_dir, BEST_FILE))
    except FileNotFoundError:
        pass


def make_points(learner: str, space: SearchSpace, source: DataSource, samples: int | None = None, search_seed: int = 0) -> list[Point]:
    """Grid (or ``samples`` random) points of ``space``, parameters derived from the data added
    and resolved (:func:`okl_experiments.params.learner_params`: ``n_inputs``, ``"median"`` ...).

    Raises
    ------
    ValueError
        Before anything runs: a parameter the learner does not have, or a learner (or a point
        of it) for another task than the data's -- the messages of ``pipelines.train``.
    """
    config_fields = dataclasses.fields(learner_class(learner).config_class)
    space = space.with_integers({f.name for f in config_fields if f.type in (int, "int")})
    values = space.sample(samples, search_seed) if samples else space.grid()
    swept, facts = space.swept, source.facts()
    for v in values:
        check_fit(learner, v, facts)
    points, identities = [], []
    for i, v in enumerate(values):
        params = learner_params(learner, v, facts)
        built = _built(learner, params)
        if built is not None:  # an invalid value fails that point's runs, where it is recorded
            check_task(built, facts)
        points.append(Point(i, {k: v[k] for k in swept}, params))
        identities.append(point_identity(learner, params, built))
    _refuse_repeated(points, identities)
    return points


def _refuse_repeated(points: list[Point], identities: list[str]) -> None:
    """Two points of one configuration (``sigma=2,2.0``) would run it twice and list it twice."""
    seen: dict[str, Point] = {}
    for point, identity in zip(points, identities):
        first = seen.setdefault(identity, point)
        if first is not point:
            raise ValueError(f"--grid: points {first.index} {point_key(first.swept)} and {point.index} {point_key(point.swept)} "
                             "are the same learner configuration; list each value once")
