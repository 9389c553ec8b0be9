"""What a run reports of its online metric: the headline's names and the run's curves.

The headline metric of a task is :func:`okl_core.evaluation.default_metric` (the mistake
rate for classification, the mean squared error for regression); :func:`headline` says how
each output names it -- the key in a :meth:`okl_core.metrics.Prequential.summary`, the sum
in a per-batch record, the axis label -- and :func:`baseline_name` what the constant
answer it is compared with is called.

:func:`batch_curve` is what a training step records of each batch (cumulative points within
it); :func:`job_curves` turns a run's per-batch records (``metrics.json`` batches) into its
per-shard and merged curves on one x axis, rows learned by the whole job: the training
run's plot, ``pipelines.report curves`` on a ``metrics.json``, and anything else that draws
a run's curve take them from here.

Below ``transforms`` (the training step records the curves, the outputs step draws them)
and ``okl_experiments`` (sweeps and figures name their metrics after these).
"""

from __future__ import annotations

import dataclasses
import typing

import numpy as np

from okl_core.evaluation import canonical_metric, default_metric
from okl_core.learners.base import labels_from_scores
from okl_core.metrics import Prequential

__all__ = ["Headline", "headline", "metric_of", "baseline_name", "CURVE_POINTS", "batch_curve", "JobCurves", "job_curves"]

CURVE_POINTS = 8
"""Cumulative points a training batch records within itself (``batch_curve``): enough for a
curve of a two-batch run, 16 numbers per batch in ``metrics.json``."""


@dataclasses.dataclass(frozen=True)
class Headline:
    """How outputs name the headline metric of a task.

    Attributes
    ----------
    metric : str
        okl_core's name (``mistake_rate`` or ``mse``): the sweeps' ``online_<metric>``.
    summary_key : str
        Key in :meth:`okl_core.metrics.Prequential.summary` (``mistake_rate`` or ``mse``).
    batch_sum : str
        The per-batch record's sum it is the mean of (``mistakes`` or ``sum_squared_error``).
    label : str
        Axis label of the online curve.
    short : str
        Short name in titles (``error`` or ``MSE``).
    """

    metric: str
    summary_key: str
    batch_sum: str
    label: str
    short: str


_HEADLINES = {
    "mistake_rate": Headline("mistake_rate", "mistake_rate", "mistakes", "online mistake rate", "mistake rate"),
    "mse": Headline("mse", "mse", "sum_squared_error", "online mean squared error", "MSE"),
}

_CONSTANT_ANSWERS = {"mistake_rate": "majority class", "mse": "mean", "mae": "median"}


def headline(task: str) -> Headline:
    """The headline metric of ``task`` (``binary``, ``multiclass`` or ``regression``)."""
    return _HEADLINES[default_metric(task)]


def metric_of(name: str) -> str:
    """okl_core's metric name of an experiment metric: ``online_mistake_rate`` -> ``mistake_rate``.

    Old names are understood: ``online_error`` and ``error`` -> ``mistake_rate``.
    """
    if name.startswith(("online_", "test_")):
        name = name.split("_", 1)[1]
    return canonical_metric(name)


def baseline_name(task_or_metric: str) -> str:
    """What the constant baseline answers, in words: ``majority class``, ``mean`` or ``median``.

    ``task_or_metric``: a task (its headline metric's baseline) or a metric name
    (``mistake_rate``, ``online_mse``, ``test_mae`` ...): the median is the best constant
    for the absolute error (:func:`okl_core.evaluation.constant_baseline`).
    """
    if task_or_metric in ("binary", "multiclass", "regression"):
        return _CONSTANT_ANSWERS[default_metric(task_or_metric)]
    return _CONSTANT_ANSWERS[metric_of(task_or_metric)]


def batch_curve(task: str, scores, y, points: int = CURVE_POINTS) -> list[list]:
    """Cumulative ``[rows, headline sum]`` at ``points`` even steps through one batch.

    Point ``k`` (1..points) covers the batch's first ``len(y) * k // points`` rows, scored
    as :class:`okl_core.metrics.Prequential` scores them; the last is the whole batch, so it
    equals the batch record's own sum. A batch of fewer rows than ``points`` repeats rows.
    """
    key, n = headline(task).batch_sum, len(y)
    stops = [n * k // points for k in range(1, points + 1)]
    if key == "mistakes":  # classification: label the batch once, count the mistakes of each prefix
        wrong = np.concatenate([[0], np.cumsum(labels_from_scores(task, scores) != np.asarray(y))])
        return [[stop, int(wrong[stop])] for stop in stops]
    return [[stop, getattr(Prequential(task).add(scores[:stop], np.asarray(y)[:stop]), key)] for stop in stops]


class JobCurves(typing.NamedTuple):
    """A run's online curves on one x axis: rows learned by the whole job.

    ``x`` and ``merged`` are the job's points; ``shards[s]`` is ``(x, value)`` of shard
    ``s``, its x taken from the same job-wide axis (so every curve ends at the job's rows).
    """

    x: list
    merged: list
    shards: dict


def _points(batch: dict, key: str) -> list:
    """A batch record's cumulative points (records without ``curve``: its end only)."""
    return batch.get("curve") or [[batch["rows"], batch[key]]]


MAX_MERGED_POINTS = 2000
"""Most points of the merged curve per round (a long run's batches record many more)."""


def _round_points(members: list[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
    """One shard's cumulative ``(rows, sum)`` within a round, from its batches' points."""
    ns, sums, n0, s0 = [0.0], [0.0], 0, 0.0
    for b in sorted(members, key=lambda b: b.get("seq", 0)):
        for n, v in _points(b, key):
            ns.append(n0 + n)
            sums.append(s0 + v)
        n0, s0 = n0 + b["rows"], s0 + b[key]
    return np.asarray(ns, dtype=np.float64), np.asarray(sums, dtype=np.float64)


def job_curves(batches: list[dict], task: str) -> JobCurves:
    """Per-shard and merged cumulative online headline metric against job-wide rows learned.

    Shards run in parallel: within a round, every shard is taken to be at the same fraction
    ``f`` of its rows at the same time, when the job has learned the earlier rounds' rows
    plus ``f`` of this round's. A shard's point at ``n`` of its ``N`` rows in a round is
    drawn at that x (``f = n / N``); the merged curve adds up every shard's cumulative sum
    at each fraction (linear between the points a batch recorded, :func:`batch_curve`).
    So every curve ends at the job's rows, and a shard's value is its own cumulative
    metric over all its rounds so far. Records without points (older runs) give one point
    per batch.

    Raises
    ------
    ValueError
        A record without ``rows`` or the headline's per-batch sum.
    """
    key = headline(task).batch_sum
    by_round: dict = {}
    for b in batches:
        if key not in b or "rows" not in b:
            raise ValueError(f"batch records need 'rows' and {key!r}")
        by_round.setdefault(b.get("round", 0), {}).setdefault(b.get("shard", 0), []).append(b)
    x: list = []
    merged: list = []
    shards: dict = {}
    done_n, done_sum = 0.0, 0.0
    shard_n: dict = {}
    shard_sum: dict = {}
    for r in sorted(by_round):
        points = {s: _round_points(members, key) for s, members in sorted(by_round[r].items())}
        points = {s: p for s, p in points.items() if p[0][-1] > 0}
        total = sum(p[0][-1] for p in points.values())
        fractions = []
        for s, (ns, sums) in points.items():
            f = ns[1:] / ns[-1]
            fractions.append(f)
            seen, got = shard_n.get(s, 0.0) + ns[1:], shard_sum.get(s, 0.0) + sums[1:]
            keep = seen > 0
            xs, ys = shards.setdefault(s, ([], []))
            xs.extend((done_n + f[keep] * total).tolist())
            ys.extend((got[keep] / seen[keep]).tolist())
            shard_n[s], shard_sum[s] = shard_n.get(s, 0.0) + ns[-1], shard_sum.get(s, 0.0) + sums[-1]
        if not points:
            continue
        f = np.unique(np.concatenate(fractions))
        if len(f) > MAX_MERGED_POINTS:
            f = f[np.unique(np.linspace(0, len(f) - 1, MAX_MERGED_POINTS).round().astype(int))]
        f = f[f > 0]
        at_sum = sum(np.interp(f * ns[-1], ns, sums) for ns, sums in points.values())
        n_now = done_n + f * total
        keep = n_now > 0
        x.extend(n_now[keep].tolist())
        merged.extend(((done_sum + at_sum[keep]) / n_now[keep]).tolist())
        done_n += total
        done_sum += sum(p[1][-1] for p in points.values())
    return JobCurves(x, merged, dict(sorted(shards.items())))
