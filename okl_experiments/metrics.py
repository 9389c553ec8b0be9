"""Which numbers a run reports, and how they are named, labelled and plotted: one place.

The headline metric of a task is okl_core's (:func:`okl_core.evaluation.default_metric`:
the mistake rate for classification, the mean squared error for regression);
:func:`headline` says how each output names it -- the key in a
:meth:`okl_core.metrics.Prequential.summary`, the sum in a per-batch record, the axis
label. Experiments (sweeps, reproductions) name their metrics ``online_<m>`` (prequential,
over the stream) and ``test_<m>`` (held-out set) for every ``m`` of
:func:`okl_core.evaluation.task_metrics` (:func:`experiment_metrics`), and rank by
:func:`ranking_metric` (the online metric, never the test set) unless told otherwise.

:func:`online_curve` is the cumulative online metric of per-batch records (the training
pipeline's ``metrics.json`` batches): its plot, ``pipelines.report curves`` on a
``metrics.json``, and anything else that draws a run's curve take it from here.
"""

from __future__ import annotations

import dataclasses

from okl_core.evaluation import METRIC_ALIASES, canonical_metric, default_metric, task_metrics

__all__ = ["Headline", "headline", "metric_of", "metric_label", "experiment_metrics", "experiment_metric", "ranking_metric",
           "online_curve", "parallel_order"]


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
_LABELS = {"mistake_rate": "online mistake rate", "mse": "online mean squared error", "mae": "online mean absolute error"}


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


def experiment_metric(name: str) -> str:
    """An experiment metric's own name: ``online_error`` (okl <= 0.1) -> ``online_mistake_rate``."""
    split, _, metric = name.partition("_")
    if split in ("online", "test") and metric in METRIC_ALIASES:
        return f"{split}_{METRIC_ALIASES[metric]}"
    return name


def metric_label(metric: str) -> str:
    """Axis label of an online curve of ``metric`` (``mistake_rate``, ``mse``, ``mae``)."""
    return _LABELS.get(canonical_metric(metric), "online metric")


def experiment_metrics(task: str, with_test: bool) -> list[str]:
    """The metrics an experiment records: ``online_<m>``, and ``test_<m>`` with a test set."""
    names = [f"online_{m}" for m in task_metrics(task)]
    return names + ([f"test_{m}" for m in task_metrics(task)] if with_test else [])


def ranking_metric(task: str) -> str:
    """The metric experiments rank by unless told otherwise: the online (prequential) headline.

    Never the test set: a configuration chosen by its test error would make that test
    error an optimistic estimate. Ranking by ``test_<m>`` has to be asked for.
    """
    return f"online_{default_metric(task)}"


def online_curve(batches: list[dict], task: str) -> tuple[list[int], list[float]]:
    """Cumulative online headline metric after each batch of ``batches``, in the order given.

    Returns ``(rows seen, metric)``, one point per batch with rows. Shards that run in
    parallel are read in the order they run: sort by ``(round, seq, shard)`` first.

    Raises
    ------
    ValueError
        A record without ``rows`` or the headline's per-batch sum.
    """
    key = headline(task).batch_sum
    n, total, xs, ys = 0, 0.0, [], []
    for b in batches:
        if key not in b or "rows" not in b:
            raise ValueError(f"batch records need 'rows' and {key!r}")
        n, total = n + b["rows"], total + b[key]
        if n:
            xs.append(n)
            ys.append(total / n)
    return xs, ys


def parallel_order(batches: list[dict]) -> list[dict]:
    """Batches in the order shards run in parallel: round, then batch number, then shard."""
    return sorted(batches, key=lambda b: (b.get("round", 0), b.get("seq", 0), b.get("shard", 0)))
