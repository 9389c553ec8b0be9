"""Hyperparameter sweeps of okl learners on dask.distributed (DESIGN.md, "Dask").

Example::

    python -m pipelines.sweep --input data/a9a --learner fogd \\
        --grid sigma=2,4,8 eta=0.002,0.02 n_components=400 --repeats 5 --workers 2

Each grid point runs ``--repeats`` times, run ``r`` on the data in the order of
``okl_core.random.permutation(n, shuffle_seed, r)`` (all runs are random permutations;
``--order file`` keeps the stored order), folding the okl_core learner over the rows in
batches (:func:`okl_core.evaluation.run_online`) and, with ``--test``, scoring the final
state on the test set. ``--reseed`` also gives run ``r`` the model seed ``seed + r`` (new
random features per run), otherwise every run uses the point's seed.

How it runs
-----------
* One Dask task per (point, run): a small :class:`RunTask` naming the learner, its
  parameters and the data *source* (a loader and a path), never the data. A worker loads
  each source once and keeps it in a per-process cache keyed by the source
  (:mod:`pipelines.runner`), so the data crosses the network zero times; the path must be
  readable where the workers run.
* ``--scheduler`` unset: a ``LocalCluster`` of ``--workers`` processes with one thread
  each; ``--scheduler tcp://host:8786``: an existing cluster; ``--scheduler serial``: in
  this process, without Dask (debugging, references).
* Results stream back with ``distributed.as_completed``; a progress line per finished run
  goes to stderr. When all runs of a point are in, the point's mean +- std (sample std,
  ddof = 1) lands in ``OUT/results.parquet`` (rewritten atomically after every point, so an
  interrupted sweep keeps what it finished) and a Markdown table is printed at the end.
* A run that raises (invalid parameters, a learner/task mismatch, a dead worker) marks its
  point ``error`` with the message; the sweep goes on.
* ``--resume`` keeps the points of ``OUT/results.parquet`` whose status is ``ok`` and runs
  the rest (failed points are retried). The settings that change the numbers (learner,
  data, test data, repeats, order, seeds, batch rows) must match the file's.
* The best point by ``--metric`` (lower is better; ties: lower point index) is written to
  ``OUT/best.json`` as ``{"learner": name, "params": {...}}`` with the learner's complete
  configuration: the format ``pipelines.train --config`` reads, and ``make_learner(name,
  **params)`` accepts.

Metrics: ``online_error`` / ``online_mse`` / ``online_mae`` (prequential, over the
stream) and, with ``--test``, ``test_error`` / ``test_mse`` / ``test_mae``. Every metric
of the task is recorded; ``--metric`` picks the ranking one (default: ``test_`` with
``--test``, else ``online_``; ``error`` for classification, ``mse`` for regression).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import io
import json
import math
import os
import sys
import time
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from okl_core.evaluation import default_metric, mean_std, task_metrics
from okl_core.registry import learner_class, learner_names, make_learner
from okl_core.state import atomic_write_bytes
from pipelines.grid import SearchSpace, point_key
from pipelines.runner import DataSource, RunTask, dask_client, execute, okl_source

__all__ = [
    "Point",
    "SweepSettings",
    "SweepResult",
    "make_points",
    "resolve_params",
    "sweep",
    "read_results",
    "markdown_table",
    "run",
]

RESULTS_FILE = "results.parquet"
BEST_FILE = "best.json"
MARKDOWN_FILE = "results.md"
_METADATA_KEY = b"okl_sweep"
_RESULTS_VERSION = 1


# -- points, settings, results -----------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Point:
    """A grid point: its index, the varying values, and the full learner parameters."""

    index: int
    swept: dict
    params: dict

    @property
    def key(self) -> str:
        return point_key(self.params)


def resolve_params(learner: str, values: dict, source: DataSource) -> dict:
    """Learner parameters for ``values`` on ``source``: adds ``n_inputs`` (and ``n_classes``).

    Raises
    ------
    ValueError
        ``values`` set a parameter the data determines to another value.
    """
    fields = {f.name for f in dataclasses.fields(learner_class(learner).config_class)}
    derived = {"n_inputs": source.n_features}
    if source.task == "multiclass" and "n_classes" in fields:
        derived["n_classes"] = source.n_classes
    for name, value in derived.items():
        if name in values and values[name] != value:
            raise ValueError(f"{name}={values[name]!r} contradicts the data ({name} = {value})")
    return {**values, **derived}


@dataclasses.dataclass(frozen=True)
class SweepSettings:
    """What determines the numbers of a sweep (checked on ``--resume``)."""

    learner: str
    train: DataSource
    test: DataSource | None = None
    repeats: int = 1
    shuffle_seed: int | None = 0
    reseed: bool = False
    batch_rows: int = 4096
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
        }

    @property
    def task(self) -> str:
        return self.train.task

    def metric_names(self) -> list[str]:
        names = [f"online_{m}" for m in task_metrics(self.task)]
        if self.test is not None:
            names += [f"test_{m}" for m in task_metrics(self.task)]
        return names

    def default_metric(self) -> str:
        return f"{'test' if self.test is not None else 'online'}_{default_metric(self.task)}"

    def tasks(self, point: Point) -> list[RunTask]:
        params = tuple(sorted(point.params.items()))
        return [RunTask(point.index, r, self.learner, params, self.train, self.test, self.shuffle_seed,
                        self.reseed, self.batch_rows, self.curve_points) for r in range(self.repeats)]


def _row(settings: SweepSettings, point: Point, results: list[dict]) -> dict:
    """One results-table row from the runs of a point."""
    results = sorted(results, key=lambda r: r["run"])
    errors = [r["error"] for r in results if not r["ok"]]
    row = {
        "point": point.index,
        "learner": settings.learner,
        "params": point.key,
        "status": "error" if errors else "ok",
        "error": errors[0] if errors else None,
        "runs": sum(r["ok"] for r in results),
        "seconds": float(sum(r["seconds"] for r in results)),
    }
    for name in settings.metric_names():
        values = [r["metrics"][name] for r in results if r["ok"]] if not errors else []
        row[f"{name}_mean"], row[f"{name}_std"] = mean_std(values)
        row[f"{name}_runs"] = values
    curves = [r for r in results if r["ok"]] if not errors else []
    row["curve_n"] = curves[0]["curve_n"] if curves else []
    row["curve_value"] = np.mean([c["curve_value"] for c in curves], axis=0).tolist() if curves else []
    for name, value in point.swept.items():
        row[f"param_{name}"] = value
    return row


def _schema(settings: SweepSettings, swept_types: dict[str, pa.DataType], space: dict) -> pa.Schema:
    fields = [
        ("point", pa.int64()), ("learner", pa.string()), ("params", pa.string()), ("status", pa.string()),
        ("error", pa.string()), ("runs", pa.int64()), ("seconds", pa.float64()),
    ]
    for name in settings.metric_names():
        fields += [(f"{name}_mean", pa.float64()), (f"{name}_std", pa.float64()), (f"{name}_runs", pa.list_(pa.float64()))]
    fields += [("curve_n", pa.list_(pa.int64())), ("curve_value", pa.list_(pa.float64()))]
    fields += [(f"param_{name}", t) for name, t in swept_types.items()]
    meta = {"version": _RESULTS_VERSION, "settings": settings.identity(), "space": space, "metrics": settings.metric_names()}
    return pa.schema(fields, metadata={_METADATA_KEY: json.dumps(meta, sort_keys=True).encode()})


def _param_type(values: list) -> pa.DataType:
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return pa.float64() if numeric else pa.string()


def _param_cell(value, dtype):
    if pa.types.is_float64(dtype):
        return float(value)
    return value if isinstance(value, str) else json.dumps(value)


def write_results(path: str, rows: list[dict], settings: SweepSettings, space: dict, swept: list[str]) -> None:
    """Write the results table atomically (rows sorted by point)."""
    rows = sorted(rows, key=lambda r: r["point"])
    swept_types = {name: _param_type([r[f"param_{name}"] for r in rows if f"param_{name}" in r]) for name in swept}
    schema = _schema(settings, swept_types, space)
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
    return table.to_pylist(), json.loads(meta)


def _format_value(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _format_metric(mean: float, std: float) -> str:
    if mean is None or math.isnan(mean):
        return "-"
    return f"{mean:.4f}" if std is None or math.isnan(std) else f"{mean:.4f} ± {std:.4f}"


def ranked(rows: list[dict], metric: str) -> list[dict]:
    """Rows ordered best first by ``metric`` mean (lower is better); failed points last."""
    def key(r):
        value = r.get(f"{metric}_mean")
        bad = r["status"] != "ok" or value is None or math.isnan(value)
        return (bad, value if not bad else 0.0, r["point"])

    return sorted(rows, key=key)


def markdown_table(rows: list[dict], metric: str, swept: list[str]) -> str:
    """Markdown table of the points, best first."""
    head = ["rank", "point", *swept, f"{metric} (mean ± std)", "runs", "seconds", "status"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rank, r in enumerate(ranked(rows, metric), 1):
        params = json.loads(r["params"])
        status = "ok" if r["status"] == "ok" else f"error: {r['error']}".replace("|", "\\|")
        cells = [str(rank), str(r["point"]), *(_format_value(params.get(n)) for n in swept),
                 _format_metric(r.get(f"{metric}_mean"), r.get(f"{metric}_std")), str(r["runs"]), f"{r['seconds']:.1f}", status]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best_config(rows: list[dict], metric: str) -> dict | None:
    """``{"learner", "params"}`` of the best ``ok`` point, with the complete learner config."""
    best = ranked(rows, metric)
    if not best or best[0]["status"] != "ok" or math.isnan(best[0].get(f"{metric}_mean", math.nan)):
        return None
    learner = make_learner(best[0]["learner"], **json.loads(best[0]["params"]))
    return {"learner": learner.name, "params": dataclasses.asdict(learner.config)}


@dataclasses.dataclass
class SweepResult:
    """What a sweep produced: rows (all points in the table), the best config, counts."""

    rows: list[dict]
    best: dict | None
    metric: str
    swept: list[str]
    ran: int
    skipped: int
    results_path: str | None
    best_path: str | None
    task_results: list[dict] = dataclasses.field(default_factory=list)


class _Progress:
    """One line per finished run on ``stream``: a bar, counts, elapsed and remaining time."""

    def __init__(self, total_runs: int, total_points: int, metric: str, stream=None, width: int = 20):
        self.total_runs, self.total_points, self.metric = total_runs, total_points, metric
        self.stream, self.width = stream, width
        self.runs = self.points = 0
        self.start = time.perf_counter()

    def run_done(self, result: dict, point: Point) -> None:
        self.runs += 1
        if self.stream is None:
            return
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.runs * (self.total_runs - self.runs)
        filled = int(self.width * self.runs / max(self.total_runs, 1))
        values = ", ".join(f"{k}={_format_value(v)}" for k, v in point.swept.items()) or "-"
        outcome = (f"{self.metric} {result['metrics'].get(self.metric, math.nan):.4f}" if result["ok"] else f"FAILED {result['error']}")
        print(f"[{'#' * filled}{'.' * (self.width - filled)}] {self.runs}/{self.total_runs} runs, "
              f"{self.points}/{self.total_points} points, {elapsed:.1f} s, ~{eta:.0f} s left | "
              f"point {point.index} ({values}) run {result['run']}: {outcome} ({result['seconds']:.2f} s)",
              file=self.stream, flush=True)

    def point_done(self) -> None:
        self.points += 1


def sweep(settings: SweepSettings, points: list[Point], *, out_dir: str | None = None, metric: str | None = None,
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
    metric : str, optional
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
    metric = metric or settings.default_metric()
    if metric not in settings.metric_names():
        raise ValueError(f"--metric {metric!r} is not available here; choose from {settings.metric_names()}"
                         + ("" if settings.test is not None else " (test_* metrics need --test)"))
    swept = list(swept) if swept is not None else list(dict.fromkeys(k for p in points for k in p.swept))
    space = space or {}
    results_path = os.path.join(out_dir, RESULTS_FILE) if out_dir else None
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    if resume and not results_path:
        raise ValueError("resume needs an output directory")
    done_rows = _finished_rows(results_path, settings, progress) if resume else {}
    todo = [p for p in points if p.key not in done_rows]
    rows = _kept_rows(points, done_rows)
    tasks = [t for p in todo for t in settings.tasks(p)]
    by_index = {p.index: p for p in todo}
    pending: dict[int, list[dict]] = collections.defaultdict(list)
    tracker = _Progress(len(tasks), len(todo), metric, progress)
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
                write_results(results_path, rows, settings, space, swept)
        tracker.run_done(result, point)
    if results_path and not todo:
        write_results(results_path, rows, settings, space, swept)
    rows = sorted(rows, key=lambda r: r["point"])
    best = best_config(rows, metric)
    best_path = None
    if out_dir:
        atomic_write_bytes(os.path.join(out_dir, MARKDOWN_FILE), (markdown_table(rows, metric, swept) + "\n").encode())
        if best is not None:
            best_path = os.path.join(out_dir, BEST_FILE)
            atomic_write_bytes(best_path, (json.dumps(best, indent=2, sort_keys=True) + "\n").encode())
    return SweepResult(rows=rows, best=best, metric=metric, swept=swept, ran=len(todo), skipped=len(points) - len(todo),
                       results_path=results_path, best_path=best_path, task_results=all_results)


def _finished_rows(results_path: str, settings: SweepSettings, progress) -> dict[str, dict]:
    """The ``ok`` rows of an earlier sweep by point key (its settings must match)."""
    if not os.path.exists(results_path):
        if progress is not None:
            print(f"--resume: nothing at {results_path} yet, running every point", file=progress)
        return {}
    old_rows, meta = read_results(results_path)
    mismatched = sorted(k for k, v in settings.identity().items() if meta["settings"].get(k) != v)
    if mismatched:
        raise ValueError(f"--resume: {results_path} was made with other settings ({', '.join(mismatched)} differ); "
                         "use another --out or the same settings")
    return {r["params"]: r for r in old_rows if r["status"] == "ok"}


def _kept_rows(points: list[Point], done_rows: dict[str, dict]) -> list[dict]:
    """Earlier rows renumbered: this grid's points keep their index, others follow them."""
    rows = [dict(done_rows[p.key], point=p.index) for p in points if p.key in done_rows]
    current = {p.key for p in points}
    extra = sorted((r for k, r in done_rows.items() if k not in current), key=lambda r: r["point"])
    return rows + [dict(r, point=len(points) + i) for i, r in enumerate(extra)]


def make_points(learner: str, space: SearchSpace, source: DataSource, samples: int | None = None, search_seed: int = 0) -> list[Point]:
    """Grid (or ``samples`` random) points of ``space`` with data-derived parameters added."""
    config_fields = dataclasses.fields(learner_class(learner).config_class)
    space = space.with_integers({f.name for f in config_fields if f.type in (int, "int")})
    values = space.sample(samples, search_seed) if samples else space.grid()
    swept = space.swept
    return [Point(i, {k: v[k] for k in swept}, resolve_params(learner, v, source)) for i, v in enumerate(values)]


# -- command line ----------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipelines.sweep", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", required=True, help="okl data set (directory with dataset.json, Parquet file or glob)")
    p.add_argument("--learner", required=True, help=f"learner name ({', '.join(learner_names())})")
    p.add_argument("--grid", nargs="+", default=[], metavar="NAME=VALUES",
                   help="parameters: name=v1,v2 (list), name=lo:hi (log-uniform), name=lo..hi (uniform)")
    p.add_argument("--grid-file", help="JSON (or YAML, with PyYAML) mapping of parameter -> values")
    p.add_argument("--samples", type=int, help="random search: draw this many points from the space")
    p.add_argument("--search-seed", type=int, default=0, help="seed of the random search (default 0)")
    p.add_argument("--repeats", type=int, default=1, help="runs per point, each on its own permutation (default 1)")
    p.add_argument("--shuffle-seed", type=int, default=0, help="run r uses permutation (shuffle_seed, r) (default 0)")
    p.add_argument("--order", choices=["shuffled", "file"], default="shuffled", help="permute rows per run, or keep the stored order")
    p.add_argument("--reseed", action="store_true", help="run r uses model seed = seed + r (new features per run)")
    p.add_argument("--test", help="held-out okl data set: adds test_* metrics (the default ranking metric then)")
    p.add_argument("--metric", help="ranking metric: online_error|online_mse|online_mae|test_error|test_mse|test_mae")
    p.add_argument("--batch-rows", type=int, default=4096, help="rows per learner update call (default 4096)")
    p.add_argument("--curve-points", type=int, default=64, help="online curve checkpoints per run: this many log-spaced plus as many evenly spaced (default 64)")
    p.add_argument("--scheduler", help="scheduler address, or 'serial' (default: a new LocalCluster)")
    p.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes, 1 thread each (default 2)")
    p.add_argument("--dashboard", action="store_true", help="serve the LocalCluster's dashboard on :8787 (needs bokeh)")
    p.add_argument("--out", default="sweep", help="output directory: results.parquet, results.md, best.json (default ./sweep)")
    p.add_argument("--resume", action="store_true", help="skip points already ok in OUT/results.parquet")
    return p


def run(argv: list[str] | None = None) -> SweepResult:
    """Parse flags, run the sweep, print the table and where the files went."""
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"pipelines.sweep: error: {err}") from None


def _run(args) -> SweepResult:
    learner_class(args.learner)  # unknown names fail before any work
    for flag, value, low in (("--repeats", args.repeats, 1), ("--workers", args.workers, 1), ("--batch-rows", args.batch_rows, 1)):
        if value < low:
            raise ValueError(f"{flag} must be >= {low}, got {value}")
    space = SearchSpace.from_tokens(args.grid)
    if args.grid_file:
        space = SearchSpace.from_file(args.grid_file).merged(space)
    train = okl_source(args.input)
    test = okl_source(args.test) if args.test else None
    if test is not None and (test.n_features != train.n_features or test.task != train.task):
        raise ValueError(f"--test {args.test}: {test.task} with {test.n_features} features, but --input is {train.task} with {train.n_features}")
    points = make_points(args.learner, space, train, args.samples, args.search_seed)
    settings = SweepSettings(learner=args.learner, train=train, test=test, repeats=args.repeats,
                             shuffle_seed=None if args.order == "file" else args.shuffle_seed, reseed=args.reseed,
                             batch_rows=args.batch_rows, curve_points=args.curve_points)
    print(f"sweep: {args.learner} on {args.input} ({train.n_rows} rows), {len(points)} points x {args.repeats} runs", file=sys.stderr)
    with dask_client(args.scheduler, args.workers, args.dashboard) as client:
        result = sweep(settings, points, out_dir=args.out, metric=args.metric, resume=args.resume, client=client,
                       space=space.describe(), swept=space.swept, progress=sys.stderr)
    print(markdown_table(result.rows, result.metric, result.swept))
    workers = {r["worker"] for r in result.task_results}
    loads = sum(r["loaded"] for r in result.task_results)
    print(f"\n{len(result.task_results)} runs on {len(workers)} worker(s); data sets loaded {loads} time(s)")
    if args.resume:
        print(f"{result.ran} points run, {result.skipped} skipped (already in {result.results_path})")
    print(f"\nresults: {result.results_path}")
    if result.best is not None:
        print(f"best ({result.metric}): {json.dumps(result.best['params'], sort_keys=True)} -> {result.best_path}")
    else:
        print("no point succeeded: no best config written")
    return result


if __name__ == "__main__":
    run()
