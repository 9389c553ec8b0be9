"""Every learner with its default parameters against the constant baseline: the defaults table.

A learner's defaults must learn: built with every parameter left at its default -- only
what the data dictates (``n_inputs``, ``n_classes``, and the values derived from the data:
:func:`okl_experiments.params.learner_params`) -- each registered learner must be clearly
better (:func:`okl_core.evaluation.beats_baseline`) than the best constant answer of the
same rows (:func:`okl_core.evaluation.constant_baseline`: the majority class, or the mean)
on the data sets of its task, measured as ``okl train`` measures a run: the online
(predict-then-learn) metric over the training rows, in file order, and the metric of the
trained model on held-out rows.

Data sets (:data:`DATA_SETS`), by task:

* ``a9a`` (binary): the LIBSVM a9a training file, tested on ``a9a.t``;
* ``mnist`` (multiclass): the MNIST test digits (pixels / 255), the first 80% learned,
  the last 20% held out;
* ``synthetic``: the built-in demo (``okl train`` with no ``--input``: the DSG synthetic
  regression, :func:`okl_core.data.synthetic.dsg_regression`) for regression learners, and
  okl's synthetic classification stream :func:`okl_core.data.synthetic.gaussian_blobs`
  (8 clusters in 10 dimensions; 2 clusters, labels -1 / +1, for binary learners);
* ``csv``: a generated CSV of mixed-scale numeric features (:func:`write_mixed_csv`) with a
  binary, a multiclass and a regression target, converted as ``okl prepare`` converts it
  (no scaling).

The real sets (a9a, MNIST) come from a data root (``--data_root``) and are left out, with
the reason, when their files are missing.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import tempfile
from typing import Callable, Iterable

import numpy as np

import okl_core
from okl_core.evaluation import beats_baseline, constant_baseline, default_metric, evaluate, run_online
from okl_core.random import block_bit_generator, standard_normal, uniform_open
from okl_experiments.params import MEDIAN_ROWS, DataFacts, batch_rows_for, build_learner

__all__ = [
    "DATA_SETS",
    "Split",
    "DefaultResult",
    "learner_task",
    "demo_params",
    "DEMO_SIGMA",
    "write_mixed_csv",
    "load_split",
    "run_default",
    "defaults_table",
    "table_markdown",
    "QUICK_ROWS",
    "FULL_ROWS",
    "write_table",
    "result_line",
    "DATA_TASKS",
]

DATA_SETS = ("a9a", "mnist", "synthetic", "csv")
"""The data sets of the defaults table, in column order."""

FULL_ROWS = {"a9a": (None, None), "mnist": (8000, 2000), "synthetic": (8192, 2048), "csv": (8000, 2000)}
"""Training and test rows of each data set in the full table (None: the whole file). The demo's
8,192 rows stay under the exact kernel ridge learners' ``max_rows`` (10,000)."""

DEMO_SIGMA = "0.2*median"
"""The built-in demo's bandwidth for every learner with a ``sigma``: its two inputs make the
median distance (about 5.2) wider than the target's rings (the DSG paper uses 0.1 x median
on this data set); ``okl train`` with no ``--input`` uses it unless ``--sigma`` is given."""

QUICK_ROWS = {"a9a": (3000, 2000), "mnist": (2000, 1000), "synthetic": (3000, 1000), "csv": (3000, 1000)}
"""Training and test rows of the quick table (the test suite's): the first rows of each set."""

CSV_COLUMNS = ("age", "income", "balance", "ratio", "visits", "score")
"""Feature columns of :func:`write_mixed_csv` (scales from ~1e-2 to ~1e5)."""


@dataclasses.dataclass(frozen=True)
class Split:
    """A data set's training and held-out rows for one task."""

    name: str
    task: str
    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    n_classes: int | None = None
    demo: bool = False
    """The built-in demo's rows: learned with :func:`demo_params`, as ``okl train`` does."""

    @property
    def facts(self) -> DataFacts:
        """What ``okl train`` derives parameters from: the shape, and the first rows for the median."""
        return DataFacts(self.X.shape[1], self.task, self.n_classes, len(self.y), rows=lambda: self.X[:MEDIAN_ROWS],
                         name=self.name)


@dataclasses.dataclass(frozen=True)
class DefaultResult:
    """One learner's default run on one data set, beside the constant baseline of the same rows.

    Attributes
    ----------
    learner, data, task, metric : str
    online, online_baseline : float
        The online metric over the training rows, and the best constant's over them.
    test, test_baseline : float
        The trained model's metric on the held-out rows, and the best constant's.
    params : dict
        The values derived from the data (``sigma``, ``horizon``...), as resolved.
    diverged : bool
        The run diverged, or could not run (``error``).
    seconds : float
    error : str
        Why the learner could not learn the rows at all (a capacity it would exceed), or "".
    """

    learner: str
    data: str
    task: str
    metric: str
    online: float
    online_baseline: float
    test: float
    test_baseline: float
    params: dict
    diverged: bool
    seconds: float
    error: str = ""

    @property
    def learns(self) -> bool:
        """Whether both the online and the test metric clearly beat their baselines."""
        return not self.diverged and beats_baseline(self.online, self.online_baseline) and beats_baseline(self.test, self.test_baseline)


def demo_params(name: str) -> dict:
    """The built-in demo's parameters of learner ``name`` beside its defaults (:data:`DEMO_SIGMA`)."""
    fields = {f.name for f in dataclasses.fields(okl_core.learner_class(name).config_class)}
    return {"sigma": DEMO_SIGMA} if "sigma" in fields else {}


def learner_task(name: str) -> str:
    """The task learner ``name`` is set up for with its default parameters."""
    cls = okl_core.learner_class(name)
    fields = {f.name for f in dataclasses.fields(cls.config_class)}
    task = getattr(cls.config_class, "task", None)
    if isinstance(task, str):
        return task
    if "n_classes" in fields and not any(f.name == "n_classes" and f.default is None for f in dataclasses.fields(cls.config_class)):
        return "multiclass"  # n_classes has no default: a multiclass learner
    params = {"n_inputs": 2, **({"horizon": 10} if "horizon" in fields else {})}
    return okl_core.make_learner(name, **params).task


def write_mixed_csv(path: str, n_rows: int, seed: int = 0) -> str:
    """Write a CSV of mixed-scale numeric features with ``binary``, ``multiclass`` and ``target`` columns.

    Features (:data:`CSV_COLUMNS`): an age (18-90), an income (log-normal, ~5e4), a
    balance (normal, mean 1e3, sd 3e3), a ratio in [0, 1], a visit count (0-20) and a score
    (normal, sd 0.01). The targets depend non-linearly on standardized features, every
    feature carrying some of the signal: ``target`` a smooth function plus noise, ``binary``
    its sign (``yes`` / ``no``), ``multiclass`` its tercile (``low`` / ``mid`` / ``high``).

    Returns
    -------
    str
        ``path``.
    """
    n = int(n_rows)
    normal = standard_normal(block_bit_generator(seed, 0), 6 * n).reshape(n, 6)
    uniform = uniform_open(block_bit_generator(seed, 1).random_raw(3 * n)).reshape(n, 3)
    age = 18 + 72 * uniform[:, 0]
    income = np.exp(10.8 + 0.5 * normal[:, 0])
    balance = 1000 + 3000 * normal[:, 1]
    ratio = uniform[:, 1]
    visits = np.floor(21 * uniform[:, 2])
    score = 0.01 * normal[:, 2]
    z = np.column_stack([(age - 54) / 21, (np.log(income) - 10.8) / 0.5, (balance - 1000) / 3000, (ratio - 0.5) / 0.29,
                         (visits - 10) / 6, score / 0.01])
    signal = (np.sin(1.5 * z[:, 0]) + 0.8 * z[:, 1] * z[:, 3] + np.tanh(2 * z[:, 2]) - 0.5 * z[:, 4] ** 2 + 0.5 * z[:, 5] + 0.5)
    target = 3 * signal + 0.5 * normal[:, 3]
    cuts = np.quantile(target, [1 / 3, 2 / 3])
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*CSV_COLUMNS, "binary", "multiclass", "target"])
        for i in range(n):
            writer.writerow([f"{age[i]:.1f}", f"{income[i]:.2f}", f"{balance[i]:.2f}", f"{ratio[i]:.4f}", int(visits[i]),
                             f"{score[i]:.6f}", "yes" if target[i] > 0 else "no",
                             ("low", "mid", "high")[int(np.searchsorted(cuts, target[i]))], f"{target[i]:.4f}"])
    return path


def _csv_split(task: str, n_train: int, n_test: int) -> Split:
    from okl_core.data.csv_table import convert_csv
    from okl_experiments.data import load_okl_dataset

    column = {"binary": "binary", "multiclass": "multiclass", "regression": "target"}[task]
    others = [c for c in ("binary", "multiclass", "target") if c != column]
    with tempfile.TemporaryDirectory() as tmp:
        path = write_mixed_csv(os.path.join(tmp, "mixed.csv"), n_train + n_test)
        convert_csv(path, os.path.join(tmp, "data"), target=column, drop=others, task=task,
                    classes=["no", "yes"] if task == "binary" else None)
        data = load_okl_dataset(os.path.join(tmp, "data"))
    return Split("csv", task, data.X[:n_train], data.y[:n_train], data.X[n_train:], data.y[n_train:], data.n_classes)


def _synthetic_split(task: str, n_train: int, n_test: int) -> Split:
    from okl_core.data.synthetic import dsg_regression, gaussian_blobs

    if task == "multiclass":
        X, y = gaussian_blobs(n_train + n_test, seed=0)
        return Split("synthetic", task, X[:n_train], y[:n_train], X[n_train:], y[n_train:], 8)
    if task == "binary":  # two Gaussian clusters, labels -1 / +1
        X, y = gaussian_blobs(n_train + n_test, seed=0, n_classes=2)
        y = (2 * y - 1).astype(np.int32)
        return Split("synthetic", task, X[:n_train], y[:n_train], X[n_train:], y[n_train:])
    X, y = dsg_regression(n_train, seed=0)  # the demo's training and test sets (seeds 0 and 1)
    X_test, y_test = dsg_regression(n_test, seed=1)
    return Split("synthetic", task, X, y, X_test, y_test, demo=True)


def _real_split(name: str, data_root: str, n_train: int | None, n_test: int | None) -> Split:
    from okl_experiments.data import load_real

    if name == "a9a":
        train, test = load_real("a9a", data_root), load_real("a9a.t", data_root)
        return Split("a9a", "binary", train.X[:n_train], train.y[:n_train], test.X[:n_test], test.y[:n_test])
    data = load_real("mnist-test", data_root)
    n_train = n_train or 8000
    stop = None if n_test is None else n_train + n_test
    return Split("mnist", "multiclass", data.X[:n_train], data.y[:n_train], data.X[n_train:stop], data.y[n_train:stop], 10)


DATA_TASKS = {"a9a": ("binary",), "mnist": ("multiclass",), "synthetic": ("binary", "multiclass", "regression"),
          "csv": ("binary", "multiclass", "regression")}
"""Data set -> the tasks it has rows for."""


def load_split(name: str, task: str, data_root: str | None = None, rows: tuple | None = None) -> Split | None:
    """Data set ``name`` of :data:`DATA_SETS` for ``task`` (None: the data set has no such task).

    ``rows``: ``(n_train, n_test)`` (default :data:`FULL_ROWS`). Raises FileNotFoundError
    when a real data set's files are not under ``data_root``.
    """
    if task not in DATA_TASKS[name]:
        return None
    n_train, n_test = rows or FULL_ROWS[name]
    if name in ("a9a", "mnist"):
        if data_root is None:
            raise FileNotFoundError(f"data set {name!r} needs a data root")
        return _real_split(name, data_root, n_train, n_test)
    loader = _csv_split if name == "csv" else _synthetic_split
    return loader(task, int(n_train), int(n_test))


def run_default(name: str, split: Split, params: dict | None = None) -> DefaultResult:
    """Learner ``name`` with its defaults (plus ``params``) learned on ``split`` as ``okl train`` does."""
    learner = build_learner(name, {**(demo_params(name) if split.demo else {}), **(params or {})}, split.facts)
    metric = default_metric(split.task)
    baselines = constant_baseline(split.task, split.y)[metric], constant_baseline(split.task, split.y_test)[metric]
    config = dataclasses.asdict(learner.config)
    derived = {k: config[k] for k in ("sigma", "horizon", "kernels") if k in config}
    try:
        run = run_online(learner, split.X, split.y, batch_rows=batch_rows_for(learner), curve_points=0)
    except okl_core.CapacityError as err:  # a default that cannot learn the data set at all
        return DefaultResult(name, split.name, split.task, metric, math.nan, baselines[0], math.nan, baselines[1], derived,
                             True, 0.0, str(err))
    test = evaluate(learner, run.state, split.X_test, split.y_test)
    online_value = okl_core.evaluation.metric_value(run.metrics, metric)
    test_value = okl_core.evaluation.metric_value(test, metric)
    return DefaultResult(name, split.name, split.task, metric, online_value, baselines[0], test_value, baselines[1], derived,
                         run.diverged or not math.isfinite(test_value), run.seconds)


def defaults_table(learners: Iterable[str] | None = None, data_sets: Iterable[str] = DATA_SETS, data_root: str | None = None,
                   rows: dict | None = None, on_result: Callable[[DefaultResult], None] | None = None) -> tuple[list, dict]:
    """Every learner's default run on every data set of its task.

    Parameters
    ----------
    learners : names (default: every registered learner).
    data_sets : names of :data:`DATA_SETS`.
    data_root : str, optional
        Where ``a9a/`` and ``mnist/`` are; without it (or without their files) they are skipped.
    rows : dict, optional
        Data set -> ``(n_train, n_test)`` (default :data:`FULL_ROWS`).
    on_result : callable, optional
        Called with each :class:`DefaultResult` as it is measured.

    Returns
    -------
    results : list of DefaultResult
    skipped : dict
        Data set -> why it was left out.
    """
    learners = list(learners or okl_core.learner_names())
    tasks = {name: learner_task(name) for name in learners}
    results, skipped = [], {}
    for data in data_sets:
        for task in sorted(set(tasks.values())):
            try:
                split = load_split(data, task, data_root, (rows or {}).get(data))
            except FileNotFoundError as err:
                skipped[data] = str(err)
                break
            if split is None:
                continue
            for name in (n for n in learners if tasks[n] == task):
                result = run_default(name, split)
                results.append(result)
                if on_result:
                    on_result(result)
    return results, skipped


def _cell(value: float, baseline: float) -> str:
    mark = "" if beats_baseline(value, baseline) else " **(not better)**"
    return f"{value:.4g} / {baseline:.4g}{mark}"


def table_markdown(results: list) -> str:
    """A Markdown table: learner x data set, ``test metric / baseline`` (and the online pair)."""
    data_sets = [d for d in DATA_SETS if any(r.data == d for r in results)]
    by = {(r.learner, r.data): r for r in results}
    lines = ["| learner | task | " + " | ".join(f"{d} test / baseline | {d} online / baseline" for d in data_sets) + " |",
             "|---|---|" + "---|---|" * len(data_sets)]
    for name in dict.fromkeys(r.learner for r in results):
        task = next(r.task for r in results if r.learner == name)
        cells = []
        for d in data_sets:
            r = by.get((name, d))
            cells += [_cell(r.test, r.test_baseline), _cell(r.online, r.online_baseline)] if r else ["", ""]
        lines.append(f"| {name} | {task} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def result_line(result: DefaultResult) -> str:
    """``fogd on a9a: test mistake_rate 0.1571 (baseline 0.2362), online 0.1872 (0.2408): learns``."""
    verdict = "learns" if result.learns else (f"error: {result.error}" if result.error else "NOT better than the baseline")
    return (f"{result.learner} on {result.data}: test {result.metric} {result.test:.4g} (baseline {result.test_baseline:.4g}), "
            f"online {result.online:.4g} ({result.online_baseline:.4g}): {verdict}")


def _summary(results: list, skipped: dict) -> list[str]:
    failing = [f"{r.learner} on {r.data}" for r in results if not r.learns]
    lines = [f"{sum(r.learns for r in results)} of {len(results)} default runs beat the constant baseline"
             + (f"; not better: {', '.join(failing)}" if failing else "")]
    lines += [f"skipped {name}: {why}" for name, why in skipped.items()]
    return lines


def write_table(results: list, skipped: dict, output: str) -> list[str]:
    """Write ``defaults.md`` (the table, :func:`table_markdown`) and ``defaults.json`` into ``output``.

    Returns
    -------
    list of str
        The paths written.
    """
    from okl_experiments.text import write_json, write_text

    os.makedirs(output, exist_ok=True)
    md = os.path.join(output, "defaults.md")
    text = ("Each cell: the metric (mistake rate, or MSE for regression) of the learner with its defaults / the "
            "best constant answer's on the same rows (majority class, or mean).\n\n" + table_markdown(results)
            + "\n" + "\n".join(f"- {line}" for line in _summary(results, skipped)) + "\n")
    write_text(md, text)
    path = os.path.join(output, "defaults.json")
    write_json(path, {"results": [{**dataclasses.asdict(r), "learns": r.learns} for r in results], "skipped": skipped})
    return [md, path]
